// Every id the config accepts reaches its admin route: node and provider ids
// may be 256 characters (src/main/config.ts), and fastify's default path
// parameter limit (100) answered a longer one 414, so such a node could not be
// drained or commanded, nor its provider reset.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

/** The longest ids the config takes (256 characters: src/main/config.ts). */
const LONG_NODE = `n-${'x'.repeat(254)}`;
const LONG_PROVIDER = `p-${'y'.repeat(254)}`;

describe('admin routes and the longest ids the config takes', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({
      configure: (raw) => {
        (raw.nodes as unknown[]).push({ id: LONG_NODE, token: 'another-test-token', labels: ['rack-2'], providers: [{ id: LONG_PROVIDER, type: 'openai_compat', capacity: 1 }] });
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('a node and a provider with the longest id the config takes are reached by drain, undrain, commands and reset', async () => {
    const drain = await stack.admin(`/admin/nodes/${LONG_NODE}/drain`, { method: 'POST', body: {} });
    assert.equal(drain.status, 409, JSON.stringify(drain.json));
    assert.equal(drain.json.error.code, 'node_not_connected');
    const undrain = await stack.admin(`/admin/nodes/${LONG_NODE}/undrain`, { method: 'POST', body: {} });
    assert.equal(undrain.json.error.code, 'node_not_connected');
    const command = await stack.admin(`/admin/nodes/${LONG_NODE}/commands`, { method: 'POST', body: { kind: 'probe' } });
    assert.equal(command.status, 200, JSON.stringify(command.json));
    assert.deepEqual(
      command.json.results.map((r: { node: string; status: string }) => [r.node, r.status]),
      [[LONG_NODE, 'not_connected']],
    );
    const reset = await stack.admin(`/admin/providers/${LONG_PROVIDER}/reset`, { method: 'POST', body: {} });
    assert.equal(reset.status, 200, JSON.stringify(reset.json));
    assert.deepEqual(reset.json, { ok: true, provider: LONG_PROVIDER, reset: false });
  });
});
