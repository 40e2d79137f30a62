// Connections and generations, draining.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { req, setup } from './fixtures.js';

const TWO_NODES = {
  nodes: { n1: [{ id: 'a', capacity: 2 }], n2: [{ id: 'b', capacity: 2 }] },
  models: [{ alias: 'chat', providers: ['a', 'b'] }],
};

test('every connection gets a unique generation, increasing across all nodes', () => {
  const { s } = setup(TWO_NODES, []);
  const gens = [s.connect('n1', 0), s.connect('n2', 0), s.connect('n1', 1), s.connect('n1', 2)].map((r) => r?.generation);
  assert.deepEqual(
    gens.every((g, i) => typeof g === 'number' && (i === 0 || g > (gens[i - 1] as number))),
    true,
    `generations ${gens.join(',')}`,
  );
  const n1 = s.status().nodes.find((n) => n.id === 'n1');
  assert.deepEqual(n1, { id: 'n1', connected: true, generation: gens[3], connectedSinceMs: 2, draining: false, leases: 0 });
});

test('a node not in the catalog is refused', () => {
  const { s } = setup(TWO_NODES, []);
  assert.equal(s.connect('intruder', 0), undefined);
  assert.equal(s.status().nodes.some((n) => n.id === 'intruder'), false);
});

test('a reconnect supersedes the old connection and fences exactly its leases', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(req(1, 'chat', { node: 'n1' }), 0);
  s.admit(req(2, 'chat', { node: 'n2' }), 0);
  s.admit(req(3, 'chat', { node: 'n1' }), 0);
  const grants = sink.takeGrants();
  const result = s.connect('n1', 10);
  assert.deepEqual(
    result?.fenced.map((l) => [l.requestId, l.nodeId]).sort(),
    [
      [1, 'n1'],
      [3, 'n1'],
    ],
  );
  assert.equal(s.lease(grants[1].leaseId)?.nodeId, 'n2', "n2's lease is untouched");
  assert.equal(s.release(grants[0].leaseId, 'end', 11), false, 'a late END of a fenced lease releases nothing');
  assert.equal(s.status().providers.find((p) => p.id === 'a')?.inFlight, 0);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a stale disconnect for an old generation is a no-op', () => {
  const { s, sink, gen } = setup(TWO_NODES);
  const old = gen.get('n1') as number;
  const fresh = s.connect('n1', 5)?.generation as number;
  s.admit(req(1, 'chat', { node: 'n1' }), 6);
  const lease = sink.takeGrants()[0];
  assert.equal(lease.generation, fresh);
  assert.equal(s.disconnect('n1', old, 7), undefined, "the old stream's close callback arrives late");
  assert.equal(s.lease(lease.leaseId)?.generation, fresh, "the new connection's lease survives");
  assert.equal(s.status().nodes.find((n) => n.id === 'n1')?.connected, true);
  assert.equal(s.disconnect('n1', fresh, 8)?.length, 1);
  assert.equal(s.disconnect('n1', fresh, 9), undefined, 'a second disconnect of the same generation is a no-op');
});

test('a disconnect releases that generation and removes the node from the candidates', () => {
  const { s, sink, gen } = setup({ ...TWO_NODES, models: [{ alias: 'chat', providers: ['a', 'b'] }] });
  for (let i = 1; i <= 4; i++) s.admit(req(i, 'chat'), 0); // a, b, a, b
  const grants = sink.takeGrants();
  const fenced = s.disconnect('n1', gen.get('n1') as number, 1);
  assert.deepEqual(fenced?.map((l) => l.requestId).sort(), [1, 3]);
  s.admit(req(5, 'chat'), 2);
  assert.deepEqual(sink.take(), [], 'n2 is full and n1 is gone: waits, though a has free slots');
  s.release(grants[1].leaseId, 'end', 3);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[5, 'b']]);
  assert.deepEqual(s.checkInvariants(), []);
});

test('reconnect alone dispatches a request that waited while its only node was offline', () => {
  const { s, sink, gen } = setup({ nodes: { n1: [{ id: 'a', capacity: 1 }] }, models: [{ alias: 'chat', providers: ['a'] }] });
  s.disconnect('n1', gen.get('n1') as number, 0);
  s.admit(req(1, 'chat'), 100);
  assert.deepEqual(sink.take(), []);
  const result = s.connect('n1', 350);
  const [g] = sink.takeGrants();
  assert.deepEqual([g.requestId, g.generation, g.queuedMs], [1, result?.generation, 250]);
});

test('a draining node gets no new grants while its open leases continue', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(req(1, 'chat', { node: 'n1' }), 0);
  const open = sink.takeGrants()[0];
  s.setDraining('n1', true, 1);
  s.admit(req(2, 'chat'), 2);
  s.admit(req(3, 'chat', { node: 'n1' }), 2);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.nodeId]), [[2, 'n2']], 'the direct one waits');
  assert.equal(s.lease(open.leaseId)?.nodeId, 'n1');
  assert.equal(s.confirm(open.leaseId, 3), true, 'draining does not fence');
  assert.equal(s.status().nodes.find((n) => n.id === 'n1')?.draining, true);
  s.setDraining('n1', false, 4);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.nodeId]), [[3, 'n1']], 'undraining wakes the waiter');
});

test('draining belongs to a connection: a reconnect starts undrained', () => {
  const { s, sink } = setup(TWO_NODES, ['n1']);
  s.setDraining('n1', true, 0);
  s.admit(req(1, 'chat'), 1);
  assert.deepEqual(sink.take(), []);
  s.connect('n1', 2);
  assert.deepEqual(sink.takeGrants().map((g) => g.requestId), [1]);
});

test('a provider its node did not announce at connect is no candidate for that connection', () => {
  const spec = {
    nodes: { n1: [{ id: 'a', capacity: 4 }, { id: 'missing', capacity: 4 }] },
    models: [
      { alias: 'chat', providers: ['a', 'missing'] },
      { alias: 'only-missing', providers: ['missing'], queueTimeoutMs: 100 },
    ],
  };
  const { s, sink } = setup(spec, []);
  s.connect('n1', 0, ['a']);
  for (let i = 1; i <= 3; i++) s.admit(req(i, 'chat'), 1);
  assert.deepEqual(sink.takeGrants().map((g) => g.providerId), ['a', 'a', 'a'], "'missing' would win the ties if it were a candidate");
  s.admit(req(10, 'only-missing'), 1);
  assert.deepEqual(sink.take(), [], 'queued: no announced provider serves it');
  s.tick(200);
  assert.deepEqual(
    sink.take().map((d) => (d.kind === 'reject' ? [d.requestId, d.code] : ['grant', d.grant.requestId])),
    [[10, 'no_provider_available']],
  );
  const status = s.status().providers;
  assert.equal(status.find((p) => p.id === 'missing')?.announced, false);
  assert.equal(status.find((p) => p.id === 'a')?.announced, true);
  // A reconnect that announces it makes it a candidate again.
  s.connect('n1', 300, ['a', 'missing']);
  s.admit(req(11, 'only-missing'), 301);
  assert.deepEqual(sink.takeGrants().map((g) => g.providerId), ['missing']);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a provider withdrawn from its connection (a refresh changed its type) is no candidate until put back, with no reconnect', () => {
  const spec = {
    nodes: { n1: [{ id: 'a', capacity: 4 }, { id: 'retyped', capacity: 4 }] },
    models: [
      { alias: 'chat', providers: ['a', 'retyped'] },
      { alias: 'only-retyped', providers: ['retyped'], queueTimeoutMs: 100 },
    ],
  };
  const { s, sink } = setup(spec, []);
  const generation = s.connect('n1', 0, ['a', 'retyped'], new Map([['retyped', 0b101]]))?.generation as number;
  assert.equal(s.setAnnounced('n1', 'retyped', false, undefined, 1, generation), true);
  assert.equal(s.setAnnounced('n1', 'retyped', false, undefined, 1, generation), false, 'already withdrawn');
  for (let i = 1; i <= 3; i++) s.admit(req(i, 'chat'), 2);
  assert.deepEqual(sink.takeGrants().map((g) => g.providerId), ['a', 'a', 'a'], "'retyped' would win the ties if it were a candidate");
  s.admit(req(10, 'only-retyped'), 2);
  assert.deepEqual(sink.take(), [], 'queued: no announced provider serves it');
  const withdrawn = s.status().providers.find((p) => p.id === 'retyped');
  assert.equal(withdrawn?.announced, false);
  assert.deepEqual(withdrawn?.endpoints, ['chat', 'completions', 'embeddings'], 'its config applies, as when Register leaves it out');
  // A word about another connection changes nothing; the current one's puts it back and serves the waiter.
  assert.equal(s.setAnnounced('n1', 'retyped', true, 0b101, 3, generation + 1), false);
  assert.deepEqual(sink.take(), []);
  assert.equal(s.setAnnounced('n1', 'retyped', true, 0b101, 3, generation), true);
  assert.deepEqual(sink.takeGrants().map((g) => [g.requestId, g.providerId]), [[10, 'retyped']]);
  assert.deepEqual(s.status().providers.find((p) => p.id === 'retyped')?.endpoints, ['chat', 'embeddings'], 'with the APIs its node announced');
  assert.equal(s.status().nodes.find((n) => n.id === 'n1')?.generation, generation);
  assert.deepEqual(s.checkInvariants(), []);
});

test('waiters pinned to a provider its connection withdraws are refused then, not at their deadline; the others wait on', () => {
  const spec = {
    nodes: { n1: [{ id: 'a', capacity: 1 }, { id: 'b', capacity: 1 }] },
    models: [{ alias: 'chat', providers: ['a', 'b'], queueTimeoutMs: 60_000 }],
  };
  const { s, sink } = setup(spec, []);
  const generation = s.connect('n1', 0, ['a', 'b'])?.generation as number;
  s.admit({ ...req(1, 'chat'), pinnedProviderId: 'a' }, 1);
  s.admit({ ...req(2, 'chat'), pinnedProviderId: 'b' }, 1);
  assert.deepEqual(sink.takeGrants().map((g) => g.providerId), ['a', 'b']);
  // Both full: these wait, two on the provider that will go, one on the other, one for either.
  s.admit({ ...req(3, 'chat'), pinnedProviderId: 'a' }, 2);
  s.admit({ ...req(4, 'chat'), pinnedProviderId: 'b' }, 2);
  s.admit({ ...req(5, 'chat'), pinnedProviderId: 'a' }, 2);
  s.admit(req(6, 'chat'), 2);
  assert.deepEqual(sink.take(), []);
  assert.equal(s.setAnnounced('n1', 'a', false, undefined, 3, generation), true);
  assert.deepEqual(
    sink.take().map((d) => (d.kind === 'reject' ? [d.requestId, d.code] : [d.kind])),
    [[3, 'pinned_provider_gone'], [5, 'pinned_provider_gone']],
  );
  assert.equal(s.status().groups.find((g) => g.alias === 'chat')?.queueDepth, 2, 'the one pinned to b and the free one wait on');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a late Leaving or probe verdict from a superseded connection leaves the new one as it is', () => {
  const { s, sink } = setup(TWO_NODES, []);
  const old = s.connect('n1', 0)?.generation as number;
  const current = s.connect('n1', 1)?.generation as number; // reconnected before the old stream's last words arrived
  s.setDraining('n1', true, 2, old);
  s.setProviderHealth('n1', 'a', false, 2, old);
  const n1 = s.status().nodes.find((n) => n.id === 'n1');
  assert.equal(n1?.draining, false, 'the old connection\'s Leaving does not drain the new one');
  assert.notEqual(s.status().providers.find((p) => p.id === 'a')?.unhealthy, true, 'nor does its probe verdict');
  s.admit(req(1, 'chat'), 3);
  assert.equal(sink.takeGrants()[0]?.providerId, 'a', 'the new connection takes requests');
  // Its own connection, or an operator's drain (no generation), still applies.
  s.setDraining('n1', true, 4, current);
  assert.equal(s.status().nodes.find((n) => n.id === 'n1')?.draining, true);
  s.setDraining('n1', false, 5);
  assert.equal(s.status().nodes.find((n) => n.id === 'n1')?.draining, false);
});

test('setDraining says whether it applied: a connected node (in the named generation), not a gone one or a stale generation', () => {
  const { s, gen } = setup(TWO_NODES);
  const g1 = gen.get('n1') as number;
  assert.equal(s.setDraining('n1', true, 1), true);
  assert.equal(s.status().nodes.find((n) => n.id === 'n1')?.draining, true);
  assert.equal(s.setDraining('n1', false, 2, g1 + 1000), false, 'another generation');
  s.disconnect('n2', gen.get('n2') as number, 3);
  assert.equal(s.setDraining('n2', true, 4), false, 'not connected: nothing drained, and the caller can say so');
  assert.equal(s.setDraining('ghost', true, 5), false);
});
