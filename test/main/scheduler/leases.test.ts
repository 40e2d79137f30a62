// Leases: released exactly once, every release pumps, the pre-send fence.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Scheduler } from '../../../src/main/scheduler/scheduler.js';
import type { ReleaseReason, SchedulerSink } from '../../../src/contract/scheduler.js';
import { makeConfig, req, setup } from './fixtures.js';

const TWO_NODES = {
  nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }] },
  models: [{ alias: 'chat', providers: ['a', 'b'] }],
};

test('release is exactly once', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(req(1, 'chat'), 0);
  const { leaseId } = sink.takeGrants()[0];
  assert.equal(s.release(leaseId, 'end', 1), true);
  assert.equal(s.release(leaseId, 'client_closed', 2), false, 'a terminal frame racing a client close');
  assert.equal(s.release(leaseId, 'timeout', 3), false);
  assert.equal(s.release(12_345, 'end', 3), false, 'unknown lease');
  assert.equal(s.lease(leaseId), undefined);
  assert.equal(s.status().liveLeases, 0);
  assert.equal(s.status().providers.find((p) => p.id === 'a')?.inFlight, 0);
  assert.deepEqual(s.checkInvariants(), []);
});

test('every release reason frees the slot and pumps the queue', () => {
  const reasons: ReleaseReason[] = [
    'end',
    'error',
    'client_closed',
    'send_failed',
    'body_build_failed',
    'timeout',
    'stale_generation',
    'shutting_down',
  ];
  const { s, sink } = setup({ nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'] }] });
  s.admit(req(0, 'chat'), 0);
  let lease = sink.takeGrants()[0].leaseId;
  reasons.forEach((reason, i) => {
    s.admit(req(i + 1, 'chat'), i);
    assert.equal(s.release(lease, reason, i), true, reason);
    const [next] = sink.takeGrants();
    assert.equal(next?.requestId, i + 1, `${reason} hands the slot to the waiter`);
    lease = next.leaseId;
  });
});

test('the pre-send fence confirms a lease of the current generation', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(req(1, 'chat'), 0);
  const { leaseId } = sink.takeGrants()[0];
  assert.equal(s.confirm(leaseId, 1), true);
  assert.equal(s.confirm(leaseId, 2), true, 'idempotent');
  assert.equal(s.confirm(999, 2), false, 'unknown lease');
  assert.deepEqual(sink.take(), []);
});

test('a request fenced by a reconnect before its send is re-admitted on the new generation', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  assert.equal(first.nodeId, 'n1');
  // n1 reconnects between the grant and the send: the lease is fenced.
  const result = s.connect('n1', 5);
  assert.deepEqual(
    result?.fenced.map((l) => l.leaseId),
    [first.leaseId],
  );
  assert.equal(s.confirm(first.leaseId, 6), false, 'the send must not go out on the old generation');
  const [again] = sink.takeGrants();
  assert.equal(again.requestId, 1);
  assert.notEqual(again.leaseId, first.leaseId, 'a re-admission gets a new lease');
  assert.equal(again.nodeId, 'n1', 'n1 (new generation) and n2 are both idle: id order picks a');
  assert.equal(again.generation, result?.generation);
  assert.equal(s.confirm(again.leaseId, 7), true);
  assert.equal(s.status().liveLeases, 1);
  assert.deepEqual(s.checkInvariants(), []);
});

test('pre-send fence re-admits to another candidate once', () => {
  const { s, sink, gen } = setup(TWO_NODES);
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  s.disconnect('n1', gen.get('n1') as number, 1);
  assert.equal(s.confirm(first.leaseId, 2), false);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.nodeId]), [[1, 'n2']]);
});

test('a second stale fence rejects with no_provider_available', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  s.connect(first.nodeId, 1);
  s.confirm(first.leaseId, 2);
  const second = sink.takeGrants()[0];
  s.connect(second.nodeId, 3);
  assert.equal(s.confirm(second.leaseId, 4), false);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 1, code: 'no_provider_available', retryAfterSec: 1 }]);
  assert.equal(s.status().liveLeases, 0);
  assert.equal(s.confirm(second.leaseId, 5), false, 'asking again changes nothing');
  assert.deepEqual(sink.take(), []);
});

test('a re-admitted request keeps its place ahead of later waiters', () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'] }] });
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  s.connect('n1', 1); // fenced before the send; the slot is free again...
  s.admit(req(2, 'chat'), 2); // ...and a newcomer takes it
  const newcomer = sink.takeGrants()[0];
  s.admit(req(3, 'chat'), 3); // a later waiter
  assert.equal(s.confirm(first.leaseId, 4), false);
  assert.deepEqual(sink.take(), [], 'no free slot: request 1 waits');
  s.release(newcomer.leaseId, 'end', 5);
  assert.deepEqual(
    sink.takeGrants().map((g) => g.requestId),
    [1],
    'request 1 was admitted before 3, so it goes first',
  );
  assert.deepEqual(s.checkInvariants(), []);
});

test('releasing a fenced lease ends its claim to a re-admission', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  s.connect(first.nodeId, 1);
  assert.equal(s.release(first.leaseId, 'client_closed', 2), false, 'already released by the fence');
  assert.equal(s.confirm(first.leaseId, 3), false);
  assert.deepEqual(sink.take(), [], 'the client is gone: nothing is re-admitted');
});

test('a lease confirmed before the fence is not re-admitted', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  assert.equal(s.confirm(first.leaseId, 1), true); // sent
  const fenced = s.connect(first.nodeId, 2)?.fenced ?? [];
  assert.deepEqual(fenced.map((l) => l.leaseId), [first.leaseId], 'the open tunnel is failed by the caller');
  assert.equal(s.confirm(first.leaseId, 3), false);
  assert.deepEqual(sink.take(), []);
});

test('decisions reach the sink after the transition, so a sink may call back in', () => {
  const seen: number[] = [];
  // A sink that releases every grant at once, as a send that failed synchronously would.
  const sink: SchedulerSink = {
    grant(g) {
      seen.push(g.requestId);
      assert.deepEqual(s.checkInvariants(), [], 'state is whole when the sink runs');
      assert.equal(s.release(g.leaseId, 'send_failed', 1), true);
    },
    reject() {
      assert.fail('no rejects expected');
    },
    retryRefused() {
      assert.fail('no retries expected');
    },
  };
  const s = new Scheduler(
    makeConfig({ nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'] }] }),
    sink,
  );
  s.connect('n1', 0);
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0);
  assert.deepEqual(seen, [1, 2]);
  assert.equal(s.status().liveLeases, 0);
});
