// A provider that answers 429 with `Retry-After: 0` (docs/hardening.md
// "Overload: 429 and 503": no client request fails on a 429 while another
// provider is free). Its hold is over at once, but the request it sent back
// must still go to the other, free provider: before, the requeue's own pump
// saw it unheld, the tie-break (provider id) picked it again, and after
// max_requeues such answers the client got the 429 while b sat idle.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { inFlight, startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const ALIAS = 'llama3';

describe('a provider that answers 429 with Retry-After: 0, another one free', () => {
  let stack: ProvidersStack;
  let mocks: MockProvider[];
  before(async () => {
    mocks = await Promise.all([0, 1].map(() => startMockProvider({ ttftMs: 0, tokens: 3, intervalMs: 1 })));
    stack = await startProvidersStack(ALIAS, { a: mocks[0].url, b: mocks[1].url });
  });
  after(async () => {
    await stack.close();
    await Promise.all(mocks.map((m) => m.close()));
  });

  test('the request is served by the free provider; the refusing one saw it once', async () => {
    const [a] = mocks;
    a.misbehave({ fail: 'status:429,retry-after:0' });
    const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-edge-provider'), 'b');
    assert.equal(a.stats.failuresInjected, 1, 'a answered 429 once, not max_requeues + 1 times');
    await waitUntil(() => inFlight(stack.edge) === 0, 'no lease left');
  });
});
