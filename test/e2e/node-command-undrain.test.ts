// The undrain command with requests waiting for the drained node, through
// real parts: an edge with its admin listener, the node agent as a child
// process (the CLI, started from a config file), a mock provider. The
// requests the undrain lets through must reach an agent that already takes
// tunnels: one it still refused (node_leaving) would drain the node on the
// edge again, and they would wait for nothing.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { stringify as toYaml } from 'yaml';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { testWorkers } from '../helpers/stack.js';

const AGENT_CLI = fileURLToPath(new URL('../../src/agent/cli.js', import.meta.url));
const WAITING = 3;

let edge: RunningEdge;
let mock: MockProvider;
let dir: string;
let agent: ChildProcess;

async function admin(path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${edge.adminUrl}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return res.json();
}

async function chat(): Promise<number> {
  const res = await fetch(`${edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'solo', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'node-command-undrain-'));
  mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 0 });
  edge = await startEdge(
    parseEdgeConfig(
      {
        listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
        heartbeat: { interval_ms: 200, timeout_ms: 2_000 },
        workers: { count: testWorkers() },
        admin: { host: '127.0.0.1', port: 0 },
        nodes: [{ id: 'solo-node', token: 'solo-token', providers: [{ id: 'p1', type: 'openai_compat', capacity: 8 }] }],
        // A short queue deadline: waiters the node never takes fail the test in seconds, not the default 30.
        models: [{ alias: 'solo', providers: { p1: 'm' }, queue_timeout_ms: 5_000 }],
      },
      'test',
    ),
    { logger: silentLogger(), admin: true },
  );
  const file = join(dir, 'agent.yaml');
  await writeFile(file, toYaml({ edge: { address: `127.0.0.1:${edge.grpcPort}` }, node: { id: 'solo-node', token: 'solo-token' }, providers: [{ id: 'p1', type: 'openai_compat', base_url: mock.url }], reconnect: { initial_ms: 50, max_ms: 200 } }));
  agent = spawn(process.execPath, [AGENT_CLI, '--config', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: agent.stdout! });
  await new Promise<void>((resolve) => lines.on('line', (line) => line.includes('registered with the edge') && resolve()));
});

after(async () => {
  if (agent.exitCode === null && agent.signalCode === null) {
    const exited = once(agent, 'exit');
    agent.kill('SIGTERM');
    await exited;
  }
  await edge.close();
  await mock.close();
  await rm(dir, { recursive: true, force: true });
});

test('undrain with requests waiting for the drained node: they are served, and the node stays undrained on the edge', async () => {
  assert.equal((await admin('/admin/nodes/solo-node/commands', { kind: 'drain' })).results[0].status, 'ok');
  const waiting = Array.from({ length: WAITING }, () => chat());
  await until('the requests to queue', async () => (await admin('/admin/status')).groups.find((g: any) => g.model === 'solo')?.queueDepth === WAITING);

  const undrained = (await admin('/admin/nodes/solo-node/commands', { kind: 'undrain' })).results[0];
  assert.equal(undrained.status, 'ok', undrained.message);
  assert.deepEqual(await Promise.all(waiting), Array(WAITING).fill(200), 'the waiting requests were served');
  assert.equal((await admin('/admin/status')).nodes.find((n: any) => n.id === 'solo-node').draining, false, 'the edge did not drain it again');
  assert.equal(await chat(), 200);
});
