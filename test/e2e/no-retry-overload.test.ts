// A provider's 429/503 that says `x-should-retry: false` (OpenAI's 429
// insufficient_quota: no wait makes it pass) is no overload to wait out:
// it reaches the client at once, as the provider sent it, instead of going
// back to the queue for that provider or another (docs/scheduling.md,
// "What a client sees"). The official SDK then does not retry it either.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import type { RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { ALIAS, inFlight, postChat, startProvidersStack, waitUntil, type ProvidersStack, type Stack } from '../helpers/stack.js';
import { stackWithFakeNode } from '../helpers/fake-node-stack.js';
import type { FakeNode } from '../workers/grpc/fake-node.js';


async function chat(edge: RunningEdge, headers: Record<string, string> = {}): Promise<{ status: number; provider: string | null; headers: Headers; body: string }> {
  const res = await postChat(`${edge.url}/v1`, { headers });
  return { status: res.status, provider: res.headers.get('x-edge-provider'), headers: res.headers, body: await res.text() };
}

describe('a provider answering 429/503 with x-should-retry: false', () => {
  let mocks: MockProvider[];
  let stack: ProvidersStack;
  before(async () => {
    mocks = await Promise.all([0, 1].map(() => startMockProvider({ ttftMs: 0, tokens: 2 })));
    // a wins ties: it is tried first.
    stack = await startProvidersStack(ALIAS, { a: mocks[0].url, b: mocks[1].url });
  });
  after(async () => {
    await stack.close();
    await Promise.all(mocks.map((m) => m.close()));
  });

  for (const status of [429, 503]) {
    test(`its ${status} is relayed at once, not requeued to the other provider`, async () => {
      const [a, b] = mocks;
      a.resetStats();
      b.resetStats();
      const result = await chat(stack.edge, { 'x-mock-fail': `status:${status},no-retry` });
      assert.equal(result.status, status, result.body);
      assert.equal(result.headers.get('x-should-retry'), 'false');
      assert.equal((JSON.parse(result.body) as { error: { code: string } }).error.code, 'mock_failure', 'the provider\'s own body');
      // (The first case's provider is held for a while after its 429, so the second may go to the other one.)
      assert.equal(a.stats.requests + b.stats.requests, 1, `tried once, on ${result.provider}: a got ${a.stats.requests}, b ${b.stats.requests}`);
      await waitUntil(() => inFlight(stack.edge) === 0, 'no lease left');
    });
  }

  test('the openai SDK gets the 429 once and does not retry it', async () => {
    const [a, b] = mocks;
    a.resetStats();
    b.resetStats();
    a.misbehave({ fail: 'status:429,no-retry' });
    b.misbehave({ fail: 'status:429,no-retry' });
    try {
      const client = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 2 });
      await assert.rejects(client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => err instanceof OpenAI.RateLimitError);
    } finally {
      a.behave();
      b.behave();
    }
    assert.equal(a.stats.requests + b.stats.requests, 1, `a got ${a.stats.requests}, b ${b.stats.requests}`);
    await waitUntil(() => inFlight(stack.edge) === 0, 'no lease left');
  });
});

describe('a provider answering 429 with x-should-retry: false and a body that is not JSON', () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    ({ stack, node } = await stackWithFakeNode());
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  test('is not requeued, and the answer in the route\'s format keeps x-should-retry: false', async () => {
    const pending = postChat(stack.baseURL);
    const tunnel = await node.nextTunnel();
    node.headers(tunnel.tunnelId, 0, [header('content-type', 'text/plain'), header('x-should-retry', 'false')], 429);
    node.data(tunnel.tunnelId, 1, 'quota exceeded');
    node.end(tunnel.tunnelId, 2);
    const res = await Promise.race([pending, node.nextTunnel(5_000).then(() => assert.fail('the request was sent again'))]);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(res.status, 429);
    assert.equal(body.error.code, 'upstream_error');
    assert.match(body.error.message, /quota exceeded/);
    assert.equal(res.headers.get('x-should-retry'), 'false');
    await waitUntil(() => inFlight(stack.edge) === 0, 'no lease left');
  });
});

function header(name: string, value: string): { $typeName: 'edge.v1.Header'; name: string; value: string } {
  return { $typeName: 'edge.v1.Header', name, value };
}
