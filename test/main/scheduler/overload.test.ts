// Overload backoff and probe health through the scheduler (time passed in):
// a 429/503 halves the provider's effective concurrency (floor 1) and holds
// it for its Retry-After; the request goes to another free provider, or
// waits at its old place in the queue and is served after the hold; each
// window of successes adds one slot back; an unhealthy probe verdict takes a
// provider out of rotation without touching its open leases. Failure-rate
// ejection sits beside consecutive-failure ejection.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Scheduler } from '../../../src/main/scheduler/scheduler.js';
import { DEFAULT_OUTLIER_POLICY, Outliers } from '../../../src/main/scheduler/outliers.js';
import { makeConfig, RecordingSink, req, setup, type ConfigSpec } from './fixtures.js';

const TWO: ConfigSpec = {
  nodes: { n1: [{ id: 'a', capacity: 8 }], n2: [{ id: 'b', capacity: 8 }] },
  models: [{ alias: 'chat', providers: ['a', 'b'] }],
};
const ONE: ConfigSpec = { nodes: { n1: [{ id: 'a', capacity: 8 }] }, models: [{ alias: 'chat', providers: ['a'] }] };

test('a 429 halves the limit, holds the provider for its Retry-After, and the request goes to the other provider', () => {
  const { s, sink } = setup(TWO);
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  assert.equal(first.providerId, 'a');
  assert.equal(s.retry(first.leaseId, req(1, 'chat'), 'a', 10, false, { retryAfterMs: 2_000 }), true);
  const again = sink.takeGrants();
  assert.deepEqual(again.map((g) => [g.requestId, g.providerId]), [[1, 'b']], 'retried at once on the free provider');
  assert.deepEqual(sink.take().filter((d) => d.kind === 'reject'), []);
  const a = s.status(10).providers.find((p) => p.id === 'a');
  assert.deepEqual(a?.overload, { limit: 4, heldUntilMs: 2_010, overloads: 1 });
  // During the hold nothing goes to a, even though it has free slots.
  for (let id = 2; id <= 5; id++) s.admit(req(id, 'chat'), 100);
  assert.ok(sink.takeGrants().every((g) => g.providerId === 'b'));
  assert.equal(s.nextDeadline(), 2_010, 'the driver wakes when the hold ends');
  assert.deepEqual(s.checkInvariants(), []);
});

test('with no other provider the request waits at its old place and is served after the hold; no request fails', () => {
  const { s, sink } = setup(ONE);
  s.admit(req(1, 'chat'), 0);
  const lease1 = sink.takeGrants()[0];
  // Fill the provider, then queue two more behind.
  for (let id = 2; id <= 8; id++) s.admit(req(id, 'chat'), 0);
  sink.takeGrants();
  s.admit(req(9, 'chat'), 1);
  s.admit(req(10, 'chat'), 1);
  assert.equal(sink.take().length, 0, 'queued');
  // Request 1 (admitted first) meets a 429 with no Retry-After: the default 1 s hold.
  assert.equal(s.retry(lease1.leaseId, req(1, 'chat'), 'a', 5, false, { retryAfterMs: undefined }), true);
  assert.equal(sink.take().length, 0, 'nothing granted during the hold');
  s.tick(1_004);
  assert.equal(sink.take().length, 0);
  s.tick(1_005);
  // The limit is 4 with 7 still in flight: nothing fits until 4 finish; the old place is kept.
  assert.equal(sink.take().length, 0);
  const status = s.status(1_005).providers[0];
  assert.equal(status.overload?.limit, 4);
  assert.equal(status.overload?.heldUntilMs, undefined);
  for (let lease = 2; lease <= 5; lease++) s.release(lease, 'end', 1_100);
  const grants = sink.takeGrants();
  // Four successes were one window at limit 4: the limit is 5, so two waiters fit, request 1 first (its old place).
  assert.deepEqual(grants.map((g) => g.requestId), [1, 9], 'request 1 kept its place ahead of 9 and 10');
  assert.equal(s.status(1_100).providers[0].overload?.limit, 5);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a burst of 429s is one episode; successes add one slot per window back up to capacity', () => {
  const { s, sink } = setup(ONE);
  for (let id = 1; id <= 8; id++) s.admit(req(id, 'chat'), 0);
  const leases = sink.takeGrants().map((g) => g.leaseId);
  // Three in-flight requests are refused in the same moment: halved once.
  for (const leaseId of leases.slice(0, 3)) s.release(leaseId, 'overloaded', 10, 0, 500);
  assert.equal(s.status(10).providers[0].overload?.limit, 4);
  assert.equal(s.status(10).providers[0].overload?.overloads, 3);
  // The others end without a verdict (clients left): only successes count.
  for (const leaseId of leases.slice(3)) s.release(leaseId, 'client_closed', 600);
  // Successes: 4 raise it to 5, 5 more to 6, 6 more to 7, 7 more to 8 = capacity (cleared).
  let id = 100;
  const expected = [5, 6, 7];
  for (const limit of expected) {
    for (let i = 0; i < limit - 1; i++) {
      s.admit(req(id++, 'chat'), 700);
      s.release(sink.takeGrants()[0].leaseId, 'end', 700);
    }
    assert.equal(s.status(700).providers[0].overload?.limit, limit);
  }
  for (let i = 0; i < 7; i++) {
    s.admit(req(id++, 'chat'), 700);
    s.release(sink.takeGrants()[0].leaseId, 'end', 700);
  }
  assert.equal(s.status(700).providers[0].overload, undefined, 'back at capacity: no overload state');
  assert.deepEqual(s.checkInvariants(), []);
});

test('an unhealthy probe verdict takes a provider out of rotation; healthy again brings it back', () => {
  const { s, sink } = setup(TWO);
  assert.equal(s.setProviderHealth('n1', 'a', false, 0), true);
  assert.equal(s.setProviderHealth('n1', 'a', false, 0), false, 'no change');
  assert.equal(s.setProviderHealth('n2', 'a', false, 0), false, 'only its own node reports it');
  for (let id = 1; id <= 4; id++) s.admit(req(id, 'chat'), 1);
  assert.ok(sink.takeGrants().every((g) => g.providerId === 'b'));
  assert.equal(s.status(1).providers.find((p) => p.id === 'a')?.unhealthy, true);
  assert.equal(s.setProviderHealth('n1', 'a', true, 2), true);
  s.admit(req(5, 'chat'), 3);
  assert.equal(sink.takeGrants()[0].providerId, 'a');
  // A reconnect starts from healthy: the new connection reports its own probes.
  s.setProviderHealth('n1', 'a', false, 4);
  s.connect('n1', 5);
  assert.equal(s.status(5).providers.find((p) => p.id === 'a')?.unhealthy, undefined);
  assert.deepEqual(s.checkInvariants(), []);
});

test('failure-rate ejection: half of the last requests failing ejects, though never five in a row', () => {
  const spec: ConfigSpec = {
    nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }], n3: [{ id: 'c', capacity: 1 }] },
    models: [{ alias: 'chat', providers: ['a', 'b', 'c'] }],
  };
  const sink = new RecordingSink();
  const s = new Scheduler(makeConfig(spec), sink, new Outliers({ ...DEFAULT_OUTLIER_POLICY, jitter: 0 }));
  for (const node of ['n1', 'n2', 'n3']) s.connect(node, 0);
  // Requests pinned to a by direct dispatch, alternating fail / success: 10 seen, 5 failed.
  let id = 1;
  for (let i = 0; i < 10; i++) {
    s.admit(req(id++, 'chat', { node: 'n1' }), 1);
    const grant = sink.takeGrants()[0];
    s.release(grant.leaseId, i % 2 === 0 ? 'provider_failed' : 'end', 1);
    assert.equal(s.outlierStatus('a')?.phase, 'healthy', `not yet after ${i + 1} (fewer than 10 seen, or a success last)`);
  }
  // The tenth outcome was a success; the next failure judges 11 outcomes, 6 failed.
  s.admit(req(id++, 'chat', { node: 'n1' }), 2);
  s.release(sink.takeGrants()[0].leaseId, 'provider_failed', 2);
  const status = s.outlierStatus('a');
  assert.equal(status?.phase, 'ejected');
  assert.match(status?.reason ?? '', /6 of its last 11 requests failed/);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a passing active probe returns a half-open provider (it stands in for the probe request)', () => {
  const sink = new RecordingSink();
  const s = new Scheduler(makeConfig(TWO), sink, new Outliers({ ...DEFAULT_OUTLIER_POLICY, jitter: 0 }));
  s.connect('n1', 0);
  s.connect('n2', 0);
  for (let id = 1; id <= 5; id++) {
    s.admit(req(id, 'chat', { node: 'n1' }), 1);
    s.release(sink.takeGrants()[0].leaseId, 'provider_failed', 1);
  }
  assert.equal(s.outlierStatus('a')?.phase, 'ejected');
  assert.equal(s.setProviderHealth('n1', 'a', true, 10), false, 'a passing probe does not end an ejection early');
  assert.equal(s.outlierStatus('a')?.phase, 'ejected');
  s.tick(30_001);
  assert.equal(s.outlierStatus('a')?.phase, 'half_open');
  s.setProviderHealth('n1', 'a', true, 30_002);
  assert.equal(s.outlierStatus('a')?.phase, 'healthy', 'returned by the active probe');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a Retry-After hold that ends between timer ticks serves the waiting request before a newcomer', () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'] }] });
  s.admit(req(1, 'chat'), 0);
  s.release(sink.takeGrants()[0].leaseId, 'overloaded', 10, 0, 1_000); // held until 1,010
  s.admit(req(2, 'chat'), 20);
  assert.equal(sink.takeGrants().length, 0, 'request 2 waits out the hold');
  // No tick at 1,010 (the driver's timer runs late): the next call is a newcomer's admit.
  s.admit(req(3, 'chat'), 1_011);
  assert.deepEqual(sink.takeGrants().map((g) => g.requestId), [2], 'the waiter first; request 3 queues behind it');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a request a 429 sent back keeps its wait: its band\'s aging does not start over (fairness on)', () => {
  const spec: ConfigSpec = { nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'] }] };
  const { s, sink } = setup(spec);
  const config = makeConfig(spec);
  s.setConfig({ ...config, scheduler: { ...config.scheduler, fairness: true } }, 0);
  const tenant = (id: number, priority = 0, tenantKey = 1) => ({ ...req(id, 'chat'), priority, tenantKey });
  s.admit(tenant(1), 0);
  const lease1 = sink.takeGrants()[0];
  s.admit(tenant(2), 0); // band 0 waits from t=0
  // At 10 s request 1 meets a 429 (1 s hold) and goes back ahead of request 2; a fresh band-2 request arrives.
  assert.equal(s.retry(lease1.leaseId, tenant(1), 'a', 10_000, false, { retryAfterMs: undefined }), true);
  s.admit(tenant(3, 2, 2), 10_000);
  s.tick(11_001);
  // Band 0 has waited 11 s (aging 1 step/s: effective 11) against band 2's 1 s (effective 3).
  assert.deepEqual(sink.takeGrants().map((g) => g.requestId), [1]);
  assert.deepEqual(s.checkInvariants(), []);
});

test("a refusal while every provider waits out a Retry-After says to come back when the first hold ends, not sooner", () => {
  const spec: ConfigSpec = { nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'], queueTimeoutMs: 2_000 }] };
  const { s, sink } = setup(spec);
  s.admit(req(1, 'chat'), 0);
  const lease = sink.takeGrants()[0];
  // The only provider answers 429 with Retry-After: 30; the request waits at its place for the hold.
  assert.equal(s.retry(lease.leaseId, req(1, 'chat'), 'a', 10, false, { retryAfterMs: 30_000 }), true);
  s.tick(2_011);
  const [refusal] = sink.take().filter((d) => d.kind === 'reject');
  assert.equal(refusal?.code, 'queue_timeout');
  // The hold ends at 30,010: a retry in 2 s (the queue timeout) would meet it still held.
  assert.equal(refusal?.kind === 'reject' ? refusal.retryAfterSec : undefined, 28);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a short Retry-After hold does not cut the no-rate fallback: the refusal still says the queue timeout', () => {
  const spec: ConfigSpec = { nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'], maxQueue: 1, queueTimeoutMs: 30_000 }] };
  const { s, sink } = setup(spec);
  s.admit(req(1, 'chat'), 0);
  const lease = sink.takeGrants()[0];
  // The only provider answers 429 with Retry-After: 1; the request waits at its place, filling the queue.
  assert.equal(s.retry(lease.leaseId, req(1, 'chat'), 'a', 10, false, { retryAfterMs: 1_000 }), true);
  s.admit(req(2, 'chat'), 20);
  const [refusal] = sink.take().filter((d) => d.kind === 'reject');
  assert.equal(refusal?.code, 'queue_full');
  // No drain rate is measured yet (one grant): the fallback is the queue timeout, which the 1 s hold only floors.
  assert.equal(refusal?.kind === 'reject' ? refusal.retryAfterSec : undefined, 30);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a 429 with Retry-After 0 still sends the request to the other free provider, not straight back to the tie-break winner', () => {
  const { s, sink } = setup(TWO);
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  assert.equal(first.providerId, 'a');
  assert.equal(s.retry(first.leaseId, req(1, 'chat'), 'a', 10, false, { retryAfterMs: 0 }), true);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[1, 'b']], 'retried at once on the free provider');
  assert.equal(s.status(10).providers.find((p) => p.id === 'a')?.overload?.limit, 4, 'halved once');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a 429 with Retry-After 0 and no other provider: the request is served by it again at once', () => {
  const { s, sink } = setup(ONE);
  s.admit(req(1, 'chat'), 0);
  const first = sink.takeGrants()[0];
  assert.equal(s.retry(first.leaseId, req(1, 'chat'), 'a', 10, false, { retryAfterMs: 0 }), true);
  const grants = [...sink.takeGrants()];
  if (grants.length === 0) {
    // Held for the requeue's own pump only: the driver's next wake (1 ms on) serves it.
    const next = s.nextDeadline();
    assert.ok(next !== undefined && next <= 11, `the driver wakes at once: ${next}`);
    s.tick(next);
    grants.push(...sink.takeGrants());
  }
  assert.deepEqual(grants.map((g) => [g.requestId, g.providerId]), [[1, 'a']]);
  assert.deepEqual(s.checkInvariants(), []);
});
