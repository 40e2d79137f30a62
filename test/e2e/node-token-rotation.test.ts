// Rotating a node's token with no agent restart, through real parts: an edge
// with its admin listener, a node agent over gRPC started from a config file
// on disk, the mock provider. The edge retires the connection whose token
// it changed; the agent re-reads node.token from its file when it dials again.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify as toYaml } from 'yaml';
import type { NodeAgent } from '../../src/agent/agent.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { startFileAgent, testWorkers, waitFor } from '../helpers/stack.js';

const NODE = 'gpu-r';
const OLD_TOKEN = 'node-token-before-the-rotation-0001';
const NEW_TOKEN = 'node-token-after-the-rotation-00002';

function edgeRaw(token: string): any {
  return {
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
    workers: { count: testWorkers() },
    admin: { host: '127.0.0.1', port: 0 },
    nodes: [{ id: NODE, token, providers: [{ id: 'p', type: 'openai_compat', capacity: 4 }] }],
    models: [{ alias: 'chat', providers: { p: 'm' } }],
  };
}

function agentRaw(grpcPort: number, baseUrl: string, token: string): any {
  return {
    edge: { address: `127.0.0.1:${grpcPort}` },
    node: { id: NODE, token },
    providers: [{ id: 'p', type: 'openai_compat', base_url: baseUrl }],
    reconnect: { initial_ms: 50, max_ms: 200 },
  };
}

describe('node token rotation without an agent restart', () => {
  let edge: RunningEdge;
  let mock: MockProvider;
  let agent: NodeAgent;
  let dir: string;
  let file: string;
  const rejections: string[] = [];

  const admin = async (path: string, body?: unknown): Promise<{ status: number; json: any }> => {
    const res = await fetch(`${edge.adminUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  };
  const chat = (stream: boolean, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'chat', stream, messages: [{ role: 'user', content: 'hi' }] }),
    });
  const nodeStatus = async (): Promise<any> => (await admin('/admin/status')).json.nodes.find((n: any) => n.id === NODE);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'token-rotation-'));
    file = join(dir, 'agent.yaml');
    mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 0 });
    edge = await startEdge(parseEdgeConfig(edgeRaw(OLD_TOKEN), 'test'), { logger: silentLogger(), admin: true });
    await writeFile(file, toYaml(agentRaw(edge.grpcPort, mock.url, OLD_TOKEN)));
    agent = await startFileAgent(file);
    agent.on('rejected', (reason) => rejections.push(reason));
  });

  after(async () => {
    await agent.stop();
    await edge.close();
    await mock.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('refresh_config takes a new node.token for the next registration instead of asking for a restart', async () => {
    await writeFile(file, toYaml(agentRaw(edge.grpcPort, mock.url, NEW_TOKEN)));
    const { status, json } = await admin(`/admin/nodes/${NODE}/commands`, { kind: 'refresh_config' });
    assert.equal(status, 200);
    assert.equal(json.results[0].status, 'applied', json.results[0].message);
    assert.deepEqual(json.results[0].result.applied, ['node.token (sent at the next registration)']);
    assert.equal(agent.config.node.token, NEW_TOKEN);
    // The running connection is not cut for it: the edge still knows the old token and the node serves.
    assert.equal(agent.isConnected(), true);
    assert.equal((await chat(false)).status, 200);
    // Back to the old token in the file: the next test starts from an agent that knows only that one.
    await writeFile(file, toYaml(agentRaw(edge.grpcPort, mock.url, OLD_TOKEN)));
    assert.equal((await admin(`/admin/nodes/${NODE}/commands`, { kind: 'refresh_config' })).json.results[0].status, 'applied');
    assert.equal(agent.config.node.token, OLD_TOKEN);
  });

  test('the documented rotation: new token in both files, edge applied; the open stream ends whole and the same agent comes back with the new token', async () => {
    const before = await nodeStatus();
    assert.equal(before.connected, true);
    // A stream keeps the old connection open past the apply (a retired connection closes once idle).
    const open = await chat(true, { 'x-mock-tokens': '12', 'x-mock-interval-ms': '30' });
    assert.equal(open.status, 200);
    await writeFile(file, toYaml(agentRaw(edge.grpcPort, mock.url, NEW_TOKEN)));
    const applied = await admin('/admin/config/refresh', { mode: 'apply', config: edgeRaw(NEW_TOKEN) });
    assert.equal(applied.status, 200, JSON.stringify(applied.json));
    assert.deepEqual(applied.json.retired, [NODE]);
    const body = await open.text();
    assert.match(body, /\[DONE\]/, 'the open stream ran to its end');
    await waitFor(async () => {
      const node = await nodeStatus();
      return node.connected === true && node.generation !== before.generation && node.draining === false;
    }, 'the agent registered again with the new token', 10_000);
    assert.deepEqual(rejections, [], 'never refused: it dialed with the token the edge now holds');
    assert.equal(agent.config.node.token, NEW_TOKEN);
    assert.equal((await chat(false)).status, 200);
  });
});
