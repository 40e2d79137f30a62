// Fair queuing turned on by a config refresh while requests wait
// (docs/scheduling.md; "the queue policy applies at once, to queued requests
// too"): the requests already queued keep their API keys' bands and tenants,
// so a higher band admitted under FIFO still goes first, and /admin/status
// shows them by key, not as one anonymous tenant. None is lost or run twice.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { holdOneSlot, keyedChat, oneSlotWithKeys, queueDepth } from '../helpers/stack.js';
import { ALIAS, inFlight, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const KEYS = { low: 'sk-refresh-fair-low-01', high: 'sk-refresh-fair-high-1' };

describe('fair queuing turned on by a refresh', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack(
      oneSlotWithKeys(
        [
          { name: 'low', key_sha256: sha256Hex(KEYS.low) },
          { name: 'high', key_sha256: sha256Hex(KEYS.high), priority: 5 },
        ],
        (raw) => {
          raw.scheduler = { fairness: false, aging_step_per_sec: 0 };
        },
      ),
    );
  });
  after(async () => {
    await stack.close();
  });

  const depth = (): number => queueDepth(stack.edge);

  test('the requests already waiting keep their bands and tenants', async () => {
    const holder = await holdOneSlot(stack, KEYS.low);
    const served: string[] = [];
    const send = (name: string, key: string): Promise<number> =>
      keyedChat(stack.baseURL, key).then(async (r) => {
        served.push(name);
        await r.arrayBuffer();
        return r.status;
      });
    const waiting = [send('low-1', KEYS.low)];
    await waitUntil(() => depth() === 1, 'low-1 to queue');
    waiting.push(send('low-2', KEYS.low));
    await waitUntil(() => depth() === 2, 'low-2 to queue');
    waiting.push(send('high', KEYS.high));
    await waitUntil(() => depth() === 3, 'high to queue');

    const config = structuredClone(stack.raw) as Record<string, unknown>;
    config.scheduler = { fairness: true, aging_step_per_sec: 0 };
    const applied = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config } });
    assert.equal(applied.json.status, 'applied');

    const { json } = await stack.admin('/admin/status');
    const group = json.groups.find((g: { model: string }) => g.model === ALIAS);
    assert.equal(group.policy, 'fair');
    assert.deepEqual(
      group.fairness.bands.map((b: { priority: number; tenants: { tenant: string; queued: number }[] }) => [b.priority, b.tenants.map((t) => `${t.tenant}:${t.queued}`)]),
      [
        [5, ['high:1']],
        [0, ['low:2']],
      ],
    );

    await holder.release();
    assert.deepEqual(await Promise.all(waiting), [200, 200, 200], 'none lost');
    assert.deepEqual(served, ['high', 'low-1', 'low-2'], 'the higher band first, then the lower in admission order');
  });
});
