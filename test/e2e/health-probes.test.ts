// Active health through the real stack: the agent probes each provider
// (GET /v1/models for openai_compat) and reports the verdicts in its
// heartbeats. A provider whose probe fails (the mock's model list answers
// 503 while its completions would still work) is taken out of rotation
// before any client request meets it: every request goes to the other
// provider and none fails. When the probe passes again it is back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import type { EdgeEvent } from '../../src/contract/events.js';
import { inFlight, startProvidersStack, waitFor, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const ALIAS = 'llama3';

describe('a provider whose health probe fails', () => {
  let a: MockProvider;
  let b: MockProvider;
  let edge: RunningEdge;
  let stack: ProvidersStack;
  let events: EdgeEvent[] = [];
  before(async () => {
    [a, b] = await Promise.all([startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 }), startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 })]);
    stack = await startProvidersStack(ALIAS, { a: a.url, b: b.url }, { health: { interval_ms: 50, timeout_ms: 500, unhealthy_after: 2 } });
    ({ edge, events } = stack);
  });
  after(async () => {
    await stack.close();
    await Promise.all([a.close(), b.close()]);
  });

  async function chat(): Promise<string> {
    const res = await fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    return `${res.headers.get('x-edge-provider')}:${res.status}`;
  }

  async function healthOf(id: string): Promise<string | undefined> {
    return (await edge.status()).providers.find((p) => p.id === id)?.health;
  }

  test('is out of rotation while it fails, with no client request failing, and back once it passes', async () => {
    // Which of the two lands first depends on the worker that takes each connection: compare as a set.
    assert.deepEqual((await Promise.all([chat(), chat()])).sort(), ['a:200', 'b:200'], 'both serve while healthy');
    a.misbehave({ fail: 'status:503', paths: ['/v1/models'] });
    await waitFor(async () => (await healthOf('a')) === 'unhealthy', 'a reported unhealthy');
    const completionsBefore = a.requestLog.filter((r) => r.path === '/v1/chat/completions').length;
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => chat()));
    assert.deepEqual(outcomes, Array(12).fill('b:200'), 'every request served by b, none failed');
    assert.equal(a.requestLog.filter((r) => r.path === '/v1/chat/completions').length, completionsBefore, 'a got no request while unhealthy');
    assert.ok(events.some((e) => e.type === 'provider.unhealthy' && e.provider === 'a'));
    const metrics = await edge.metrics.scrape();
    assert.match(metrics, /edge_provider_probe_unhealthy\{provider="a",node="gpu-1"\} 1/);

    // The node reconnects while a still fails: the requests that waited for it go to b, though the connect
    // pumps their queue before any heartbeat of the new connection (the verdict rides on its Register).
    const generation = (await edge.status()).nodes.find((n) => n.id === 'gpu-1')?.generation;
    stack.agent.dropConnection();
    // Sent at once, not after polling for the gap: the agent's jittered reconnect may take no time at all.
    const waiting = Array.from({ length: 6 }, () => chat());
    await waitFor(async () => {
      const node = (await edge.status()).nodes.find((n) => n.id === 'gpu-1');
      return node?.connected === true && node.generation !== generation;
    }, 'the node back', 10_000);
    assert.deepEqual(await Promise.all(waiting), Array(6).fill('b:200'), 'the waiting requests went to b');
    assert.equal(a.requestLog.filter((r) => r.path === '/v1/chat/completions').length, completionsBefore, 'a got none after the reconnect either');

    a.behave();
    await waitFor(async () => (await healthOf('a')) === 'ok', 'a healthy again');
    assert.ok(events.some((e) => e.type === 'provider.healthy' && e.provider === 'a'));
    assert.deepEqual(await Promise.all([chat(), chat()]).then((r) => r.sort()), ['a:200', 'b:200'], 'a serves again');
    await waitUntil(() => inFlight(edge) === 0, 'no lease left');
  });
});
