// Overload is not failure, through the real stack: a provider (the mock,
// told to misbehave process-wide) answers 429 with Retry-After. Its
// effective concurrency is halved and held for the Retry-After, and no
// client sees the 429: with another provider free the request is served
// there at once; with none it waits in the queue at its place and is
// served by the same provider after the hold.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import type { EdgeEvent } from '../../src/contract/events.js';
import { inFlight, startProvidersStack, waitUntil } from '../helpers/stack.js';

const ALIAS = 'llama3';

interface Pair {
  readonly edge: RunningEdge;
  readonly mocks: MockProvider[];
  readonly events: EdgeEvent[];
  close(): Promise<void>;
}

/** One node, one provider per mock (ids a, b, ...: a wins ties), capacity 4 each. */
async function start(count: number): Promise<Pair> {
  const mocks = await Promise.all(Array.from({ length: count }, () => startMockProvider({ ttftMs: 0, tokens: 3, intervalMs: 20 })));
  const ids = mocks.map((_, i) => String.fromCharCode(97 + i));
  const stack = await startProvidersStack(ALIAS, Object.fromEntries(ids.map((id, i) => [id, mocks[i].url])));
  return {
    edge: stack.edge,
    mocks,
    events: stack.events,
    async close() {
      await stack.close();
      await Promise.all(mocks.map((m) => m.close()));
    },
  };
}

async function chat(edge: RunningEdge, stream = false): Promise<{ status: number; provider: string | null; body: string }> {
  const res = await fetch(`${edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const body = await res.text();
  return { status: res.status, provider: res.headers.get('x-edge-provider'), body };
}

describe('a provider that answers 429 with Retry-After, another one free', () => {
  let pair: Pair;
  before(async () => {
    pair = await start(2);
  });
  after(async () => pair.close());

  test('its concurrency is halved, it gets nothing during the hold, and no request fails', async () => {
    const [a] = pair.mocks;
    a.misbehave({ fail: 'status:429,retry-after:3', count: 2 });
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => chat(pair.edge, i % 2 === 0)));
    assert.deepEqual(results.map((r) => r.status), Array(8).fill(200), results.map((r) => `${r.provider}:${r.status}`).join(' '));
    assert.ok(a.stats.failuresInjected >= 1, 'a answered 429 at least once');
    const status = await pair.edge.status();
    const pa = status.providers.find((p) => p.id === 'a');
    assert.equal(pa?.health, 'overloaded');
    assert.equal(pa?.overload?.limit, 2, 'capacity 4 halved once (the 429s of one moment are one episode)');
    assert.ok(pa?.overload?.heldUntil !== null && Date.parse(pa?.overload?.heldUntil ?? '') > Date.now(), 'held for its Retry-After');
    // During the hold every new request goes to b.
    const during = await Promise.all(Array.from({ length: 4 }, () => chat(pair.edge)));
    assert.deepEqual(during.map((r) => `${r.provider}:${r.status}`), Array(4).fill('b:200'));
    assert.ok(pair.events.some((e) => e.type === 'provider.overloaded' && e.provider === 'a'));
    const metrics = await pair.edge.metrics.scrape();
    assert.match(metrics, /edge_provider_overload_limit\{provider="a",node="gpu-1"\} 2/);
    await waitUntil(() => inFlight(pair.edge) === 0, 'no lease left');
  });
});

describe('the only provider answers 429 with Retry-After', () => {
  let pair: Pair;
  before(async () => {
    pair = await start(1);
  });
  after(async () => pair.close());

  test('the request waits in the queue and is served after the hold, not failed', async () => {
    const [a] = pair.mocks;
    a.misbehave({ fail: 'status:429,retry-after:1', count: 1 });
    const started = performance.now();
    const result = await chat(pair.edge);
    const tookMs = performance.now() - started;
    assert.equal(result.status, 200, result.body);
    assert.equal(result.provider, 'a');
    assert.equal(a.stats.failuresInjected, 1);
    assert.ok(tookMs >= 900, `served after the 1 s Retry-After (took ${Math.round(tookMs)} ms)`);
    await waitUntil(() => inFlight(pair.edge) === 0, 'no lease left');
  });

  test('a provider that keeps refusing: after max_requeues its 429 reaches the client as is', async () => {
    const [a] = pair.mocks;
    a.resetStats();
    a.misbehave({ fail: 'status:429,retry-after:0' });
    const result = await chat(pair.edge);
    a.behave();
    assert.equal(result.status, 429, 'a clear answer, not a hang');
    assert.equal(a.stats.failuresInjected, 4, 'the first try and three requeues');
    await waitUntil(() => inFlight(pair.edge) === 0, 'no lease left');
  });
});

describe("a provider that answers 529 (Anthropic's overloaded_error), another one free", () => {
  let pair: Pair;
  before(async () => {
    pair = await start(2);
  });
  after(async () => pair.close());

  test('it is overloaded, not failing: the request is served by the other at once and nothing counts toward ejection', async () => {
    const [a] = pair.mocks;
    a.misbehave({ fail: 'status:529,retry-after:3', count: 1 });
    const result = await chat(pair.edge);
    assert.equal(`${result.provider}:${result.status}`, 'b:200', result.body);
    assert.equal(a.stats.failuresInjected, 1);
    const pa = (await pair.edge.status()).providers.find((p) => p.id === 'a');
    assert.equal(pa?.health, 'overloaded');
    assert.ok(pair.events.some((e) => e.type === 'provider.overloaded' && e.provider === 'a'));
    await waitUntil(() => inFlight(pair.edge) === 0, 'no lease left');
  });
});
