// What the admin routes need from the running edge: one narrow interface,
// so the routes are testable without a whole edge and the edge does not
// leak its parts to HTTP handlers.
import type { EventBus } from '../events/event-bus.js';
import type { RefreshRequest, RefreshResult } from '../refresh/refresher.js';
import type { SeriesPoint } from './series.js';
import type { EdgeStatus } from './status.js';
import type { KeysView } from './keys.js';
import type { RunStore } from '../runs/run-store.js';
import type { NodeCommandKind } from '../../shared/node-commands.js';
import type { NodeCommandOutcome } from '../nodes/node-commands.js';

export type NodeDrainOutcome =
  | { readonly ok: true; readonly node: string; readonly draining: boolean; readonly openTunnels: number }
  | { readonly ok: false; readonly code: 'node_not_found' | 'node_not_connected' | 'node_retiring' | 'node_leaving' | 'node_drained_by_command'; readonly message: string };

/** `finished`: it ended before the cancel reached it (the record says how). */
export type RunCancelOutcome = 'cancelled' | 'not_found' | 'finished';

export interface AdminOps {
  refresh(request: RefreshRequest): Promise<RefreshResult>;
  status(): Promise<EdgeStatus>;
  /** Each client API key: its grants, open requests and use since start (GET /admin/keys). */
  keys(): Promise<KeysView>;
  /** Draining belongs to the node's current connection: a reconnect clears it. */
  setNodeDraining(nodeId: string, draining: boolean): NodeDrainOutcome;
  /** Resets a provider's outlier breaker: true if it had state, false if not, undefined for an unknown provider. */
  resetProvider(providerId: string): boolean | undefined;
  /** Cancels an open run (queued or dispatched): its upstream request is aborted or its cli process killed. */
  cancelRun(runId: string): Promise<RunCancelOutcome>;
  /** A command to the node(s) a reference (id or label) names; resolves with every node's answer. */
  nodeCommand(ref: string, kind: NodeCommandKind, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<NodeCommandOutcome>;
  scrapeMetrics(): Promise<string>;
  readonly metricsContentType: string;
  readonly events: EventBus;
  readonly runs: RunStore;
  /** The console's charts: the last 15 minutes, oldest first. */
  seriesPoints(): readonly SeriesPoint[];
  /** The client listener's base URL (http://host:port): the console's try-it box goes through it. */
  readonly url: string;
  /** The edge drains (SIGTERM): its client listener is closed. */
  readonly shuttingDown: boolean;
}
