// The console's try-it box while the edge drains (SIGTERM): the client
// listener is closed, so the proxy cannot reach it; the answer says the edge
// is shutting down (503 shutting_down, Retry-After), as the client listener's
// own refusals do, not that the client listener is unreachable (502).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ALIAS, startOpsStack } from '../main/admin/ops-stack.js';

describe('try-it during a drain', () => {
  test('POST /admin/try answers 503 shutting_down with Retry-After', async () => {
    const stack = await startOpsStack({ capacity: 2, mock: { ttftMs: 0 } });
    try {
      const body = { model: ALIAS, messages: [{ role: 'user', content: 'try me' }] };
      assert.equal((await stack.admin('/admin/try', { method: 'POST', body })).status, 200);
      // A stream open across the drain keeps the edge (and its admin listener) up while try-it is asked.
      const open = await fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-mock-tokens': '200', 'x-mock-interval-ms': '20' },
        body: JSON.stringify({ ...body, stream: true }),
      });
      assert.equal(open.status, 200);
      const draining = stack.edge.shutdown(3_000);
      const tried = await stack.admin('/admin/try', { method: 'POST', body });
      assert.equal(tried.status, 503, JSON.stringify(tried.json));
      assert.equal(tried.json.error.code, 'shutting_down');
      assert.equal(tried.headers.get('retry-after'), '1');
      await open.body?.cancel();
      await draining;
    } finally {
      await stack.agent.stop();
      await stack.mock.close();
    }
  });
});
