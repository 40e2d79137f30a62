// Live config swaps: candidates are re-resolved from the live catalog.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeConfig, req, setup, type ConfigSpec } from './fixtures.js';

function spec(capacity: number, enabled = true, extra: Partial<ConfigSpec> = {}): ConfigSpec {
  return {
    nodes: { n1: [{ id: 'a', capacity, enabled }] },
    models: [{ alias: 'chat', providers: ['a'], maxQueue: 10, queueTimeoutMs: 1_000 }],
    ...extra,
  };
}

test('raising capacity by config wakes waiters at once', () => {
  const { s, sink } = setup(spec(1));
  for (let i = 1; i <= 4; i++) s.admit(req(i, 'chat'), 0);
  assert.equal(sink.takeGrants().length, 1);
  s.setConfig(makeConfig(spec(3)), 10);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.queuedMs]), [
    [2, 10],
    [3, 10],
  ]);
  assert.equal(s.status().providers[0].capacity, 3);
});

test('enabling a provider by config wakes waiters; disabling it stops new grants', () => {
  const { s, sink } = setup(spec(2, false));
  s.admit(req(1, 'chat'), 0);
  assert.deepEqual(sink.take(), []);
  s.setConfig(makeConfig(spec(2, true)), 1);
  const [first] = sink.takeGrants();
  assert.equal(first.requestId, 1);
  s.setConfig(makeConfig(spec(2, false)), 2);
  s.admit(req(2, 'chat'), 3);
  assert.deepEqual(sink.take(), [], 'disabled: the free slot is not used');
  assert.equal(s.lease(first.leaseId)?.providerId, 'a', 'the open lease continues');
  s.tick(1_003);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'no_provider_available', retryAfterSec: 1 }]);
});

test('lowering capacity below in-flight keeps the leases and grants nothing new until below it', () => {
  const { s, sink } = setup(spec(3));
  for (let i = 1; i <= 3; i++) s.admit(req(i, 'chat'), 0);
  const grants = sink.takeGrants();
  s.setConfig(makeConfig(spec(1)), 1);
  assert.deepEqual(s.capacityExcess(), [{ providerId: 'a', inFlight: 3, capacity: 1 }]);
  assert.deepEqual(s.checkInvariants(), [], 'an excess left by a config change is allowed');
  s.admit(req(4, 'chat'), 2);
  s.release(grants[0].leaseId, 'end', 3);
  s.release(grants[1].leaseId, 'end', 4);
  assert.deepEqual(sink.take(), [], 'still at capacity 1 of 1');
  s.release(grants[2].leaseId, 'end', 5);
  assert.deepEqual(sink.takeGrants().map((g) => g.requestId), [4]);
  assert.deepEqual(s.capacityExcess(), []);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a provider removed from config keeps its leases counted until released', () => {
  const both: ConfigSpec = {
    nodes: { n1: [{ id: 'a' }, { id: 'b' }] },
    models: [{ alias: 'chat', providers: ['a', 'b'] }],
  };
  const { s, sink } = setup(both);
  s.admit(req(1, 'chat'), 0);
  const lease = sink.takeGrants()[0];
  assert.equal(lease.providerId, 'a');
  s.setConfig(makeConfig({ nodes: { n1: [{ id: 'b' }] }, models: [{ alias: 'chat', providers: ['b'] }] }), 1);
  assert.equal(s.status().providers.find((p) => p.id === 'a')?.inFlight, 1);
  assert.equal(s.status().liveLeases, 1);
  assert.deepEqual(s.checkInvariants(), []);
  assert.equal(s.release(lease.leaseId, 'end', 2), true);
  assert.equal(s.status().providers.some((p) => p.id === 'a'), false, 'forgotten once its last lease ended');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a provider id moved to another node: the new slot serves waiters at once; the old node\'s leases end, or are fenced, on the old slot', () => {
  const on = (node: 'n1' | 'n2'): ConfigSpec => ({
    nodes: { n1: node === 'n1' ? [{ id: 'a' }] : [], n2: node === 'n2' ? [{ id: 'a' }] : [] },
    models: [{ alias: 'chat', providers: ['a'], queueTimeoutMs: 60_000 }],
  });
  const { s, sink, gen } = setup(on('n1'));
  s.admit(req(1, 'chat'), 0);
  const old = sink.takeGrants()[0];
  assert.equal(old.nodeId, 'n1');
  s.admit(req(2, 'chat'), 1);
  assert.deepEqual(sink.take(), [], 'a busy: waits');
  s.setConfig(makeConfig(on('n2')), 2);
  // The lease on n1 holds a slot of n1's process, not of n2's: the waiter goes to n2 now, not when n1's request ends.
  const moved = sink.takeGrants()[0];
  assert.equal(moved?.nodeId, 'n2');
  assert.equal(s.status().providers.find((p) => p.id === 'a')?.inFlight, 1, "status counts a's slot on n2 only");
  assert.deepEqual(s.checkInvariants(), []);
  assert.equal(s.release(old.leaseId, 'end', 3), true);
  assert.equal(s.status().providers.find((p) => p.id === 'a')?.inFlight, 1, "n1's lease ending frees nothing on n2");
  s.admit(req(3, 'chat'), 4);
  assert.deepEqual(sink.take(), [], "n2's one slot is busy");
  assert.deepEqual(s.checkInvariants(), []);
  // Moved back while the n2 lease runs: n1's slot is free again, and fencing n2 releases its lease.
  s.setConfig(makeConfig(on('n1')), 5);
  assert.equal(sink.takeGrants()[0]?.nodeId, 'n1');
  assert.deepEqual(s.checkInvariants(), []);
  assert.deepEqual(s.disconnect('n2', gen.get('n2') as number, 6)?.map((l) => l.leaseId), [moved.leaseId]);
  assert.equal(s.status().providers.find((p) => p.id === 'a')?.inFlight, 1);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a changed queue policy applies to new waiters; queued ones keep their deadlines', () => {
  const { s, sink } = setup(spec(1));
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0); // deadline 1000 under the old policy
  sink.take();
  const tighter = { ...spec(1), models: [{ alias: 'chat', providers: ['a'], maxQueue: 2, queueTimeoutMs: 5_000 }] };
  s.setConfig(makeConfig(tighter), 10);
  s.admit(req(3, 'chat'), 10); // deadline 5010
  s.admit(req(4, 'chat'), 10);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 4, code: 'queue_full', retryAfterSec: 5 }]);
  // The head (request 2) has waited since 0; one refusal so far (queue_full).
  assert.deepEqual(s.status(500).groups, [{ alias: 'chat', queueDepth: 2, maxQueue: 2, queueTimeoutMs: 5_000, oldestWaitMs: 500, rejectedTotal: 1 }]);
  s.tick(1_000);
  assert.deepEqual(sink.take().map((d) => d.kind === 'reject' && d.requestId), [2]);
  // Its expiry counts as a refusal too; request 3 (queued at 10) is now the oldest.
  assert.deepEqual(s.status(1_000).groups, [{ alias: 'chat', queueDepth: 1, maxQueue: 2, queueTimeoutMs: 5_000, oldestWaitMs: 990, rejectedTotal: 2 }]);
  assert.equal(s.nextDeadline(), 5_010);
});

test('an alias removed from config: its waiters get model_not_found at once, as new requests do, not at their deadline', () => {
  const { s, sink } = setup(spec(1));
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0);
  sink.take();
  s.setConfig(makeConfig({ nodes: { n1: [{ id: 'a' }] }, models: [] }), 1);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'model_not_found', retryAfterSec: 0 }]);
  s.admit(req(3, 'chat'), 2);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 3, code: 'model_not_found', retryAfterSec: 0 }]);
  assert.deepEqual(s.status().groups, [], 'the emptied group is gone');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a waiter pinned to a provider its alias no longer has is answered at once; one pinned to a provider still there waits', () => {
  const two: ConfigSpec = { nodes: { n1: [{ id: 'a', capacity: 1 }, { id: 'b', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a', 'b'], maxQueue: 10, queueTimeoutMs: 1_000 }] };
  const { s, sink } = setup(two);
  s.admit({ ...req(1, 'chat'), pinnedProviderId: 'a' }, 0);
  s.admit({ ...req(2, 'chat'), pinnedProviderId: 'b' }, 0);
  s.admit({ ...req(3, 'chat'), pinnedProviderId: 'a' }, 0);
  s.admit({ ...req(4, 'chat'), pinnedProviderId: 'b' }, 0);
  assert.equal(sink.takeGrants().length, 2);
  s.setConfig(makeConfig({ ...two, models: [{ alias: 'chat', providers: ['a'], maxQueue: 10, queueTimeoutMs: 1_000 }] }), 1);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 4, code: 'pinned_provider_gone', retryAfterSec: 0 }]);
  assert.equal(s.status().groups[0].queueDepth, 1, 'the waiter pinned to a stays');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a waiter for a node (x-edge-node) the alias no longer has a provider on is answered node_not_found at once, as a new request is', () => {
  const two: ConfigSpec = { nodes: { n0: [{ id: 'p0', capacity: 1 }], n1: [{ id: 'p1', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['p0', 'p1'], maxQueue: 10, queueTimeoutMs: 600_000 }] };
  const { s, sink } = setup(two);
  s.admit({ ...req(1, 'chat'), directNodeId: 'n0' }, 0);
  s.admit({ ...req(2, 'chat'), directNodeId: 'n0' }, 0);
  s.admit({ ...req(3, 'chat'), directNodeId: 'n1' }, 0);
  assert.equal(sink.takeGrants().length, 2);
  s.admit({ ...req(4, 'chat'), directNodeId: 'n1' }, 0);
  s.setConfig(makeConfig({ ...two, models: [{ alias: 'chat', providers: ['p1'], maxQueue: 10, queueTimeoutMs: 600_000 }] }), 10);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'node_not_found', retryAfterSec: 0 }]);
  assert.equal(s.status().groups[0].queueDepth, 1, 'the waiter for n1 stays');
  s.admit({ ...req(5, 'chat'), directNodeId: 'n0' }, 11);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 5, code: 'node_not_found', retryAfterSec: 0 }]);
  assert.deepEqual(s.checkInvariants(), []);
});

test("status's oldest wait is the longest waiter's, also when a retry went back to the head with its wait restarted", () => {
  const two: ConfigSpec = { nodes: { n0: [{ id: 'p0', capacity: 1 }], n1: [{ id: 'p1', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['p0', 'p1'], maxQueue: 10, queueTimeoutMs: 60_000 }] };
  const { s, sink, gen } = setup(two);
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0);
  const [first] = sink.takeGrants();
  s.confirm(first.leaseId, 0);
  s.admit(req(3, 'chat'), 0); // waits from t=0
  s.disconnect(first.nodeId, gen.get(first.nodeId) ?? 0, 20_000);
  s.retry(first.leaseId, req(1, 'chat'), '', 20_000);
  const group = s.status(20_000).groups[0];
  assert.equal(group.queueDepth, 2);
  assert.equal(group.oldestWaitMs, 20_000, 'request 3 has waited 20 s');
});

test('status reports every node, provider and group', () => {
  const { s, sink } = setup(
    {
      nodes: { n1: [{ id: 'a', capacity: 2 }], n2: [{ id: 'b', capacity: 4 }] },
      models: [{ alias: 'chat', providers: { a: 'm-a', b: 'm-b' }, maxQueue: 7, queueTimeoutMs: 9_000 }],
    },
    ['n1'],
  );
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0);
  s.admit(req(3, 'chat'), 0);
  sink.take();
  const status = s.status(250);
  assert.equal(status.liveLeases, 2);
  assert.deepEqual(status.groups, [{ alias: 'chat', queueDepth: 1, maxQueue: 7, queueTimeoutMs: 9_000, oldestWaitMs: 250, rejectedTotal: 0 }]);
  assert.deepEqual(status.providers, [
    {
      id: 'a',
      nodeId: 'n1',
      capacity: 2,
      inFlight: 2,
      queued: 1,
      loadRatio: 1,
      connected: true,
      announced: true,
      enabled: true,
      draining: false,
      servedModels: ['m-a'],
      endpoints: ['chat', 'completions', 'embeddings'],
    },
    {
      id: 'b',
      nodeId: 'n2',
      capacity: 4,
      inFlight: 0,
      queued: 1,
      loadRatio: 0,
      connected: false,
      announced: true,
      enabled: true,
      draining: false,
      servedModels: ['m-b'],
      endpoints: ['chat', 'completions', 'embeddings'],
    },
  ]);
  assert.deepEqual(
    status.nodes.map((n) => [n.id, n.connected]),
    [
      ['n1', true],
      ['n2', false],
    ],
  );
});
