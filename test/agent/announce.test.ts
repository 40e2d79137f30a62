// The agent's side of Announce against a fake edge: a refresh that added or
// removed providers while Register awaited its answer is announced at
// Registered to an edge that takes Announce, and to one that predates it the
// agent registers again with them (it would never hear of them otherwise).
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { create } from '@bufbuild/protobuf';
import { EdgeMessageSchema, type Announce } from '../../src/gen/edge/v1/tunnel_pb.js';
import { NodeAgent } from '../../src/agent/agent.js';
import type { AgentConfig } from '../../src/agent/config.js';
import { ANNOUNCE_CAPABILITY } from '../../src/shared/announce.js';
import { agentConfig, FakeEdge, silentLogger, waitFor, type EdgeStream } from './fake-edge.js';

/** An agent whose Register the fake edge holds, and whose config file now names `next` providers. */
async function registering(t: TestContext): Promise<{ edge: FakeEdge; agent: NodeAgent; stream: EdgeStream }> {
  const edge = await FakeEdge.start({ kind: 'silent' });
  const start = agentConfig(edge.address, [{ id: 'pa', baseUrl: 'http://127.0.0.1:9' }]);
  const next: AgentConfig = agentConfig(edge.address, [{ id: 'pb', baseUrl: 'http://127.0.0.1:9' }]);
  const agent = new NodeAgent(start, { logger: silentLogger, stopGraceMs: 100, reloadConfig: async () => next });
  t.after(async () => {
    await agent.stop();
    edge.close();
  });
  agent.start();
  const stream = await edge.registeredStream(0);
  assert.deepEqual(stream.register?.providerIds, ['pa']);
  // The refresh, while the Register waits: the edge asks before answering it.
  stream.send(create(EdgeMessageSchema, { msg: { case: 'command', value: { id: 1, kind: 'refresh_config', deadlineMs: 5_000 } } }));
  const answer = await waitFor('the refresh answer', () => stream.messages.find((m) => m.msg.case === 'commandResult')?.msg.value as { status: string; message: string } | undefined);
  assert.equal(answer.status, 'applied', answer.message);
  return { edge, agent, stream };
}

function registered(stream: EdgeStream, capabilities: string[]): void {
  stream.send(create(EdgeMessageSchema, { msg: { case: 'registered', value: { generation: 1, heartbeatIntervalMs: 1_000, heartbeatTimeoutMs: 10_000, capabilities } } }));
}

test('a change made while Register awaited its answer is announced at Registered', async (t) => {
  const { agent, stream } = await registering(t);
  registered(stream, [ANNOUNCE_CAPABILITY]);
  const announce = await waitFor('the Announce', () => stream.messages.find((m) => m.msg.case === 'announce')?.msg.value as Announce | undefined);
  assert.deepEqual(announce.providerIds, ['pb']);
  assert.deepEqual(announce.providerEndpoints.map((e) => [e.providerId, e.type]), [['pb', 'openai_compat']]);
  assert.equal(agent.isConnected(), true, 'the connection stands');
});

test('to an edge that predates Announce, the agent registers again with the new providers', async (t) => {
  const { edge, stream } = await registering(t);
  edge.answer = { kind: 'accept' };
  registered(stream, []);
  const again = await edge.registeredStream(1);
  assert.deepEqual(again.register?.providerIds, ['pb'], 'the new set, at a Register the old edge reads');
  assert.equal(stream.messages.some((m) => m.msg.case === 'announce'), false, 'no Announce to an edge that would ignore it');
});
