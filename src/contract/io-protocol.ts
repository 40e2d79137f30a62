// The cold-path messages between the main thread and an I/O worker
// (postMessage): start-up data, control requests and their replies, and
// events the worker forwards to the main thread's event bus.
import type { EdgeEvent } from './events.js';
import type { EdgeConfig } from '../shared/config-types.js';

export interface IoWorkerData {
  readonly index: number;
  readonly count: number;
  readonly config: EdgeConfig;
  /** The port to listen on (worker 0 may get 0 = any; the rest get worker 0's). */
  readonly httpPort: number;
  readonly grpcPort: number;
  readonly logLevel: string;
  readonly toMain: SharedArrayBuffer;
  readonly fromMain: SharedArrayBuffer;
  /** toPeer[j]: ring this worker -> worker j; undefined at its own index. */
  readonly toPeer: readonly (SharedArrayBuffer | undefined)[];
  readonly fromPeer: readonly (SharedArrayBuffer | undefined)[];
  /** Int32 flag: 1 while the admin event stream has subscribers. */
  readonly eventsFlag: SharedArrayBuffer;
}

export type ControlRequest =
  | { readonly id: number; readonly type: 'inspect' }
  | { readonly id: number; readonly type: 'setConfig'; readonly config: EdgeConfig }
  | { readonly id: number; readonly type: 'notifyNode'; readonly nodeId: string; readonly changedPaths: readonly string[]; readonly configVersion: number }
  | { readonly id: number; readonly type: 'retireNode'; readonly nodeId: string; readonly graceMs: number; readonly reason: string; readonly holdAnchor?: boolean }
  | { readonly id: number; readonly type: 'drain'; readonly graceMs: number }
  | { readonly id: number; readonly type: 'metrics' }
  | { readonly id: number; readonly type: 'close' };

export type ControlReply =
  | { readonly type: 'ready'; readonly value: { readonly httpPort: number; readonly grpcPort: number } }
  | { readonly type: 'reply'; readonly id: number; readonly value?: unknown; readonly error?: string };

/** A node session as status shows it; sent when a node connects to a worker. */
export interface SessionInfo {
  readonly nodeId: string;
  readonly generation: number;
  readonly agentVersion: string;
  readonly remoteAddress: string;
  readonly connectedAtMs: number;
  readonly worker: number;
}

export type WorkerEvent =
  | { readonly type: 'event'; readonly event: EdgeEvent; readonly session?: undefined; readonly gone?: undefined }
  | { readonly type: 'event'; readonly event: EdgeEvent | undefined; readonly session: SessionInfo; readonly gone: boolean };

/** What one data path (the main thread's, or one worker's) holds, for tests and status. */
export interface PlaneInspection {
  readonly worker: number;
  readonly openExchanges: number;
  /** Requests that reached this data path since start. */
  readonly requests: number;
  /** Per open tunnel: buffered now, outstanding now, and the high-water marks of both since it opened. */
  readonly tunnelBuffers: { runId: string; buffered: number; outstanding: number; window: number; highWaterBuffered: number; highWaterOutstanding: number }[];
  /** lane: the node's stream index; joined: an extra lane of the connection (false: its anchor stream). */
  readonly sessions: { nodeId: string; generation: number; lane: number; joined: boolean; openTunnels: number; agentVersion: string; remoteAddress: string; connectedAtMs: number }[];
  readonly protocolStats: Record<string, number>;
  /** Tunnels opened through a node in another worker / by another worker through this one. */
  readonly crossTunnelsOut: number;
  readonly crossTunnelsIn: number;
  readonly rings: { name: string; used: number; capacity: number }[];
}

/** A ControlRequest before the pool numbers it. */
export type ControlCall = ControlRequest extends infer R ? (R extends ControlRequest ? Omit<R, 'id'> : never) : never;
