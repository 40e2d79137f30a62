// A POST that names `content-type: application/json` but sends no body
// (`curl -X POST -H 'content-type: application/json' …`, HTTP clients that
// always send the header) is a POST without a body, answered as one without
// the header is: a drain drains, a refresh evaluates. Not fastify's 400
// "Body cannot be empty when content-type is set to 'application/json'".
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { NODE_ID, PROVIDER_ID, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

let stack: OpsStack;
before(async () => {
  stack = await startOpsStack();
});
after(async () => {
  await stack.close();
});

async function emptyJsonPost(path: string): Promise<{ status: number; json: any }> {
  const res = await fetch(`${stack.edge.adminUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '' });
  return { status: res.status, json: await res.json() };
}

test('a POST with a JSON content type and an empty body is answered as one with no body', async () => {
  const drain = await emptyJsonPost(`/admin/nodes/${NODE_ID}/drain`);
  assert.equal(drain.status, 200, JSON.stringify(drain.json));
  assert.equal(drain.json.draining, true);
  const undrain = await emptyJsonPost(`/admin/nodes/${NODE_ID}/undrain`);
  assert.equal(undrain.status, 200, JSON.stringify(undrain.json));
  assert.equal(undrain.json.draining, false);
  const reset = await emptyJsonPost(`/admin/providers/${PROVIDER_ID}/reset`);
  assert.deepEqual([reset.status, reset.json], [200, { ok: true, provider: PROVIDER_ID, reset: false }]);
  const cancel = await emptyJsonPost('/admin/runs/run-none/cancel');
  assert.deepEqual([cancel.status, cancel.json.error.code], [404, 'run_not_found']);
  // No body: mode evaluate, the config file re-read (an embedded edge has none), as without the header.
  const refresh = await emptyJsonPost('/admin/config/refresh');
  assert.deepEqual([refresh.status, refresh.json.mode, refresh.json.rejection], [400, 'evaluate', 'no_config_source']);
  const commands = await emptyJsonPost(`/admin/nodes/${NODE_ID}/commands`);
  assert.deepEqual([commands.status, commands.json.error.code], [400, 'invalid_kind']);
});

test('a body that is not JSON under a JSON content type is still a 400 in the admin format', async () => {
  const res = await fetch(`${stack.edge.adminUrl}/admin/nodes/${NODE_ID}/commands`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"kind":' });
  assert.equal(res.status, 400);
  const body = (await res.json()) as { error: { code: string; message: string } };
  assert.equal(typeof body.error.code, 'string');
  assert.equal(typeof body.error.message, 'string');
  // Prototype poisoning stays refused, as fastify's own parser refuses it.
  const poisoned = await fetch(`${stack.edge.adminUrl}/admin/nodes/${NODE_ID}/commands`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"kind":"probe","__proto__":{"x":1}}' });
  assert.equal(poisoned.status, 400);
});
