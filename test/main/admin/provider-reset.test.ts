// POST /admin/providers/:id/reset through the real admin listener: 404 in the
// admin error format for an unknown provider, 200 with reset false for a
// provider with no outlier state (the ejection path is in test/e2e/outliers.test.ts).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PROVIDER_ID, startOpsStack, type OpsStack } from './ops-stack.js';

let stack: OpsStack;
before(async () => {
  stack = await startOpsStack();
});
after(async () => {
  await stack.close();
});

test('reset of an unknown provider is 404; of a healthy one, nothing to reset', async () => {
  const unknown = await stack.admin('/admin/providers/nope/reset', { method: 'POST' });
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json.error.code, 'provider_not_found');
  const healthy = await stack.admin(`/admin/providers/${PROVIDER_ID}/reset`, { method: 'POST' });
  assert.equal(healthy.status, 200);
  assert.deepEqual(healthy.json, { ok: true, provider: PROVIDER_ID, reset: false });
});
