// Loads and validates the edge's YAML config into an immutable EdgeConfig.
// Every problem is reported with its path, what was expected and what was
// found; referential mistakes (a model naming an unknown provider) too.
import { MAX_ANNOUNCED_PROVIDERS, MAX_PROVIDER_ID_BYTES, MAX_REQUEST_BODY_BYTES } from '../shared/wire-limits.js';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { parse as parseYaml } from 'yaml';
import { ConfigError, ConfigReader, headerSafeId, MAX_NODE_ID_CHARS, noBrackets, unreadableFileProblem, YAML_PARSE_OPTIONS, yamlSyntaxProblem } from '../shared/config-reader.js';
import { readEndpoints } from '../shared/endpoints.js';
import { readNodeFlags } from '../shared/node-flags.js';
import { bareHost, dialPort } from '../shared/url-host.js';
import { baseUrlProblems } from '../shared/base-url.js';
import { MAX_WORKERS } from '../contract/scheduler-port.js';
import { STORED_RESPONSE_ENTRIES } from '../contract/io-protocol.js';
import { DEFAULT_MAX_FINISHED_RUNS } from './runs/run-store.js';
import { readA2A } from './a2a-config.js';
import { DEFAULT_MAX_QUEUE, DEFAULT_QUEUE_TIMEOUT_MS } from './scheduler/index.js';
import { readResilience } from './config-resilience.js';
import { readCors } from './config-cors.js';
import { HARDENING_LIMIT_KEYS, readAuth, readLimitsHardening, readTls } from '../shared/config-hardening.js';
import type { AdminConfig, BootstrapConfig, EdgeConfig, ListenConfig, ModelConfig, NodeConfig, ProviderConfig, ProviderType } from '../shared/config-types.js';

const PROVIDER_TYPES: readonly ProviderType[] = ['ollama', 'vllm', 'openai_compat', 'cli'];
const MAX_PORT = 65535;
const DAY_MS = 86_400_000;
// Each remembered id costs a few hundred bytes in every I/O worker and in the pool.
const MAX_STORED_RESPONSES = 10_000_000;
export const DEFAULT_ADMIN_PORT = 9090;
import { DEFAULT_DRAIN_GRACE_MS } from '../shared/config-types.js';

export { DEFAULT_DRAIN_GRACE_MS };
const MIN_CORES_FOR_WORKERS = 4;

/** True for names and addresses that only this host can reach. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

function readListen(r: ConfigReader, path: string, raw: unknown, defaultPort: number): ListenConfig {
  const obj = r.object(path, raw, true) ?? {};
  const client = path === 'listen.http';
  r.noUnknownKeys(path, obj, client ? ['host', 'port', 'lean_http1'] : ['host', 'port']);
  // `[::1]` as a URL writes it, `::1` as node:net and grpc-js bind it.
  const listen = { host: bareHost(r.string(`${path}.host`, obj.host, '127.0.0.1')), port: r.integer(`${path}.port`, obj.port, 0, MAX_PORT, defaultPort) };
  return client ? { ...listen, leanHttp1: r.boolean(`${path}.lean_http1`, obj.lean_http1, true) } : listen;
}

// The admin API can change the edge's config and drain its nodes: anywhere
// but loopback it must not be open to whoever can reach the port.
function readAdmin(r: ConfigReader, raw: unknown): AdminConfig {
  const obj = r.object('admin', raw, true) ?? {};
  r.noUnknownKeys('admin', obj, ['host', 'port', 'token']);
  const host = bareHost(r.string('admin.host', obj.host, '127.0.0.1'));
  const token = obj.token === undefined ? undefined : r.secret('admin.token', obj.token);
  // `Authorization: Bearer <token>` carries one word: a token with a space (or a YAML block scalar's newline) could never match.
  if (token !== undefined && /\s/.test(token)) r.problems.push('admin.token: must not contain whitespace (value not shown: it is a secret); a YAML `|` block adds a trailing newline, use a plain or quoted scalar');
  if (token === undefined && !isLoopbackHost(host)) r.problems.push(`admin.token: required when admin.host (${host}) is not a loopback address`);
  return { host, port: r.integer('admin.port', obj.port, 0, MAX_PORT, DEFAULT_ADMIN_PORT), token };
}

// The bootstrap listener hands out node tokens inside rendered configs, so
// a token is always required, and the address written into those configs
// must be one a node can dial (a wildcard listen host is not).
function readBootstrap(r: ConfigReader, raw: unknown, grpc: ListenConfig): BootstrapConfig | undefined {
  if (raw === undefined || raw === null) return undefined;
  const obj = r.object('bootstrap', raw) ?? {};
  r.noUnknownKeys('bootstrap', obj, ['listen', 'artifact_dir', 'token', 'token_expires_at', 'edge_address']);
  const listen = readListen(r, 'bootstrap.listen', obj.listen, 8443);
  const artifactDir = r.string('bootstrap.artifact_dir', obj.artifact_dir);
  const token = r.secret('bootstrap.token', obj.token);
  if (token !== '' && token.length < 16) r.problems.push('bootstrap.token: at least 16 characters (value not shown: it is a secret)');
  if (/\s/.test(token)) r.problems.push('bootstrap.token: must not contain whitespace (value not shown: it is a secret); a YAML `|` block adds a trailing newline, use a plain or quoted scalar');
  const wildcard = grpc.host === '0.0.0.0' || grpc.host === '::' || grpc.host === '';
  if (obj.edge_address === undefined && wildcard) r.problems.push(`bootstrap.edge_address: required when listen.grpc.host (${grpc.host}) is a wildcard address nodes cannot dial`);
  // Rendered for nodes on other hosts (the bootstrap listener is reachable from them): a loopback gRPC address would have them dial themselves.
  else if (obj.edge_address === undefined && isLoopbackHost(grpc.host) && !isLoopbackHost(listen.host)) {
    r.problems.push(`bootstrap.edge_address: required when listen.grpc.host (${grpc.host}) is loopback and bootstrap.listen.host (${listen.host}) is not: nodes on other hosts cannot dial it`);
  }
  const edgeAddress = r.optionalString('bootstrap.edge_address', obj.edge_address);
  if (edgeAddress !== undefined && dialPort(edgeAddress) === 0) r.problem('bootstrap.edge_address', 'host:port a node can dial (an IPv6 address in brackets), with a port from 1 to 65535', obj.edge_address);
  // A token for one rollout window: past it the listener refuses it, so a leaked one stops handing out node tokens by itself.
  const expiresText = r.optionalString('bootstrap.token_expires_at', obj.token_expires_at);
  let tokenExpiresAt: number | undefined;
  if (expiresText !== undefined) {
    tokenExpiresAt = rfc3339Ms(expiresText);
    if (Number.isNaN(tokenExpiresAt)) r.problem('bootstrap.token_expires_at', 'an RFC 3339 date and time with its offset, e.g. 2026-12-31T18:00:00Z', obj.token_expires_at);
  }
  return { host: listen.host, port: listen.port, artifactDir, token, tokenExpiresAt, edgeAddress };
}

/** RFC 3339 date-time with a required offset (Z or ±hh:mm; `t` and `z` may be lower-case, as its §5.6 allows). */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * The instant an RFC 3339 date-time names; NaN when it is not one. Each field is checked against the
 * calendar: Date.parse reads 2026-02-30 as March 2, so a typo would set another day without a word.
 */
function rfc3339Ms(text: string): number {
  const m = RFC3339.exec(text);
  if (m === null) return Number.NaN;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  // No leap second (:60): Date.parse takes none.
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) return Number.NaN;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return Number.NaN;
  return Date.parse(text.toUpperCase());
}

/** A provider id's cap: its node announces it at Register, which refuses a longer one (the node would never connect). */
const PROVIDER_ID_WHY = 'the edge refuses a node registering a longer one';
const NODE_ID_WHY = 'it is sent in the x-edge-node header of every answer the node serves';

function readProvider(r: ConfigReader, path: string, raw: unknown): ProviderConfig | undefined {
  const obj = r.object(path, raw);
  if (!obj) return undefined;
  r.noUnknownKeys(path, obj, ['id', 'type', 'capacity', 'max_context_tokens', 'enabled', 'models', 'endpoints', 'base_url']);
  const served = obj.models === undefined ? undefined : r.list(`${path}.models`, obj.models).map((m, i) => r.string(`${path}.models[${i}]`, m));
  const type = r.oneOf(`${path}.type`, obj.type, PROVIDER_TYPES, 'openai_compat');
  // Rendered into bootstrapped agent configs: what the agent would refuse is refused here.
  const baseUrl = obj.base_url === undefined ? undefined : r.url(`${path}.base_url`, obj.base_url);
  if (baseUrl !== undefined && type === 'cli') r.problems.push(`${path}.base_url: a cli provider runs a command on its node and has no base_url`);
  else if (baseUrl !== undefined) baseUrlProblems(r, `${path}.base_url`, baseUrl, type);
  return {
    id: headerSafeId(r, `${path}.id`, obj.id, MAX_PROVIDER_ID_BYTES, PROVIDER_ID_WHY),
    type,
    endpoints: readEndpoints(r, `${path}.endpoints`, obj.endpoints, type),
    capacity: r.integer(`${path}.capacity`, obj.capacity, 0, 1_000_000, 1),
    maxContextTokens: r.optionalInteger(`${path}.max_context_tokens`, obj.max_context_tokens, 1, 100_000_000),
    enabled: r.boolean(`${path}.enabled`, obj.enabled, true),
    ...(baseUrl === undefined ? {} : { baseUrl }),
    ...(served === undefined ? {} : { models: served }),
  };
}

/**
 * A provider that lists the model names it serves (`models`) is checked
 * against what the aliases send it: a served name it does not list is a
 * typo that would otherwise surface only as the provider's 404 on every
 * request of that alias.
 */
function checkServedNames(r: ConfigReader, nodes: readonly NodeConfig[], models: readonly ModelConfig[]): void {
  const listed = new Map<string, { path: string; names: readonly string[] }>();
  nodes.forEach((node, i) =>
    node.providers.forEach((p, j) => {
      if (p.models !== undefined) listed.set(p.id, { path: `nodes[${i}].providers[${j}].models`, names: p.models });
    }),
  );
  if (listed.size === 0) return;
  models.forEach((model, i) => {
    for (const [providerId, servedName] of model.providers) {
      const offer = listed.get(providerId);
      if (offer !== undefined && !offer.names.includes(servedName)) {
        r.problems.push(`models[${i}].providers.${providerId}: ${JSON.stringify(servedName)} is not a model that provider serves (${offer.path}: ${offer.names.map((n) => JSON.stringify(n)).join(', ') || 'none'})`);
      }
    }
  });
}

function readNode(r: ConfigReader, path: string, raw: unknown): NodeConfig | undefined {
  const obj = r.object(path, raw);
  if (!obj) return undefined;
  r.noUnknownKeys(path, obj, ['id', 'token', 'providers', 'labels']);
  const providers: ProviderConfig[] = [];
  for (const [i, p] of r.list(`${path}.providers`, obj.providers).entries()) {
    const provider = readProvider(r, `${path}.providers[${i}]`, p);
    if (provider) providers.push(provider);
  }
  if (providers.length > MAX_ANNOUNCED_PROVIDERS) r.problems.push(`${path}.providers: ${providers.length} providers; at most ${MAX_ANNOUNCED_PROVIDERS} (the edge refuses a node registering more)`);
  const labels = r.list(`${path}.labels`, obj.labels, true).map((label, i) => r.string(`${path}.labels[${i}]`, label));
  const node = { id: headerSafeId(r, `${path}.id`, obj.id, MAX_NODE_ID_CHARS, NODE_ID_WHY), token: r.secret(`${path}.token`, obj.token), providers };
  return labels.length === 0 ? node : { ...node, labels };
}

function readModel(r: ConfigReader, path: string, raw: unknown, providerIds: ReadonlySet<string>): ModelConfig | undefined {
  const obj = r.object(path, raw);
  if (!obj) return undefined;
  r.noUnknownKeys(path, obj, ['alias', 'providers', 'max_queue', 'queue_timeout_ms']);
  const providers = new Map<string, string>();
  const map = r.object(`${path}.providers`, obj.providers);
  // An alias no provider serves would hold every request for its queue timeout, then fail as if its nodes were down.
  if (map && Object.keys(map).length === 0) r.problems.push(`${path}.providers: names no provider; a model needs at least one (provider id: the model name it serves)`);
  if (map) {
    for (const [providerId, served] of Object.entries(map)) {
      const servedName = r.string(`${path}.providers.${providerId}`, served);
      if (!providerIds.has(providerId)) r.problems.push(`${path}.providers.${providerId}: no provider with this id in nodes[].providers`);
      providers.set(providerId, servedName);
    }
  }
  return {
    alias: aliasOf(r, `${path}.alias`, obj.alias),
    providers,
    maxQueue: r.integer(`${path}.max_queue`, obj.max_queue, 0, 1_000_000, DEFAULT_MAX_QUEUE),
    queueTimeoutMs: r.integer(`${path}.queue_timeout_ms`, obj.queue_timeout_ms, 1, DAY_MS, DEFAULT_QUEUE_TIMEOUT_MS),
  };
}

function aliasOf(r: ConfigReader, path: string, value: unknown): string {
  const alias = r.string(path, value);
  noBrackets(r, path, alias);
  return alias;
}

function reportDuplicates(r: ConfigReader, path: string, ids: readonly string[]): void {
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) r.problems.push(`${path}: duplicate id ${JSON.stringify(id)}`);
    seen.add(id);
  }
}

/** What `localhost` may bind: 127.0.0.1 or ::1, as /etc/hosts and the resolver's order decide on the host. */
const LOCALHOST_ADDRESSES: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '::1']);

/** Whether two listen hosts can collide on one port: the same address, or either is a wildcard. */
function hostsOverlap(hostA: string, hostB: string): boolean {
  // Host names are case-insensitive; `localhost` beside 127.0.0.1 passed here and failed at start with EADDRINUSE.
  const a = hostA.toLowerCase();
  const b = hostB.toLowerCase();
  if ((a === 'localhost' || b === 'localhost') && LOCALHOST_ADDRESSES.has(a) && LOCALHOST_ADDRESSES.has(b)) return true;
  if (a === b || a === '' || b === '' || a === '::' || b === '::') return true; // '::' binds both families (Linux's default)
  // 0.0.0.0 covers every IPv4 address (and host names, which may resolve to one), no IPv6 one.
  if (a === '0.0.0.0') return !b.includes(':');
  if (b === '0.0.0.0') return !a.includes(':');
  return false;
}

/** Two of the edge's listeners on one port would fail at start with EADDRINUSE and no config key named: refused here. */
function checkListenerPorts(r: ConfigReader, config: EdgeConfig): void {
  const listeners: [string, string, number][] = [
    ['listen.http', config.http.host, config.http.port],
    ['listen.grpc', config.grpc.host, config.grpc.port],
  ];
  if (config.admin !== undefined) listeners.push(['admin', config.admin.host, config.admin.port]);
  if (config.bootstrap !== undefined) listeners.push(['bootstrap.listen', config.bootstrap.host, config.bootstrap.port]);
  for (let i = 0; i < listeners.length; i++) {
    for (let j = i + 1; j < listeners.length; j++) {
      const [pathA, hostA, portA] = listeners[i];
      const [pathB, hostB, portB] = listeners[j];
      // Port 0 is a fresh port for each.
      if (portA !== 0 && portA === portB && hostsOverlap(hostA, hostB)) r.problems.push(`${pathB}.port: ${portB} is also ${pathA}.port (${hostA} and ${hostB}); each listener needs its own port`);
    }
  }
}

/** Validates a parsed config tree; throws ConfigError listing every problem. */
export function parseEdgeConfig(raw: unknown, source: string): EdgeConfig {
  const r = new ConfigReader();
  const root = r.object('(root)', raw) ?? {};
  // A node agent's file given to the edge: one line saying so, not a problem for each of its keys.
  if ('node' in root && 'providers' in root && !('nodes' in root)) {
    throw new ConfigError(source, ["this is a node agent's config (it has edge, node and providers; an edge's has listen, nodes and models): check it with `node-agent check-config FILE` (npm run node-agent -- check-config FILE)"]);
  }
  r.noUnknownKeys('(root)', root, ['listen', 'limits', 'heartbeat', 'scheduler', 'workers', 'admin', 'drain', 'runs', 'runtime', 'nodes', 'models', 'auth', 'tls', 'bootstrap', 'a2a', 'resilience', 'cors']);

  const listen = r.object('listen', root.listen, true) ?? {};
  r.noUnknownKeys('listen', listen, ['http', 'grpc']);
  const limits = r.object('limits', root.limits, true) ?? {};
  r.noUnknownKeys('limits', limits, ['body_bytes', 'tunnel_timeout_ms', 'tunnel_window_bytes', 'stored_responses', ...HARDENING_LIMIT_KEYS]);
  const heartbeat = r.object('heartbeat', root.heartbeat, true) ?? {};
  r.noUnknownKeys('heartbeat', heartbeat, ['interval_ms', 'timeout_ms']);
  const scheduler = r.object('scheduler', root.scheduler, true) ?? {};
  r.noUnknownKeys('scheduler', scheduler, ['long_context_threshold_tokens', 'fairness', 'aging_step_per_sec']);
  const workers = r.object('workers', root.workers, true) ?? {};
  r.noUnknownKeys('workers', workers, ['count']);
  const drain = r.object('drain', root.drain, true) ?? {};
  r.noUnknownKeys('drain', drain, ['grace_ms']);
  const runs = r.object('runs', root.runs, true) ?? {};
  r.noUnknownKeys('runs', runs, ['max_finished']);
  const runtime = r.object('runtime', root.runtime, true) ?? {};
  r.noUnknownKeys('runtime', runtime, ['node_flags']);

  const nodes: NodeConfig[] = [];
  for (const [i, n] of r.list('nodes', root.nodes).entries()) {
    const node = readNode(r, `nodes[${i}]`, n);
    if (node) nodes.push(node);
  }
  reportDuplicates(r, 'nodes', nodes.map((n) => n.id));
  // The token is what proves which node an agent is: two nodes sharing one could each register as the other.
  const tokenOwner = new Map<string, number>();
  nodes.forEach((n, i) => {
    if (n.token === '') return;
    const first = tokenOwner.get(n.token);
    if (first === undefined) tokenOwner.set(n.token, i);
    else r.problems.push(`nodes[${i}].token: the same as nodes[${first}].token (value not shown: it is a secret); each node needs its own, since the token is what proves which node an agent is`);
  });
  const providerIds = nodes.flatMap((n) => n.providers.map((p) => p.id));
  reportDuplicates(r, 'nodes[].providers', providerIds);

  const models: ModelConfig[] = [];
  const providerIdSet = new Set(providerIds);
  for (const [i, m] of r.list('models', root.models).entries()) {
    const model = readModel(r, `models[${i}]`, m, providerIdSet);
    if (model) models.push(model);
  }
  reportDuplicates(r, 'models', models.map((m) => m.alias));
  checkServedNames(r, nodes, models);

  const heartbeatIntervalMs = r.integer('heartbeat.interval_ms', heartbeat.interval_ms, 10, DAY_MS, 5_000);
  const heartbeatTimeoutMs = r.integer('heartbeat.timeout_ms', heartbeat.timeout_ms, 20, DAY_MS, 15_000);
  if (heartbeatTimeoutMs <= heartbeatIntervalMs) r.problems.push('heartbeat.timeout_ms: must be larger than heartbeat.interval_ms');

  const config: EdgeConfig = {
    http: readListen(r, 'listen.http', listen.http, 8080),
    grpc: readListen(r, 'listen.grpc', listen.grpc, 50051),
    limits: {
      // A body travels to the node in one gRPC message, which the agent caps.
      bodyBytes: r.integer('limits.body_bytes', limits.body_bytes, 1024, MAX_REQUEST_BODY_BYTES, 8 * 1024 * 1024),
      tunnelTimeoutMs: r.integer('limits.tunnel_timeout_ms', limits.tunnel_timeout_ms, 1, DAY_MS, 600_000),
      tunnelWindowBytes: r.integer('limits.tunnel_window_bytes', limits.tunnel_window_bytes, 0, 1 << 30, 256 * 1024),
      storedResponses: r.integer('limits.stored_responses', limits.stored_responses, 1, MAX_STORED_RESPONSES, STORED_RESPONSE_ENTRIES),
      ...readLimitsHardening(r, limits),
    },
    heartbeat: { intervalMs: heartbeatIntervalMs, timeoutMs: heartbeatTimeoutMs },
    scheduler: {
      longContextThresholdTokens: r.integer('scheduler.long_context_threshold_tokens', scheduler.long_context_threshold_tokens, 1, 100_000_000, 32_768),
      // Fair queuing (docs/scheduling.md): absent = on exactly when an API key sets priority or weight.
      ...(scheduler.fairness === undefined ? {} : { fairness: r.boolean('scheduler.fairness', scheduler.fairness, false) }),
      agingStepPerSec: r.integer('scheduler.aging_step_per_sec', scheduler.aging_step_per_sec, 0, 1000, 1),
    },
    // I/O worker threads (docs/architecture.md); 0 = the whole data path on the main thread.
    // At most 64: request ids carry the worker index in their low 6 bits.
    workers: { count: r.integer('workers.count', workers.count, 0, MAX_WORKERS, defaultWorkerCount(availableParallelism())) },
    admin: readAdmin(r, root.admin),
    drain: { graceMs: r.integer('drain.grace_ms', drain.grace_ms, 0, DAY_MS, DEFAULT_DRAIN_GRACE_MS) },
    runs: { maxFinished: r.integer('runs.max_finished', runs.max_finished, 1, 1_000_000, DEFAULT_MAX_FINISHED_RUNS) },
    runtime: { nodeFlags: readNodeFlags(r, 'runtime.node_flags', runtime.node_flags) },
    nodes,
    models,
    auth: readAuth(r, root.auth, new Set(models.map((m) => m.alias))),
    tls: readTls(r, root.tls),
    a2a: readA2A(r, root.a2a, new Set(models.map((m) => m.alias))),
  };
  Object.assign(config, { resilience: readResilience(r, root.resilience) });
  const cors = readCors(r, root.cors);
  if (cors !== undefined) Object.assign(config, { cors });
  const bootstrap = readBootstrap(r, root.bootstrap, config.grpc);
  if (bootstrap !== undefined) Object.assign(config, { bootstrap });
  checkListenerPorts(r, config);
  checkRoleSecrets(r, config);
  const { tunnelWindowBytes, maxFrameBytes } = config.limits;
  if (maxFrameBytes !== undefined && tunnelWindowBytes > maxFrameBytes) {
    // A DATA frame is at most the window, so a larger window would let frames break the frame limit.
    r.problems.push(`limits.tunnel_window_bytes: must not exceed limits.max_frame_bytes (${maxFrameBytes}), found ${tunnelWindowBytes}`);
  }
  r.throwIfProblems(source);
  return config;
}

/**
 * Each role its own secret: the admin token, the bootstrap token, each node's token and each client API key.
 * One secret in two roles lets whoever holds it for one act as the other (a node's token, or a client's
 * key, opening the admin API). Client keys are compared by their digests; no value is ever shown.
 */
function checkRoleSecrets(r: ConfigReader, config: EdgeConfig): void {
  const owners = new Map<string, string>();
  const claim = (secret: string | undefined, path: string): void => {
    if (secret === undefined || secret === '') return;
    const digest = createHash('sha256').update(secret).digest('hex');
    const first = owners.get(digest);
    if (first === undefined) owners.set(digest, path);
    // Two nodes sharing a token are reported where the nodes are read.
    else if (!(first.startsWith('nodes[') && path.startsWith('nodes['))) r.problems.push(`${path}: the same secret as ${first} (value not shown); each role needs its own, or whoever holds one could act as the other`);
  };
  claim(config.admin?.token, 'admin.token');
  claim(config.bootstrap?.token, 'bootstrap.token');
  config.nodes.forEach((n, i) => claim(n.token, `nodes[${i}].token`));
  const keys = new Map((config.auth?.apiKeys ?? []).flatMap((k) => k.keySha256s.map((digest) => [digest, k.name] as const)));
  for (const [digest, path] of owners) {
    const name = keys.get(digest);
    if (name !== undefined) r.problems.push(`${path}: the same secret as the client API key ${JSON.stringify(name)} (auth.api_keys[].key_sha256; value not shown); each role needs its own, or a client could act as the other`);
  }
}

/** Parses YAML (JSON is YAML too); a syntax error is a ConfigError like any other problem. */
export function parseEdgeConfigText(text: string, source: string): EdgeConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text, YAML_PARSE_OPTIONS);
  } catch (err) {
    throw new ConfigError(source, [yamlSyntaxProblem(err)]);
  }
  return parseEdgeConfig(raw, source);
}

/**
 * One I/O worker per core where there are cores to spare; on hosts with
 * fewer than 4 the single-thread mode measured faster (docs/benchmarks.md):
 * the workers, the main thread and the node agent would share two cores.
 */
export function defaultWorkerCount(cores: number): number {
  return cores < MIN_CORES_FOR_WORKERS ? 0 : Math.min(MAX_WORKERS, cores);
}

export async function loadEdgeConfig(file: string): Promise<EdgeConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, [unreadableFileProblem(file, err)]);
  }
  return parseEdgeConfigText(text, file);
}

/** Below this many characters a node token is short enough to guess: the edge warns (and `edge check-config` says so). */
export const MIN_NODE_TOKEN_CHARS = 16;

/**
 * What a valid config still does unwisely: one line each, never a secret's
 * value. The edge logs them at start; `edge check-config` prints them and
 * still passes the file (refusing would stop an upgraded edge whose config
 * ran before).
 */
export function configAdvice(config: EdgeConfig): string[] {
  const advice: string[] = [];
  config.nodes.forEach((node, i) => {
    if (node.token.length < MIN_NODE_TOKEN_CHARS) {
      advice.push(`nodes[${i}].token (node ${node.id}): ${node.token.length} characters; a token this short can be guessed by anyone who reaches the node listener: use ${MIN_NODE_TOKEN_CHARS} or more (e.g. \`openssl rand -hex 16\`)`);
    }
  });
  return advice;
}
