// What the agent does with the edge's node commands (Command over the
// stream, answered with one CommandResult of the same id):
//   refresh_config   re-read the config file; apply providers' base_url,
//                    connections and api_key at once (new tunnels use them),
//                    and providers added or removed (announced to the edge
//                    on the live connection, when it takes Announce);
//                    anything else needs a restart and is named as such
//   drain / undrain  take no new tunnels (they get ERROR node_leaving, which
//                    the edge retries elsewhere) / take them again; open
//                    tunnels always finish
//   probe            GET its type's probe path (ollama /api/tags, else /v1/models)
//                    on each HTTP provider now, within the command's deadline
//   restart_provider end a cli provider's processes, through the CliHook a
//                    cli runner installs; other provider types: unsupported
// An unknown kind is answered `unsupported`, so a newer edge learns what an
// older agent cannot do instead of waiting for a timeout.
import type { Logger } from 'pino';
import type { AgentConfig, AgentProviderConfig } from './config.js';
import { defaultProbePath, probeProvider } from './health-probes.js';
import type { Upstreams } from './upstreams.js';

export type AgentCommandStatus = 'ok' | 'applied' | 'restart_required' | 'failed' | 'unsupported';

export interface AgentCommandAnswer {
  readonly status: AgentCommandStatus;
  readonly message: string;
  /** Kind-specific details, sent as JSON. */
  readonly result?: unknown;
}

/**
 * The hook a cli-provider runner installs (NodeAgentOptions.cli): ends the
 * provider's running processes, resolving with a line for the operator.
 * Without one every restart_provider is answered unsupported.
 */
export interface CliProviderHook {
  restartProvider(providerId: string): Promise<string>;
}

export interface CommandContext {
  readonly logger: Logger;
  readonly upstreams: Upstreams;
  /** The config the agent runs by now; replaced by an applied refresh. */
  config(): AgentConfig;
  setConfig(config: AgentConfig): void;
  /** Re-reads the config file; undefined when the agent was not started from a file. */
  readonly reload: (() => Promise<AgentConfig>) | undefined;
  setDraining(draining: boolean): void;
  openTunnels(): number;
  readonly cli: CliProviderHook | undefined;
  /** Whether the edge can be told of providers added or removed without a reconnect (an edge that predates Announce cannot). */
  canAnnounce(): boolean;
  /** Tells the edge the providers `upstreams` holds now (at once when registered; else its next Register does). */
  announce(): void;
}

/** Probe budget per provider when the command's deadline allows it. */
const PROBE_TIMEOUT_MS = 3_000;

export async function runAgentCommand(ctx: CommandContext, kind: string, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<AgentCommandAnswer> {
  switch (kind) {
    case 'refresh_config':
      return serialRefresh(ctx);
    case 'drain':
      ctx.setDraining(true);
      return { status: 'ok', message: `draining: no new tunnels; ${ctx.openTunnels()} open tunnel(s) finish` };
    case 'undrain':
      ctx.setDraining(false);
      return { status: 'ok', message: 'taking new tunnels again' };
    case 'probe':
      return probe(ctx, Math.max(100, Math.min(PROBE_TIMEOUT_MS, deadlineMs - 250)));
    case 'restart_provider':
      return restartProvider(ctx, args.provider);
    default:
      return { status: 'unsupported', message: `this agent does not know the command ${JSON.stringify(kind)}` };
  }
}

/** The refresh each agent runs now: the next one waits for it. */
const refreshes = new WeakMap<CommandContext, Promise<unknown>>();

/**
 * One refresh at a time: two that overlapped could finish their file reads
 * out of order and leave the agent on the older file, though the operator
 * asked last for the newer one.
 */
function serialRefresh(ctx: CommandContext): Promise<AgentCommandAnswer> {
  const run = (refreshes.get(ctx) ?? Promise.resolve()).then(() => refreshConfig(ctx));
  refreshes.set(ctx, run.catch(() => undefined));
  return run;
}

async function refreshConfig(ctx: CommandContext): Promise<AgentCommandAnswer> {
  if (ctx.reload === undefined) return { status: 'failed', message: 'the agent was not started from a config file; nothing to re-read' };
  let next: AgentConfig;
  try {
    next = await ctx.reload();
  } catch (err) {
    return { status: 'failed', message: (err as Error).message };
  }
  const current = ctx.config();
  const before = new Map(current.providers.map((p) => [p.id, p]));
  const nextIds = new Set(next.providers.map((p) => p.id));
  const added = next.providers.filter((p) => !before.has(p.id));
  const removed = current.providers.filter((p) => !nextIds.has(p.id));
  // Added and removed providers are announced on the live connection; an edge that predates Announce hears of them at the next Register.
  const announces = (added.length > 0 || removed.length > 0) && ctx.canAnnounce();
  const restart = restartPaths(current, next, announces);
  const applied: string[] = [];
  const kept: AgentProviderConfig[] = [];
  for (const provider of next.providers) {
    const old = before.get(provider.id);
    if (old === undefined || old.type !== provider.type) continue; // added (below), or retyped: restart
    // Only these take effect now; the provider's other settings stay as they run (restartPaths names them).
    const live: AgentProviderConfig = { ...old, baseUrl: provider.baseUrl, connections: provider.connections, apiKey: provider.apiKey };
    kept.push(live);
    const changed = LIVE_PROVIDER_KEYS.filter((key) => old[key] !== provider[key]);
    if (changed.length === 0) continue;
    ctx.upstreams.replace(live);
    for (const key of changed) applied.push(`providers[${provider.id}].${snake(key)}`);
  }
  // What runs now: the old config with the provider changes applied; the rest waits for a restart.
  let providers = current.providers.map((p) => kept.find((k) => k.id === p.id) ?? p);
  if (announces) {
    // Withdrawn first: a removed provider still serves what the edge granted it before it heard (Upstreams.withdraw).
    for (const provider of removed) {
      ctx.upstreams.withdraw(provider.id);
      applied.push(`providers[${provider.id}] (removed)`);
    }
    for (const provider of added) {
      ctx.upstreams.add(provider);
      applied.push(`providers[${provider.id}] (added)`);
    }
    providers = [...providers.filter((p) => nextIds.has(p.id)), ...added];
  }
  // A new node.token is sent at the next registration: the edge retires a connection whose token it changed, and the agent comes back with it.
  const tokenChanged = next.node.id === current.node.id && next.node.token !== current.node.token;
  if (tokenChanged) applied.push('node.token (sent at the next registration)');
  ctx.setConfig({ ...current, node: tokenChanged ? { ...current.node, token: next.node.token } : current.node, providers });
  if (announces) ctx.announce();
  ctx.logger.info({ applied, restartRequired: restart }, 'config re-read');
  const result = { applied, restart_required: restart };
  if (restart.length > 0) return { status: 'restart_required', message: `applied: ${applied.join(', ') || 'nothing'}; needs an agent restart: ${restart.join(', ')}`, result };
  return { status: 'applied', message: applied.length === 0 ? 'no change' : `applied: ${applied.join(', ')}`, result };
}

/** Provider settings refresh_config applies to a running agent (a new upstream pool). */
const LIVE_PROVIDER_KEYS = ['baseUrl', 'connections', 'apiKey'] as const;

/** Changed config paths the running agent cannot take without reconnecting or restarting (`announces`: providers added or removed are taken). */
function restartPaths(current: AgentConfig, next: AgentConfig, announces: boolean): string[] {
  const paths: string[] = [];
  const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
  if (!same(current.edge, next.edge)) paths.push('edge');
  if (current.node.id !== next.node.id) paths.push('node.id');
  if (!same(current.reconnect, next.reconnect)) paths.push('reconnect');
  if (!same(current.tunnels, next.tunnels)) paths.push('tunnels');
  if (current.logLevel !== next.logLevel) paths.push('log_level');
  if (!same(current.runtime, next.runtime)) paths.push('runtime.node_flags');
  // The probes' timer and thresholds are set when the agent starts (HealthProbes.start).
  if (!same(current.health, next.health)) paths.push('health');
  const nextById = new Map(next.providers.map((p) => [p.id, p]));
  for (const p of current.providers) {
    const n = nextById.get(p.id);
    if (n === undefined) {
      if (!announces) paths.push(`providers[${p.id}] (removed)`);
    }
    else if (n.type !== p.type) paths.push(`providers[${p.id}].type`);
    else {
      // Everything else of a provider (a cli command, its env allow-list, endpoints, health checks) waits for a restart.
      const old = p as unknown as Record<string, unknown>;
      const fresh = n as unknown as Record<string, unknown>;
      for (const key of new Set([...Object.keys(old), ...Object.keys(fresh)])) {
        if (!(LIVE_PROVIDER_KEYS as readonly string[]).includes(key) && !same(old[key], fresh[key])) paths.push(`providers[${p.id}].${snake(key)}`);
      }
    }
  }
  if (!announces) for (const p of next.providers) if (!current.providers.some((c) => c.id === p.id)) paths.push(`providers[${p.id}] (added)`);
  return paths;
}

interface ProviderHealth {
  readonly healthy: boolean | null;
  readonly status?: number;
  readonly latencyMs?: number;
  readonly error?: string;
}

async function probe(ctx: CommandContext, timeoutMs: number): Promise<AgentCommandAnswer> {
  const config = ctx.config();
  const entries = await Promise.all(config.providers.map(async (p): Promise<[string, ProviderHealth]> => [p.id, await probeOne(p, timeoutMs)]));
  const providers = Object.fromEntries(entries);
  const down = entries.filter(([, h]) => h.healthy === false).map(([id, h]) => `${id} (${h.error ?? `HTTP ${h.status}`})`);
  if (down.length > 0) return { status: 'failed', message: `unhealthy: ${down.join(', ')}`, result: { providers } };
  return { status: 'ok', message: `${entries.length} provider(s) checked`, result: { providers } };
}

async function probeOne(provider: AgentProviderConfig, timeoutMs: number): Promise<ProviderHealth> {
  if (provider.baseUrl === undefined) return { healthy: null, error: 'cli provider: no HTTP endpoint to probe' };
  // The path the health probes use: a provider checked elsewhere (health_path) is judged the same way here.
  const path = provider.healthPath ?? defaultProbePath(provider.type);
  if (path === undefined || path === '') return { healthy: null, error: 'not probed (health_path is empty)' };
  const { status, redirect, timedOut, error, latencyMs } = await probeProvider(provider.baseUrl, path, provider.apiKey, timeoutMs);
  if (status === undefined) return { healthy: false, latencyMs, error: timedOut === true ? `no answer within ${timeoutMs} ms` : error };
  if (redirect !== undefined) return { healthy: false, status, latencyMs, error: `HTTP ${status}, a redirect to ${redirect}: the probe path must answer itself` };
  return { healthy: status >= 200 && status < 300, status, latencyMs };
}

async function restartProvider(ctx: CommandContext, providerId: string | undefined): Promise<AgentCommandAnswer> {
  const providers = ctx.config().providers;
  const targets = providerId === undefined ? providers.filter((p) => p.type === 'cli') : providers.filter((p) => p.id === providerId);
  if (providerId !== undefined && targets.length === 0) return { status: 'failed', message: `no provider ${JSON.stringify(providerId)} on this node` };
  if (targets.length === 0) return { status: 'unsupported', message: 'unsupported: this node has no cli providers' };
  const notCli = targets.find((p) => p.type !== 'cli');
  if (notCli !== undefined) return { status: 'unsupported', message: `unsupported for this provider type (${notCli.id} is ${notCli.type}; only cli providers run processes)` };
  const cli = ctx.cli;
  if (cli === undefined) return { status: 'unsupported', message: 'unsupported: this agent has no cli provider runner' };
  try {
    const lines = await Promise.all(targets.map((p) => cli.restartProvider(p.id)));
    return { status: 'ok', message: lines.join('; ') };
  } catch (err) {
    return { status: 'failed', message: (err as Error).message };
  }
}

function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}
