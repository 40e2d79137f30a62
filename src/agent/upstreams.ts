// The node's providers as the tunnel executor needs them: one keep-alive
// connection pool per HTTP provider, the base URL's path prefix, and the bound
// credential. Pools outlive edge connections: a reconnect to the edge has no
// reason to drop warm sockets to the providers.
import type { ProviderType } from '../shared/config-types.js';
import type { AgentProviderConfig } from './config.js';
import { UpstreamPool } from './upstream-pool.js';
import type { CliProvider } from './cli-run.js';
import { CliSessions } from './cli-sessions.js';
import { GroupReaper, type ReaperWarn } from './group-reaper.js';
import { defaultEndpoints } from '../shared/endpoints.js';

export interface Upstream {
  readonly id: string;
  readonly type: ProviderType;
  /** undefined for `cli` providers, which have no HTTP upstream. */
  readonly pool: UpstreamPool | undefined;
  /** The base URL's path without its trailing slashes; prefixed to every tunnel path. */
  readonly pathPrefix: string;
  /** `Bearer <api_key>`, or undefined when the provider has no key. */
  readonly authorization: string | undefined;
  /** A `cli` provider's command and its sessions (shared by every edge connection); undefined for HTTP types. */
  readonly cli?: CliProvider;
  readonly endpoints: readonly string[];
}

/**
 * How long a withdrawn provider still serves tunnels: the edge may have
 * granted requests to it before the Announce that withdrew it arrived.
 */
export const WITHDRAW_GRACE_MS = 10_000;

export class Upstreams {
  readonly #byId = new Map<string, Upstream>();
  /** Providers a config refresh removed: still served (get) until their grace ends, never announced (ids). */
  readonly #withdrawn = new Map<string, { readonly upstream: Upstream; readonly timer: NodeJS.Timeout }>();
  /** Pools replaced by a config refresh: tunnels started on them finish there; destroyed with the rest. */
  readonly #retired: UpstreamPool[] = [];
  /** One for every cli provider of this agent; its /bin/sh starts with the first run. */
  readonly #reaper: GroupReaper;
  readonly #warn: ReaperWarn;

  /** `warn`: where the reaper's and the session sweeps' troubles go (the agent's logger); unit tests that spawn nothing leave it out. */
  constructor(providers: readonly AgentProviderConfig[], warn: ReaperWarn = noWarn) {
    this.#reaper = new GroupReaper(warn);
    this.#warn = warn;
    for (const provider of providers) this.#byId.set(provider.id, upstreamOf(provider, this.#reaper, warn));
  }

  /** Goes up with each provider added or withdrawn: a Register written before a change announced the old set. */
  version = 0;

  get(providerId: string): Upstream | undefined {
    return this.#byId.get(providerId) ?? this.#withdrawn.get(providerId)?.upstream;
  }

  /** A provider a config refresh added (or put back within its withdrawal's grace: the withdrawn one is retired now). */
  add(provider: AgentProviderConfig): void {
    this.#end(provider.id);
    this.#byId.set(provider.id, upstreamOf(provider, this.#reaper, this.#warn));
    this.version++;
  }

  /**
   * A provider a config refresh removed: no longer announced, and after
   * `graceMs` no longer served; its pool then closes each connection once
   * no request needs it, as a replaced one does. Running tunnels finish.
   */
  withdraw(providerId: string, graceMs = WITHDRAW_GRACE_MS): void {
    const upstream = this.#byId.get(providerId);
    if (upstream === undefined) return;
    this.#byId.delete(providerId);
    const timer = setTimeout(() => this.#end(providerId), graceMs);
    timer.unref();
    this.#withdrawn.set(providerId, { upstream, timer });
    this.version++;
  }

  /** A withdrawn provider's grace is over (or it came back): its pool retires, its sessions' sweep stops. */
  #end(providerId: string): void {
    const withdrawn = this.#withdrawn.get(providerId);
    if (withdrawn === undefined) return;
    this.#withdrawn.delete(providerId);
    clearTimeout(withdrawn.timer);
    withdrawn.upstream.cli?.sessions.close();
    this.#retire(withdrawn.upstream.pool);
  }

  #retire(pool: UpstreamPool | undefined): void {
    for (let i = this.#retired.length - 1; i >= 0; i--) if (this.#retired[i].retired) this.#retired.splice(i, 1);
    if (pool === undefined) return;
    pool.retire();
    if (!pool.retired) this.#retired.push(pool);
  }

  /** Provider id -> the APIs it serves, for Register. */
  endpoints(): Map<string, readonly string[]> {
    return new Map([...this.#byId.values()].map((u) => [u.id, u.endpoints]));
  }

  /** Provider id -> its type, for Register (the edge checks a cli provider is cli on both sides). */
  types(): Map<string, string> {
    return new Map([...this.#byId.values()].map((u) => [u.id, u.type]));
  }

  ids(): string[] {
    return [...this.#byId.keys()];
  }

  /**
   * Swaps a provider's upstream for one built from `provider` (new base URL,
   * pool size or key): tunnels from now on use it; running ones keep the old
   * pool, which closes each of its connections once no request needs it
   * (those still open close when the agent stops).
   */
  replace(provider: AgentProviderConfig): void {
    this.#retire(this.#byId.get(provider.id)?.pool);
    this.#byId.set(provider.id, upstreamOf(provider, this.#reaper, this.#warn));
  }

  /** Replaced pools with a connection still open (a request still running on it). */
  get retiring(): number {
    let open = 0;
    for (const pool of this.#retired) if (!pool.retired) open++;
    return open;
  }

  /** Destroys every pool; in-flight requests fail. Call once tunnels are finished or aborted. */
  async destroy(): Promise<void> {
    for (const id of [...this.#withdrawn.keys()]) this.#end(id);
    this.#reaper.close();
    for (const upstream of this.#byId.values()) upstream.cli?.sessions.close();
    const closing: Promise<void>[] = [];
    for (const upstream of this.#byId.values()) if (upstream.pool !== undefined) closing.push(upstream.pool.destroy());
    for (const pool of this.#retired) closing.push(pool.destroy());
    await Promise.all(closing);
  }
}

function upstreamOf(provider: AgentProviderConfig, reaper: GroupReaper, warn: ReaperWarn): Upstream {
  if (provider.type === 'cli' || provider.baseUrl === undefined) {
    const onSweepError = (name: string, err: Error): void => warn('could not remove an idle session directory; the sweep goes on', { provider: provider.id, session: name, err: err.message });
    const cli = provider.cli === undefined ? undefined : { config: provider.cli, sessions: new CliSessions(provider.cli.cwdRoot, provider.cli.sessionTtlMs, onSweepError), reaper };
    return { id: provider.id, type: provider.type, pool: undefined, pathPrefix: '', authorization: undefined, endpoints: provider.endpoints ?? defaultEndpoints(provider.type), cli };
  }
  const url = new URL(provider.baseUrl);
  return {
    id: provider.id,
    type: provider.type,
    pool: new UpstreamPool(url.origin, provider.connections),
    // Every trailing slash: a base_url ending in // would otherwise send //v1/… (a 404 at most providers).
    pathPrefix: url.pathname.replace(/\/+$/, ''),
    authorization: provider.apiKey === undefined ? undefined : `Bearer ${provider.apiKey}`,
    endpoints: provider.endpoints ?? defaultEndpoints(provider.type),
  };
}

function noWarn(): void {}
