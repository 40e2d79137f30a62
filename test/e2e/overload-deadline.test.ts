// limits.tunnel_timeout_ms spans retries, the wait in the queue after a
// provider's 429/503 included: a request still back in its queue at that
// deadline gets its 504 gateway_timeout then, and leaves the queue. It is
// not kept waiting past it only to be dispatched to the provider once more
// and cut at once (the provider's hold ran longer than the deadline).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { inFlight, queueDepth, startScriptedProvider, startStack, waitUntil, type ScriptedProvider, type Stack } from '../helpers/stack.js';

describe('the only provider answers 503 with a Retry-After longer than the tunnel timeout left', () => {
  let provider: ScriptedProvider;
  let stack: Stack;
  let answered = 0;
  before(async () => {
    provider = await startScriptedProvider((_req, res) => {
      answered++;
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '2' });
      res.end(JSON.stringify({ error: { message: 'busy', type: 'server_error', code: 'busy' } }));
    });
    stack = await startStack({ providerUrl: provider.url, tunnelTimeoutMs: 2_500 });
  });
  after(async () => {
    await stack.close();
    await provider.close();
  });

  test('504 gateway_timeout at the deadline, from the queue, with no dispatch after it', async () => {
    const started = performance.now();
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'llama3', messages: [{ role: 'user', content: 'hi' }] }),
    });
    const body = (await res.json()) as { error: { code: string } };
    const tookMs = performance.now() - started;
    assert.equal(res.status, 504);
    assert.equal(body.error.code, 'gateway_timeout');
    // Tries at 0 s and 2 s (each 503 holds the provider 2 s); the deadline is 2.5 s, the next grant would be at 4 s.
    assert.ok(tookMs < 3_500, `answered at the 2.5 s deadline, not at the next grant (took ${Math.round(tookMs)} ms)`);
    await waitUntil(() => inFlight(stack.edge) === 0 && queueDepth(stack.edge) === 0, 'no lease and no queue entry left');
    assert.equal(answered, 2, 'the provider was not sent the request again after its deadline');
  });
});
