// SIGHUP reloads the config file through the same refresh path as the admin
// API: the edge CLI runs as a child process, the node agent and the mock
// provider in this process.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import type { NodeAgent } from '../../src/agent/agent.js';
import { EdgeProcess } from '../main/admin/edge-process.js';
import { agentWith, copyOf, NODE_ID, opsConfigObject, PROVIDER_ID, waitUntil } from '../main/admin/ops-stack.js';

const CAPACITY_PATH = `nodes[${NODE_ID}].providers[${PROVIDER_ID}].capacity`;

let mock: MockProvider;
let edge: EdgeProcess;
let agent: NodeAgent;
const refreshes: [readonly string[], number][] = [];
const raw = opsConfigObject({ capacity: 1 });

before(async () => {
  mock = await startMockProvider({ tokens: 2 });
  edge = await EdgeProcess.start(raw);
  agent = agentWith(edge.grpcPort, mock.url);
  agent.on('config-refresh', (paths, version) => refreshes.push([paths, version]));
  const registered = once(agent, 'registered');
  agent.start();
  await registered;
});

after(async () => {
  await agent.stop();
  await edge.dispose();
  await mock.close();
});

async function capacity(): Promise<number> {
  const status = await edge.adminJson('/admin/status');
  return status.providers.find((p: { id: string }) => p.id === PROVIDER_ID).capacity;
}

test('SIGHUP applies the changed file, logs it and tells the node', async () => {
  assert.equal(await capacity(), 1);
  const next = copyOf(raw);
  next.nodes[0].providers[0].capacity = 3;
  await edge.rewriteConfig(next);
  edge.signal('SIGHUP');
  const applied = await edge.waitForLog((l) => l.msg === 'config applied');
  assert.equal(applied.origin, 'SIGHUP');
  assert.deepEqual(applied.changed, [CAPACITY_PATH]);
  assert.equal(await capacity(), 3);
  await waitUntil(() => refreshes.length === 1, 'the ConfigRefresh at the agent');
  assert.deepEqual(refreshes[0], [[CAPACITY_PATH], 2]);
  const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
  assert.match(metrics, /^edge_config_version 2$/m);
  assert.match(metrics, /^edge_config_refreshes_total\{mode="apply",status="applied"\} 1$/m);
});

test('SIGHUP with a restart-required change logs the rejection and keeps the running config', async () => {
  const next = copyOf(raw);
  next.nodes[0].providers[0].capacity = 5;
  next.listen.grpc.port = 1;
  await edge.rewriteConfig(next);
  edge.signal('SIGHUP');
  const rejected = await edge.waitForLog((l) => l.msg.startsWith('config refresh rejected'));
  assert.equal(rejected.origin, 'SIGHUP');
  assert.match(String(rejected.reasons), /listen\.grpc\.port: needs a restart/);
  assert.equal(await capacity(), 3);
  assert.equal(refreshes.length, 1, 'nothing pushed to the node');
  const res = await fetch(`${edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama3', messages: [{ role: 'user', content: 'still there?' }] }),
  });
  assert.equal(res.status, 200);
  await res.text();
});
