// Fair queuing is visible: while requests wait, /admin/status shows the
// alias's policy as `fair` with its queue depth per band and per tenant (by
// API key name), and /metrics the same as edge_queue_depth_band and
// edge_queue_depth_tenant; once they ran, each tenant's dispatches and share.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { keyedChat, oneSlotWithKeys } from '../helpers/stack.js';
import { ALIAS, inFlight, sample, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const KEYS = { a: 'sk-status-tenant-a-01', b: 'sk-status-tenant-b-01', vip: 'sk-status-tenant-vip-1' };

describe('fair queuing in status and metrics', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack(
      oneSlotWithKeys([
        { name: 'a', key_sha256: sha256Hex(KEYS.a), weight: 2 },
        { name: 'b', key_sha256: sha256Hex(KEYS.b) },
        { name: 'vip', key_sha256: sha256Hex(KEYS.vip), priority: 5 },
      ]),
    );
  });
  after(async () => {
    await stack.close();
  });

  function chat(key: string, headers: Record<string, string> = {}): Promise<Response> {
    return keyedChat(stack.baseURL, key, headers);
  }

  test('depth per band and tenant while waiting; dispatches and shares after', async () => {
    const holder = chat(KEYS.b, { 'x-mock-tokens': '2', 'x-mock-interval-ms': '600' });
    await waitUntil(() => inFlight(stack.edge) === 1, 'the holder to run');
    const waiting = [chat(KEYS.a), chat(KEYS.a), chat(KEYS.a), chat(KEYS.b), chat(KEYS.vip)];
    let group: any;
    for (let i = 0; i < 100; i++) {
      const { json } = await stack.admin('/admin/status');
      group = json.groups.find((g: { model: string }) => g.model === ALIAS);
      if (group?.queueDepth === 5) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(group.policy, 'fair');
    assert.equal(group.queueDepth, 5);
    assert.deepEqual(
      group.fairness.bands.map((b: { priority: number; queued: number; tenants: { tenant: string; queued: number }[] }) => [b.priority, b.queued, b.tenants.map((t) => `${t.tenant}:${t.queued}`).sort()]),
      [
        [5, 1, ['vip:1']],
        [0, 4, ['a:3', 'b:1']],
      ],
    );
    const metrics = await stack.metrics();
    assert.equal(sample(metrics, 'edge_queue_depth_band', { model: ALIAS, priority: '0' }), 4);
    assert.equal(sample(metrics, 'edge_queue_depth_band', { model: ALIAS, priority: '5' }), 1);
    assert.equal(sample(metrics, 'edge_queue_depth_tenant', { model: ALIAS, tenant: 'a' }), 3);

    const done = await Promise.all([holder, ...waiting]);
    await Promise.all(done.map((r) => r.arrayBuffer()));
    const { json } = await stack.admin('/admin/status');
    const after = json.groups.find((g: { model: string }) => g.model === ALIAS);
    const shares = Object.fromEntries(after.fairness.tenants.map((t: { tenant: string; dispatched: number; share: number }) => [t.tenant, [t.dispatched, t.share]]));
    assert.deepEqual(shares, { a: [3, 0.5], b: [2, 0.333], vip: [1, 0.167] });
    assert.equal(sample(await stack.metrics(), 'edge_tenant_dispatches_total', { model: ALIAS, tenant: 'b' }), 2);
  });
});
