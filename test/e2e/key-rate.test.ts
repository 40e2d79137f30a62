// auth.api_keys[].requests_per_minute: one bucket per key for the whole edge
// (with I/O workers a key's requests reach every worker and still share it),
// refusing past it with 429 rate_limit_exceeded and a Retry-After, in the
// route's own format as the official SDKs read it; other keys unaffected, a
// request refused for its concurrency spending none of the minute, and a
// refresh changing the rate on a running edge.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { createLogger } from '../../src/shared/logger.js';
import { ALIAS, chatOnFreshConnection, testWorkers, waitFor } from '../helpers/stack.js';
import { applyApiKeys, inFlight, sample, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const ALICE = 'sk-rate-alice-0123456789';
const BOB = 'sk-rate-bob-9876543210';
const CAROL = 'sk-rate-carol-5555555555';
const DAVE = 'sk-rate-dave-7777777777';

describe('requests per minute per API key', () => {
  let stack: OpsStack;
  const apiKeys = [
    { name: 'alice', key_sha256: sha256Hex(ALICE), requests_per_minute: 3 },
    { name: 'bob', key_sha256: sha256Hex(BOB) },
    { name: 'carol', key_sha256: sha256Hex(CAROL), max_concurrent: 1, requests_per_minute: 2 },
    { name: 'dave', key_sha256: sha256Hex(DAVE), requests_per_minute: 1 },
  ];
  before(async () => {
    stack = await startOpsStack({
      capacity: 4,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      apiKeys: apiKeys,
    });
  });
  after(async () => {
    await stack?.close();
  });

  const openai = (key: string): OpenAI => new OpenAI({ baseURL: stack.baseURL, apiKey: key, maxRetries: 0 });
  const keyLoad = async (name: string): Promise<number> => ((await stack.admin('/admin/keys')).json.keys as { name: string; inFlight: number }[]).find((k) => k.name === name)?.inFlight ?? -1;

  test('a minute\'s worth over many connections, then 429 rate_limit_exceeded with its Retry-After, in each API\'s format', async () => {
    // Each on its own connection, so that with I/O workers they reach more than one worker.
    const served = await Promise.all([0, 1, 2].map(() => chatOnFreshConnection(stack.baseURL, ALIAS, ALICE)));
    assert.deepEqual(served, [200, 200, 200]);
    const refused = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}` },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(refused.status, 429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    assert.ok(retryAfter >= 19 && retryAfter <= 20, `3 a minute: the next in about 20 s, not ${retryAfter}`);
    const body = (await refused.json()) as { error: { code: string; type: string; message: string } };
    assert.equal(body.error.code, 'rate_limit_exceeded');
    assert.equal(body.error.type, 'rate_limit_error');
    assert.equal(body.error.message, `this API key is at its limit of 3 requests per minute; retry in ${retryAfter} s`);

    const sdkError = await openai(ALICE).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).then(
      () => assert.fail('alice passed her rate'),
      (err: unknown) => err,
    );
    assert.ok(sdkError instanceof OpenAI.RateLimitError, String(sdkError));
    assert.equal(sdkError.code, 'rate_limit_exceeded');
    const anthropicError = await new Anthropic({ baseURL: stack.edge.url, apiKey: ALICE, maxRetries: 0 }).messages
      .create({ model: ALIAS, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => assert.fail('alice passed her rate on /v1/messages'),
        (err: unknown) => err,
      );
    assert.ok(anthropicError instanceof Anthropic.RateLimitError, String(anthropicError));
    assert.equal((anthropicError.error as { error?: { type?: string } }).error?.type, 'rate_limit_error');

    // Another key is not held back by alice's rate.
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, BOB), 200);
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
    assert.equal(await keyLoad('alice'), 0, 'a refusal holds no slot of the key');
    const text = await stack.metrics();
    assert.equal(sample(text, 'edge_rejects_total', { reason: 'rate_limit_exceeded' }), 3);
    assert.equal(sample(text, 'edge_key_requests_total', { key: 'alice', status: '429' }), 3);
    assert.equal(sample(text, 'edge_key_requests_total', { key: 'alice', status: '200' }), 3);
    const { json: runs } = await stack.admin('/admin/runs?key=alice&state=finished');
    assert.equal(runs.runs.filter((r: { outcome: string; status: number }) => r.outcome === 'rate_limit_exceeded' && r.status === 429).length, 3);
  });

  test('a request refused for its concurrency spends none of the minute', async () => {
    const carol = openai(CAROL);
    const holding = await carol.chat.completions.create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'slow' }] }, { headers: { 'x-mock-tokens': '20', 'x-mock-interval-ms': '25' } });
    const busy = await carol.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).then(
      () => assert.fail('carol passed max_concurrent 1'),
      (err: unknown) => err,
    );
    assert.ok(busy instanceof OpenAI.RateLimitError && busy.code === 'too_many_concurrent_requests', String(busy));
    for await (const _ of holding) { /* read to the end */ }
    await waitFor(async () => (await keyLoad('carol')) === 0, "carol's slot free");
    // Two a minute: the stream took one, the refusal none, so this one is served.
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, CAROL), 200);
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, CAROL), 429);
  });

  test('a request the worker refuses itself (an unknown node, a bad session id) spends none of the minute, whatever workers.count is', async () => {
    const post = (headers: Record<string, string>): Promise<Response> =>
      fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${DAVE}`, ...headers },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
      });
    const unknownNode = await post({ 'x-edge-node': 'nowhere' });
    assert.equal(unknownNode.status, 404);
    assert.match(await unknownNode.text(), /node_not_found/);
    const badSession = await post({ 'x-edge-session': 'x'.repeat(300) });
    assert.equal(badSession.status, 400);
    assert.match(await badSession.text(), /invalid_session/);
    // One a minute: neither refusal took it, so this one is served, the next refused.
    assert.equal((await post({})).status, 200);
    const over = await post({});
    assert.equal(over.status, 429);
    assert.match(await over.text(), /rate_limit_exceeded/);
    await waitFor(async () => (await keyLoad('dave')) === 0, "dave's slots free");
  });

  test('a refresh raising the rate applies on the running edge: the next request comes at the new rate', async () => {
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, ALICE), 429, 'still over 3 a minute');
    const { status, json } = await applyApiKeys(stack, [{ ...apiKeys[0], requests_per_minute: 6000 }, ...apiKeys.slice(1)]);
    assert.equal(status, 200, JSON.stringify(json));
    assert.ok((json.changes as { path: string; mutable: boolean }[]).some((c) => c.path === 'auth.api_keys[alice].requests_per_minute' && c.mutable), JSON.stringify(json.changes));
    // 100 a second now: served within a few tens of ms, on every worker's admission.
    await waitFor(async () => (await chatOnFreshConnection(stack.baseURL, ALIAS, ALICE)) === 200, 'alice served at the new rate');
    const keys = (await stack.admin('/admin/keys')).json.keys as { name: string; requestsPerMinute: number | null }[];
    assert.equal(keys.find((k) => k.name === 'alice')?.requestsPerMinute, 6000);
  });
});

// The I/O workers log to their own stdout: the log is read in the single-thread mode.
describe('a key past its limits', { skip: testWorkers() > 0 ? 'the I/O workers log to their own stdout' : false }, () => {
  test('is not an info line per refusal (a client hammering would flood the log); debug still has each', async () => {
    const lines: string[] = [];
    const stack = await startOpsStack({
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      edgeLogger: createLogger('edge', 'debug', { destination: { write: (line: string) => void lines.push(line) } }),
      apiKeys: [{ name: 'eve', key_sha256: sha256Hex(ALICE), requests_per_minute: 1 }],
    });
    try {
      assert.deepEqual([await chatOnFreshConnection(stack.baseURL, ALIAS, ALICE), await chatOnFreshConnection(stack.baseURL, ALIAS, ALICE), await chatOnFreshConnection(stack.baseURL, ALIAS, ALICE)], [200, 429, 429]);
      const refusals = (): { level: number; outcome?: string }[] => lines.map((l) => JSON.parse(l) as { level: number; outcome?: string }).filter((l) => l.outcome === 'rate_limit_exceeded');
      await waitUntil(() => refusals().length === 2, 'a debug line for each refusal');
      assert.deepEqual(refusals().map((l) => l.level), [20, 20], 'debug, not info');
    } finally {
      await stack.close();
    }
  });
});
