// Which APIs a provider serves (endpoints) and pinning to one provider: a
// request is granted only where its API is served natively, capacity stays
// one budget per provider across APIs, and a request pinned to the provider
// that holds its state waits for that one or is refused, never sent elsewhere.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Api, endpointMask } from '../../../src/shared/endpoints.js';
import { makeConfig, req, setup } from './fixtures.js';

const BOTH = { nodes: { n1: [{ id: 'pm', endpoints: ['chat', 'messages'] as const }, { id: 'pc' }] }, models: [{ alias: 'm', providers: ['pm', 'pc'] }] };

test('a Messages request goes only to a provider that serves messages; it waits while that one is busy, though another is free', () => {
  const { s, sink } = setup(BOTH);
  s.admit({ ...req(1, 'm'), api: Api.messages }, 0);
  assert.equal(sink.takeGrants()[0]?.providerId, 'pm');
  s.admit({ ...req(2, 'm'), api: Api.messages }, 1);
  assert.deepEqual(sink.take(), [], 'queued: pc is free but does not serve messages');
  s.admit(req(3, 'm'), 2);
  assert.equal(sink.takeGrants()[0]?.providerId, 'pc', 'chat takes the free pc');
  assert.deepEqual(s.checkInvariants(), []);
});

test('capacity is shared across APIs: a chat lease on a provider blocks its Messages requests', () => {
  const { s, sink } = setup(BOTH);
  s.admit(req(1, 'm'), 0); // chat -> pm (id order)
  s.admit(req(2, 'm'), 0); // chat -> pc
  sink.take();
  s.admit({ ...req(3, 'm'), api: Api.messages }, 1);
  assert.deepEqual(sink.take(), []);
  const pmLease = sink.all.find((d) => d.kind === 'grant' && d.grant.providerId === 'pm');
  s.release(pmLease?.kind === 'grant' ? pmLease.grant.leaseId : 0, 'end', 2);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[3, 'pm']]);
});

test('the pump remembers failures per API: a waiting Messages request does not hold back a chat request behind it', () => {
  const { s, sink } = setup(BOTH);
  s.admit(req(1, 'm'), 0); // pm
  s.admit(req(2, 'm'), 0); // pc
  s.admit({ ...req(3, 'm'), api: Api.messages }, 1); // queued first
  s.admit(req(4, 'm'), 2); // queued behind it
  sink.take();
  const pcLease = sink.all.find((d) => d.kind === 'grant' && d.grant.providerId === 'pc');
  s.release(pcLease?.kind === 'grant' ? pcLease.grant.leaseId : 0, 'end', 3);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[4, 'pc']], 'pc cannot take #3, so #4 gets it');
  assert.deepEqual(s.checkInvariants(), []);
});

test('no provider of the alias serves the API: refused at once (api_not_served), not after a queue timeout', () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'pc' }] }, models: [{ alias: 'm', providers: ['pc'] }] });
  s.admit({ ...req(1, 'm'), api: Api.responses }, 0);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 1, code: 'api_not_served', retryAfterSec: 0 }]);
});

test('what a node announces at connect overrides the config for its providers', () => {
  const { s, sink } = setup(BOTH, []);
  s.connect('n1', 0, ['pm', 'pc'], new Map([['pm', endpointMask(['chat'])]]));
  s.admit({ ...req(1, 'm'), api: Api.messages }, 1);
  assert.equal(sink.take()[0]?.kind === 'reject' && sink.all[0].kind === 'reject' ? sink.all[0].code : undefined, 'api_not_served');
  // Reconnecting with pc announcing messages makes it a candidate.
  s.connect('n1', 2, ['pm', 'pc'], new Map([['pc', endpointMask(['chat', 'messages'])]]));
  s.admit({ ...req(2, 'm'), api: Api.messages }, 3);
  assert.equal(sink.takeGrants()[0]?.providerId, 'pc');
});

test('a pinned request goes only to its provider: it waits while that one is busy, and is refused when it is gone', () => {
  const { s, sink, gen } = setup({ nodes: { n1: [{ id: 'a' }], n2: [{ id: 'b' }] }, models: [{ alias: 'm', providers: ['a', 'b'] }] });
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b' }, 0);
  const first = sink.takeGrants()[0];
  assert.equal(first?.providerId, 'b', 'not a, which wins ties');
  s.admit({ ...req(2, 'm'), pinnedProviderId: 'b' }, 1);
  assert.deepEqual(sink.take(), [], 'b is busy: it waits although a is free');
  s.release(first.leaseId, 'end', 2);
  assert.equal(sink.takeGrants()[0]?.providerId, 'b');
  s.disconnect('n2', gen.get('n2') as number, 3);
  sink.take();
  s.admit({ ...req(3, 'm'), pinnedProviderId: 'b' }, 4);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 3, code: 'pinned_provider_gone', retryAfterSec: 0 }]);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a pinned request that also names a node (x-edge-node) without its provider is refused at once, not at its deadline', () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'a' }], n2: [{ id: 'b' }] }, models: [{ alias: 'm', providers: ['a', 'b'], queueTimeoutMs: 30_000 }] });
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b', directNodeId: 'n1' }, 0);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 1, code: 'node_not_found', retryAfterSec: 0 }], 'no wait makes n1 hold b');
  s.admit({ ...req(2, 'm'), pinnedProviderId: 'b', directNodeId: 'n2' }, 1);
  assert.equal(sink.takeGrants()[0]?.providerId, 'b', 'the node that runs it: served');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a pinned request waiting when its provider goes away waits for it to come back, and at its deadline is told it is gone', () => {
  const { s, sink, gen } = setup({ nodes: { n1: [{ id: 'a' }], n2: [{ id: 'b' }] }, models: [{ alias: 'm', providers: ['a', 'b'] }] });
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b' }, 0);
  const first = sink.takeGrants()[0];
  s.admit({ ...req(2, 'm'), pinnedProviderId: 'b' }, 1);
  s.disconnect('n2', gen.get('n2') as number, 2);
  sink.take();
  s.tick(1 + 30_001);
  const [rejection] = sink.take();
  assert.equal(rejection?.kind === 'reject' ? rejection.code : undefined, 'pinned_provider_gone', 'not no_provider_available: the alias has a');
  assert.equal(first.providerId, 'b');
});

test('a pinned request whose provider is only unhealthy for now waits for it, and is granted there when it passes again', () => {
  const { s, sink, gen } = setup({ nodes: { n1: [{ id: 'a' }], n2: [{ id: 'b' }] }, models: [{ alias: 'm', providers: ['a', 'b'], queueTimeoutMs: 5_000 }] });
  s.setProviderHealth('n2', 'b', false, 0, gen.get('n2'));
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b' }, 1);
  assert.deepEqual(sink.take(), [], 'queued: its provider is still there, only failing its probe');
  s.setProviderHealth('n2', 'b', true, 2, gen.get('n2'));
  const [grant] = sink.takeGrants();
  assert.equal(grant?.requestId, 1);
  assert.equal(grant.providerId, 'b');
  s.setProviderHealth('n2', 'b', false, 3, gen.get('n2'));
  s.admit({ ...req(2, 'm'), pinnedProviderId: 'b' }, 4);
  s.tick(4 + 5_000);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'pinned_provider_gone', retryAfterSec: 5 }], 'still failing at its deadline: told it is gone');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a pinned request whose provider is held by outlier ejection waits out the hold', () => {
  const { s, sink } = setup({ nodes: { n1: [{ id: 'a' }], n2: [{ id: 'b' }] }, models: [{ alias: 'm', providers: ['a', 'b'], queueTimeoutMs: 120_000 }] });
  let t = 0;
  // Fail b until it is ejected.
  for (let i = 0; i < 20 && s.outlierStatus('b')?.phase !== 'ejected'; i++) {
    s.admit({ ...req(100 + i, 'm'), pinnedProviderId: 'b' }, ++t);
    const [g] = sink.takeGrants();
    assert.ok(g, `attempt ${i} granted`);
    s.release(g.leaseId, 'provider_failed', ++t);
  }
  assert.equal(s.outlierStatus('b')?.phase, 'ejected');
  sink.take();
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b' }, ++t);
  assert.deepEqual(sink.take(), [], 'queued behind the hold, not refused');
  assert.deepEqual(s.checkInvariants(), []);
  s.tick(t + 60_000);
  const [grant] = sink.takeGrants();
  assert.equal(grant?.requestId, 1, 'granted when the hold ended');
  assert.equal(grant.providerId, 'b');
});

test('a pinned request whose provider is set to capacity 0 is refused at once, queued ones included: the operator took it out of rotation', () => {
  const spec = (capB: number) => ({ nodes: { n1: [{ id: 'a' }], n2: [{ id: 'b', capacity: capB }] }, models: [{ alias: 'm', providers: ['a', 'b'], queueTimeoutMs: 60_000 }] });
  const { s, sink } = setup(spec(1));
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b' }, 0);
  const first = sink.takeGrants()[0];
  s.admit({ ...req(2, 'm'), pinnedProviderId: 'b' }, 1);
  assert.deepEqual(sink.take(), [], 'b busy: waits');
  s.setConfig(makeConfig(spec(0)), 2);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'pinned_provider_gone', retryAfterSec: 0 }], 'the waiter is told now, not at its deadline');
  s.admit({ ...req(3, 'm'), pinnedProviderId: 'b' }, 3);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 3, code: 'pinned_provider_gone', retryAfterSec: 0 }]);
  s.release(first.leaseId, 'end', 4);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a pinned waiter whose provider id a refresh moves to another node is told at once, never granted to the process now answering to that id', () => {
  const spec = (bOn: 'n1' | 'n2') => ({
    nodes: { n1: bOn === 'n1' ? [{ id: 'a' }, { id: 'b' }] : [{ id: 'a' }], n2: bOn === 'n2' ? [{ id: 'b' }, { id: 'c' }] : [{ id: 'c' }] },
    models: [{ alias: 'm', providers: ['a', 'b', 'c'], queueTimeoutMs: 60_000 }],
  });
  const { s, sink } = setup(spec('n2'));
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b' }, 0);
  const first = sink.takeGrants()[0];
  assert.equal(first?.nodeId, 'n2');
  s.admit({ ...req(2, 'm'), pinnedProviderId: 'b' }, 1);
  assert.deepEqual(sink.take(), [], 'b busy: waits');
  s.setConfig(makeConfig(spec('n1')), 2);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'pinned_provider_gone', retryAfterSec: 0 }], 'the response is on n2\'s process, not n1\'s');
  s.release(first.leaseId, 'end', 3);
  assert.deepEqual(sink.take(), []);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a pinned request sent back by a 429 after a refresh moved its provider id to another node is not queued again', () => {
  const spec = (bOn: 'n1' | 'n2') => ({
    nodes: { n1: bOn === 'n1' ? [{ id: 'a' }, { id: 'b' }] : [{ id: 'a' }], n2: bOn === 'n2' ? [{ id: 'b' }] : [] },
    models: [{ alias: 'm', providers: ['a', 'b'], queueTimeoutMs: 60_000 }],
  });
  const { s, sink } = setup(spec('n2'));
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b' }, 0);
  const first = sink.takeGrants()[0];
  assert.equal(first?.nodeId, 'n2');
  s.setConfig(makeConfig(spec('n1')), 1);
  // n1's b never saw the stored response the request continues.
  assert.equal(s.retry(first.leaseId, { ...req(1, 'm'), pinnedProviderId: 'b' }, 'b', 2, false, { retryAfterMs: 1_000 }), false, 'not queued again');
  assert.deepEqual(sink.take(), [], 'never granted to n1');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a pinned waiter whose provider a refresh disables is told at once; a pinned request sent back by a 429 after its provider went to capacity 0 is not queued again', () => {
  const spec = (b: { capacity?: number; enabled?: boolean }) => ({ nodes: { n1: [{ id: 'a' }], n2: [{ id: 'b', ...b }] }, models: [{ alias: 'm', providers: ['a', 'b'], queueTimeoutMs: 60_000 }] });
  const { s, sink } = setup(spec({ capacity: 1 }));
  s.admit({ ...req(1, 'm'), pinnedProviderId: 'b' }, 0);
  const first = sink.takeGrants()[0];
  s.admit({ ...req(2, 'm'), pinnedProviderId: 'b' }, 1);
  assert.deepEqual(sink.take(), []);
  s.setConfig(makeConfig(spec({ capacity: 1, enabled: false })), 2);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 2, code: 'pinned_provider_gone', retryAfterSec: 0 }]);
  s.setConfig(makeConfig(spec({ capacity: 0 })), 3);
  // The one in flight now meets a 429: there is nothing to wait for.
  assert.equal(s.retry(first.leaseId, { ...req(1, 'm'), pinnedProviderId: 'b' }, 'b', 4, false, { retryAfterMs: 1_000 }), false, 'not queued again');
  assert.deepEqual(sink.take(), []);
  assert.deepEqual(s.checkInvariants(), []);
});
