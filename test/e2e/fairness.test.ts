// Fair queuing through the real stack (docs/scheduling.md), in every worker
// mode: API keys with priorities and weights turn it on. A higher band is
// served first; a sheddable key (negative priority) is refused at once with
// 429 `shed` and x-should-retry: false while the alias is saturated, which the
// openai SDK obeys (one attempt, no retries); a tenant flooding the queue does
// not keep a newcomer behind all of its requests.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, inFlight, keyedChat, oneSlotWithKeys, queueDepth, startStack, waitUntil, type Stack } from '../helpers/stack.js';

const KEYS = { interactive: 'sk-fair-interactive-01', batch: 'sk-fair-batch-000001', a: 'sk-fair-tenant-a-0001', b: 'sk-fair-tenant-b-0001' };

describe('fair queuing', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(
      oneSlotWithKeys([
        { name: 'interactive', key_sha256: sha256Hex(KEYS.interactive), priority: 1 },
        { name: 'batch', key_sha256: sha256Hex(KEYS.batch), priority: -1 },
        { name: 'a', key_sha256: sha256Hex(KEYS.a), weight: 1 },
        { name: 'b', key_sha256: sha256Hex(KEYS.b), weight: 1 },
      ]),
    );
  });
  after(async () => {
    await stack.close();
  });

  function chat(key: string, headers: Record<string, string> = {}): Promise<Response> {
    return keyedChat(stack.baseURL, key, headers);
  }

  /** Takes the one slot for about `ms`; boxed, or awaiting hold() would wait for the holder's answer. */
  async function hold(ms: number): Promise<{ done: Promise<Response> }> {
    // With I/O workers a finished request's release trails its response: a stale lease must not pass for the holder's.
    await waitUntil(() => inFlight(stack.edge) === 0, 'earlier leases to be released');
    const done = chat(KEYS.a, { 'x-mock-tokens': '2', 'x-mock-interval-ms': String(ms) });
    await waitUntil(() => inFlight(stack.edge) === 1, 'the holder to run');
    return { done };
  }

  const queueMs = (r: Response): number => Number(r.headers.get('x-edge-queue-ms'));

  test('a higher band waiting behind a lower one is served first', async () => {
    const holder = await hold(1_000);
    const low = chat(KEYS.b);
    await waitUntil(() => queueDepth(stack.edge) === 1, 'the lower band to queue');
    const high = chat(KEYS.interactive);
    await waitUntil(() => queueDepth(stack.edge) === 2, 'the higher band to queue behind it');
    const [l, h] = await Promise.all([low, high]);
    assert.equal(l.status, 200);
    assert.equal(h.status, 200);
    await Promise.all([l.arrayBuffer(), h.arrayBuffer(), (await holder.done).arrayBuffer()]);
    assert.ok(queueMs(h) < queueMs(l), `the later, higher request waited less (high ${queueMs(h)} ms, low ${queueMs(l)} ms)`);
  });

  test('a sheddable request is refused at once while the alias is saturated, and the openai SDK does not retry it', async () => {
    const free = await chat(KEYS.batch);
    assert.equal(free.status, 200, 'with a free slot a sheddable request runs');
    await free.arrayBuffer();

    // Long enough to outlast the refusals below on a loaded machine: with the slot free they would run.
    const holder = await hold(1_500);
    let attempts = 0;
    const counting: typeof fetch = (input, init) => {
      attempts++;
      return fetch(input, init);
    };
    const client = new OpenAI({ apiKey: KEYS.batch, baseURL: stack.baseURL, maxRetries: 3, fetch: counting });
    const err = await client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.APIError, `an API error, got ${String(err)}`);
    assert.equal(err.status, 429);
    assert.equal(err.code, 'shed');
    assert.equal(err.headers?.get('x-should-retry'), 'false');
    assert.ok(Number(err.headers?.get('retry-after-ms')) > 0);
    assert.equal(attempts, 1, 'x-should-retry: false stopped the SDK from retrying');

    // x-edge-priority may lower a key's band: a normal key asking for -1 is sheddable too.
    const lowered = await chat(KEYS.b, { 'x-edge-priority': '-1' });
    assert.equal(lowered.status, 429);
    assert.equal(((await lowered.json()) as { error: { code: string } }).error.code, 'shed');
    await (await holder.done).arrayBuffer();
  });

  test('a tenant flooding the queue does not keep a newcomer behind all its requests', async () => {
    // Held until the whole queue is built (counted, not timed: a loaded machine admits slowly).
    const holder = await hold(1_500);
    // Each takes ~50 ms once granted, so grant times (sent at + x-edge-queue-ms) are well apart.
    const work = { 'x-mock-tokens': '2', 'x-mock-interval-ms': '50' };
    const sentAt: number[] = [];
    const send = (key: string): Promise<Response> => {
      sentAt.push(performance.now());
      return chat(key, work);
    };
    const flood = Array.from({ length: 6 }, () => send(KEYS.a));
    await waitUntil(() => queueDepth(stack.edge) === 6, 'the flood to queue');
    const newcomer = send(KEYS.b);
    await waitUntil(() => queueDepth(stack.edge) === 7, 'the newcomer to queue behind it');
    const responses = await Promise.all([...flood, newcomer]);
    await Promise.all([...responses.map((r) => r.arrayBuffer()), (await holder.done).arrayBuffer()]);
    for (const r of responses) assert.equal(r.status, 200);
    const grantedAt = responses.map((r, i) => sentAt[i] + queueMs(r));
    const b = grantedAt[6];
    const aheadOfB = grantedAt.slice(0, 6).filter((at) => at < b).length;
    // FIFO would serve all six first; the newcomer starts at the band's clock, below the flooder's virtual time.
    assert.ok(aheadOfB <= 1, `at most one of the flooder's requests went before the newcomer, got ${aheadOfB}`);
  });
});
