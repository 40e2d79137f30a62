// A real stack on loopback with the admin listener on: mock provider, edge
// (HTTP, gRPC and admin on ephemeral ports), a node agent dialling it; plus
// small clients for the admin API, /metrics and the event stream.
import { once } from 'node:events';
import { parseAgentConfig } from '../../../src/agent/config.js';
import { NodeAgent } from '../../../src/agent/agent.js';
import { parseEdgeConfig } from '../../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../../src/edge/edge.js';
import { startMockProvider, type MockProvider, type MockProviderOptions } from '../../../src/mock/provider.js';
import { silentLogger } from '../../../src/shared/logger.js';
import type { Logger } from 'pino';
import { edgeConfigObject, NODE_ID, NODE_TOKEN, PROVIDER_ID } from '../../helpers/stack.js';

export { ALIAS, NODE_ID, NODE_TOKEN, PROVIDER_ID, SERVED, waitUntil, inFlight, queueDepth } from '../../helpers/stack.js';

export interface OpsStackOptions {
  readonly capacity?: number;
  readonly maxQueue?: number;
  readonly queueTimeoutMs?: number;
  readonly mock?: MockProviderOptions;
  readonly adminToken?: string;
  readonly drainGraceMs?: number;
  readonly agentLogger?: Logger;
  readonly edgeLogger?: Logger;
  /** Client API keys (auth.api_keys, YAML-shaped). */
  readonly apiKeys?: readonly Record<string, unknown>[];
  /** Edits the YAML-shaped edge config before it is parsed. */
  readonly configure?: (raw: Record<string, unknown>) => void;
}

export interface OpsStack {
  readonly edge: RunningEdge;
  readonly mock: MockProvider;
  readonly agent: NodeAgent;
  readonly baseURL: string;
  /** The YAML-shaped config the edge started from; refresh tests edit copies of it. */
  readonly raw: Record<string, unknown>;
  /** Every ConfigRefresh the agent received: [changedPaths, configVersion]. */
  readonly refreshes: [readonly string[], number][];
  admin(path: string, init?: { method?: string; body?: unknown; token?: string | null }): Promise<{ status: number; json: any; headers: Headers }>;
  metrics(): Promise<string>;
  close(): Promise<void>;
}

export function opsConfigObject(options: OpsStackOptions = {}): Record<string, unknown> {
  const raw = edgeConfigObject({ capacity: options.capacity, maxQueue: options.maxQueue, queueTimeoutMs: options.queueTimeoutMs });
  raw.admin = { host: '127.0.0.1', port: 0, ...(options.adminToken ? { token: options.adminToken } : {}) };
  raw.drain = { grace_ms: options.drainGraceMs ?? 5_000 };
  if (options.apiKeys !== undefined) raw.auth = { api_keys: options.apiKeys };
  options.configure?.(raw);
  return raw;
}

export function agentWith(grpcPort: number, mockUrl: string, logger: Logger = silentLogger(), stopGraceMs = 2_000): NodeAgent {
  const config = parseAgentConfig(
    {
      edge: { address: `127.0.0.1:${grpcPort}` },
      node: { id: NODE_ID, token: NODE_TOKEN },
      providers: [{ id: PROVIDER_ID, type: 'openai_compat', base_url: mockUrl }],
      reconnect: { initial_ms: 50, max_ms: 200 },
      log_level: 'debug',
    },
    'test',
  );
  return new NodeAgent(config, { logger, stopGraceMs });
}

/** Starts `agent` and resolves once the edge took its registration. */
export async function registered(agent: NodeAgent): Promise<void> {
  const done = once(agent, 'registered');
  agent.start();
  await done;
}

export async function startOpsStack(options: OpsStackOptions = {}): Promise<OpsStack> {
  const mock = await startMockProvider(options.mock ?? {});
  const raw = opsConfigObject(options);
  const edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: options.edgeLogger ?? silentLogger(), admin: true });
  const agent = agentWith(edge.grpcPort, mock.url, options.agentLogger);
  const refreshes: [readonly string[], number][] = [];
  agent.on('config-refresh', (paths, version) => refreshes.push([paths, version]));
  const registered = once(agent, 'registered');
  agent.start();
  await registered;
  const adminUrl = edge.adminUrl as string;
  return {
    edge,
    mock,
    agent,
    baseURL: `${edge.url}/v1`,
    raw,
    refreshes,
    async admin(path, init = {}) {
      const headers: Record<string, string> = {};
      const token = init.token === undefined ? options.adminToken : init.token;
      if (token) headers.authorization = `Bearer ${token}`;
      if (init.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${adminUrl}${path}`, { method: init.method ?? 'GET', headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) });
      const text = await res.text();
      return { status: res.status, json: text.length > 0 && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text, headers: res.headers };
    },
    async metrics() {
      const headers: Record<string, string> = options.adminToken ? { authorization: `Bearer ${options.adminToken}` } : {};
      const res = await fetch(`${adminUrl}/metrics`, { headers });
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
      return res.text();
    },
    async close() {
      await agent.stop();
      await edge.close();
      await mock.close();
    },
  };
}

/** A deep copy of a YAML-shaped config, for refresh candidates. */
export function copyOf(raw: Record<string, unknown>): any {
  return structuredClone(raw);
}

/** Applies the stack's starting config with `apiKeys` as auth.api_keys (a key's grants and limits changed on a running edge); the refresh's answer. */
export function applyApiKeys(stack: OpsStack, apiKeys: readonly unknown[]): Promise<{ status: number; json: any }> {
  const config = copyOf(stack.raw);
  config.auth = { api_keys: apiKeys };
  return stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config } });
}

/** The value of one Prometheus sample, e.g. sample(text, 'edge_requests_total', {model: 'llama3'}); undefined if absent. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const have: Record<string, string> = {};
    for (const pair of (match[3] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) have[pair[1]] = pair[2];
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(match[4]);
  }
  return undefined;
}
