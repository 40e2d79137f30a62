// A refresh that changes the long-context class (the threshold, a provider's
// max_context_tokens) while long requests wait re-evaluates them at once: one
// a window now takes is granted, one no window takes any more is refused
// context_length_exceeded as admission would, not left to its queue timeout.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { NODE_ID, NODE_TOKEN, queueDepth, startProvidersStack, testWorkers, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const ALIAS = 'ctx';

/** The sections startProvidersStack is given on top of its own (listen, heartbeat, workers). */
function config(threshold: number, smallWindow: number, bigWindow: number): Record<string, unknown> {
  return {
    admin: { host: '127.0.0.1', port: 0 },
    scheduler: { long_context_threshold_tokens: threshold },
    nodes: [{ id: NODE_ID, token: NODE_TOKEN, providers: [
      { id: 'small', capacity: 1, max_context_tokens: smallWindow },
      { id: 'big', capacity: 1, max_context_tokens: bigWindow },
    ] }],
    models: [{ alias: ALIAS, queue_timeout_ms: 20_000, providers: { small: 'served-small', big: 'served-big' } }],
  };
}

describe('refresh while long requests wait', () => {
  let small: MockProvider;
  let big: MockProvider;
  let stack: ProvidersStack;
  before(async () => {
    small = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
    big = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
    stack = await startProvidersStack(ALIAS, { small: small.url, big: big.url }, {}, {}, config(1_000, 2_000, 50_000));
  });
  after(async () => {
    await stack.close();
    await small.close();
    await big.close();
  });

  async function refresh(threshold: number, smallWindow: number, bigWindow: number): Promise<void> {
    const raw = {
      listen: { http: { port: 0 }, grpc: { port: 0 } },
      heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
      workers: { count: testWorkers() },
      ...config(threshold, smallWindow, bigWindow),
    };
    const res = await fetch(`${stack.edge.adminUrl}/admin/config/refresh`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ mode: 'apply', config: raw }) });
    const text = await res.text();
    assert.equal(res.status, 200, text);
  }

  function holdBig(): AbortController {
    const gone = new AbortController();
    void fetch(`${stack.edge.url}/v1/chat/completions`, {
      method: 'POST', signal: gone.signal,
      headers: { 'content-type': 'application/json', 'x-mock-tokens': '2', 'x-mock-interval-ms': '60000' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hello '.repeat(4_000) }] }),
    }).then((r) => r.arrayBuffer()).catch(() => undefined);
    return gone;
  }

  test('a window lowered below a queued long request: refused context_length_exceeded at once', async () => {
    const gone = holdBig();
    await waitUntil(() => stack.edge.driver.status().providers.some((p) => p.id === 'big' && p.inFlight === 1), 'big busy');
    const client = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const started = performance.now();
    const waiting = client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hello '.repeat(4_000) }] }).catch((e: unknown) => e);
    await waitUntil(() => queueDepth(stack.edge, ALIAS) === 1, 'queued');
    await refresh(1_000, 2_000, 3_000);
    const err = await waiting;
    const waitedMs = performance.now() - started;
    gone.abort();
    await refresh(1_000, 2_000, 50_000);
    // Not a 503 after the 20 s queue timeout: admission would refuse it so, and so does the refresh.
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.code, 'context_length_exceeded');
    assert.equal(err.param, 'messages');
    assert.ok(waitedMs < 10_000, `answered after ${Math.round(waitedMs)} ms`);
  });

  test('a threshold raised above a queued request: the small provider takes it', async () => {
    const gone = holdBig();
    await waitUntil(() => stack.edge.driver.status().providers.some((p) => p.id === 'big' && p.inFlight === 1), 'big busy');
    const waiting = fetch(`${stack.edge.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hello '.repeat(4_000) }] }) });
    await waitUntil(() => queueDepth(stack.edge, ALIAS) === 1, 'queued');
    await refresh(100_000, 2_000, 50_000);
    const res = await waiting;
    assert.equal(res.status, 200, await res.text());
    gone.abort();
    await refresh(1_000, 2_000, 50_000);
  });

  test('a small window raised: the small provider takes the queued one', async () => {
    const gone = holdBig();
    await waitUntil(() => stack.edge.driver.status().providers.some((p) => p.id === 'big' && p.inFlight === 1), 'big busy');
    const waiting = fetch(`${stack.edge.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hello '.repeat(4_000) }] }) });
    await waitUntil(() => queueDepth(stack.edge, ALIAS) === 1, 'queued');
    await refresh(1_000, 20_000, 50_000);
    const res = await waiting;
    assert.equal(res.status, 200, await res.text());
    gone.abort();
  });
});
