// The agent's extra streams ("lanes", edge.streams > 1) against a fake edge:
// they join the anchor's generation once it registered; one that drops is
// re-opened in that generation; one the edge refuses is not retried in a
// loop, only with the next connection.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { NodeAgent } from '../../src/agent/agent.js';
import { agentConfig, FakeEdge, silentLogger, waitFor, type EdgeStream } from './fake-edge.js';

async function start(t: TestContext, refuseJoins: boolean): Promise<{ edge: FakeEdge; agent: NodeAgent }> {
  const edge = await FakeEdge.start();
  if (refuseJoins) edge.joinAnswer = { kind: 'reject', reason: 'generation 1 of gpu-1 is not current; register anew' };
  const base = agentConfig(edge.address, [{ id: 'p1', baseUrl: 'http://127.0.0.1:9' }]);
  const agent = new NodeAgent({ ...base, edge: { ...base.edge, streams: 2 } }, { logger: silentLogger });
  t.after(async () => {
    await agent.stop();
    edge.close();
  });
  agent.start();
  await waitFor('the anchor registered', () => (agent.isConnected() ? true : undefined));
  return { edge, agent };
}

function joins(edge: FakeEdge): EdgeStream[] {
  return edge.streams.filter((s) => (s.register?.joinGeneration ?? 0) > 0);
}

test('lanes join the generation the anchor got, and a dropped lane is re-opened in it', async (t) => {
  const { edge, agent } = await start(t, false);
  const first = await waitFor('a join', () => joins(edge)[0]);
  assert.equal(first.register?.joinGeneration, agent.generation);
  assert.equal(first.register?.lane, 1);
  first.kill();
  const second = await waitFor('the lane re-opened', () => joins(edge)[1]);
  assert.equal(second.register?.joinGeneration, agent.generation, 'the same generation');
  assert.equal(second.register?.lane, 1);
});

test('a refused join is not retried in that generation; the next connection opens the lane again', async (t) => {
  const { edge, agent } = await start(t, true);
  await waitFor('a join', () => joins(edge)[0]);
  const generation = agent.generation;
  await new Promise((resolve) => setTimeout(resolve, 300)); // fifteen times reconnect.initial_ms
  assert.equal(joins(edge).length, 1, 'one attempt only, no loop');
  agent.dropConnection();
  await waitFor('a new connection', () => (agent.isConnected() && agent.generation !== generation ? true : undefined));
  await waitFor('a join for the new generation', () => (joins(edge).length === 2 ? true : undefined));
  assert.equal(joins(edge)[1].register?.joinGeneration, agent.generation);
});

test('a lane that keeps dropping without a refusal is re-opened at a widening pace, not several times a second for good', async (t) => {
  const edge = await FakeEdge.start();
  const base = agentConfig(edge.address, [{ id: 'p1', baseUrl: 'http://127.0.0.1:9' }], { initialMs: 20, maxMs: 5_000 });
  const agent = new NodeAgent({ ...base, edge: { ...base.edge, streams: 2 } }, { logger: silentLogger });
  // Every lane that joins is cut at once (a transport error, an edge out of file descriptors): no Rejected.
  const killed = new Set<EdgeStream>();
  const cutter = setInterval(() => {
    for (const s of joins(edge)) {
      if (killed.has(s)) continue;
      killed.add(s);
      s.kill();
    }
  }, 2);
  t.after(async () => {
    clearInterval(cutter);
    await agent.stop();
    edge.close();
  });
  agent.start();
  await waitFor('the anchor registered', () => (agent.isConnected() ? true : undefined));
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  // A fixed 10-20 ms pace re-opens it about a hundred times in 1.5 s; a widening window, about ten.
  assert.ok(joins(edge).length <= 15, `${joins(edge).length} joins in 1.5 s`);
  assert.ok(agent.isConnected(), 'the anchor stays up');
});
