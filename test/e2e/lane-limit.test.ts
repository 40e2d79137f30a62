// A node connection may have at most MAX_NODE_STREAMS streams (its anchor
// and its lanes), the agent's own cap on edge.streams: each lane costs the
// edge a session, a heartbeat timer and a place in every lane choice, so a
// node with a valid token must not open thousands. Joins past the cap are
// Rejected naming it and counted; a lane that closes frees its place. With
// I/O workers the lanes spread over the workers, and the cap is on them all.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MAX_NODE_STREAMS } from '../../src/shared/wire-limits.js';
import { stackWithFakeNode } from '../helpers/fake-node-stack.js';
import { NODE_ID, NODE_TOKEN, PROVIDER_ID, waitFor, type Stack } from '../helpers/stack.js';
import { FakeNode } from '../workers/grpc/fake-node.js';

let stack: Stack;
let anchor: FakeNode;
const lanes: FakeNode[] = [];

before(async () => {
  ({ stack, node: anchor } = await stackWithFakeNode());
});
after(async () => {
  for (const lane of lanes) lane.close();
  anchor.close();
  await stack.close();
});

async function join(lane: number, generation: number): Promise<{ node: FakeNode; answer: Promise<number> }> {
  const node = new FakeNode(stack.edge.grpcPort);
  lanes.push(node);
  node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID], lane, generation);
  const answer = node.registered(5_000);
  answer.catch(() => {});
  return { node, answer };
}

async function streamsOf(): Promise<number> {
  return (await stack.edge.inspect()).sessions.filter((s) => s.nodeId === NODE_ID).length;
}

test(`a connection takes at most ${MAX_NODE_STREAMS} streams; joins past it are Rejected naming the limit`, async () => {
  const generation = stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.generation ?? 0;
  assert.ok(generation > 0);
  const before = (await stack.edge.inspect()).protocolStats;
  // One at a time: which join is the one past the cap must not depend on arrival order.
  for (let lane = 1; lane < MAX_NODE_STREAMS; lane++) {
    const { answer } = await join(lane, generation);
    assert.equal(await answer, generation, `lane ${lane} joins`);
  }
  await waitFor(async () => (await streamsOf()) === MAX_NODE_STREAMS, `${MAX_NODE_STREAMS} streams listed`);
  const extra = [];
  for (let lane = MAX_NODE_STREAMS; lane < MAX_NODE_STREAMS + 4; lane++) extra.push(await join(lane, generation));
  for (const { answer } of extra) await assert.rejects(answer, new RegExp(`more than ${MAX_NODE_STREAMS} streams`));
  for (const { node } of extra) assert.equal((await node.ended).code !== undefined, true, 'the refused stream is closed');
  assert.equal(await streamsOf(), MAX_NODE_STREAMS);
  const stats = (await stack.edge.inspect()).protocolStats;
  assert.equal(stats.laneLimitRejections - (before.laneLimitRejections ?? 0), extra.length);
  assert.equal(stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.generation, generation, 'the connection goes on');

  // A lane that ends frees its place.
  lanes[0].close();
  await waitFor(async () => (await streamsOf()) === MAX_NODE_STREAMS - 1, 'a lane gone');
  const again = await join(1, generation);
  // With I/O workers main may hear of the lane's end just after the new join: that join is refused, the next one takes the place.
  let joined = await again.answer.then(() => true, () => false);
  if (!joined) joined = await (await join(1, generation)).answer.then(() => true, () => false);
  assert.ok(joined, 'a freed place is taken again');
});
