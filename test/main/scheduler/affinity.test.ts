// Session affinity: requests of one session keep to the node that served it
// while that node is connected and takes work, waiting for capacity there
// rather than going elsewhere; once it is gone they go to any candidate and
// the session follows them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makeConfig, req, setup } from './fixtures.js';

const TWO_NODES = {
  nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }] },
  models: [{ alias: 'chat', providers: ['a', 'b'] }],
};

const session = (requestId: number, key: number) => ({ ...req(requestId, 'chat'), sessionKey: key });

test('a session keeps to its node: a second request waits for that node\'s slot although the other node is free', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(session(1, 7), 0);
  const first = sink.takeGrants()[0];
  s.admit(session(2, 7), 1);
  assert.deepEqual(sink.take(), [], 'queued for its node, not sent to the free one');
  s.release(first.leaseId, 'end', 2);
  const second = sink.takeGrants()[0];
  assert.equal(second.requestId, 2);
  assert.equal(second.nodeId, first.nodeId);
  assert.deepEqual(s.checkInvariants(), []);
});

test('requests without a session, or of another session, are not held by it', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(session(1, 7), 0);
  const first = sink.takeGrants()[0];
  s.admit(req(2, 'chat'), 1);
  s.release(first.leaseId, 'end', 2);
  s.admit(session(3, 8), 3);
  const grants = sink.takeGrants();
  assert.equal(grants.find((g) => g.requestId === 2)?.nodeId === first.nodeId, false, 'the sessionless request took the other node');
  assert.ok(grants.some((g) => g.requestId === 3));
});

test('when the session\'s node disconnects, its queued and later requests go to any candidate, and the session follows', () => {
  const { s, sink, gen } = setup(TWO_NODES);
  s.admit(session(1, 7), 0);
  const first = sink.takeGrants()[0];
  s.admit(session(2, 7), 1);
  assert.deepEqual(sink.take(), []);
  s.disconnect(first.nodeId, gen.get(first.nodeId) as number, 2);
  const moved = sink.takeGrants()[0];
  assert.equal(moved.requestId, 2);
  assert.notEqual(moved.nodeId, first.nodeId);
  assert.equal(first.sessionMovedFrom, undefined, 'a session\'s first grant moved nothing');
  assert.equal(moved.sessionMovedFrom, first.nodeId, 'the grant that moved the session says from where');
  s.connect(first.nodeId, 3);
  s.release(moved.leaseId, 'end', 4);
  s.admit(session(3, 7), 5);
  const next = sink.takeGrants()[0];
  assert.equal(next.nodeId, moved.nodeId, 'pinned to where it went, even with its old node back');
  assert.equal(next.sessionMovedFrom, undefined);
  assert.deepEqual(s.checkInvariants(), []);
});

test('while a session\'s request waits for its node\'s slot, the invariants hold (waiting for its own node is not a free slot missed)', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(session(1, 7), 0);
  sink.takeGrants();
  s.admit(session(2, 7), 1);
  assert.deepEqual(sink.take(), []);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a session whose node\'s provider turns unhealthy goes elsewhere at once, its waiter included', () => {
  const { s, sink, gen } = setup(TWO_NODES);
  s.admit(session(1, 7), 0);
  const first = sink.takeGrants()[0];
  s.admit(session(2, 7), 1);
  assert.deepEqual(sink.take(), [], 'waits for its node');
  s.setProviderHealth(first.nodeId, first.providerId, false, 2, gen.get(first.nodeId));
  const moved = sink.takeGrants()[0];
  assert.equal(moved?.requestId, 2, 'the waiter left the unhealthy node at once, not at its queue timeout');
  assert.notEqual(moved.nodeId, first.nodeId);
  s.release(moved.leaseId, 'end', 3);
  s.admit(session(3, 7), 4);
  assert.notEqual(sink.takeGrants()[0]?.nodeId, first.nodeId, 'a new request of the session too');
  assert.deepEqual(s.checkInvariants(), []);
});

test('draining the session\'s node sends its waiter elsewhere at once, ahead of later requests', () => {
  const { s, sink } = setup(TWO_NODES);
  s.admit(session(1, 7), 0);
  const first = sink.takeGrants()[0];
  s.admit(session(2, 7), 1);
  assert.deepEqual(sink.take(), []);
  s.setDraining(first.nodeId, true, 2);
  const moved = sink.takeGrants()[0];
  assert.equal(moved?.requestId, 2);
  assert.notEqual(moved.nodeId, first.nodeId);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a session tied to a node without the request\'s API or context goes where a provider has them', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'a', capacity: 1, endpoints: ['chat'] }], n2: [{ id: 'b', capacity: 1, endpoints: ['chat', 'responses'] }] },
    models: [{ alias: 'chat', providers: ['a', 'b'] }],
  });
  s.admit(session(1, 7), 0);
  const first = sink.takeGrants()[0];
  assert.equal(first.providerId, 'a');
  s.release(first.leaseId, 'end', 1);
  s.admit({ ...session(2, 7), api: 4 }, 2);
  const grant = sink.takeGrants()[0];
  assert.equal(grant?.providerId, 'b', 'not left waiting on a node that cannot serve it');
});

test('a session whose node\'s provider is set to capacity 0 by config goes elsewhere at once, its waiter included', () => {
  const spec = (capA: number) => ({
    nodes: { n1: [{ id: 'a', capacity: capA }], n2: [{ id: 'b', capacity: 1 }] },
    models: [{ alias: 'chat', providers: ['a', 'b'] }],
  });
  const { s, sink } = setup(spec(1), ['n1']);
  s.admit(session(1, 7), 0);
  const first = sink.takeGrants()[0];
  assert.equal(first.nodeId, 'n1');
  s.connect('n2', 1);
  s.admit(session(2, 7), 2);
  assert.deepEqual(sink.take(), [], 'waits for its node');
  s.setConfig(makeConfig(spec(0)), 3);
  const moved = sink.takeGrants()[0];
  assert.equal(moved?.requestId, 2, 'a node with no slots for the alias is no reason to wait');
  assert.equal(moved.nodeId, 'n2');
  s.release(first.leaseId, 'end', 4);
  s.release(moved.leaseId, 'end', 5);
  s.admit(session(3, 7), 6);
  assert.equal(sink.takeGrants()[0]?.nodeId, 'n2', 'the session followed its request');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a session keeps to its node across aliases (a client switching models), and is told when the new alias has no provider there', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'a', capacity: 1 }], n2: [{ id: 'b', capacity: 1 }], n3: [{ id: 'c', capacity: 1 }] },
    models: [
      { alias: 'chat', providers: ['a', 'b'] },
      { alias: 'big', providers: ['a', 'b'] },
      { alias: 'other', providers: ['c'] },
    ],
  });
  // n1 is busy, so session 7 starts on n2 under `chat`.
  s.admit(req(1, 'chat'), 0);
  const busy = sink.takeGrants()[0];
  assert.equal(busy.nodeId, 'n1');
  s.admit(session(2, 7), 1);
  const first = sink.takeGrants()[0];
  assert.equal(first.nodeId, 'n2');
  s.release(busy.leaseId, 'end', 2);
  s.release(first.leaseId, 'end', 3);
  // Under `big` (same nodes), n1 is free and first in the tie-break: the session's node still wins.
  s.admit({ ...req(3, 'big'), sessionKey: 7 }, 4);
  const switched = sink.takeGrants()[0];
  assert.equal(switched.nodeId, 'n2', 'the session\'s directory is on n2, whatever alias names it');
  assert.equal(switched.sessionMovedFrom, undefined);
  s.release(switched.leaseId, 'end', 5);
  // An alias with nothing on n2: served elsewhere, and the grant says the session moved.
  s.admit({ ...req(4, 'other'), sessionKey: 7 }, 6);
  const moved = sink.takeGrants()[0];
  assert.equal(moved.nodeId, 'n3');
  assert.equal(moved.sessionMovedFrom, 'n2');
  assert.deepEqual(s.checkInvariants(), []);
});

test('a grant that moved a session but whose client left before its answer leaves the move to be told by the next grant', () => {
  const { s, sink, gen } = setup(TWO_NODES);
  s.admit(session(1, 7), 0);
  const first = sink.takeGrants()[0];
  s.release(first.leaseId, 'end', 1);
  s.disconnect(first.nodeId, gen.get(first.nodeId) as number, 2);
  s.admit(session(2, 7), 3);
  const moving = sink.takeGrants()[0];
  assert.equal(moving.sessionMovedFrom, first.nodeId);
  s.release(moving.leaseId, 'client_closed', 4);
  s.admit(session(3, 7), 5);
  const next = sink.takeGrants()[0];
  assert.equal(next.nodeId, moving.nodeId);
  assert.equal(next.sessionMovedFrom, first.nodeId, 'its client never read the move: this answer tells it');
  s.release(next.leaseId, 'end', 6);
  s.admit(session(4, 7), 7);
  assert.equal(sink.takeGrants()[0].sessionMovedFrom, undefined, 'told once');
  // Its node gone again: the next move is told as ever.
  s.connect(first.nodeId, 8);
  s.disconnect(moving.nodeId, gen.get(moving.nodeId) as number, 9);
  s.admit(session(5, 7), 10);
  const back = sink.takeGrants()[0];
  assert.equal(back.nodeId, first.nodeId);
  assert.equal(back.sessionMovedFrom, moving.nodeId);
  assert.deepEqual(s.checkInvariants(), []);
});

test('a session waiting for its busy cli provider does not hold back another session waiting for the free one beside it', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'cli-a', type: 'cli' }, { id: 'cli-b', type: 'cli' }] },
    models: [{ alias: 'agent', providers: ['cli-a', 'cli-b'] }],
  });
  const agent = (requestId: number, key: number) => ({ ...req(requestId, 'agent'), sessionKey: key });
  s.admit(agent(1, 7), 0);
  s.admit(agent(2, 8), 1);
  const [first, second] = sink.takeGrants();
  assert.notEqual(first.providerId, second.providerId);
  s.admit(agent(3, 7), 2);
  s.admit(agent(4, 8), 3);
  assert.deepEqual(sink.take(), [], 'each waits for its own provider');
  s.release(second.leaseId, 'end', 4);
  const next = sink.takeGrants();
  assert.deepEqual(next.map((g) => [g.requestId, g.providerId]), [[4, second.providerId]], 'the older waiter\'s provider being busy says nothing of the freed one');
  assert.deepEqual(s.checkInvariants(), []);
});
