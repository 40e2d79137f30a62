// Two connections of one node id registering at once, with I/O workers: each
// worker reports its session to the main thread on its own, so the news of
// the superseded connection can arrive after its successor's. The edge's
// session view (admin drain, status) must stay on the current generation:
// an admin drain of the connected node is never 409 node_not_connected.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack, testWorkers, waitFor } from '../helpers/stack.js';
import { FakeNode } from '../workers/grpc/fake-node.js';

// The race needs several threads; EDGE_TEST_WORKERS=0 still runs it with 2.
const WORKERS = testWorkers() > 1 ? testWorkers() : 2;
const ROUNDS = 40;

test(`the session view follows the newest connection when two register at once (workers.count ${WORKERS})`, { timeout: 120_000 }, async () => {
  const stack = await startStack({ startAgent: false, configure: (raw) => void (raw.workers = { count: WORKERS }) });
  const nodes: FakeNode[] = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const a = new FakeNode(stack.edge.grpcPort);
      const b = new FakeNode(stack.edge.grpcPort);
      nodes.push(a, b);
      a.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
      b.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
      await Promise.allSettled([a.registered(), b.registered()]);
      const current = (): number => stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.generation ?? 0;
      // Settled: one stream left, and its generation is the scheduler's current one.
      await waitFor(async () => {
        const sessions = (await stack.edge.inspect()).sessions.filter((s) => s.nodeId === NODE_ID);
        return sessions.length === 1 && sessions[0].generation === current();
      }, `round ${round}: one connection left`);
      // Every session event of the round has reached the main thread (each worker's are in order, and its last is its own stream's).
      const drained = stack.edge.setNodeDraining(NODE_ID, true);
      assert.ok(drained.ok, `round ${round}: admin drain of the connected node (generation ${current()}) refused: ${JSON.stringify(drained)}`);
      assert.equal(stack.edge.setNodeDraining(NODE_ID, false).ok, true);
    }
  } finally {
    for (const node of nodes) node.close();
    await stack.close();
  }
});
