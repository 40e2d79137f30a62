// x-edge-fairness-id names a tenant of its own key only (docs/scheduling.md:
// "ids of different keys are different tenants"). An id is the client's
// choice: hashed with plain FNV-1a, `j/6)k!` sent with the key `saas` was the
// tenant of the key `low` (found in a second by inverting the hash), charged
// and counted as `low`. Every thread must still name one id's tenant alike.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { holdOneSlot, keyedChat, oneSlotWithKeys, queueDepth } from '../helpers/stack.js';
import { ALIAS, inFlight, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const KEYS = { low: 'sk-fairness-id-low-001', saas: 'sk-fairness-id-saas-01' };
/** With FNV-1a, tenantKeyOf('saas', COLLIDING) === tenantKeyOf('low'). */
const COLLIDING = 'j/6)k!';

describe('fairness ids', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack(
      oneSlotWithKeys([
        { name: 'low', key_sha256: sha256Hex(KEYS.low), weight: 1 },
        { name: 'saas', key_sha256: sha256Hex(KEYS.saas), fairness_header: true },
      ]),
    );
  });
  after(async () => {
    await stack.close();
  });

  const depth = (): number => queueDepth(stack.edge);

  test("a client's fairness id is never another key's tenant, and is one tenant on every thread", async () => {
    const holder = await holdOneSlot(stack, KEYS.low);
    // Concurrent requests open several connections: with I/O workers they land on different threads.
    const waiting = Array.from({ length: 4 }, () => keyedChat(stack.baseURL, KEYS.saas, { 'x-edge-fairness-id': COLLIDING }));
    await waitUntil(() => depth() === 4, 'the four to queue');
    const { json } = await stack.admin('/admin/status');
    const tenants = json.groups.find((g: { model: string }) => g.model === ALIAS).fairness.bands.flatMap((b: { tenants: { tenant: string; queued: number }[] }) => b.tenants);
    assert.equal(tenants.length, 1, `one tenant for one id of one key, got ${JSON.stringify(tenants)}`);
    assert.notEqual(tenants[0].tenant, 'low', "the saas key's end user is not the low key's tenant");
    assert.match(tenants[0].tenant, /^#[0-9a-f]{8}$/);
    assert.equal(tenants[0].queued, 4);
    await holder.release();
    for (const r of await Promise.all(waiting)) {
      assert.equal(r.status, 200);
      await r.arrayBuffer();
    }
  });

  test('an id with a space (an end user by name) is a tenant of its own, not the whole key', async () => {
    await waitUntil(() => inFlight(stack.edge) === 0, 'the earlier leases to be released');
    const holder = await holdOneSlot(stack, KEYS.low);
    const waiting = ['Jane Doe', 'John Roe'].map((id) => keyedChat(stack.baseURL, KEYS.saas, { 'x-edge-fairness-id': id }));
    await waitUntil(() => depth() === 2, 'the two to queue');
    const { json } = await stack.admin('/admin/status');
    const tenants = json.groups.find((g: { model: string }) => g.model === ALIAS).fairness.bands.flatMap((b: { tenants: { tenant: string; queued: number }[] }) => b.tenants);
    assert.deepEqual(tenants.map((t: { tenant: string; queued: number }) => [/^#[0-9a-f]{8}$/.test(t.tenant), t.queued]), [[true, 1], [true, 1]], `two end users, two tenants: ${JSON.stringify(tenants)}`);
    await holder.release();
    for (const r of await Promise.all(waiting)) {
      assert.equal(r.status, 200);
      await r.arrayBuffer();
    }
  });
});

describe('a key with fairness_header alone', () => {
  let stack: OpsStack;
  before(async () => {
    // No key sets a priority or a weight: naming end users must still turn fair queuing on.
    stack = await startOpsStack(oneSlotWithKeys([{ name: 'saas', key_sha256: sha256Hex(KEYS.saas), fairness_header: true }]));
  });
  after(async () => {
    await stack.close();
  });

  test("turns fair queuing on: an end user arriving behind another's backlog is served next, not last", async () => {
    const holder = await holdOneSlot(stack, KEYS.saas);
    const served: string[] = [];
    const send = async (user: string, tag: string): Promise<void> => {
      const r = await keyedChat(stack.baseURL, KEYS.saas, { 'x-edge-fairness-id': user });
      assert.equal(r.status, 200);
      await r.arrayBuffer();
      served.push(tag);
    };
    const backlog: Promise<void>[] = [];
    for (const tag of ['a1', 'a2', 'a3']) {
      backlog.push(send('alice', tag));
      await waitUntil(() => queueDepth(stack.edge) === backlog.length, `${tag} to queue`);
    }
    backlog.push(send('bob', 'b1'));
    await waitUntil(() => queueDepth(stack.edge) === 4, 'b1 to queue');
    await holder.release();
    await Promise.all(backlog);
    assert.deepEqual(served, ['a1', 'b1', 'a2', 'a3']);
  });
});
