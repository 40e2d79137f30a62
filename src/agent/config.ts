// The node agent's configuration: YAML (snake_case) in, a validated immutable
// AgentConfig (camelCase) out. Every problem is reported at once, each naming
// its path, so one run shows an operator all mistakes in the file.
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { ConfigError, ConfigReader, headerSafeId, MAX_NODE_ID_CHARS, unreadableFileProblem, YAML_PARSE_OPTIONS, yamlSyntaxProblem } from '../shared/config-reader.js';
import type { ProviderType } from '../shared/config-types.js';
import { readEndpoints, type Endpoint } from '../shared/endpoints.js';
import { readNodeFlags } from '../shared/node-flags.js';
import { dialPort } from '../shared/url-host.js';
import { MAX_ANNOUNCED_PROVIDERS, MAX_NODE_STREAMS, MAX_PROVIDER_ID_BYTES } from '../shared/wire-limits.js';
import { baseUrlProblems } from '../shared/base-url.js';
import { LOG_LEVELS, type LogLevel } from '../shared/logger.js';
import { readAgentTls, type AgentTlsConfig } from './tls.js';
import { CLI_KEYS, readCliProvider, type CliProviderConfig } from './cli-config.js';


export interface AgentProviderConfig {
  /** Unique across the fleet; must match the edge's node catalog. */
  readonly id: string;
  readonly type: ProviderType;
  /** Upstream base URL; undefined only for `cli` providers (no HTTP upstream). */
  readonly baseUrl: string | undefined;
  /** Sent upstream as `Authorization: Bearer ...`; never logged. */
  readonly apiKey: string | undefined;
  /** Upstream pool size (max sockets to this provider: UpstreamPool's Http1Clients). */
  readonly connections: number;
  /** The command a `cli` provider runs per request; undefined for HTTP types. */
  readonly cli?: CliProviderConfig;
  /** APIs it serves natively, announced at Register (config `endpoints`, else the type's defaults). */
  readonly endpoints?: readonly Endpoint[];
  /** The active health probe's path (GET); undefined = the type's default, '' = not probed. */
  readonly healthPath?: string;
}

export interface AgentConfig {
  /** streams: how many gRPC streams (lanes) the node opens to the edge; more spread its tunnels over the edge's I/O workers (default 1). */
  readonly edge: { readonly address: string; readonly tls?: AgentTlsConfig; readonly streams?: number };
  readonly node: { readonly id: string; readonly token: string };
  readonly providers: readonly AgentProviderConfig[];
  readonly reconnect: { readonly initialMs: number; readonly maxMs: number };
  readonly tunnels: TunnelOptions;
  /** Active health probes (health-probes.ts); interval 0 turns them off. Optional so hand-built configs stay valid (DEFAULT_HEALTH then). */
  readonly health?: HealthOptions;
  readonly logLevel: LogLevel;
  /** runtime.node_flags, resolved (`auto` expanded for this host): the Node flags the agent restarts itself with at start. Optional so hand-built configs stay valid. */
  readonly runtime?: { readonly nodeFlags: readonly string[] };
}

/** How DATA frames are formed from upstream chunks. */
export interface TunnelOptions {
  /** Chunks arriving within this many ms of the previous frame are merged (0 = never merge). */
  readonly coalesceDelayMs: number;
  /** A merged DATA frame is sent as soon as it holds this many bytes; no DATA frame is larger (bigger chunks are split). */
  readonly coalesceMaxBytes: number;
  /** Frames of all tunnels produced in one event-loop turn go to the edge as one FrameBatch message (when the edge accepts them). */
  readonly batchFrames: boolean;
  /** A stream's later DATA frames may wait this many ms for other tunnels' frames to share their message (0 = the turn's end only). */
  readonly batchDelayMs: number;
}

export const DEFAULT_TUNNEL_OPTIONS: TunnelOptions = Object.freeze({ coalesceDelayMs: 2, coalesceMaxBytes: 16_384, batchFrames: true, batchDelayMs: 2 });

const PROVIDER_TYPES: readonly ProviderType[] = ['ollama', 'vllm', 'openai_compat', 'cli'];
const DEFAULT_CONNECTIONS = 128;
const DEFAULT_RECONNECT_INITIAL_MS = 200;
const DEFAULT_RECONNECT_MAX_MS = 10_000;
const HOUR_MS = 3_600_000;

export interface HealthOptions {
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** Failed probes in a row before a provider is reported unhealthy. */
  readonly unhealthyAfter: number;
  /** Passed probes in a row before an unhealthy provider is reported healthy again: a provider that fails every other probe stays out, not flapping. */
  readonly healthyAfter: number;
}
/**
 * Probes are off unless health.interval_ms is set (5000 is a sane value):
 * a probe is a request the provider sees, and deployments that count or
 * bill provider requests should opt in knowingly.
 */
export const DEFAULT_HEALTH: HealthOptions = { intervalMs: 0, timeoutMs: 2_000, unhealthyAfter: 2, healthyAfter: 1 };

// Header-value safe: a secret with a control character would corrupt the request.
const HEADER_SAFE = /^[\x20-\x7e\x80-\xff]+$/;

export function parseAgentConfig(raw: unknown, source: string): AgentConfig {
  const r = new ConfigReader();
  const root = r.object('config', raw) ?? {};
  // An edge's file given to the agent: one line saying so, not a problem for each of its keys.
  if ('nodes' in root && 'models' in root && !('node' in root)) {
    throw new ConfigError(source, ["this is an edge's config (it has nodes and models; a node agent's has edge, node and providers): check it with `npm run edge -- check-config FILE`"]);
  }
  r.noUnknownKeys('config', root, ['edge', 'node', 'providers', 'reconnect', 'tunnels', 'health', 'log_level', 'runtime']);
  const runtime = r.object('runtime', root.runtime, true) ?? {};
  r.noUnknownKeys('runtime', runtime, ['node_flags']);
  const nodeFlags = readNodeFlags(r, 'runtime.node_flags', runtime.node_flags);

  const edge = r.object('edge', root.edge) ?? {};
  r.noUnknownKeys('edge', edge, ['address', 'tls', 'streams']);
  const address = readAddress(r, 'edge.address', edge.address);
  const streams = r.integer('edge.streams', edge.streams, 1, MAX_NODE_STREAMS, 1);
  const tls = readAgentTls(r, edge.tls);

  const node = r.object('node', root.node) ?? {};
  r.noUnknownKeys('node', node, ['id', 'token']);
  const nodeId = headerSafeId(r, 'node.id', node.id, MAX_NODE_ID_CHARS, "the edge's config holds none longer");
  const token = readSecret(r, 'node.token', node.token, false) ?? '';

  const providers = readProviders(r, root.providers);

  const reconnect = r.object('reconnect', root.reconnect, true) ?? {};
  r.noUnknownKeys('reconnect', reconnect, ['initial_ms', 'max_ms']);
  const initialMs = r.integer('reconnect.initial_ms', reconnect.initial_ms, 1, HOUR_MS, DEFAULT_RECONNECT_INITIAL_MS);
  const maxMs = r.integer('reconnect.max_ms', reconnect.max_ms, initialMs, HOUR_MS, Math.max(initialMs, DEFAULT_RECONNECT_MAX_MS));

  const tunnels = r.object('tunnels', root.tunnels, true) ?? {};
  r.noUnknownKeys('tunnels', tunnels, ['coalesce_delay_ms', 'coalesce_max_bytes', 'batch_frames', 'batch_delay_ms']);
  const coalesceDelayMs = r.integer('tunnels.coalesce_delay_ms', tunnels.coalesce_delay_ms, 0, 1_000, DEFAULT_TUNNEL_OPTIONS.coalesceDelayMs);
  const coalesceMaxBytes = r.integer('tunnels.coalesce_max_bytes', tunnels.coalesce_max_bytes, 1, 16 * 1024 * 1024, DEFAULT_TUNNEL_OPTIONS.coalesceMaxBytes);
  const batchFrames = r.boolean('tunnels.batch_frames', tunnels.batch_frames, DEFAULT_TUNNEL_OPTIONS.batchFrames);
  const batchDelayMs = r.integer('tunnels.batch_delay_ms', tunnels.batch_delay_ms, 0, 100, DEFAULT_TUNNEL_OPTIONS.batchDelayMs);

  const health = r.object('health', root.health, true) ?? {};
  r.noUnknownKeys('health', health, ['interval_ms', 'timeout_ms', 'unhealthy_after', 'healthy_after']);
  const healthIntervalMs = r.integer('health.interval_ms', health.interval_ms, 0, HOUR_MS, DEFAULT_HEALTH.intervalMs);
  const healthTimeoutMs = r.integer('health.timeout_ms', health.timeout_ms, 1, HOUR_MS, DEFAULT_HEALTH.timeoutMs);
  const unhealthyAfter = r.integer('health.unhealthy_after', health.unhealthy_after, 1, 100, DEFAULT_HEALTH.unhealthyAfter);
  const healthyAfter = r.integer('health.healthy_after', health.healthy_after, 1, 100, DEFAULT_HEALTH.healthyAfter);

  const logLevel = r.oneOf('log_level', root.log_level, LOG_LEVELS, 'info');

  r.throwIfProblems(source);
  return {
    edge: tls === undefined ? { address, streams } : { address, tls, streams },
    node: { id: nodeId, token },
    providers,
    reconnect: { initialMs, maxMs },
    tunnels: { coalesceDelayMs, coalesceMaxBytes, batchFrames, batchDelayMs },
    health: { intervalMs: healthIntervalMs, timeoutMs: healthTimeoutMs, unhealthyAfter, healthyAfter },
    logLevel,
    runtime: { nodeFlags },
  };
}

export async function loadAgentConfig(file: string): Promise<AgentConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, [unreadableFileProblem(file, err)]);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text, YAML_PARSE_OPTIONS);
  } catch (err) {
    // Quoting nothing of the file, as the edge's: the parser's message quotes the offending text, which may be a token or api_key
    // (and this message reaches the edge's log and admin API as a refresh_config answer).
    throw new ConfigError(file, [yamlSyntaxProblem(err)]);
  }
  return parseAgentConfig(raw, file);
}

function readProviders(r: ConfigReader, value: unknown): AgentProviderConfig[] {
  const items = r.list('providers', value);
  if (Array.isArray(value) && items.length === 0) r.problem('providers', 'at least one provider', value);
  // The edge refuses a Register announcing more, or a longer id: the agent would reconnect for ever.
  if (items.length > MAX_ANNOUNCED_PROVIDERS) r.problems.push(`providers: ${items.length} providers; at most ${MAX_ANNOUNCED_PROVIDERS} (the edge refuses a node registering more)`);
  const firstPathOfId = new Map<string, string>();
  const providers: AgentProviderConfig[] = [];
  for (let i = 0; i < items.length; i++) {
    const path = `providers[${i}]`;
    const item = r.object(path, items[i]);
    if (item === undefined) continue;
    r.noUnknownKeys(path, item, item.type === 'cli' ? ['id', 'type', 'endpoints', ...CLI_KEYS] : ['id', 'type', 'base_url', 'api_key', 'connections', 'endpoints', 'health_path']);
    const id = headerSafeId(r, `${path}.id`, item.id, MAX_PROVIDER_ID_BYTES, 'the edge refuses a node registering a longer one');
    if (id !== '') {
      const first = firstPathOfId.get(id);
      if (first === undefined) firstPathOfId.set(id, `${path}.id`);
      else r.problems.push(`${path}.id: duplicate provider id ${JSON.stringify(id)} (also at ${first})`);
    }
    const type = r.oneOf(`${path}.type`, item.type, PROVIDER_TYPES);
    // A cli provider runs a command, so it has no HTTP upstream to name.
    const baseUrl = type === 'cli' && item.base_url === undefined ? undefined : r.url(`${path}.base_url`, item.base_url);
    if (baseUrl !== undefined) baseUrlProblems(r, `${path}.base_url`, baseUrl, type);
    const apiKey = item.api_key === undefined ? undefined : readSecret(r, `${path}.api_key`, item.api_key, true);
    const connections = r.integer(`${path}.connections`, item.connections, 1, 65_536, DEFAULT_CONNECTIONS);
    const endpoints = readEndpoints(r, `${path}.endpoints`, item.endpoints, type);
    if (type === 'cli') providers.push({ id, type, baseUrl, apiKey, connections, endpoints, cli: readCliProvider(r, path, item, id) });
    else if (item.health_path === undefined) providers.push({ id, type, baseUrl, apiKey, connections, endpoints });
    else {
      // '' is a value here (not probed), which the reader's string() refuses as missing.
      const healthPath = item.health_path === '' ? '' : r.string(`${path}.health_path`, item.health_path);
      if (healthPath !== '' && !healthPath.startsWith('/')) r.problem(`${path}.health_path`, "a path starting with '/', or '' for no probe", item.health_path);
      providers.push({ id, type, baseUrl, apiKey, connections, endpoints, healthPath });
    }
  }
  return providers;
}


function readAddress(r: ConfigReader, path: string, value: unknown): string {
  const text = r.string(path, value);
  if (text === '') return text;
  if (dialPort(text) === 0) r.problem(path, 'host:port with a port from 1 to 65535', value);
  return text;
}

/** Like ConfigReader.string, but a problem never repeats the value: it is a credential. */
function readSecret(r: ConfigReader, path: string, raw: unknown, isHeaderValue: boolean): string | undefined {
  const value = r.secret(path, raw);
  if (value === '') return undefined;
  if (isHeaderValue && !HEADER_SAFE.test(value)) {
    r.problems.push(`${path}: expected printable characters only (value not shown: it is a secret)`);
    return undefined;
  }
  // The agent writes `Bearer <api_key>` itself: a key given with its scheme would go out as "Bearer Bearer …",
  // and one with spaces at an end as a token the provider does not know; either fails every request (401).
  if (isHeaderValue && /^bearer /i.test(value)) {
    r.problems.push(`${path}: starts with "Bearer ", which the agent adds itself; give the key alone (value not shown: it is a secret)`);
    return undefined;
  }
  if (isHeaderValue && value.trim() !== value) {
    r.problems.push(`${path}: starts or ends with a space; give the key alone (value not shown: it is a secret)`);
    return undefined;
  }
  return value;
}
