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

test('a route asked with the wrong method is 405 naming the methods it takes; an unknown one stays 404', async () => {
  const getRefresh = await stack.admin('/admin/config/refresh');
  assert.equal(getRefresh.status, 405);
  assert.equal(getRefresh.json.error.code, 'method_not_allowed');
  assert.equal(getRefresh.headers.get('allow'), 'POST');
  const postStatus = await stack.admin('/admin/status', { method: 'POST' });
  assert.equal(postStatus.status, 405);
  assert.match(postStatus.headers.get('allow') ?? '', /^GET\b.*HEAD/);
  const getReset = await stack.admin(`/admin/providers/${PROVIDER_ID}/reset`);
  assert.equal(getReset.status, 405, 'a parametric route too');
  const unknown = await stack.admin('/admin/nowhere');
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json.error.code, 'not_found');
});
