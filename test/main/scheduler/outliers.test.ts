// Passive outlier ejection through the scheduler (time passed in, no jitter):
// consecutive provider failures eject, the share moves to the others, the
// ejection ends half-open with a single probe, ejection times grow and are
// capped, the last serving provider of an alias and more than the max share
// are never ejected, and an operator reset returns a provider at once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Scheduler } from '../../../src/main/scheduler/scheduler.js';
import { DEFAULT_OUTLIER_POLICY, Outliers } from '../../../src/main/scheduler/outliers.js';
import { makeConfig, RecordingSink, req, type ConfigSpec } from './fixtures.js';
import { Api } from '../../../src/shared/endpoints.js';

const THREE: ConfigSpec = {
  nodes: { n1: [{ id: 'a', capacity: 4 }], n2: [{ id: 'b', capacity: 4 }], n3: [{ id: 'c', capacity: 4 }] },
  models: [{ alias: 'chat', providers: ['a', 'b', 'c'] }],
};

function start(spec: ConfigSpec, random = () => 0.5): { s: Scheduler; sink: RecordingSink } {
  const sink = new RecordingSink();
  const s = new Scheduler(makeConfig(spec), sink, new Outliers(DEFAULT_OUTLIER_POLICY, random));
  for (const id of Object.keys(spec.nodes)) s.connect(id, 0);
  return { s, sink };
}

let nextId = 1;
/** Admits one request and ends it at once with `reason`; returns the provider it went to. */
function serve(s: Scheduler, sink: RecordingSink, now: number, reason: 'end' | 'provider_failed' | 'client_closed' | 'shutting_down'): string | undefined {
  s.admit(req(nextId++, 'chat'), now);
  const grant = sink.takeGrants()[0];
  if (grant === undefined) return undefined;
  s.confirm(grant.leaseId, now);
  s.release(grant.leaseId, reason, now);
  return grant.providerId;
}

test('five consecutive failures eject a provider; its share moves to the others; a successful probe returns it', () => {
  const { s, sink } = start(THREE);
  for (let i = 0; i < 4; i++) assert.equal(serve(s, sink, 1, 'provider_failed'), 'a');
  assert.equal(s.outlierStatus('a')?.phase, 'healthy', 'four failures are not enough');
  assert.equal(serve(s, sink, 2, 'provider_failed'), 'a');
  const ejected = s.outlierStatus('a');
  assert.equal(ejected?.phase, 'ejected');
  assert.equal(ejected?.untilMs, 2 + 30_000);
  assert.match(ejected?.reason ?? '', /5 consecutive failures/);
  const served = Array.from({ length: 6 }, () => serve(s, sink, 3, 'end'));
  assert.ok(!served.includes('a'), `a gets nothing while ejected: ${served.join(',')}`);
  assert.equal(s.nextDeadline(), 2 + 30_000, 'the driver wakes when the ejection ends');
  // Half-open after 30 s: exactly one probe goes to it.
  s.tick(30_002);
  assert.equal(s.outlierStatus('a')?.phase, 'half_open');
  s.admit(req(nextId++, 'chat'), 30_003);
  const probe = sink.takeGrants()[0];
  assert.equal(probe.providerId, 'a', 'the idle half-open provider is picked');
  for (let i = 0; i < 3; i++) s.admit(req(nextId++, 'chat'), 30_003);
  assert.ok(sink.takeGrants().every((g) => g.providerId !== 'a'), 'no second request while the probe runs');
  s.release(probe.leaseId, 'end', 30_004);
  assert.equal(s.outlierStatus('a')?.phase, 'healthy');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a failed probe ejects again for base × count, capped at 300 s, with jitter', () => {
  const { s, sink } = start(THREE, () => 1); // jitter at its top: +10 %
  for (let i = 0; i < 5; i++) serve(s, sink, 0, 'provider_failed');
  assert.equal(s.outlierStatus('a')?.untilMs, 33_000);
  let now = 33_000;
  for (let count = 2; count <= 12; count++) {
    s.tick(now);
    assert.equal(serve(s, sink, now, 'provider_failed'), 'a', 'the probe');
    const status = s.outlierStatus('a');
    assert.equal(status?.ejections, count);
    const expected = Math.min(30_000 * count, 300_000) * 1.1;
    assert.equal(status?.untilMs, now + expected);
    now += expected;
  }
});

test('the last serving provider of an alias is never ejected: requests keep going to it', () => {
  const { s, sink } = start({ nodes: { n1: [{ id: 'a', capacity: 2 }] }, models: [{ alias: 'chat', providers: ['a'] }] });
  for (let i = 0; i < 20; i++) assert.equal(serve(s, sink, i, 'provider_failed'), 'a');
  assert.equal(s.outlierStatus('a')?.phase, 'healthy');
  assert.match(s.outlierStatus('a')?.reason ?? '', /last serving provider of chat/);
});

test('a provider at capacity 0 does not count as serving: the last one with slots is not ejected, and comes back when the others leave', () => {
  const spec: ConfigSpec = { nodes: { n1: [{ id: 'a', capacity: 2 }], n2: [{ id: 'b', capacity: 0 }] }, models: [{ alias: 'chat', providers: ['a', 'b'] }] };
  const { s, sink } = start(spec);
  for (let i = 0; i < 20; i++) assert.equal(serve(s, sink, i, 'provider_failed'), 'a');
  assert.equal(s.outlierStatus('a')?.phase, 'healthy', 'b has no slots: ejecting a would leave chat nothing');
  assert.match(s.outlierStatus('a')?.reason ?? '', /last serving provider of chat/);

  const three: ConfigSpec = { nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 0 }], n3: [{ id: 'c', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a', 'b', 'c'] }] };
  const second = start(three);
  for (let i = 0; i < 5; i++) {
    second.s.admit({ ...req(nextId++, 'chat'), pinnedProviderId: 'a' }, 1);
    const g = second.sink.takeGrants()[0];
    second.s.release(g.leaseId, 'provider_failed', 1);
  }
  assert.equal(second.s.outlierStatus('a')?.phase, 'ejected', 'c still serves');
  second.s.disconnect('n3', second.s.currentGeneration('n3'), 2);
  assert.equal(second.s.outlierStatus('a')?.phase, 'half_open', 'c left and b has no slots: a comes back at once');
});

test('at most half of an alias is ejected at once', () => {
  const { s, sink } = start({
    nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }], n3: [{ id: 'c', capacity: 1 }], n4: [{ id: 'd', capacity: 1 }] },
    models: [{ alias: 'chat', providers: ['a', 'b', 'c', 'd'] }],
  });
  // Every provider fails every request.
  for (let i = 0; i < 40; i++) serve(s, sink, i, 'provider_failed');
  const phases = ['a', 'b', 'c', 'd'].map((id) => s.outlierStatus(id)?.phase);
  assert.equal(phases.filter((p) => p === 'ejected').length, 2, phases.join(','));
});

test('client-side endings neither count nor reset; a success resets the count; an operator reset returns at once', () => {
  const { s, sink } = start({ nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a', 'b'] }] });
  for (let i = 0; i < 4; i++) assert.equal(serve(s, sink, 0, 'provider_failed'), 'a');
  serve(s, sink, 0, 'client_closed');
  // The edge's drain cutting it is not the provider's doing either.
  serve(s, sink, 0, 'shutting_down');
  assert.equal(s.outlierStatus('a')?.consecutiveFailures, 4);
  serve(s, sink, 0, 'end');
  assert.equal(s.outlierStatus('a')?.consecutiveFailures, 0);
  for (let i = 0; i < 5; i++) serve(s, sink, 1, 'provider_failed');
  assert.equal(s.outlierStatus('a')?.phase, 'ejected');
  assert.equal(s.resetOutlier('a', 2), true);
  assert.equal(s.outlierStatus('a')?.phase, 'healthy');
  assert.equal(serve(s, sink, 3, 'end'), 'a');
});

test('a failure before the first byte (retry) counts as a provider failure', () => {
  const { s, sink } = start(THREE);
  for (let i = 0; i < 5; i++) {
    s.admit(req(nextId++, 'chat'), 0);
    const grant = sink.takeGrants()[0];
    assert.equal(grant.providerId, 'a');
    s.confirm(grant.leaseId, 0);
    assert.equal(s.retry(grant.leaseId, req(grant.requestId, 'chat'), 'a', 0, true), true);
    const retried = sink.takeGrants()[0];
    s.release(retried.leaseId, 'end', 0);
  }
  assert.equal(s.outlierStatus('a')?.phase, 'ejected');
});

/** Two providers on two nodes; `a` ejected (five failures while `b` serves). */
function aEjected(): { s: Scheduler; sink: RecordingSink } {
  const started = start({ nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a', 'b'] }] });
  for (let i = 0; i < 5; i++) assert.equal(serve(started.s, started.sink, 0, 'provider_failed'), 'a');
  assert.equal(started.s.outlierStatus('a')?.phase, 'ejected');
  return started;
}

test('a half-open probe ended by its node reconnecting leaves the provider probing again, not held for good', () => {
  const { s, sink } = aEjected();
  s.tick(30_001);
  s.admit(req(nextId++, 'chat'), 30_001);
  const probe = sink.takeGrants()[0];
  assert.equal(probe.providerId, 'a', 'the probe');
  s.connect('n1', 30_002); // the node restarts: the probe's lease is fenced, no verdict
  s.release(probe.leaseId, 'end', 30_003); // the data path's late release finds no lease
  const served = Array.from({ length: 4 }, () => {
    s.admit(req(nextId++, 'chat'), 30_004);
    return sink.takeGrants()[0]?.providerId;
  });
  assert.ok(served.includes('a'), `a takes the next probe: ${served.join(',')}`);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a request whose only provider left is half-open with its probe out waits for the probe, and times out as busy, not as having none', () => {
  const { s, sink } = aEjected();
  s.tick(30_001);
  s.admit(req(nextId++, 'chat'), 30_001);
  const probe = sink.takeGrants()[0];
  assert.equal(probe.providerId, 'a', 'the probe');
  s.confirm(probe.leaseId, 30_001);
  const retried = req(nextId++, 'chat');
  s.admit(retried, 30_001);
  const onB = sink.takeGrants()[0];
  assert.equal(onB.providerId, 'b');
  // b fails before its first byte: a (probing) is the only provider left for the retry.
  assert.equal(s.retry(onB.leaseId, retried, 'b', 30_002, true), true, 'the retry waits for a instead of failing at once');
  s.release(probe.leaseId, 'end', 30_003);
  assert.equal(s.outlierStatus('a')?.phase, 'healthy');
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[retried.requestId, 'a']], 'the probe returned a: the retry takes it');
  assert.deepEqual(s.checkInvariants(), []);

  // Again, with the probe outlasting the queue: the waiter was waiting for a busy provider.
  const again = aEjected();
  again.s.tick(30_001);
  again.s.disconnect('n2', again.s.currentGeneration('n2'), 30_001);
  again.s.admit(req(nextId++, 'chat'), 30_001);
  assert.equal(again.sink.takeGrants()[0]?.providerId, 'a', 'the probe');
  const waiter = nextId++;
  again.s.admit(req(waiter, 'chat'), 30_001);
  again.s.tick(30_001 + 30_000);
  assert.deepEqual(
    again.sink.take().flatMap((d) => (d.kind === 'reject' ? [[d.requestId, d.code]] : [])),
    [[waiter, 'queue_timeout']],
  );
});

test('a failed probe does not eject the last serving provider: it stays half-open and requests wait for it', () => {
  const { s, sink } = aEjected();
  s.disconnect('n2', s.currentGeneration('n2'), 10); // b leaves while a is out
  s.tick(30_001);
  assert.equal(serve(s, sink, 30_001, 'provider_failed'), 'a', 'the probe fails');
  const status = s.outlierStatus('a');
  assert.equal(status?.phase, 'half_open', 'not ejected again');
  assert.match(status?.reason ?? '', /last serving provider of chat/);
  assert.equal(serve(s, sink, 30_002, 'end'), 'a', 'the next request goes to it and returns it');
  assert.equal(s.outlierStatus('a')?.phase, 'healthy');
});

test('when the last serving provider of an alias leaves, its ejected providers come back half-open at once', () => {
  for (const [how, leave] of [
    ['disconnected', (s: Scheduler) => s.disconnect('n2', s.currentGeneration('n2'), 10)],
    ['drained', (s: Scheduler) => s.setDraining('n2', true, 10)],
    ['failed its health probe', (s: Scheduler) => s.setProviderHealth('n2', 'b', false, 10)],
    // A reconnect that supersedes the old connection (no disconnect first) and no longer announces b.
    ['reconnected without it', (s: Scheduler) => s.connect('n2', 10, [])],
  ] as const) {
    const { s, sink } = aEjected();
    s.admit(req(nextId++, 'chat'), 5);
    const onB = sink.takeGrants()[0];
    assert.equal(onB.providerId, 'b');
    s.admit(req(nextId++, 'chat'), 6);
    assert.equal(sink.takeGrants().length, 0, `${how}: waits for b`);
    leave(s);
    assert.equal(s.outlierStatus('a')?.phase, 'half_open', how);
    const grants = sink.takeGrants();
    assert.equal(grants.length, 1, `${how}: the waiting request probes a at once, not after the 30 s ejection`);
    assert.equal(grants[0].providerId, 'a');
    assert.deepEqual(s.checkInvariants(), [], how);
  }
});

test('only the half-open probe decides: a lease granted before the ejection that ends during the probe neither returns, re-ejects nor frees a second probe', () => {
  const pinnedToA = (id: number) => ({ ...req(id, 'chat'), pinnedProviderId: 'a' });
  for (const reason of ['end', 'provider_failed', 'client_closed'] as const) {
    const { s, sink } = start(THREE);
    s.admit(pinnedToA(nextId++), 0);
    const early = sink.takeGrants()[0];
    s.confirm(early.leaseId, 0);
    for (let i = 0; i < 5; i++) {
      s.admit(pinnedToA(nextId++), 1);
      const g = sink.takeGrants()[0];
      s.confirm(g.leaseId, 1);
      s.release(g.leaseId, 'provider_failed', 1);
    }
    assert.equal(s.outlierStatus('a')?.phase, 'ejected', reason);
    s.tick(30_002);
    s.admit(pinnedToA(nextId++), 30_003);
    const probe = sink.takeGrants()[0];
    assert.equal(probe?.providerId, 'a', `${reason}: the probe`);
    s.release(early.leaseId, reason, 30_004);
    assert.equal(s.outlierStatus('a')?.phase, 'half_open', `${reason}: the early lease is no verdict`);
    s.admit(pinnedToA(nextId++), 30_005);
    assert.deepEqual(sink.takeGrants(), [], `${reason}: still one request at a time while the probe runs`);
    s.release(probe.leaseId, 'end', 30_006);
    assert.equal(s.outlierStatus('a')?.phase, 'healthy', `${reason}: the probe returns it`);
    assert.equal(sink.takeGrants()[0]?.providerId, 'a', `${reason}: the waiter goes`);
    assert.deepEqual(s.checkInvariants(), [], reason);
  }
});

test('a refreshed policy judges the next outcome: a lower consecutive_failures ejects at once; an ejection under way keeps its end', () => {
  const { s, sink } = start(THREE);
  for (let i = 0; i < 3; i++) assert.equal(serve(s, sink, 1, 'provider_failed'), 'a');
  assert.equal(s.outlierStatus('a')?.phase, 'healthy');
  // An operator tightens the breaker: three failures are already counted, the fourth is over the new threshold.
  s.outliers.setPolicy({ ...DEFAULT_OUTLIER_POLICY, consecutiveFailures: 2, baseEjectionMs: 5_000 });
  assert.equal(serve(s, sink, 2, 'provider_failed'), 'a');
  const ejected = s.outlierStatus('a');
  assert.equal(ejected?.phase, 'ejected');
  assert.equal(ejected?.untilMs, 2 + 5_000, 'timed by the new base');
  // A looser policy later does not shorten the ejection under way.
  s.outliers.setPolicy({ ...DEFAULT_OUTLIER_POLICY, baseEjectionMs: 1_000 });
  assert.equal(s.outlierStatus('a')?.untilMs, 2 + 5_000);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a refreshed failure_rate_window starts the windows afresh; the consecutive count stands', () => {
  const { s, sink } = start(THREE);
  // a fails every other request (never many in a row): only the failure rate could eject it.
  const rate = { ...DEFAULT_OUTLIER_POLICY, consecutiveFailures: 1000, failureRate: 0.5, failureRateWindow: 10, failureRateMinRequests: 10 };
  s.outliers.setPolicy(rate);
  const outcomes = (n: number): void => {
    for (let i = 0; i < n; i++) assert.equal(serve(s, sink, 1, i % 2 === 0 ? 'provider_failed' : 'end'), 'a');
  };
  outcomes(8);
  assert.equal(s.outlierStatus('a')?.phase, 'healthy', '8 outcomes: under failure_rate_min_requests');
  s.outliers.setPolicy({ ...rate, failureRateWindow: 4, failureRateMinRequests: 4 });
  // Three more (F S F): in the old window of 10 that is 5 failures in 10, an ejection; in a fresh window of 4, too few to judge.
  outcomes(3);
  assert.equal(s.outlierStatus('a')?.phase, 'healthy');
  assert.equal(s.outlierStatus('a')?.consecutiveFailures, 1);
  assert.equal(serve(s, sink, 1, 'provider_failed'), 'a');
  assert.equal(s.outlierStatus('a')?.phase, 'ejected', 'the fresh window is full: 3 failures in 4');
  assert.deepEqual(s.checkInvariants(), []);
});

test('an ejected provider still serves the API no other provider of the alias serves; the rest of the traffic stays away from it', () => {
  // a serves chat and Messages, b chat only: once a is ejected, a Messages request has no other candidate.
  const { s, sink } = start({
    nodes: { n1: [{ id: 'a', capacity: 2, endpoints: ['chat', 'messages'] }], n2: [{ id: 'b', capacity: 2, endpoints: ['chat'] }] },
    models: [{ alias: 'chat', providers: ['a', 'b'] }],
  }, () => 1);
  for (let i = 0; i < 5; i++) assert.equal(serve(s, sink, 1, 'provider_failed'), 'a');
  assert.equal(s.outlierStatus('a')?.phase, 'ejected', 'b serves the alias, so a may be ejected');
  const messages = (now: number) => s.admit({ ...req(nextId++, 'chat'), api: Api.messages }, now);
  messages(2);
  messages(2);
  const served = sink.takeGrants();
  assert.deepEqual(served.map((g) => g.providerId), ['a', 'a'], 'Messages requests are granted on the ejected a, not left to time out');
  messages(2);
  assert.deepEqual(sink.takeGrants(), [], 'a is full: the third waits for it');
  // Chat fills b and then waits: it never spills onto the ejected a.
  for (let i = 0; i < 3; i++) s.admit(req(nextId++, 'chat'), 2);
  assert.deepEqual(sink.takeGrants().map((g) => g.providerId), ['b', 'b']);
  for (const g of served) s.confirm(g.leaseId, 2);
  s.release(served[0].leaseId, 'end', 3);
  assert.deepEqual(sink.takeGrants().map((g) => g.providerId), ['a'], 'the waiting Messages request takes the freed slot; the waiting chat request does not');
  assert.equal(s.outlierStatus('a')?.phase, 'ejected', 'a success while ejected does not end the ejection early');
  assert.deepEqual(s.checkInvariants(), []);
  // Its queued Messages requests time out as waiting for a busy provider, not as having none.
  messages(3);
  assert.deepEqual(sink.takeGrants(), [], 'a is full again: this one waits for it');
  // (Jitter +10 %: a is still ejected at the queue's 30 s deadline.)
  s.tick(30_003);
  assert.equal(s.outlierStatus('a')?.phase, 'ejected');
  assert.deepEqual(
    sink.take().flatMap((d) => (d.kind === 'reject' ? [d.code] : [])),
    ['queue_timeout', 'queue_timeout'],
    'the chat request waiting for b and the Messages request waiting for a: busy providers, not none',
  );
});

test('an ejected provider with the only long window still takes long prompts, also when they queued behind short ones', () => {
  const { s, sink } = start({
    nodes: { n1: [{ id: 'big', capacity: 1, maxContextTokens: 100_000 }], n2: [{ id: 'small', capacity: 2, maxContextTokens: 4_000 }] },
    models: [{ alias: 'chat', providers: ['big', 'small'] }],
    longContextThresholdTokens: 2_000,
  });
  for (let i = 0; i < 5; i++) assert.equal(serve(s, sink, 1, 'provider_failed'), 'big');
  assert.equal(s.outlierStatus('big')?.phase, 'ejected');
  s.admit(req(nextId++, 'chat', { tokens: 50_000 }), 2);
  const [long] = sink.takeGrants();
  assert.equal(long?.providerId, 'big', 'no other window holds 50,000 tokens');
  s.admit(req(nextId++, 'chat'), 2);
  s.admit(req(nextId++, 'chat'), 2);
  assert.deepEqual(sink.takeGrants().map((g) => g.providerId), ['small', 'small'], 'short prompts go to small only');
  s.admit(req(nextId++, 'chat'), 2); // waits for small
  s.admit(req(nextId++, 'chat', { tokens: 50_000 }), 2); // waits for big, behind the short one
  assert.deepEqual(sink.takeGrants(), []);
  s.confirm(long.leaseId, 2);
  s.release(long.leaseId, 'end', 3);
  assert.deepEqual(sink.takeGrants().map((g) => g.providerId), ['big'], 'the short waiter failing to find a slot says nothing about the long one');
  assert.deepEqual(s.checkInvariants(), []);
});

test("failures of requests still running on the node a refresh moved the provider from do not eject it on its new node", () => {
  const on = (node: 'n1' | 'n3'): ConfigSpec => ({
    nodes: { n1: node === 'n1' ? [{ id: 'a', capacity: 8 }] : [], n2: [{ id: 'b', capacity: 1 }], n3: node === 'n3' ? [{ id: 'a', capacity: 8 }] : [] },
    models: [{ alias: 'chat', providers: ['a', 'b'] }],
  });
  const { s, sink } = start(on('n1'));
  // b busy, so that every request goes to a (and b stays serving: a may be ejected).
  s.admit(req(nextId++, 'chat'), 0);
  const busy = sink.takeGrants();
  if (busy[0]?.providerId !== 'b') {
    s.admit(req(nextId++, 'chat'), 0);
    busy.push(...sink.takeGrants());
  }
  assert.ok(busy.some((g) => g.providerId === 'b'));
  const old: number[] = busy.filter((g) => g.providerId === 'a').map((g) => g.leaseId);
  for (const g of busy) s.confirm(g.leaseId, 0);
  while (old.length < 5) {
    s.admit(req(nextId++, 'chat'), 1);
    const grant = sink.takeGrants()[0];
    assert.equal(grant.providerId, 'a');
    s.confirm(grant.leaseId, 1);
    old.push(grant.leaseId);
  }
  s.setConfig(makeConfig(on('n3')), 2);
  for (const leaseId of old) s.release(leaseId, 'provider_failed', 3);
  assert.equal(s.outlierStatus('a')?.phase ?? 'healthy', 'healthy', "n1's process failing says nothing of a on n3");
  assert.deepEqual(s.checkInvariants(), []);
});
