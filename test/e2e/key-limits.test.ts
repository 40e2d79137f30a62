// auth.api_keys[].max_concurrent is one limit per key for the whole edge: with
// I/O workers (EDGE_TEST_WORKERS > 0) requests of one key spread over several
// worker threads and still share one count (kept on the main thread). Runs in
// every mode; the worker-only checks look at the main thread's count.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Agent, fetch as undiciFetch, type Response } from 'undici';
import type { KeyConcurrency } from '../../src/main/key-concurrency.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, inFlight, startStack, testWorkers, waitUntil, type Stack } from '../helpers/stack.js';
import { sample } from '../main/admin/ops-stack.js';

const ALICE = 'sk-alice-limits-0123';
const LIMIT = 2;
const ROUNDS = 200;

describe('max_concurrent across worker threads', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      capacity: 1, // one running, the rest queue: a slot is held while queued too
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      configure(raw) {
        raw.auth = { api_keys: [{ name: 'alice', key_sha256: sha256Hex(ALICE), max_concurrent: LIMIT }] };
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  /** Each request on its own connection, so the kernel spreads them over the workers. */
  function chat(headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
    const dispatcher = new Agent({ connections: 1, pipelining: 0 });
    return undiciFetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}`, ...headers },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
      signal,
      dispatcher,
    }).finally(() => void dispatcher.close().catch(() => undefined));
  }

  /** The main thread's count (I/O workers only: the WorkerPool's; RunningEdge does not expose it). */
  function keys(): KeyConcurrency | undefined {
    return (stack.edge as unknown as { plane: { keys?: KeyConcurrency } }).plane.keys;
  }
  function keyCount(): number | undefined {
    return keys()?.inFlight('alice');
  }

  test('of many requests at once over many connections, exactly max_concurrent are served; the rest get 429', async () => {
    const slow = { 'x-mock-tokens': '2', 'x-mock-interval-ms': '400' };
    const responses = await Promise.all(Array.from({ length: 12 }, () => chat(slow)));
    const statuses = responses.map((r) => r.status).sort();
    const refused = responses.filter((r) => r.status === 429);
    for (const r of refused) {
      assert.equal(r.headers.get('retry-after'), '1');
      const body = (await r.json()) as { error: { code: string; type: string; message: string } };
      assert.equal(body.error.code, 'too_many_concurrent_requests');
      assert.equal(body.error.type, 'rate_limit_error');
      assert.equal(body.error.message, `this API key is at its limit of ${LIMIT} concurrent requests; retry when one finishes`);
    }
    await Promise.all(responses.filter((r) => r.status !== 429).map((r) => r.arrayBuffer()));
    assert.deepEqual(statuses, [...Array<number>(LIMIT).fill(200), ...Array<number>(12 - LIMIT).fill(429)]);
    if (testWorkers() > 1) {
      const planes = (await stack.edge.inspect()).planes.filter((p) => p.requests > 0);
      assert.ok(planes.length > 1, 'the requests reached more than one worker');
    }
    await waitUntil(() => inFlight(stack.edge) === 0 && (keyCount() ?? 0) === 0, 'every slot to be free again');
    assert.deepEqual(keys()?.load(performance.now()) ?? [], []);
    // Every refusal is accounted for the same way in every mode: a finished run and the reject counters.
    const refusedRuns = () => stack.edge.runs.list({ state: 'finished' }).filter((r) => r.status === 429 && r.outcome === 'too_many_concurrent_requests').length;
    await waitUntil(() => refusedRuns() === refused.length, `${refused.length} refused runs in the run records`);
    const metrics = await stack.edge.scrapeMetrics();
    assert.equal(sample(metrics, 'edge_rejects_total', { reason: 'too_many_concurrent_requests' }), refused.length);
    assert.equal(sample(metrics, 'edge_requests_total', { model: ALIAS, provider: '', status: '429' }), refused.length);
  });

  test('a client that sends its next requests as soon as it has read its responses always finds its slots free', async () => {
    // The edge frees a key's slot before the response's last byte leaves; with
    // workers the release must reach the main thread's count before any request
    // the client can send after reading it (another connection, likely another worker).
    const refused: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const responses = await Promise.all(Array.from({ length: LIMIT }, () => chat()));
      await Promise.all(responses.map((r) => r.arrayBuffer()));
      if (responses.some((r) => r.status !== 200)) refused.push(round);
    }
    assert.deepEqual(refused, [], `rounds of ${LIMIT} requests with a 429 among them, of ${ROUNDS}`);
    await waitUntil(() => inFlight(stack.edge) === 0 && (keyCount() ?? 0) === 0, 'every slot to be free again');
  });

  test('a request abandoned while queued gives its slot back at once', async () => {
    const running = chat({ 'x-mock-tokens': '2', 'x-mock-interval-ms': '500' });
    await waitUntil(() => inFlight(stack.edge) === 1, 'the first request to run');
    const aborter = new AbortController();
    const queued = chat({}, aborter.signal).catch((e: unknown) => e);
    if (keys() !== undefined) await waitUntil(() => keyCount() === LIMIT, 'the queued request to hold a slot');
    else await new Promise((resolve) => setTimeout(resolve, 50));
    aborter.abort();
    assert.ok((await queued) instanceof Error);
    if (keys() !== undefined) await waitUntil(() => keyCount() === 1, 'the abandoned request to free its slot');
    // The slot is free: this one queues behind the first instead of being refused.
    const next = chat();
    assert.equal((await running).status, 200);
    const res = await next;
    assert.equal(res.status, 200, 'the abandoned request gave its key slot back');
    await res.arrayBuffer();
    await waitUntil(() => inFlight(stack.edge) === 0 && (keyCount() ?? 0) === 0, 'every slot to be free again');
  });
});

// A limit a refresh adds to a key counts the requests it already has open, in
// every mode. With workers the main thread counted only keys that had a limit
// when each request came, so an abusive key throttled by a refresh could still
// open max_concurrent more beside the ones it held.
test('a max_concurrent a refresh adds counts the key\'s requests already open', async () => {
  const BOB = 'sk-bob-limits-012345';
  const keysOf = (limit?: number) => ({ api_keys: [{ name: 'bob', key_sha256: sha256Hex(BOB), ...(limit === undefined ? {} : { max_concurrent: limit }) }] });
  let raw: Record<string, unknown> = {};
  const stack = await startStack({
    capacity: 8,
    mock: { ttftMs: 0, tokens: 2, intervalMs: 1_500 },
    configure(config) {
      config.auth = keysOf();
      raw = config;
    },
  });
  const send = (): Promise<Response> => {
    const dispatcher = new Agent({ connections: 1, pipelining: 0 });
    return undiciFetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${BOB}` },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
      dispatcher,
    }).finally(() => void dispatcher.close().catch(() => undefined));
  };
  try {
    const open = Array.from({ length: 3 }, send);
    await waitUntil(() => inFlight(stack.edge) === 3, 'three requests of the key running');
    const result = await stack.edge.refresh({ mode: 'apply', config: { ...raw, auth: keysOf(2) } });
    assert.equal(result.status, 'applied');
    const more = await Promise.all([send(), send()]);
    assert.deepEqual(more.map((r) => r.status), [429, 429], 'the key already has 3 open, over its new limit of 2');
    await Promise.all(more.map((r) => r.arrayBuffer()));
    for (const res of await Promise.all(open)) {
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    // Its requests over, the key is served again, up to its limit.
    const after = await Promise.all([send(), send(), send()]);
    assert.deepEqual(after.map((r) => r.status).sort(), [200, 200, 429]);
    await Promise.all(after.map((r) => r.arrayBuffer()));
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  } finally {
    await stack.close();
  }
});
