// The response id -> provider map behind previous_response_id and
// GET / DELETE /v1/responses/{id}: bounded (least recently used goes first),
// expiring, and fed only from ids read at the head of a relayed response.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { responseIdFromHead, storedResponseIdOf } from '../../src/workers/http/response-affinity.js';
import { StoredResponses } from '../../src/contract/stored-responses.js';

const AT = (providerId: string) => ({ alias: 'm', providerId, nodeId: 'n', owner: undefined });

test('remembers where a response lives; the least recently used id goes first when full', () => {
  const map = new StoredResponses(2, 60_000);
  map.remember('resp_1', AT('a'));
  map.remember('resp_2', AT('b'));
  assert.equal(map.lookup('resp_1')?.providerId, 'a'); // resp_1 is now the most recent
  map.remember('resp_3', AT('c'));
  assert.equal(map.lookup('resp_2'), undefined, 'evicted');
  assert.equal(map.lookup('resp_1')?.providerId, 'a');
  assert.equal(map.lookup('resp_3')?.providerId, 'c');
  assert.equal(map.size, 2);
});

test('an entry expires after its TTL, and forget() drops it at once', () => {
  let now = 1_000;
  const map = new StoredResponses(10, 500, () => now);
  map.remember('resp_1', AT('a'));
  map.remember('resp_2', AT('a'));
  map.forget('resp_2');
  assert.equal(map.lookup('resp_2'), undefined);
  now += 499;
  assert.equal(map.lookup('resp_1')?.providerId, 'a');
  now += 1;
  assert.equal(map.lookup('resp_1'), undefined);
});

test('unexpired() hands a replacement worker the live entries with their own expiry, and drops the expired', () => {
  let now = 1_000;
  const map = new StoredResponses(10, 500, () => now);
  map.remember('resp_old', AT('a'));
  now += 300;
  map.remember('resp_new', AT('b'), now + 500);
  assert.deepEqual(map.unexpired(), [
    ['resp_old', AT('a'), 1_500],
    ['resp_new', AT('b'), 1_800],
  ]);
  now = 1_500;
  assert.deepEqual(map.unexpired(), [['resp_new', AT('b'), 1_800]]);
  assert.equal(map.size, 1, 'the expired entry is gone, not just hidden');
});

test('ids that could not be a response id are never stored', () => {
  const map = new StoredResponses();
  for (const id of ['', 'a/b', 'x'.repeat(300), 'id with space']) map.remember(id, AT('a'));
  assert.equal(map.size, 0);
});

test('the id is read from the head of a JSON response and of a response.created event', () => {
  assert.equal(responseIdFromHead(Buffer.from('{"id":"resp_abc","object":"response","output":[{"id":"msg_1"}]}')), 'resp_abc');
  const event = 'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_xyz","object":"response"';
  assert.equal(responseIdFromHead(Buffer.from(event)), 'resp_xyz');
  assert.equal(responseIdFromHead(Buffer.from('event: response.created\ndata: {"type":"resp')), undefined, 'not yet arrived');
});

test('the id in a stored response\'s path is read percent-decoded, as the router and the provider read it', () => {
  assert.equal(storedResponseIdOf('/v1/responses/resp_1'), 'resp_1');
  assert.equal(storedResponseIdOf('/v1/responses/%72esp_1?stream=true'), 'resp_1');
  assert.equal(storedResponseIdOf('/v1/responses/resp%5F1'), 'resp_1');
  assert.equal(storedResponseIdOf('/v1/responses/resp%2F1'), undefined, 'a slash is no part of an id');
  assert.equal(storedResponseIdOf('/v1/responses/resp%E0%A4%A'), undefined, 'malformed encoding');
  assert.equal(storedResponseIdOf('/v1/responses/resp_1/cancel'), undefined);
});

test('an id read from a response head holds only its own characters, not the whole head it was found in', () => {
  // The map keeps up to limits.stored_responses ids for a day: were each a slice of its response's head
  // text (V8 keeps substrings as slices), it would hold that whole head, not ~30 bytes.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const HEADS = 200;
  const padding = 'x'.repeat(256 * 1024); // 200 heads of 256 KB: 50 MB if kept
  gc();
  const before = process.memoryUsage().heapUsed;
  const ids: string[] = [];
  for (let i = 0; i < HEADS; i++) ids.push(responseIdFromHead(Buffer.from(`{"id":"resp_${String(i).padStart(24, '0')}","object":"response","output":[{"type":"message","content":"${padding}"}]}`)) as string);
  gc();
  const grown = process.memoryUsage().heapUsed - before;
  assert.equal(ids[HEADS - 1], `resp_${String(HEADS - 1).padStart(24, '0')}`);
  assert.ok(grown < 8 * 1024 * 1024, `${HEADS} ids hold ${(grown / 1048576).toFixed(1)} MB of heap`);
});
