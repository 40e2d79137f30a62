// The body of GET /admin/status: the scheduler's view (nodes, providers,
// groups) joined with the live sessions (agent version, address, connected
// since) and the event bus's subscribers. Built on request, never on the
// data path.
import type { EdgeConfig, ProviderType } from '../../shared/config-types.js';
import { VERSION } from '../../shared/version.js';
import { runningNodeFlags } from '../../shared/node-flags.js';
import type { EventBus } from '../events/event-bus.js';
import type { FairGroupStatus, OutlierView, ProviderStatus, SchedulerStatus } from '../../contract/scheduler.js';
import { tenantKeyOf, tenantLabel } from '../../shared/tenant-key.js';

export type ProviderHealth = 'ok' | 'offline' | 'not_announced' | 'disabled' | 'draining' | 'ejected' | 'half_open' | 'unhealthy' | 'overloaded';

export interface EdgeStatus {
  readonly edge: {
    readonly version: string;
    readonly pid: number;
    /** The Node flags this process runs with (runtime.node_flags, or the operator's own). */
    readonly nodeFlags: readonly string[];
    readonly startedAt: string;
    readonly uptimeSeconds: number;
    readonly configVersion: number;
    readonly shuttingDown: boolean;
    readonly openRequests: number;
  };
  readonly nodes: readonly {
    readonly id: string;
    readonly connected: boolean;
    readonly generation: number;
    readonly connectedSince: string | null;
    readonly agentVersion: string | null;
    readonly address: string | null;
    readonly draining: boolean;
    readonly openTunnels: number;
    readonly configured: boolean;
    /** config nodes[].labels; operators may name the node by any of them. */
    readonly labels: readonly string[];
    /** gRPC streams the node's connection holds (lanes); 0 when not connected. */
    readonly lanes: number;
    /** Since the last message from the node on any lane (heartbeats included); null when not connected. */
    readonly heartbeatAgeMs: number | null;
  }[];
  readonly providers: readonly {
    readonly id: string;
    readonly node: string;
    readonly capacity: number;
    readonly inFlight: number;
    readonly queued: number;
    readonly loadRatio: number;
    readonly health: ProviderHealth;
    readonly servedModels: readonly string[];
    /** Outlier state, when the provider is ejected, half-open, or has failures counted. */
    readonly outlier?: { readonly phase: string; readonly until: string | null; readonly reason: string; readonly ejections: number; readonly consecutiveFailures: number };
    /** Overload backoff, while a 429/503 keeps its concurrency below capacity: the limit, and the Retry-After hold's end (null: none). */
    readonly overload?: { readonly limit: number; readonly heldUntil: string | null; readonly overloads: number };
    /** The API the provider speaks (its configured type); null once gone from the config. */
    readonly type: ProviderType | null;
    /** The APIs it serves (announced by its node, else configured). */
    readonly endpoints: readonly string[];
  }[];
  readonly groups: readonly {
    readonly model: string;
    readonly queueDepth: number;
    readonly maxQueue: number;
    readonly queueTimeoutMs: number;
    readonly oldestWaitMs: number;
    readonly rejectsPerMinute: number;
    readonly policy: 'fifo' | 'fair';
    /** Fair queuing only: queue depth per band and tenant, and each tenant's share of dispatches. */
    readonly fairness?: GroupFairnessView;
  }[];
  readonly workers: { readonly count: number; readonly rings: readonly { readonly name: string; readonly used: number; readonly capacity: number }[] };
  readonly events: {
    readonly published: number;
    readonly dropped: number;
    readonly subscribers: readonly { readonly id: number; readonly since: string; readonly buffered: number; readonly capacity: number; readonly delivered: number; readonly dropped: number; readonly runs: boolean }[];
  };
}

/** A node session as status shows it (a NodeSession, or a worker's report of one). */
export interface SessionView {
  readonly generation: number;
  readonly connectedAtMs: number;
  readonly agentVersion: string;
  readonly remoteAddress: string;
  readonly openTunnels: number;
}

export interface StatusSource {
  readonly config: EdgeConfig;
  readonly configVersion: number;
  readonly startedAt: number;
  readonly shuttingDown: boolean;
  readonly events: EventBus;
  scheduler(): SchedulerStatus;
  session(nodeId: string): SessionView | undefined;
}

function lanesOf(live: { generation: number; lanes: number; lastSeenMs: number } | undefined, generation: number, now: number): { lanes: number; heartbeatAgeMs: number | null } {
  if (live === undefined || live.generation !== generation) return { lanes: 0, heartbeatAgeMs: null };
  // Whole milliseconds, as every other *Ms here: lastSeenMs comes from a sub-millisecond clock.
  return { lanes: live.lanes, heartbeatAgeMs: Math.max(0, Math.round(now - live.lastSeenMs)) };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Per node, what its live lanes say: how many there are, and the newest message time (ms since the epoch). */
export type LaneLiveness = ReadonlyMap<string, { readonly generation: number; readonly lanes: number; readonly lastSeenMs: number }>;

/** Lane count and last-heard time per node, from the data path's session list. */
export function livenessOf(sessions: readonly { readonly nodeId: string; readonly generation: number; readonly lastSeenMs: number }[]): LaneLiveness {
  const out = new Map<string, { generation: number; lanes: number; lastSeenMs: number }>();
  for (const s of sessions) {
    const known = out.get(s.nodeId);
    if (known === undefined || s.generation > known.generation) out.set(s.nodeId, { generation: s.generation, lanes: 1, lastSeenMs: s.lastSeenMs });
    else if (s.generation === known.generation) {
      known.lanes++;
      known.lastSeenMs = Math.max(known.lastSeenMs, s.lastSeenMs);
    }
  }
  return out;
}

export interface StatusExtras {
  readonly liveness?: LaneLiveness;
  rejectsPerMinute?(alias: string, rejectedTotal: number): number;
}

/** Fair queuing of one alias as status shows it: tenants by key name (`#hex` for a fairness id). */
export interface GroupFairnessView {
  readonly bands: readonly { readonly priority: number; readonly queued: number; readonly tenants: readonly { readonly tenant: string; readonly queued: number; readonly weight: number }[] }[];
  readonly tenants: readonly { readonly tenant: string; readonly dispatched: number; readonly share: number }[];
}

/** Configured key names by tenant key. */
export function tenantNamesOf(config: EdgeConfig): Map<number, string> {
  return new Map((config.auth?.apiKeys ?? []).map((k) => [tenantKeyOf(k.name), k.name]));
}

export function fairnessView(group: FairGroupStatus, names: ReadonlyMap<number, string>): GroupFairnessView {
  const total = group.dispatches.reduce((sum, d) => sum + d.dispatched, 0);
  return {
    bands: group.bands
      .filter((b) => b.queued > 0)
      .map((b) => ({ priority: b.priority, queued: b.queued, tenants: b.tenants.filter((t) => t.queued > 0).map((t) => ({ tenant: tenantLabel(t.tenant, names), queued: t.queued, weight: t.weight })) })),
    tenants: group.dispatches.map((d) => ({ tenant: tenantLabel(d.tenant, names), dispatched: d.dispatched, share: total === 0 ? 0 : Math.round((d.dispatched / total) * 1000) / 1000 })),
  };
}

/** `openRequests` and `rings` are gathered by the caller (from the workers when there are some). */
export function buildEdgeStatus(source: StatusSource, openRequests: number, rings: EdgeStatus['workers']['rings'], extras: StatusExtras = {}): EdgeStatus {
  const now = Date.now();
  const s = source.scheduler();
  const configured = new Set(source.config.nodes.map((n) => n.id));
  const labels = new Map(source.config.nodes.map((n) => [n.id, n.labels ?? []]));
  const providerTypes = new Map<string, ProviderType>();
  for (const n of source.config.nodes) for (const p of n.providers) providerTypes.set(p.id, p.type);
  const bus = source.events;
  const fairGroups = new Map((s.fairness?.groups ?? []).map((g) => [g.alias, g]));
  const tenantNames = s.fairness === undefined ? new Map<number, string>() : tenantNamesOf(source.config);
  return {
    edge: {
      version: VERSION,
      pid: process.pid,
      nodeFlags: runningNodeFlags(),
      startedAt: iso(source.startedAt),
      uptimeSeconds: Math.round((Date.now() - source.startedAt) / 1000),
      configVersion: source.configVersion,
      shuttingDown: source.shuttingDown,
      openRequests,
    },
    nodes: s.nodes.map((n) => {
      const session = n.connected ? source.session(n.id) : undefined;
      const live = session !== undefined && session.generation === n.generation;
      return {
        id: n.id,
        connected: n.connected,
        generation: n.generation,
        connectedSince: live && session.connectedAtMs > 0 ? iso(session.connectedAtMs) : null,
        agentVersion: live ? session.agentVersion : null,
        address: live ? session.remoteAddress : null,
        draining: n.draining,
        // A worker's report carries no live count: the scheduler's leases on the node stand in.
        openTunnels: live ? (session.openTunnels > 0 ? session.openTunnels : n.leases) : 0,
        configured: configured.has(n.id),
        labels: labels.get(n.id) ?? [],
        ...lanesOf(extras.liveness?.get(n.id), n.connected ? n.generation : -1, now),
      };
    }),
    providers: s.providers.map((p) => ({
      id: p.id,
      node: p.nodeId,
      capacity: p.capacity,
      inFlight: p.inFlight,
      queued: p.queued,
      loadRatio: Math.round(p.loadRatio * 1000) / 1000,
      health: healthOf(p),
      servedModels: p.servedModels,
      ...(p.outlier === undefined ? {} : { outlier: outlierView(p.outlier) }),
      ...(p.overload === undefined ? {} : { overload: { limit: p.overload.limit, heldUntil: p.overload.heldUntilMs === undefined ? null : wallClock(p.overload.heldUntilMs), overloads: p.overload.overloads } }),
      type: providerTypes.get(p.id) ?? null,
      endpoints: p.endpoints,
    })),
    groups: s.groups.map((g) => {
      const fair = fairGroups.get(g.alias);
      return {
        model: g.alias,
        queueDepth: g.queueDepth,
        maxQueue: g.maxQueue,
        queueTimeoutMs: g.queueTimeoutMs,
        oldestWaitMs: Math.round(g.oldestWaitMs),
        rejectsPerMinute: extras.rejectsPerMinute?.(g.alias, g.rejectedTotal) ?? 0,
        policy: s.fairness === undefined ? 'fifo' : 'fair',
        ...(fair === undefined ? {} : { fairness: fairnessView(fair, tenantNames) }),
      };
    }),
    workers: { count: source.config.workers.count, rings },
    events: {
      published: bus.publishedTotal,
      dropped: bus.droppedTotal,
      subscribers: [...bus.subscribers].map((sub) => ({
        id: sub.id,
        since: iso(sub.startedAt),
        buffered: sub.buffered,
        capacity: sub.capacity,
        delivered: sub.delivered,
        dropped: sub.dropped,
        runs: sub.runs,
      })),
    },
  };
}

/** Worst first: what keeps the provider from new requests, else what limits it. */
function healthOf(p: ProviderStatus): ProviderHealth {
  if (!p.connected) return 'offline';
  if (!p.announced) return 'not_announced';
  if (!p.enabled) return 'disabled';
  if (p.draining) return 'draining';
  if (p.unhealthy === true) return 'unhealthy';
  if (p.outlier !== undefined && p.outlier.phase !== 'healthy') return p.outlier.phase;
  return p.overload !== undefined ? 'overloaded' : 'ok';
}

/** The scheduler's clock is performance.now(); status shows wall-clock time. */
function wallClock(ms: number): string {
  return new Date(Date.now() + (ms - performance.now())).toISOString();
}

function outlierView(o: OutlierView): NonNullable<EdgeStatus['providers'][number]['outlier']> {
  const until = o.untilMs === undefined ? null : wallClock(o.untilMs);
  return { phase: o.phase, until, reason: o.reason, ejections: o.ejections, consecutiveFailures: o.consecutiveFailures };
}
