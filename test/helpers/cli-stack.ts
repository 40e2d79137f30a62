// A real stack on loopback whose providers are `type: cli`: an edge (admin
// on), and one node agent per node, each running test/fixtures/cli-fixture.mjs
// through argv with the prompt on stdin. Every stack gets a fresh cwd root
// and a tag in the command line, so live fixture processes can be counted
// in /proc without seeing another test's.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAgentConfig } from '../../src/agent/config.js';
import { NodeAgent } from '../../src/agent/agent.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { silentLogger } from '../../src/shared/logger.js';
import { testWorkers } from './stack.js';

export const CLI_ALIAS = 'agent';
export const CLI_SERVED = 'fixture-agent';
export const FIXTURE = fileURLToPath(new URL('../../../test/fixtures/cli-fixture.mjs', import.meta.url));

export interface CliStackOptions {
  readonly nodes?: number;
  readonly capacity?: number;
  /** Extra keys of every cli provider (timeout_ms, kill_grace_ms, …). */
  readonly cli?: Record<string, unknown>;
  readonly runs?: Record<string, unknown>;
  readonly tunnelTimeoutMs?: number;
  /** Edits the raw edge config before it is parsed (extra sections such as a2a). */
  readonly configure?: (raw: Record<string, unknown>) => void;
  /** False: no agent starts in this process (the test runs one as a child process: agentConfig). */
  readonly inProcessAgents?: boolean;
}

export interface CliStack {
  readonly edge: RunningEdge;
  readonly agents: NodeAgent[];
  readonly baseURL: string;
  readonly root: string;
  readonly tag: string;
  nodeId(index: number): string;
  /** Node `index`'s agent config, raw (what a config file holds). */
  agentConfig(index: number): Record<string, unknown>;
  startAgent(index: number): Promise<NodeAgent>;
  admin(path: string): Promise<{ status: number; json: any }>;
  close(): Promise<void>;
}

export async function startCliStack(options: CliStackOptions = {}): Promise<CliStack> {
  const nodes = options.nodes ?? 1;
  const root = await mkdtemp(join(tmpdir(), 'edge-cli-test-'));
  const tag = `tag-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const nodeId = (i: number): string => `gpu-${i + 1}`;
  const raw: Record<string, unknown> = {
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    limits: { tunnel_timeout_ms: options.tunnelTimeoutMs ?? 30_000 },
    heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
    workers: { count: testWorkers() },
    admin: { host: '127.0.0.1', port: 0 },
    nodes: Array.from({ length: nodes }, (_, i) => ({ id: nodeId(i), token: `token-${i}`, providers: [{ id: `${nodeId(i)}-cli`, type: 'cli', capacity: options.capacity ?? 4 }] })),
    models: [{ alias: CLI_ALIAS, queue_timeout_ms: 20_000, max_queue: 64, providers: Object.fromEntries(Array.from({ length: nodes }, (_, i) => [`${nodeId(i)}-cli`, CLI_SERVED])) }],
  };
  if (options.runs !== undefined) raw.runs = options.runs;
  options.configure?.(raw);
  const edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger(), admin: true });
  const agents: NodeAgent[] = [];
  const stack: CliStack = {
    edge,
    agents,
    baseURL: `${edge.url}/v1`,
    root,
    tag,
    nodeId,
    agentConfig: (i) => ({
      edge: { address: `127.0.0.1:${edge.grpcPort}` },
      node: { id: nodeId(i), token: `token-${i}` },
      providers: [
        {
          id: `${nodeId(i)}-cli`,
          type: 'cli',
          command: [process.execPath, FIXTURE, tag],
          args: ['{model}', '{session}'],
          input: 'stdin',
          cwd_root: join(root, nodeId(i)),
          kill_grace_ms: 300,
          ...options.cli,
        },
      ],
      reconnect: { initial_ms: 50, max_ms: 200 },
    }),
    async startAgent(i) {
      const config = parseAgentConfig(stack.agentConfig(i), 'test');
      const agent = new NodeAgent(config, { logger: silentLogger(), stopGraceMs: 500 });
      agents[i] = agent;
      const registered = once(agent, 'registered');
      agent.start();
      await registered;
      return agent;
    },
    async admin(path) {
      const res = await fetch(`${edge.adminUrl as string}${path}`);
      const text = await res.text();
      return { status: res.status, json: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
    },
    async close() {
      for (const agent of agents) await agent?.stop();
      await edge.close();
      await rm(root, { recursive: true, force: true });
    },
  };
  if (options.inProcessAgents !== false) for (let i = 0; i < nodes; i++) await stack.startAgent(i);
  return stack;
}

/** Pids of live (not zombie) processes whose command line holds `needle`. */
export async function livePids(needle: string): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8');
      if (!cmdline.includes(needle)) continue;
      if (!(await isLive(Number(entry)))) continue;
      out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** True while /proc/<pid> exists and is not a zombie. */
export async function isLive(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Reads the 'orphan' fixture's stream until it printed the pids of its command and grandchild. */
export async function readPids(res: Response): Promise<{ reader: ReadableStreamDefaultReader<Uint8Array>; text: string; child: number; grandchild: number }> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let text = '';
  while (!/pids \d+ \d+/.test(text)) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the stream ended before the fixture printed its pids');
    text += new TextDecoder().decode(value);
  }
  const [, child, grandchild] = /pids (\d+) (\d+)/.exec(text)?.map(Number) ?? [];
  return { reader, text, child, grandchild };
}
