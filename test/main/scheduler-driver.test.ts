// The driver's answers to a data path on another thread (workers.count > 0):
// a stale check of a lease the scheduler no longer knows still gets a
// decision, so the request it was granted for never waits without one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SchedulerDriver } from '../../src/main/scheduler-driver.js';
import type { AdmissionRejectCode } from '../../src/contract/scheduler-port.js';
import type { Grant } from '../../src/contract/scheduler.js';
import { makeConfig } from './scheduler/fixtures.js';

test('a stale check of a grant whose fenced lease the scheduler forgot (over its memory of unsent leases) is refused, not left waiting', () => {
  // More leases than the scheduler remembers as fenced-unsent (10,000): with I/O workers none is marked sent.
  const COUNT = 10_050;
  const driver = new SchedulerDriver(makeConfig({ nodes: { n1: [{ id: 'p1', capacity: COUNT }] }, models: [{ alias: 'chat', providers: ['p1'], maxQueue: COUNT }] }));
  const grants: Grant[] = [];
  const rejects: { requestId: number; code: AdmissionRejectCode }[] = [];
  const stale: { requestId: number; current: boolean }[] = [];
  driver.setHandler({
    onGrant: (grant) => void grants.push(grant),
    onReject: (requestId, code) => void rejects.push({ requestId, code }),
    onRequeueRefused: () => assert.fail('no requeue here'),
    onRequeueAccepted: () => assert.fail('no requeue here'),
    onStaleChecked: (requestId, _leaseId, current) => void stale.push({ requestId, current }),
  });
  const generation = driver.connect('n1')?.generation ?? 0;
  for (let id = 1; id <= COUNT; id++) driver.admit({ requestId: id, alias: 'chat', estimatedTokens: 10, directNodeId: undefined });
  assert.equal(grants.length, COUNT);
  // The node drops with every grant still on its way to the workers: all fenced at once.
  driver.disconnect('n1', generation);
  // The first grant's worker finds its session gone and asks.
  const first = grants[0];
  driver.reportStale(first.requestId, first.leaseId);
  assert.deepEqual(stale, [{ requestId: first.requestId, current: false }]);
  assert.deepEqual(rejects, [{ requestId: first.requestId, code: 'no_provider_available' }], 'a decision follows the stale answer');
  // A lease still remembered is re-admitted as before (it waits in the queue for the node), never refused twice.
  const last = grants[COUNT - 1];
  driver.reportStale(last.requestId, last.leaseId);
  assert.deepEqual(rejects.length, 1);
  assert.deepEqual(stale.at(-1), { requestId: last.requestId, current: false });
  driver.close();
});
