// The one interface through which the composition root (src/edge) reaches
// the data path, whatever runs it: the main thread itself (LocalPlane,
// workers.count 0) or N I/O worker threads (WorkerPool). As with Envoy's
// Server::Worker, the calls are the same for any worker count, so the edge
// assembly has no per-mode branches. Node lifecycle events, run reports and bus events come back
// through the `onEvent` callback each implementation takes at construction.
import type { EdgeConfig } from '../shared/config-types.js';
import type { NodeCommandResult } from '../shared/node-commands.js';
import type { TlsMaterial } from '../shared/tls-material.js';
import type { PlaneInspection, WorkerEvent } from './io-protocol.js';

export interface DataPathPorts {
  readonly httpPort: number;
  readonly grpcPort: number;
}

/** Receives what the data path reports: node sessions coming and going, and bus events. */
export type DataPathEvents = (event: WorkerEvent) => void;

export interface DataPath {
  /** I/O worker threads running the data path; 0 = the main thread does. */
  readonly workers: number;
  /** Binds the client and node listeners (config ports; 0 = any). */
  start(config: EdgeConfig, logLevel: string): Promise<DataPathPorts>;
  /**
   * Swaps the config snapshot; each thread swaps it in one step. Resolves
   * once every thread has it (with I/O workers, a message later); rejects
   * when one could not take it.
   */
  setConfig(config: EdgeConfig): Promise<void>;
  /**
   * Every listener serves this material to new handshakes (open connections
   * keep theirs). Resolves once every thread has it. A listener that is
   * plaintext ignores its part: TLS on or off takes a restart.
   */
  setCertificates(tls: TlsMaterial): Promise<void>;
  /** Bus-only events are built only while someone subscribes (run reports for the run records always go). */
  setEventsActive(active: boolean): void;
  /** Sends a ConfigRefresh to the node's current connection; false when it has none. */
  notifyNode(nodeId: string, changedPaths: readonly string[], configVersion: number): boolean;
  /**
   * Sends an operator command to the node's current connection and resolves
   * with its answer: never rejects; `not_connected`, `unsupported` (an agent
   * without the capability) and `timeout` (past deadlineMs) are results too.
   */
  nodeCommand(nodeId: string, kind: string, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<NodeCommandResult>;
  /** Cancels an open run wherever its client connection lives; false when no thread holds it open. */
  cancelRun(runId: string): Promise<boolean>;
  /** Retires every stream of the node's current connection as it goes idle; false when it has none. */
  retireNode(nodeId: string, graceMs: number, reason: string): boolean;
  /** The state of every thread's data path (tests, status). */
  inspect(): Promise<readonly PlaneInspection[]>;
  /**
   * Open requests by API key name over every thread, as the admission counts
   * them for auth.api_keys[].max_concurrent (keys with none may be left out),
   * and what a key with a requests_per_minute or tokens_per_minute has left of
   * it now (absent: its bucket is full, or it has no such limit).
   */
  keyLoad(): readonly KeyLoadEntry[];
  /** The rings the scheduler thread owns (none without workers). */
  ringUsage(): PlaneInspection['rings'];
  /**
   * From now on every thread answers new requests 503 shutting_down: one
   * synchronous step (a flag the I/O workers share), so no request is served
   * after the drain is announced while a worker has yet to hear of it.
   */
  beginDrain(): void;
  /** Graceful drain of every listener; resolves with the requests still open at the deadline (then aborted). */
  drain(graceMs: number): Promise<number>;
  /** The data path's metrics as prom-client JSON, one part per thread, for AggregatorRegistry. */
  metricParts(): Promise<unknown[]>;
  close(): Promise<void>;
}

/** One API key's entry in DataPath.keyLoad(). */
export interface KeyLoadEntry {
  readonly name: string;
  readonly inFlight: number;
  /** What its requests_per_minute bucket holds now. */
  readonly requestsLeft?: number;
  /** What its tokens_per_minute bucket holds now (below 0: a debt being paid back). */
  readonly tokensLeft?: number;
}
