// Node commands and per-node refresh results through real parts: an edge
// with its admin listener, node agents over gRPC started from config files
// on disk (refresh_config re-reads them), mock providers. Two agents answer
// commands; one registers as an agent that predates them, one announces
// them but never answers.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify as toYaml } from 'yaml';
import type { NodeAgent, NodeAgentOptions } from '../../src/agent/agent.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { startFileAgent, testWorkers, waitFor } from '../helpers/stack.js';

const ALIAS = 'chat';

function edgeRaw(capacity: number): any {
  const node = (id: string, providers: string[], labels: string[]) => ({
    id,
    token: `${id}-token`,
    labels,
    providers: providers.map((p) => ({ id: p, type: 'openai_compat', capacity })),
  });
  return {
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
    workers: { count: testWorkers() },
    admin: { host: '127.0.0.1', port: 0 },
    nodes: [node('gpu-a', ['pa'], ['rack1', 'slow']), node('gpu-b', ['pb', 'pb-down'], ['rack1']), node('old', ['po'], []), node('hung', ['ph'], ['slow']), node('offline', ['poff'], []), node('paths', ['pp-own', 'pp-none'], []), { id: 'cli-node', token: 'cli-node-token', providers: [{ id: 'pcli', type: 'cli', capacity }] }],
    models: [{ alias: ALIAS, providers: { pa: 'm', pb: 'm' } }],
  };
}

function agentRaw(grpcPort: number, id: string, providers: Record<string, string>, extra: Record<string, unknown> = {}): any {
  return {
    edge: { address: `127.0.0.1:${grpcPort}` },
    node: { id, token: `${id}-token` },
    providers: Object.entries(providers).map(([pid, url]) => ({ id: pid, type: 'openai_compat', base_url: url })),
    reconnect: { initial_ms: 50, max_ms: 200 },
    ...extra,
  };
}

describe('node commands through real agents', () => {
  let edge: RunningEdge;
  let mockA: MockProvider;
  let mockB: MockProvider;
  let dir: string;
  const agents = new Map<string, NodeAgent>();
  const files = new Map<string, string>();
  const cliRestarts: string[] = [];

  async function startAgent(id: string, raw: any, options: NodeAgentOptions = {}): Promise<NodeAgent> {
    const file = join(dir, `${id}.yaml`);
    await writeFile(file, toYaml(raw));
    files.set(id, file);
    const agent = await startFileAgent(file, options);
    agents.set(id, agent);
    return agent;
  }

  async function admin(path: string, body?: unknown): Promise<{ status: number; json: any }> {
    const res = await fetch(`${edge.adminUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  }

  const command = (ref: string, kind: string, extra: Record<string, unknown> = {}) => admin(`/admin/nodes/${encodeURIComponent(ref)}/commands`, { kind, ...extra });

  async function chat(): Promise<number> {
    const res = await fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    return res.status;
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'node-commands-'));
    mockA = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 0 });
    mockB = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 0 });
    edge = await startEdge(parseEdgeConfig(edgeRaw(4), 'test'), { logger: silentLogger(), admin: true });
    const port = edge.grpcPort;
    await startAgent('gpu-a', agentRaw(port, 'gpu-a', { pa: mockA.url }));
    await startAgent('gpu-b', agentRaw(port, 'gpu-b', { pb: mockB.url, 'pb-down': 'http://127.0.0.1:9' }));
    await startAgent('old', agentRaw(port, 'old', { po: mockA.url }), { commandMode: 'legacy' });
    await startAgent('hung', agentRaw(port, 'hung', { ph: mockA.url }), { commandMode: 'silent' });
    const pathsRaw = agentRaw(port, 'paths', {});
    pathsRaw.providers = [
      { id: 'pp-own', type: 'openai_compat', base_url: mockA.url, health_path: '/no-such-health-path' },
      { id: 'pp-none', type: 'openai_compat', base_url: mockA.url, health_path: '' },
    ];
    await startAgent('paths', pathsRaw);
    const cliRaw = { ...agentRaw(port, 'cli-node', {}), providers: [{ id: 'pcli', type: 'cli', command: [process.execPath, '-e', 'process.stdin.pipe(process.stdout)'] }] };
    await startAgent('cli-node', cliRaw, { cli: { restartProvider: async (id) => (cliRestarts.push(id), `${id}: 2 processes ended`) } });
  });

  after(async () => {
    await Promise.all([...agents.values()].map((a) => a.stop()));
    await edge.close();
    await mockA.close();
    await mockB.close();
    await rm(dir, { recursive: true, force: true });
  });

  test("probe checks each provider's own health_path, and skips one whose path is empty", async () => {
    const res = await command('paths', 'probe');
    assert.equal(res.status, 200);
    const providers = res.json.results[0].result.providers;
    // The mock serves /v1/models but not this path: judged by the path the health probes use.
    assert.deepEqual([providers['pp-own'].healthy, providers['pp-own'].status], [false, 404]);
    assert.deepEqual(providers['pp-none'], { healthy: null, error: 'not probed (health_path is empty)' });
    assert.equal(res.json.results[0].status, 'failed');
    assert.match(res.json.results[0].message, /pp-own \(HTTP 404\)/);
  });

  test('probe reports each provider: a live one healthy, an unreachable one not', async () => {
    const a = await command('gpu-a', 'probe');
    assert.equal(a.status, 200);
    assert.equal(a.json.results.length, 1);
    assert.equal(a.json.results[0].status, 'ok', a.json.results[0].message);
    assert.equal(a.json.results[0].result.providers.pa.healthy, true);
    assert.equal(a.json.results[0].result.providers.pa.status, 200);
    const b = await command('gpu-b', 'probe');
    const result = b.json.results[0];
    assert.equal(result.status, 'failed');
    assert.match(result.message, /pb-down/);
    assert.equal(result.result.providers.pb.healthy, true);
    assert.equal(result.result.providers['pb-down'].healthy, false);
  });

  test('drain: the agent takes no new tunnels and the edge sends them elsewhere; undrain restores it', async () => {
    const drained = await command('gpu-a', 'drain');
    assert.equal(drained.json.results[0].status, 'ok', drained.json.results[0].message);
    assert.equal(agents.get('gpu-a')?.draining, true);
    const status = await admin('/admin/status');
    assert.equal(status.json.nodes.find((n: any) => n.id === 'gpu-a').draining, true);
    const beforeA = mockA.requestLog.length;
    for (let i = 0; i < 6; i++) assert.equal(await chat(), 200);
    assert.equal(mockA.requestLog.length, beforeA, 'a drained node got no request');

    const undrained = await command('gpu-a', 'undrain');
    assert.equal(undrained.json.results[0].status, 'ok');
    assert.equal(agents.get('gpu-a')?.draining, false);
    for (let i = 0; i < 8; i++) assert.equal(await chat(), 200);
    assert.ok(mockA.requestLog.length > beforeA, 'an undrained node serves again');
  });

  test('the drain route given a label says it is one and names the command that takes it', async () => {
    const refused = await admin('/admin/nodes/rack1/drain', {});
    assert.equal(refused.status, 404);
    assert.equal(refused.json.error.code, 'node_not_found');
    assert.match(refused.json.error.message, /"rack1" is a label \(of "gpu-a", "gpu-b"\)/);
    assert.match(refused.json.error.message, /POST \/admin\/nodes\/rack1\/commands \{"kind":"drain"\}/);
    const undrain = await admin('/admin/nodes/rack1/undrain', {});
    assert.match(undrain.json.error.message, /\{"kind":"undrain"\}/);
    // An unknown name that is no label either keeps the plain answer.
    assert.equal((await admin('/admin/nodes/no-such/drain', {})).json.error.message, 'no node "no-such" in the config');
    assert.equal((await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'gpu-a').draining, false, 'nothing drained');
  });

  test('a drained agent that reconnects starts its new connection drained on the edge too: requests go elsewhere, not to be refused', async () => {
    await command('gpu-a', 'drain');
    const agent = agents.get('gpu-a') as NodeAgent;
    const registered = once(agent, 'registered');
    agent.dropConnection();
    await registered;
    // With I/O workers the drain reaches the scheduler through the worker's ring, a moment after Registered.
    const deadline = Date.now() + 3_000;
    let node: any;
    do node = (await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'gpu-a');
    while (!(node.connected && node.draining) && Date.now() < deadline && (await new Promise((resolve) => setTimeout(resolve, 20, true))));
    assert.equal(node.connected, true);
    assert.equal(node.draining, true, 'the edge knows the new connection is drained');
    const beforeA = mockA.requestLog.length;
    for (let i = 0; i < 6; i++) assert.equal(await chat(), 200);
    assert.equal(mockA.requestLog.length, beforeA);
    assert.equal((await admin('/admin/nodes/gpu-a/undrain', {})).json.error?.code, 'node_drained_by_command', 'the new connection registered drained: the route alone does not lift it');
    await command('gpu-a', 'undrain');
    assert.equal((await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'gpu-a').draining, false);
  });

  test('a node a drain command drained is not undrained by the route alone (its agent would refuse every request): 409 naming the undrain command', async () => {
    await command('gpu-a', 'drain');
    const refused = await admin('/admin/nodes/gpu-a/undrain', {});
    assert.equal(refused.status, 409);
    assert.equal(refused.json.error.code, 'node_drained_by_command');
    assert.match(refused.json.error.message, /\{"kind":"undrain"\}/);
    assert.equal((await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'gpu-a').draining, true, 'still drained on the edge');
    const beforeA = mockA.requestLog.length;
    for (let i = 0; i < 6; i++) assert.equal(await chat(), 200);
    assert.equal(mockA.requestLog.length, beforeA);
    await command('gpu-a', 'undrain');
    // Lifted where it was set: the route's own drain and undrain work as ever.
    assert.equal((await admin('/admin/nodes/gpu-a/drain', {})).status, 200);
    assert.equal((await admin('/admin/nodes/gpu-a/undrain', {})).status, 200);
    for (let i = 0; i < 8; i++) assert.equal(await chat(), 200);
    assert.ok(mockA.requestLog.length > beforeA, 'gpu-a serves again');
  });

  test('an undrain and a drain sent together end drained on both sides, as the agent takes them in order', async () => {
    await command('gpu-a', 'drain');
    // Both in flight at once: the undrain's answer comes after the drain switched the edge.
    const [undrained, drained] = await Promise.all([command('gpu-a', 'undrain'), command('gpu-a', 'drain')]);
    assert.equal(undrained.json.results[0].status, 'ok');
    assert.equal(drained.json.results[0].status, 'ok');
    assert.equal(agents.get('gpu-a')?.draining, true, 'the agent took the drain last');
    assert.equal((await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'gpu-a').draining, true, 'the edge agrees');
    await command('gpu-a', 'undrain');
    assert.equal((await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'gpu-a').draining, false);
  });

  test('an undrain of a label answered after a later drain of one of its nodes leaves that node drained by command', async () => {
    await command('gpu-a', 'drain');
    // gpu-a takes the undrain, then the drain; the undrain's outcome waits for hung, which never answers.
    const undrain = command('slow', 'undrain', { timeout_ms: 300 });
    await waitFor(async () => agents.get('gpu-a')?.draining === false, 'gpu-a took the undrain');
    const drained = await command('gpu-a', 'drain');
    assert.equal(drained.json.results[0].status, 'ok');
    const undrained = await undrain;
    assert.equal(undrained.json.results.find((r: any) => r.node === 'gpu-a').status, 'ok');
    assert.equal(agents.get('gpu-a')?.draining, true, 'the agent took the drain last');
    // The agent keeps the drain: the admin undrain, lifting only the edge's side, is refused.
    assert.equal((await admin('/admin/nodes/gpu-a/undrain', {})).json.error?.code, 'node_drained_by_command');
    await command('gpu-a', 'undrain');
    assert.equal((await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'gpu-a').draining, false);
  });

  test('refresh_config applies base_url and connections, and names what needs a restart', async () => {
    const file = files.get('gpu-a') as string;
    // pa moves to mock B with a smaller pool: both apply at once.
    await writeFile(file, toYaml(agentRaw(edge.grpcPort, 'gpu-a', { pa: mockB.url }, {})).replace('type: openai_compat', 'type: openai_compat\n    connections: 8'));
    const applied = await command('gpu-a', 'refresh_config');
    assert.equal(applied.json.results[0].status, 'applied', applied.json.results[0].message);
    assert.deepEqual(applied.json.results[0].result.applied.sort(), ['providers[pa].base_url', 'providers[pa].connections']);
    const beforeB = mockB.requestLog.length;
    await command('gpu-b', 'drain');
    assert.equal(await chat(), 200);
    assert.equal(mockB.requestLog.length, beforeB + 1, 'gpu-a now sends pa requests to the new base_url');
    await command('gpu-b', 'undrain');

    await writeFile(file, toYaml(agentRaw(edge.grpcPort, 'gpu-a', { pa: mockA.url }, { log_level: 'debug', edge: { address: `127.0.0.1:${edge.grpcPort}`, streams: 2 } })));
    const restart = await command('gpu-a', 'refresh_config');
    assert.equal(restart.json.results[0].status, 'restart_required');
    assert.match(restart.json.results[0].message, /needs an agent restart: edge, log_level/);
    assert.match(restart.json.results[0].message, /applied: providers\[pa\]\.base_url, providers\[pa\]\.connections/);

    // A provider setting that is not applied live (here its endpoints; a cli command or env alike) is named, not silently kept.
    await writeFile(file, toYaml(agentRaw(edge.grpcPort, 'gpu-a', { pa: mockA.url }, { log_level: 'debug', edge: { address: `127.0.0.1:${edge.grpcPort}`, streams: 2 } })).replace('type: openai_compat', 'type: openai_compat\n    endpoints: [chat]'));
    const endpoints = await command('gpu-a', 'refresh_config');
    assert.equal(endpoints.json.results[0].status, 'restart_required');
    assert.match(endpoints.json.results[0].message, /needs an agent restart: .*providers\[pa\]\.endpoints/);

    // The probes' settings (the top-level health block) are read at start only: named too, never "no change".
    await writeFile(file, toYaml({ ...agentRaw(edge.grpcPort, 'gpu-a', { pa: mockA.url }, { log_level: 'debug', edge: { address: `127.0.0.1:${edge.grpcPort}`, streams: 2 } }), health: { interval_ms: 5_000 } }).replace('type: openai_compat', 'type: openai_compat\n    endpoints: [chat]'));
    const health = await command('gpu-a', 'refresh_config');
    assert.equal(health.json.results[0].status, 'restart_required');
    assert.match(health.json.results[0].message, /needs an agent restart: .*\bhealth\b/);

    await writeFile(file, 'node: [not, a, map');
    const broken = await command('gpu-a', 'refresh_config');
    assert.equal(broken.json.results[0].status, 'failed');
    assert.match(broken.json.results[0].message, /not valid YAML/);
  });

  test('restart_provider ends a cli provider\'s processes through the runner\'s hook', async () => {
    const res = await command('cli-node', 'restart_provider', { args: { provider: 'pcli' } });
    assert.equal(res.json.results[0].status, 'ok', res.json.results[0].message);
    assert.equal(res.json.results[0].message, 'pcli: 2 processes ended');
    assert.deepEqual(cliRestarts, ['pcli']);
    const probe = await command('cli-node', 'probe');
    assert.equal(probe.json.results[0].result.providers.pcli.healthy, null);
  });

  test('a field or arg a command does not take is refused, naming it, and nothing reaches the node', async () => {
    const restarts = cliRestarts.length;
    // Beside args, or misspelt in it, `provider` was dropped: restart_provider then ended every cli provider's runs.
    const beside = await command('cli-node', 'restart_provider', { provider: 'pcli' });
    assert.equal(beside.status, 400, JSON.stringify(beside.json));
    assert.equal(beside.json.error.code, 'invalid_request');
    assert.match(beside.json.error.message, /"provider"; a command takes kind, args, timeout_ms/);
    const misspelt = await command('cli-node', 'restart_provider', { args: { provder: 'pcli' } });
    assert.equal(misspelt.status, 400, JSON.stringify(misspelt.json));
    assert.match(misspelt.json.error.message, /restart_provider takes args provider; got "provder"/);
    const probeArgs = await command('cli-node', 'probe', { args: { provider: 'pcli' } });
    assert.equal(probeArgs.status, 400, JSON.stringify(probeArgs.json));
    assert.match(probeArgs.json.error.message, /probe takes no args/);
    const timeout = await command('gpu-a', 'probe', { timeout: 300 });
    assert.equal(timeout.status, 400, JSON.stringify(timeout.json));
    assert.match(timeout.json.error.message, /"timeout"/);
    assert.equal(cliRestarts.length, restarts, 'no restart reached the agent');
  });

  test('restart_provider on an HTTP provider is unsupported for its type', async () => {
    const res = await command('gpu-a', 'restart_provider', { args: { provider: 'pa' } });
    assert.equal(res.json.results[0].status, 'unsupported');
    assert.match(res.json.results[0].message, /unsupported for this provider type/);
  });

  test('an agent that predates commands gets a clear unsupported result; a silent one a timeout', async () => {
    const old = await command('old', 'probe');
    assert.equal(old.status, 200);
    assert.equal(old.json.results[0].status, 'unsupported');
    assert.match(old.json.results[0].message, /predates node commands/);
    const started = performance.now();
    const hung = await command('hung', 'probe', { timeout_ms: 300 });
    assert.equal(hung.json.results[0].status, 'timeout');
    assert.match(hung.json.results[0].message, /no answer within 300 ms/);
    assert.ok(performance.now() - started < 3_000);
  });

  test('drain and undrain to an agent that predates commands say the edge side took effect', async () => {
    const drained = (await command('old', 'drain')).json.results[0];
    assert.equal(drained.status, 'unsupported');
    assert.match(drained.message, /^drained on the edge only, for this connection \(a reconnect ends it\); .*predates node commands/);
    assert.equal((await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'old').draining, true);
    const undrained = (await command('old', 'undrain')).json.results[0];
    assert.equal(undrained.status, 'unsupported');
    assert.match(undrained.message, /^undrained on the edge only/);
    assert.equal((await admin('/admin/status')).json.nodes.find((n: any) => n.id === 'old').draining, false);
  });

  test('probe, drain and undrain to a node with no connection all answer not_connected (not failed)', async () => {
    for (const kind of ['probe', 'drain', 'undrain']) {
      const res = await command('offline', kind);
      assert.equal(res.status, 200);
      assert.equal(res.json.results[0].status, 'not_connected', `${kind}: ${JSON.stringify(res.json.results[0])}`);
    }
  });

  test('a label names every node carrying it; unknown references and kinds are refused', async () => {
    const res = await command('rack1', 'probe');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json.results.map((r: any) => r.node).sort(), ['gpu-a', 'gpu-b']);
    const status = await admin('/admin/status');
    assert.deepEqual(status.json.nodes.find((n: any) => n.id === 'gpu-b').labels, ['rack1']);
    assert.equal((await command('nope', 'probe')).status, 404);
    const bad = await command('gpu-a', 'reboot');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'invalid_kind');
  });

  test('a refresh apply returns each concerned node\'s answer and says when an agent needs a restart', async () => {
    await writeFile(files.get('gpu-a') as string, toYaml(agentRaw(edge.grpcPort, 'gpu-a', { pa: mockA.url })));
    await writeFile(files.get('gpu-b') as string, toYaml(agentRaw(edge.grpcPort, 'gpu-b', { pb: mockB.url, 'pb-down': 'http://127.0.0.1:9' }, { tunnels: { batch_frames: false } })));
    const res = await admin('/admin/config/refresh', { mode: 'apply', config: edgeRaw(6), node_timeout_ms: 1_000 });
    assert.equal(res.status, 200);
    assert.equal(res.json.status, 'applied');
    const byNode = Object.fromEntries(res.json.nodes.map((n: any) => [n.node, [n.status, n.message]]));
    assert.equal(byNode['gpu-a'][0], 'applied', byNode['gpu-a'][1]);
    assert.equal(byNode['gpu-b'][0], 'restart_required');
    assert.match(byNode['gpu-b'][1], /tunnels/);
    assert.equal(byNode.old[0], 'unsupported');
    assert.equal(byNode.hung[0], 'timeout');
    assert.equal(byNode.offline[0], 'not_connected', 'a concerned node with no connection is reported, not left out');
    assert.equal(res.json.configVersion, 2, 'the commit stands whatever the nodes answered');
    const status = await admin('/admin/status');
    assert.equal(status.json.providers.find((p: any) => p.id === 'pa').capacity, 6);
  });
});
