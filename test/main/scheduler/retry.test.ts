// Retry after a failure before the first byte: the lease ends, the request
// goes back to its queue once, never to the provider that failed it (on the
// connection that failed it: once its node connects again it may), ahead
// of later waiters, and only when another candidate exists.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeConfig, req, setup } from './fixtures.js';

const TWO = {
  nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }] },
  models: [{ alias: 'chat', providers: ['a', 'b'] }],
};

test('a retry goes to another provider, never back to the one that failed', () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'a', capacity: 4 }], n2: [{ id: 'b', capacity: 4 }] }, models: [{ alias: 'chat', providers: ['a', 'b'] }] });
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  assert.equal(first.providerId, 'a', 'tie broken by provider id');
  assert.equal(s.confirm(first.leaseId, 1), true);
  // After the release of a's lease, a is the least loaded again: only the exclusion keeps the retry off it.
  assert.equal(s.retry(first.leaseId, req(1, 'chat'), 'a', 2), true);
  const second = sink.takeGrants()[0];
  assert.equal(second.requestId, 1);
  assert.equal(second.providerId, 'b');
  assert.notEqual(second.leaseId, first.leaseId);
  assert.equal(s.release(first.leaseId, 'error', 3), false, 'the failed lease ended with the retry');
  assert.equal(s.status().liveLeases, 1);
  assert.deepEqual(s.checkInvariants(), []);
});

test('with no other candidate the lease ends and nothing is queued', () => {
  const { s, sink } = setup(TWO, ['n1']);
  s.admit(req(1, 'chat'), 0);
  const { leaseId } = sink.takeGrants()[0];
  s.confirm(leaseId, 1);
  assert.equal(s.retry(leaseId, req(1, 'chat'), 'a', 2), false, 'b is not connected');
  assert.deepEqual(sink.take(), []);
  assert.equal(s.status().liveLeases, 0);
  assert.equal(s.status().groups[0].queueDepth, 0);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a retry waits ahead of later requests while the other provider is busy, and the failed one stays free for them', () => {
  const { s, sink } = setup(TWO);
  s.admit(req(1, 'chat'), 0); // -> a
  s.admit(req(2, 'chat'), 0); // -> b
  const [g1, g2] = sink.takeGrants();
  s.confirm(g1.leaseId, 0);
  s.confirm(g2.leaseId, 0);
  s.admit(req(3, 'chat'), 1); // queued
  assert.equal(s.retry(g1.leaseId, req(1, 'chat'), 'a', 2), true);
  // a is free now: request 3 (not excluded) takes it; request 1 keeps waiting for b.
  const [g3] = sink.takeGrants();
  assert.equal(g3.requestId, 3);
  assert.equal(g3.providerId, 'a');
  assert.equal(s.status().groups[0].queueDepth, 1);
  assert.deepEqual(s.checkInvariants(), [], 'a retry waiting while only its excluded provider is free is not a lost wakeup');
  s.admit(req(4, 'chat'), 3); // queued behind the retry
  s.release(g2.leaseId, 'end', 4);
  const [next] = sink.takeGrants();
  assert.equal(next.requestId, 1, 'the retry is served first');
  assert.equal(next.providerId, 'b');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a retry whose lease was already fenced with its node queues ahead of every waiter', () => {
  const { s, sink, gen } = setup(TWO);
  s.admit(req(1, 'chat'), 0); // a on n1
  s.admit(req(2, 'chat'), 0); // b on n2
  const [g1, g2] = sink.takeGrants();
  s.confirm(g1.leaseId, 0);
  s.confirm(g2.leaseId, 0);
  s.admit(req(3, 'chat'), 1); // waits
  s.disconnect('n1', gen.get('n1') as number, 2); // fences g1
  assert.equal(s.retry(g1.leaseId, req(1, 'chat'), 'a', 3), true, 'b still serves the alias');
  s.release(g2.leaseId, 'end', 4);
  const [next] = sink.takeGrants();
  assert.equal(next.requestId, 1);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a waiting retry times out like any waiter, as no_provider_available once its only other candidate left', () => {
  const { s, sink, gen } = setup({ nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a', 'b'], queueTimeoutMs: 100 }] });
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0);
  const [g1, g2] = sink.takeGrants();
  s.confirm(g1.leaseId, 0);
  s.confirm(g2.leaseId, 0);
  assert.equal(s.retry(g1.leaseId, req(1, 'chat'), 'a', 1), true);
  s.disconnect('n2', gen.get('n2') as number, 2);
  s.tick(200);
  const decisions = sink.take();
  assert.deepEqual(decisions, [{ kind: 'reject', requestId: 1, code: 'no_provider_available', retryAfterSec: 1 }]);
  assert.deepEqual(sink.retryRefusals, [], 'a rejection with its Retry-After, not a refused retry');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a retried request the client abandons is cancelled like any waiter', () => {
  const { s, sink } = setup(TWO);
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0);
  const [g1] = sink.takeGrants();
  s.confirm(g1.leaseId, 0);
  assert.equal(s.retry(g1.leaseId, req(1, 'chat'), 'a', 1), true);
  assert.equal(s.cancel(1, 2), true);
  assert.equal(s.status().groups[0].queueDepth, 0);
  assert.deepEqual(s.checkInvariants(), []);
});

test("a retry granted to a connection whose disconnect comes next is refused as a retry, not as 'no provider'", () => {
  // One node, two providers. With I/O workers the data path's requeue can reach the scheduler before
  // the node's disconnect: the retry is granted to the dying connection, and the disconnect fences it.
  const { s, sink, gen } = setup({ nodes: { n1: [{ id: 'a', capacity: 1 }, { id: 'b', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a', 'b'] }] });
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  assert.equal(s.confirm(first.leaseId, 1), true);
  assert.equal(s.retry(first.leaseId, req(1, 'chat'), first.providerId, 2), true, 'the node still looks connected');
  const second = sink.takeGrants()[0];
  assert.equal(second.nodeId, 'n1');
  s.disconnect('n1', gen.get('n1') as number, 3);
  assert.equal(s.confirm(second.leaseId, 4), false);
  assert.deepEqual(sink.take(), [], 'no rejection: the data path answers with the first failure');
  assert.deepEqual(sink.retryRefusals, [1]);
  assert.equal(s.status().liveLeases, 0);
  assert.equal(s.status().groups[0].queueDepth, 0);
  assert.deepEqual(s.checkInvariants(), []);
});

test('fairness on: a retried or re-admitted request is charged to its tenant once, not once per attempt', () => {
  const config = makeConfig(TWO);
  const { s, sink } = setup(TWO);
  s.setConfig({ ...config, scheduler: { ...config.scheduler, fairness: true } }, 0);
  const tenantVt = (key: number) => s.fairnessStatus()?.groups[0].bands.find((b) => b.priority === 0)?.tenants.find((t) => t.tenant === key)?.virtualTime;
  const tenant = (id: number) => ({ ...req(id, 'chat', { tokens: 100 }), tenantKey: 7 });
  s.admit(tenant(1), 0);
  const first = sink.takeGrants()[0];
  assert.equal(tenantVt(7), 100);
  // A failure before the first byte: it goes again, to the other provider.
  assert.equal(s.retry(first.leaseId, tenant(1), first.providerId, 1, true), true);
  const second = sink.takeGrants()[0];
  assert.notEqual(second.providerId, first.providerId);
  assert.equal(tenantVt(7), 100, 'the retry is the same request: its tenant paid for it already');
  // A second request of the tenant, granted; its node reconnects before the lease was confirmed, and the late confirm re-admits it.
  s.admit(tenant(2), 2);
  const third = sink.takeGrants()[0];
  assert.equal(third.requestId, 2);
  assert.equal(tenantVt(7), 200);
  s.connect(third.nodeId, 4);
  assert.equal(s.confirm(third.leaseId, 5), false, 'fenced: not current');
  const readmitted = sink.takeGrants()[0];
  assert.equal(readmitted?.requestId, 2);
  assert.equal(tenantVt(7), 200, 'the re-admission is not a second charge');
  assert.equal(s.fairnessStatus()?.groups[0].dispatches.find((d) => d.tenant === 7)?.dispatched, 2, 'two requests dispatched');
  assert.deepEqual(s.checkInvariants(), []);
});

test('fairness on: the queue position a waiter is told counts a retried request ahead of it without charging it again, as dispatch does', () => {
  const ONE = { nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'] }] };
  const config = makeConfig(ONE);
  const { s, sink } = setup(ONE);
  s.setConfig({ ...config, scheduler: { ...config.scheduler, fairness: true } }, 0);
  const of = (id: number, tenantKey: number) => ({ ...req(id, 'chat', { tokens: 100 }), tenantKey });
  s.admit(of(1, 7), 0);
  const first = sink.takeGrants()[0];
  s.admit(of(2, 8), 1);
  s.admit(of(3, 7), 2);
  s.admit(of(4, 8), 3);
  // Request 1 meets a 429: back at its old place, its tenant already charged for it.
  assert.equal(s.retry(first.leaseId, of(1, 7), 'a', 4, false, { retryAfterMs: 1_000 }), true);
  assert.equal(s.queuePosition(3)?.position, 3, 'requests 2 and 1 go before 3; 4 after it');
  const order: number[] = [];
  s.tick(1_010);
  for (let i = 0; i < 4; i++) {
    const grant = sink.takeGrants()[0];
    order.push(grant.requestId);
    s.release(grant.leaseId, 'end', 1_020 + i);
  }
  assert.deepEqual(order, [2, 1, 3, 4], 'dispatch agrees with the position told');
});

test("a node's own refusal as it leaves: that connection drains, the request waits for the node's return and is served by it", () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'a', capacity: 2 }] }, models: [{ alias: 'chat', providers: ['a'] }] });
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  s.confirm(first.leaseId, 1);
  assert.equal(s.retry(first.leaseId, req(1, 'chat'), '', 2, false, undefined, 'leaving'), true, 'queued although no candidate is up');
  assert.deepEqual(sink.takeGrants(), [], 'not back to the leaving connection, though a has free slots');
  assert.equal(s.status().groups[0].queueDepth, 1);
  assert.deepEqual(s.checkInvariants(), []);
  // The node restarts: a new connection, not draining.
  s.connect('n1', 3);
  const [again] = sink.takeGrants();
  assert.equal(again.requestId, 1);
  assert.equal(again.providerId, 'a');
  assert.deepEqual(s.checkInvariants(), []);
});

test("a node's stream lost under a request: nothing is held against its provider; it goes to a lane still up, or waits for the node's return", () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'a', capacity: 2 }] }, models: [{ alias: 'chat', providers: ['a'] }] });
  const generation = s.connect('n1', 0)?.generation as number;
  s.admit(req(1, 'chat'), 1);
  const first = sink.takeGrants()[0];
  s.confirm(first.leaseId, 1);
  // One lane dropped, the connection stands: back to its only provider at once, the connection not drained.
  assert.equal(s.retry(first.leaseId, req(1, 'chat'), '', 2, false, undefined, 'lost'), true);
  const [again] = sink.takeGrants();
  assert.deepEqual([again.requestId, again.providerId, again.generation], [1, 'a', generation]);
  assert.equal(s.status().nodes[0].draining, false);
  // The whole connection gone (an agent killed): queued although no candidate is up, served by the node's return.
  s.confirm(again.leaseId, 3);
  assert.deepEqual(s.disconnect('n1', generation, 4)?.map((l) => l.requestId), [1]);
  assert.equal(s.retry(again.leaseId, req(1, 'chat'), '', 5, false, undefined, 'lost'), true, 'queued although no candidate is up');
  assert.equal(s.status().groups[0].queueDepth, 1);
  s.connect('n1', 6);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[1, 'a']]);
  assert.deepEqual(s.checkInvariants(), []);
});

test("a retry kept off the provider whose node dropped takes it once that node is back, ahead of later waiters", () => {
  // Both busy; n1 drops (a restart) under request 1 before its first byte; its retry waits for b.
  // n1 comes back idle: request 1, not the later request 3, gets a (else it would wait for b, maybe past its deadline).
  const { s, sink, gen } = setup(TWO);
  s.admit(req(1, 'chat'), 0); // -> a on n1
  s.admit(req(2, 'chat'), 0); // -> b on n2
  const [g1, g2] = sink.takeGrants();
  s.confirm(g1.leaseId, 0);
  s.confirm(g2.leaseId, 0);
  s.disconnect('n1', gen.get('n1') as number, 1);
  assert.equal(s.retry(g1.leaseId, req(1, 'chat'), 'a', 2), true, 'b still serves the alias');
  s.admit(req(3, 'chat'), 3); // waits behind the retry
  s.connect('n1', 4);
  const [next] = sink.takeGrants();
  assert.equal(next.requestId, 1, 'the retry is served first');
  assert.equal(next.providerId, 'a');
  assert.equal(s.status().groups[0].queueDepth, 1);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a retry that reaches the scheduler after its node connected again may go to the new connection', () => {
  // With I/O workers the node's reconnect can reach the scheduler before the data path's requeue.
  const { s, sink, gen } = setup(TWO);
  s.admit(req(1, 'chat'), 0); // -> a on n1
  s.admit(req(2, 'chat'), 0); // -> b on n2
  const [g1] = sink.takeGrants();
  s.confirm(g1.leaseId, 0);
  s.disconnect('n1', gen.get('n1') as number, 1);
  s.connect('n1', 2);
  assert.equal(s.retry(g1.leaseId, req(1, 'chat'), 'a', 3), true);
  const [next] = sink.takeGrants();
  assert.equal(next?.requestId, 1);
  assert.equal(next.providerId, 'a');
  assert.deepEqual(s.checkInvariants(), []);
});
