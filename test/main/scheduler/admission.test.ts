// Admission (provider pool): the queue rules of semantics.md.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeConfig, req, setup } from './fixtures.js';

const ONE_SLOT = {
  nodes: { n1: [{ id: 'p1', capacity: 1 }] },
  models: [{ alias: 'chat', providers: { p1: 'llama3:8b' }, maxQueue: 2, queueTimeoutMs: 5_000 }],
};

test('admits at once when the queue is empty and a slot is free', () => {
  const { s, sink, gen } = setup(ONE_SLOT);
  s.admit(req(1, 'chat'), 100);
  const [d] = sink.take();
  assert.equal(d.kind, 'grant');
  assert.deepEqual(d.kind === 'grant' && d.grant, {
    requestId: 1,
    leaseId: d.kind === 'grant' ? d.grant.leaseId : 0,
    nodeId: 'n1',
    providerId: 'p1',
    servedModel: 'llama3:8b',
    generation: gen.get('n1'),
    queuedMs: 0,
    sessionMovedFrom: undefined,
  });
  assert.deepEqual(s.lease(d.kind === 'grant' ? d.grant.leaseId : 0), {
    leaseId: d.kind === 'grant' ? d.grant.leaseId : 0,
    requestId: 1,
    alias: 'chat',
    nodeId: 'n1',
    providerId: 'p1',
    generation: gen.get('n1'),
  });
  assert.deepEqual(s.checkInvariants(), []);
});

test('an unknown model is rejected with model_not_found', () => {
  const { s, sink } = setup(ONE_SLOT);
  s.admit(req(1, 'no-such-model'), 0);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 1, code: 'model_not_found', retryAfterSec: 0 }]);
  assert.equal(s.status().liveLeases, 0);
});

test('queues while every candidate slot is busy and grants in FIFO order as slots free', () => {
  const { s, sink } = setup({ ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 5 }] });
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  s.admit(req(2, 'chat'), 10);
  s.admit(req(3, 'chat'), 20);
  assert.deepEqual(sink.take(), [], 'both wait: the only slot is taken');
  assert.equal(s.status().groups[0].queueDepth, 2);

  assert.equal(s.release(first.leaseId, 'end', 110), true);
  const second = sink.takeGrants();
  assert.deepEqual(
    second.map((g) => [g.requestId, g.queuedMs]),
    [[2, 100]],
    'the head is granted by the release, with the time it waited',
  );
  s.release(second[0].leaseId, 'end', 150);
  assert.deepEqual(
    sink.takeGrants().map((g) => [g.requestId, g.queuedMs]),
    [[3, 130]],
  );
  assert.deepEqual(s.checkInvariants(), []);
});

test('queue full rejects with queue_full and a Retry-After', () => {
  const { s, sink } = setup(ONE_SLOT); // maxQueue 2, timeout 5 s
  s.admit(req(1, 'chat'), 0); // granted
  s.admit(req(2, 'chat'), 0); // queued
  s.admit(req(3, 'chat'), 0); // queued
  sink.take();
  s.admit(req(4, 'chat'), 0);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 4, code: 'queue_full', retryAfterSec: 5 }]);
  assert.equal(s.status().groups[0].queueDepth, 2);
});

test('max_queue 0 never queues: a busy pool rejects at once', () => {
  const { s, sink } = setup({ ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 0 }] });
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0);
  assert.deepEqual(
    sink.take().map((d) => d.kind === 'reject' && d.code),
    [false, 'queue_full'],
  );
});

test('queue timeout rejects with queue_timeout when candidates are connected but busy', () => {
  const { s, sink } = setup(ONE_SLOT);
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 1_000);
  sink.take();
  assert.equal(s.nextDeadline(), 6_000);
  s.tick(5_999);
  assert.deepEqual(sink.take(), [], 'not yet due');
  s.tick(6_000);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'queue_timeout', retryAfterSec: 5 }]);
  assert.equal(s.nextDeadline(), undefined);
  assert.equal(s.status().groups[0].queueDepth, 0);
});

test('a request that waited with no candidate connected expires as no_provider_available', () => {
  const { s, sink } = setup(ONE_SLOT, []);
  s.admit(req(1, 'chat'), 0);
  assert.deepEqual(sink.take(), [], 'queued even though no node is connected');
  s.tick(5_000);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 1, code: 'no_provider_available', retryAfterSec: 5 }]);
});

test('a due request is expired before the call that passes its deadline acts', () => {
  const { s, sink } = setup(ONE_SLOT);
  s.admit(req(1, 'chat'), 0);
  const lease = sink.takeGrants()[0].leaseId;
  s.admit(req(2, 'chat'), 0); // deadline 5000
  // The release arrives late: the waiter already timed out, so it must not get the slot.
  s.release(lease, 'end', 5_000);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'queue_timeout', retryAfterSec: 5 }]);
  assert.equal(s.status().providers[0].inFlight, 0);
});

test('nextDeadline is the earliest deadline even when a lowered timeout makes a later waiter due first', () => {
  const spec = { ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 5, queueTimeoutMs: 10_000 }] };
  const { s, sink } = setup(spec);
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0); // due 10000
  s.setConfig(makeConfig(makeSpecTimeout(spec, 1_000)), 100);
  s.admit(req(3, 'chat'), 200); // due 1200
  assert.equal(s.nextDeadline(), 1_200);
  s.tick(1_200);
  assert.deepEqual(sink.take().slice(1), [{ kind: 'reject', requestId: 3, code: 'queue_timeout', retryAfterSec: 1 }]);
  assert.equal(s.nextDeadline(), 10_000, 'the older waiter keeps its own deadline');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a client gone while queued is removed and nothing is reserved', () => {
  const { s, sink } = setup({ ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 5 }] });
  s.admit(req(1, 'chat'), 0);
  const lease = sink.takeGrants()[0].leaseId;
  s.admit(req(2, 'chat'), 0);
  s.admit(req(3, 'chat'), 0);
  assert.equal(s.cancel(2, 5), true);
  assert.equal(s.cancel(2, 5), false, 'already gone');
  assert.equal(s.cancel(99, 5), false, 'never queued');
  s.release(lease, 'end', 10);
  assert.deepEqual(
    sink.takeGrants().map((g) => g.requestId),
    [3],
    'the slot goes to the next waiter, not to the cancelled one',
  );
  assert.equal(s.status().providers[0].inFlight, 1);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a waiter whose candidates are all busy does not block a later waiter with a free candidate', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'pa', capacity: 1 }], n2: [{ id: 'pb', capacity: 1 }] },
    models: [{ alias: 'chat', providers: ['pa', 'pb'] }],
  });
  s.admit(req(1, 'chat', { node: 'n1' }), 0); // pa
  s.admit(req(2, 'chat', { node: 'n2' }), 0); // pb
  const [a, b] = sink.takeGrants();
  s.admit(req(3, 'chat', { node: 'n1' }), 0); // waits for pa
  s.admit(req(4, 'chat', { node: 'n2' }), 0); // waits for pb
  s.release(b.leaseId, 'end', 1);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[4, 'pb']]);
  s.release(a.leaseId, 'end', 2);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[3, 'pa']]);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a provider shared by two aliases serves the globally oldest waiter first', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'shared', capacity: 1 }] },
    models: [
      { alias: 'a', providers: ['shared'] },
      { alias: 'b', providers: ['shared'] },
    ],
  });
  s.admit(req(1, 'a'), 0);
  const lease = sink.takeGrants()[0].leaseId;
  s.admit(req(2, 'b'), 1);
  s.admit(req(3, 'a'), 2);
  s.admit(req(4, 'b'), 3);
  let current = lease;
  const order: number[] = [];
  for (let t = 10; t < 13; t++) {
    s.release(current, 'end', t);
    const [g] = sink.takeGrants();
    order.push(g.requestId);
    current = g.leaseId;
  }
  assert.deepEqual(order, [2, 3, 4]);
});

function makeSpecTimeout<T extends { models: readonly object[] }>(spec: T, queueTimeoutMs: number): T {
  return { ...spec, models: spec.models.map((m) => ({ ...m, queueTimeoutMs })) };
}

test('admitting a request id that is already queued is a caller bug and throws', () => {
  const { s } = setup(ONE_SLOT);
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'chat'), 0);
  assert.throws(() => s.admit(req(2, 'chat'), 1), RangeError);
  assert.equal(s.status().groups[0].queueDepth, 1);
  assert.deepEqual(s.checkInvariants(), []);
});

test('saturated: no free slot and the admission would be refused, by a full queue or (fairness on) as sheddable', () => {
  const { s } = setup(ONE_SLOT);
  assert.equal(s.saturated('chat'), false, 'a free slot');
  s.admit(req(1, 'chat'), 0);
  assert.equal(s.saturated('chat'), false, 'busy, but a request would queue');
  assert.equal(s.saturated('chat', -1), false, 'fairness off: a negative priority queues too');
  const config = makeConfig(ONE_SLOT);
  s.setConfig({ ...config, scheduler: { ...config.scheduler, fairness: true } }, 1);
  assert.equal(s.saturated('chat', -1), true, 'fairness on: a sheddable request would be shed');
  assert.equal(s.saturated('chat', 0), false);
  s.admit(req(2, 'chat'), 2);
  s.admit(req(3, 'chat'), 3);
  assert.equal(s.saturated('chat', 0), true, 'the queue at max_queue');
  assert.equal(s.saturated('no-such-model'), false);
});

test('saturated, for a request bound to one node or provider: a free slot elsewhere does not take it', () => {
  // With I/O workers the pool reads the other workers' rings before such a refusal: the client's
  // previous request (its session's, or its stored response's) may have released that slot there.
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'p1', capacity: 1 }], n2: [{ id: 'p2', capacity: 1 }] },
    models: [{ alias: 'chat', providers: { p1: 'llama3:8b', p2: 'llama3:8b' }, maxQueue: 0, queueTimeoutMs: 5_000 }],
  });
  s.admit({ ...req(1, 'chat'), sessionKey: 7 }, 0);
  const [granted] = sink.take();
  assert.equal(granted.kind, 'grant');
  const busy = granted.kind === 'grant' ? granted.grant.providerId : '';
  const busyNode = busy === 'p1' ? 'n1' : 'n2';
  assert.equal(s.saturated('chat', 0), false, 'the other provider is free');
  assert.equal(s.saturated('chat', 0, { ...req(2, 'chat'), sessionKey: 7 }), true, "the session's node is busy");
  assert.equal(s.saturated('chat', 0, { ...req(3, 'chat'), pinnedProviderId: busy }), true, 'its stored response is on the busy provider');
  assert.equal(s.saturated('chat', 0, req(4, 'chat', { node: busyNode })), true, 'x-edge-node names the busy node');
  assert.equal(s.saturated('chat', 0, { ...req(5, 'chat'), sessionKey: 8 }), false, 'another session goes to the free provider');
  assert.equal(s.saturated('chat', 0, req(6, 'chat')), false);
});

test('fairness turned on by a refresh orders the requests already waiting by their bands and tenants', () => {
  const { s, sink } = setup({ ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 5 }] });
  s.admit(req(1, 'chat'), 0);
  const holder = sink.takeGrants()[0];
  // Fairness off: each waits in admission order, its band and tenant still told.
  s.admit({ ...req(2, 'chat'), priority: 0, tenantKey: 11 }, 1);
  s.admit({ ...req(3, 'chat'), priority: 0, tenantKey: 11 }, 2);
  s.admit({ ...req(4, 'chat'), priority: 5, tenantKey: 22 }, 3);
  const config = makeConfig(ONE_SLOT);
  s.setConfig({ ...config, models: [{ ...config.models[0], maxQueue: 5 }], scheduler: { ...config.scheduler, fairness: true, agingStepPerSec: 0 } }, 4);
  const bands = s.fairnessStatus()?.groups[0].bands.map((b) => [b.priority, b.tenants.map((t) => [t.tenant, t.queued])]);
  assert.deepEqual(bands, [[5, [[22, 1]]], [0, [[11, 2]]]], 'the waiting requests keep their bands and tenants');
  const order: number[] = [];
  let lease = holder.leaseId;
  for (let now = 10; order.length < 3; now += 10) {
    s.release(lease, 'end', now);
    const [g] = sink.takeGrants();
    order.push(g.requestId);
    lease = g.leaseId;
  }
  assert.deepEqual(order, [4, 2, 3], 'the higher band first, as for a request admitted with fairness on');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a request granted under FIFO and retried after fairness turned on is charged at its re-dispatch, its usage correcting that charge', () => {
  const { s, sink } = setup({ ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 5 }] });
  // Fairness off: granted, no tenant charged.
  const first = { ...req(1, 'chat', { tokens: 500 }), priority: 0, tenantKey: 11 };
  s.admit(first, 0);
  const [lease] = sink.takeGrants();
  s.admit({ ...req(2, 'chat'), priority: 0, tenantKey: 11 }, 1);
  const config = makeConfig(ONE_SLOT);
  s.setConfig({ ...config, models: [{ ...config.models[0], maxQueue: 5 }], scheduler: { ...config.scheduler, fairness: true, agingStepPerSec: 0 } }, 2);
  // The provider reset before any byte: the request goes back and is granted again, now under fair queuing.
  assert.equal(s.retry(lease.leaseId, first, '', 3), true);
  const [again] = sink.takeGrants();
  assert.equal(again.requestId, 1);
  // It reports 900 tokens used: its tenant owes 900 in all (its dispatch under fair queuing is its first charge).
  s.release(again.leaseId, 'end', 4, 900);
  assert.deepEqual(sink.takeGrants().map((g) => g.requestId), [2], 'the release grants the next one (charged its 10)');
  const tenant = s.fairnessStatus()?.groups[0].bands.flatMap((b) => b.tenants).find((t) => t.tenant === 11);
  assert.equal(tenant?.virtualTime, 910, 'request 1 charged its estimate at the re-dispatch, then corrected to what it used');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a request granted under FIFO and re-admitted after fairness turned on is charged at its re-dispatch', () => {
  const { s, sink, gen } = setup({ ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 5 }] });
  const first = { ...req(1, 'chat', { tokens: 500 }), priority: 0, tenantKey: 11 };
  s.admit(first, 0);
  const [lease] = sink.takeGrants();
  const config = makeConfig(ONE_SLOT);
  s.setConfig({ ...config, models: [{ ...config.models[0], maxQueue: 5 }], scheduler: { ...config.scheduler, fairness: true, agingStepPerSec: 0 } }, 2);
  // Its node goes away before the request was sent, and comes back: the request is admitted again.
  s.disconnect('n1', gen.get('n1') as number, 3);
  s.connect('n1', 4);
  s.confirm(lease.leaseId, 4);
  const again = sink.takeGrants().find((g) => g.requestId === 1);
  assert.ok(again, 're-admitted and granted');
  s.release(again.leaseId, 'end', 5, 900);
  const tenant = s.fairnessStatus()?.groups[0].bands.flatMap((b) => b.tenants).find((t) => t.tenant === 11);
  assert.equal(tenant?.virtualTime, 900);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a lease charged before fairness was turned off and on again is not corrected in the new queue', () => {
  const { s, sink } = setup({ ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 5 }] });
  const config = makeConfig(ONE_SLOT);
  const withFairness = (on: boolean) => ({ ...config, models: [{ ...config.models[0], maxQueue: 5 }], scheduler: { ...config.scheduler, fairness: on, agingStepPerSec: 0 } });
  s.setConfig(withFairness(true), 0);
  // Charged 500 in the first fair queue.
  s.admit({ ...req(1, 'chat', { tokens: 500 }), priority: 0, tenantKey: 11 }, 1);
  const [first] = sink.takeGrants();
  s.setConfig(withFairness(false), 2);
  s.setConfig(withFairness(true), 3);
  s.admit({ ...req(2, 'chat'), priority: 0, tenantKey: 11 }, 4);
  // It used 900 tokens: its correction (+400) belongs to the queue it was charged in, gone now.
  s.release(first.leaseId, 'end', 5, 900);
  const [second] = sink.takeGrants();
  assert.equal(second.requestId, 2);
  const tenant = s.fairnessStatus()?.groups[0].bands.flatMap((b) => b.tenants).find((t) => t.tenant === 11);
  assert.equal(tenant?.virtualTime, 10, 'only request 2, charged in this queue');
  assert.deepEqual(s.checkInvariants(), []);
});

test('grants older than a minute give no drain rate: three recent ones after an old burst fall back to the queue timeout', () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'p1', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['p1'], maxQueue: 1, queueTimeoutMs: 30_000 }] });
  let id = 0;
  const serve = (at: number, releaseAt: number): void => {
    s.admit(req(++id, 'chat'), at);
    s.release(sink.takeGrants()[0].leaseId, 'end', releaseAt);
  };
  // A burst long ago: 13 grants in 1.3 s.
  for (let i = 0; i < 13; i++) serve(i * 100, i * 100 + 50);
  // Then the alias slows to one grant every 25 s: three within the last minute.
  serve(60_000, 60_050);
  serve(85_000, 85_050);
  s.admit(req(++id, 'chat'), 110_000); // holds the slot
  assert.equal(sink.takeGrants().length, 1);
  s.admit(req(++id, 'chat'), 110_000); // fills the queue
  s.admit(req(++id, 'chat'), 110_000);
  const [refusal] = sink.take();
  assert.equal(refusal?.kind === 'reject' ? refusal.code : undefined, 'queue_full');
  // The burst is another load: counted, it made one grant look 7.3 s away while the alias grants one per 25 s.
  assert.equal(refusal?.kind === 'reject' ? refusal.retryAfterSec : undefined, 30);
  assert.deepEqual(s.checkInvariants(), []);
});

test("a waiter's queue position is taken at the asker's clock: a band that aged past another since the last event is told it is ahead", () => {
  const { s, sink } = setup({ ...ONE_SLOT, models: [{ ...ONE_SLOT.models[0], maxQueue: 5 }] });
  const config = makeConfig(ONE_SLOT);
  s.setConfig({ ...config, models: [{ ...config.models[0], maxQueue: 5, queueTimeoutMs: 30_000 }], scheduler: { ...config.scheduler, fairness: true, agingStepPerSec: 1 } }, 0);
  s.admit(req(1, 'chat'), 0);
  const holder = sink.takeGrants()[0];
  s.admit({ ...req(2, 'chat'), priority: 0, tenantKey: 11 }, 0);
  // 2.5 s later a fresh request of band 2: tied with the aged band 0, it goes first (the higher base band).
  s.admit({ ...req(3, 'chat'), priority: 2, tenantKey: 22 }, 2_500);
  assert.equal(s.queuePosition(2, 2_500)?.position, 2);
  // Nothing happens until 3 s: band 0 has waited 3 whole seconds (3 > 2), and the queue updates sent then say so.
  assert.equal(s.queuePosition(2, 3_000)?.position, 1, 'band 0 aged past band 2');
  assert.equal(s.queuePosition(3, 3_000)?.position, 2);
  s.release(holder.leaseId, 'end', 3_000);
  assert.equal(sink.takeGrants()[0]?.requestId, 2, 'dispatch agrees with the position told');
  assert.deepEqual(s.checkInvariants(), []);
});

test('FIFO: a queue position counts the older waiters of another alias sharing the provider, as dispatch serves them first', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'p1', capacity: 1 }, { id: 'p2', capacity: 1 }] },
    models: [
      { alias: 'chat', providers: { p1: 'llama3:8b' }, maxQueue: 5, queueTimeoutMs: 30_000 },
      { alias: 'code', providers: { p1: 'coder:7b' }, maxQueue: 5, queueTimeoutMs: 30_000 },
      { alias: 'other', providers: { p2: 'other:1b' }, maxQueue: 5, queueTimeoutMs: 30_000 },
    ],
  });
  s.admit(req(1, 'chat'), 0); // holds p1
  s.admit(req(2, 'other'), 0); // holds p2
  const [holder] = sink.takeGrants().filter((g) => g.requestId === 1);
  s.admit(req(3, 'other'), 10); // waits for p2 only: never ahead of p1's waiters
  s.admit(req(4, 'chat'), 20);
  s.admit(req(5, 'code'), 30);
  s.admit(req(6, 'chat'), 40);
  assert.deepEqual([4, 5, 6, 3].map((id) => s.queuePosition(id, 50)?.position), [1, 2, 3, 1]);
  const served: number[] = [];
  let lease = holder.leaseId;
  for (let i = 0; i < 3; i++) {
    s.release(lease, 'end', 100 + i);
    const [grant] = sink.takeGrants();
    served.push(grant.requestId);
    lease = grant.leaseId;
  }
  assert.deepEqual(served, [4, 5, 6], 'dispatch agrees with the positions told');
  assert.deepEqual(s.checkInvariants(), []);
});
