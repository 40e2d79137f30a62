// The body of GET /admin/status: the scheduler's view (nodes, providers,
// groups) joined with the live sessions (agent version, address, connected
// since) and the event bus's subscribers. Built on request, never on the
// data path.
import type { EdgeConfig } from '../../shared/config-types.js';
import { VERSION } from '../../shared/version.js';
import type { EventBus } from '../events/event-bus.js';
import type { SchedulerStatus } from '../../contract/scheduler.js';

export type ProviderHealth = 'ok' | 'offline' | 'not_announced' | 'disabled' | 'draining';

export interface EdgeStatus {
  readonly edge: {
    readonly version: string;
    readonly pid: number;
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
    /** The APIs it serves (announced by its node, else configured). */
    readonly endpoints: readonly string[];
  }[];
  readonly groups: readonly {
    readonly model: string;
    readonly queueDepth: number;
    readonly maxQueue: number;
    readonly queueTimeoutMs: number;
    readonly policy: 'fifo';
  }[];
  readonly workers: { readonly count: number; readonly rings: readonly { readonly name: string; readonly used: number; readonly capacity: number }[] };
  readonly events: {
    readonly published: number;
    readonly dropped: number;
    readonly subscribers: readonly { readonly id: number; readonly since: string; readonly buffered: number; readonly capacity: number; readonly delivered: number; readonly dropped: number }[];
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

function leasesOn(s: SchedulerStatus, nodeId: string): number {
  let sum = 0;
  for (const p of s.providers) if (p.nodeId === nodeId) sum += p.inFlight;
  return sum;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** `openRequests` and `rings` are gathered by the caller (from the workers when there are some). */
export function buildEdgeStatus(source: StatusSource, openRequests: number, rings: EdgeStatus['workers']['rings']): EdgeStatus {
  const s = source.scheduler();
  const configured = new Set(source.config.nodes.map((n) => n.id));
  const bus = source.events;
  return {
    edge: {
      version: VERSION,
      pid: process.pid,
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
        openTunnels: live ? (session.openTunnels > 0 ? session.openTunnels : leasesOn(s, n.id)) : 0,
        configured: configured.has(n.id),
      };
    }),
    providers: s.providers.map((p) => ({
      id: p.id,
      node: p.nodeId,
      capacity: p.capacity,
      inFlight: p.inFlight,
      queued: p.queued,
      loadRatio: Math.round(p.loadRatio * 1000) / 1000,
      health: !p.connected ? 'offline' : !p.announced ? 'not_announced' : !p.enabled ? 'disabled' : p.draining ? 'draining' : 'ok',
      servedModels: p.servedModels,
      endpoints: p.endpoints,
    })),
    groups: s.groups.map((g) => ({ model: g.alias, queueDepth: g.queueDepth, maxQueue: g.maxQueue, queueTimeoutMs: g.queueTimeoutMs, policy: 'fifo' })),
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
      })),
    },
  };
}
