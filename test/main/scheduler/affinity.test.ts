// Session affinity: requests of one session keep to the node that served it
// while that node is connected and takes work, waiting for capacity there
// rather than going elsewhere; once it is gone they go to any candidate and
// the session follows them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { req, setup } from './fixtures.js';

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
  s.connect(first.nodeId, 3);
  s.release(moved.leaseId, 'end', 4);
  s.admit(session(3, 7), 5);
  assert.equal(sink.takeGrants()[0].nodeId, moved.nodeId, 'pinned to where it went, even with its old node back');
  assert.deepEqual(s.checkInvariants(), []);
});
