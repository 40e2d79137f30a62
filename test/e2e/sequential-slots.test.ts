// A client that reads its answer and sends its next request at once must
// find the provider slot free, even when that request lands on another I/O
// worker: with max_queue 0 a slot still held would be a 429 queue_full the
// client did nothing to earn. Runs in every mode; it is only a race with
// I/O workers (EDGE_TEST_WORKERS > 0), where the lease's release and the
// next admission reach the main thread over different workers' rings.
// The second suite makes the other race exact: a JSON answer with a
// content-length is complete for the client at its last body byte, which
// may reach it well before the node's END frame does.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Agent, fetch as undiciFetch } from 'undici';
import { ALIAS, PROVIDER_ID, inFlight, openExchanges, registeredFakeNode, startStack, waitFor, waitUntil, type Stack } from '../helpers/stack.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { JSON_HEADERS, type FakeNode } from '../workers/grpc/fake-node.js';

const ROUNDS = 300;

/**
 * ROUNDS requests, each sent once the one before was read whole, each on
 * a new connection (so the kernel spreads them over the workers): every
 * one must be served; a refusal is named with its round and body.
 */
async function oneAtATime(stack: Stack, modelOf: (round: number) => string, streamOf: (round: number) => boolean): Promise<void> {
  const statuses = new Map<number, number>();
  const refused: string[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const dispatcher = new Agent({ connections: 1, pipelining: 0 });
    const res = await undiciFetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: modelOf(i), stream: streamOf(i), messages: [{ role: 'user', content: 'next' }] }),
      dispatcher,
    });
    const body = await res.text();
    if (res.status !== 200) refused.push(`round ${i} (${modelOf(i)}, ${streamOf(i) ? 'stream' : 'json'}): ${res.status} ${body.slice(0, 300)}`);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    void dispatcher.close().catch(() => undefined);
  }
  assert.deepEqual(Object.fromEntries(statuses), { 200: ROUNDS }, refused.join('\n'));
  await waitUntil(() => inFlight(stack.edge) === 0, 'the last lease released');
}

describe('one provider slot, no queue, one client at a time', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 1, maxQueue: 0, mock: { ttftMs: 0, tokens: 2, intervalMs: 0 } });
  });
  after(async () => {
    await stack.close();
  });

  test(`${ROUNDS} requests one after another, each on a new connection: every one served`, async () => {
    await oneAtATime(stack, () => ALIAS, (i) => i % 2 === 0);
  });
});

/** The second alias of the shared-slot suite: the same provider slot, its own queue. */
const QUEUED_ALIAS = 'llama3-queued';

describe('one provider slot shared by an alias with a queue and one without', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      capacity: 1,
      maxQueue: 0,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 0 },
      configure(raw) {
        // A release on the queued alias frees the slot the no-queue alias refuses without.
        const models = raw.models as Record<string, unknown>[];
        models.push({ ...models[0], alias: QUEUED_ALIAS, max_queue: 16 });
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test(`${ROUNDS} requests one after another, alternating the aliases, each on a new connection: every one served`, async () => {
    await oneAtATime(stack, (i) => (i % 2 === 0 ? QUEUED_ALIAS : ALIAS), (i) => i % 4 < 2);
  });
});

const KEY = 'sk-solo-one-at-a-time';

describe('a JSON answer with a content-length, its END held back by the node', () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    stack = await startStack({
      capacity: 1,
      maxQueue: 0,
      startAgent: false,
      // The key's one slot is the same race as the provider's.
      configure(raw) {
        raw.auth = { api_keys: [{ name: 'solo', key_sha256: sha256Hex(KEY), max_concurrent: 1 }] };
      },
    });
    node = await registeredFakeNode(stack);
  });
  after(async () => {
    node.close();
    await stack.close();
  });

  test('the client has the whole body: its provider slot and its key slot are free for the next request before END arrives', async () => {
    const chat = (content: string): Promise<Response> =>
      fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content }] }),
      });
    const answer = (text: string): string =>
      JSON.stringify({ id: 'c', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
    const lengthHeaders = (body: string) => [...JSON_HEADERS, { $typeName: 'edge.v1.Header' as const, name: 'content-length', value: String(Buffer.byteLength(body)) }];

    const first = chat('one');
    const t1 = await node.nextTunnel();
    const body1 = answer('first');
    node.headers(t1.tunnelId, 0, lengthHeaders(body1));
    // Two DATA frames: the slot must stay held until the last byte is there.
    node.data(t1.tunnelId, 1, body1.slice(0, 10));
    await waitUntil(() => node.received.length > 0, 'the node heard from the edge');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(inFlight(stack.edge), 1, 'half the body sent: the slot is still held');
    node.data(t1.tunnelId, 2, body1.slice(10));
    const res1 = await first;
    assert.equal(res1.status, 200);
    assert.deepEqual(await res1.json(), JSON.parse(body1), 'the whole body, by its content-length, with no END yet');

    // END of the first is still held: the next request must still find the one slot free.
    const second = chat('two');
    // Answered before its tunnel reached the node: refused (queue_full, the slot still held).
    const refused = second.then(async (r) => (r.status === 200 ? new Promise<never>(() => {}) : Promise.reject(new Error(`the next request was refused: ${r.status} ${await r.text()}`))));
    const t2 = await Promise.race([node.nextTunnel(), refused]);
    assert.notEqual(t2.tunnelId, t1.tunnelId);
    const body2 = answer('second');
    node.headers(t2.tunnelId, 0, lengthHeaders(body2));
    node.data(t2.tunnelId, 1, body2);
    node.end(t2.tunnelId, 2);
    const res2 = await second;
    assert.equal(res2.status, 200);
    assert.deepEqual(await res2.json(), JSON.parse(body2));

    // The late END closes the first exchange without releasing its lease a second time.
    node.end(t1.tunnelId, 3);
    await waitFor(async () => (await openExchanges(stack.edge)) === 0, 'both exchanges over');
    await waitUntil(() => inFlight(stack.edge) === 0, 'no lease left');
    const provider = stack.edge.driver.status().providers.find((p) => p.id === PROVIDER_ID);
    assert.equal(provider?.inFlight, 0);
  });
});
