// The warning an edge refresh logs for a provider it added that the node's
// agent does not announce. The documented way to add one (name it in the
// agent's config file, then apply the edge's config, which sends that agent
// refresh_config) must not warn: the agent announces it in its answer. One
// the agent's file lacks is named, with what to do (no restart needed).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import { stringify as toYaml } from 'yaml';
import type { NodeAgent } from '../../src/agent/agent.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { startFileAgent, testWorkers, waitFor } from '../helpers/stack.js';

const lines: { level: number; msg: string; providers?: string[] }[] = [];
const sink = new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(...chunk.toString().split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))), done()) });

let edge: RunningEdge;
let mock: MockProvider;
let agent: NodeAgent;
let dir: string;
let file: string;

const edgeRaw = (providers: string[]): unknown => ({
  listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
  workers: { count: testWorkers() },
  admin: { host: '127.0.0.1', port: 0 },
  nodes: [{ id: 'gpu-a', token: 'gpu-a-token-long-enough', providers: providers.map((id) => ({ id, capacity: 2 })) }],
  models: [{ alias: 'm', providers: Object.fromEntries(providers.map((id) => [id, 'm'])) }],
});
const agentRaw = (providers: string[]): unknown => ({
  edge: { address: `127.0.0.1:${edge.grpcPort}` },
  node: { id: 'gpu-a', token: 'gpu-a-token-long-enough' },
  providers: providers.map((id) => ({ id, type: 'openai_compat', base_url: mock.url })),
  reconnect: { initial_ms: 50, max_ms: 200 },
});

async function apply(providers: string[]): Promise<any> {
  const res = await fetch(`${edge.adminUrl}/admin/config/refresh`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ mode: 'apply', config: edgeRaw(providers) }),
  });
  return res.json();
}
const warned = (): { msg: string; providers?: string[] }[] => lines.filter((l) => l.level === 40 && /not announced/.test(l.msg));

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'announce-warning-'));
  file = join(dir, 'agent.yaml');
  mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 0 });
  edge = await startEdge(parseEdgeConfig(edgeRaw(['pa']), 'test'), { logger: pino({ level: 'info' }, sink), admin: true });
  await writeFile(file, toYaml(agentRaw(['pa'])));
  agent = await startFileAgent(file);
});

after(async () => {
  await agent?.stop();
  await edge?.close();
  await mock?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

test("a provider already in the agent's file is announced by the refresh the apply sends: no warning", async () => {
  await writeFile(file, toYaml(agentRaw(['pa', 'pb'])));
  const answer = await apply(['pa', 'pb']);
  assert.equal(answer.status, 'applied');
  assert.deepEqual(answer.nodes.map((n: any) => [n.node, n.status, n.message]), [['gpu-a', 'applied', 'applied: providers[pb] (added)']]);
  await waitFor(async () => lines.some((l) => l.msg === 'config refresh: nodes answered'), 'the nodes answered line');
  assert.deepEqual(warned(), [], 'no warning for a provider the agent announced');
});

test("one the agent's file lacks is named once the nodes answered, saying what to do", async () => {
  const answer = await apply(['pa', 'pb', 'pc']);
  assert.equal(answer.status, 'applied');
  await waitFor(async () => warned().length > 0, 'the warning');
  const [warning] = warned();
  assert.deepEqual(warning.providers, ['pc']);
  assert.match(warning.msg, /refresh_config/);
  assert.doesNotMatch(warning.msg, /restart it with them/);
});
