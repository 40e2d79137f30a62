// The cold-path messages between the main thread and an I/O worker
// (postMessage): start-up data, control requests and their replies, and
// events the worker forwards to the main thread's event bus.
import type { EdgeEvent, RunEvent } from './events.js';
import type { EdgeConfig } from '../shared/config-types.js';
import type { TlsMaterial } from '../shared/tls-material.js';

export interface IoWorkerData {
  readonly index: number;
  readonly count: number;
  readonly config: EdgeConfig;
  /** What the listeners serve: read and checked by the main thread, the latest one for a worker that replaces another. */
  readonly tls: TlsMaterial;
  /** The port to listen on (worker 0 may get 0 = any; the rest get worker 0's). */
  readonly httpPort: number;
  readonly grpcPort: number;
  readonly logLevel: string;
  /** The main thread logs human-readable lines (--pretty): the worker's lines look the same. */
  readonly logPretty: boolean;
  readonly toMain: SharedArrayBuffer;
  readonly fromMain: SharedArrayBuffer;
  /** toPeer[j]: ring this worker -> worker j; undefined at its own index. */
  readonly toPeer: readonly (SharedArrayBuffer | undefined)[];
  readonly fromPeer: readonly (SharedArrayBuffer | undefined)[];
  /** Int32 flags: [EVENTS_FLAG] 1 while the admin event stream has subscribers; [DRAIN_FLAG] 1 once the edge drains, GRACE_OVER once a thread's drain grace ran out. */
  readonly flags: SharedArrayBuffer;
  /**
   * The stored responses the pool has heard of (id, where, expiry in epoch ms), oldest first: a worker
   * that replaces one that exited starts with them, so it knows every response the others know.
   */
  readonly responses?: readonly (readonly [string, StoredResponse, number])[];
  /** The main thread's fairness-id secret (shared/tenant-key.ts): every thread names a fairness id's tenant alike. */
  readonly tenantSecret?: Uint8Array;
  /**
   * The model list's `created` (epoch s), stamped once by the pool: every worker, a replacement too,
   * answers /v1/models alike (each stamping its own start, a client saw it change from call to call).
   */
  readonly modelsCreated: number;
}

/** Indexes into the shared Int32 flags (`flags`). */
export const EVENTS_FLAG = 0;
export const DRAIN_FLAG = 1;
/**
 * DRAIN_FLAG's value once any thread's drain grace ran out: the threads get there apart (one busy when the drain
 * began), and a lease the first one releases must not send another's queued request to a provider just to cut it.
 */
export const GRACE_OVER = 2;
export const FLAG_COUNT = 2;

export type ControlRequest =
  | { readonly id: number; readonly type: 'inspect' }
  | { readonly id: number; readonly type: 'setConfig'; readonly config: EdgeConfig }
  | { readonly id: number; readonly type: 'setCertificates'; readonly tls: TlsMaterial }
  | { readonly id: number; readonly type: 'notifyNode'; readonly nodeId: string; readonly changedPaths: readonly string[]; readonly configVersion: number }
  | { readonly id: number; readonly type: 'retireNode'; readonly nodeId: string; readonly graceMs: number; readonly reason: string; readonly holdAnchor?: boolean }
  | { readonly id: number; readonly type: 'nodeCommand'; readonly nodeId: string; readonly kind: string; readonly args: Readonly<Record<string, string>>; readonly deadlineMs: number }
  | { readonly id: number; readonly type: 'drain'; readonly graceMs: number }
  | { readonly id: number; readonly type: 'cancelRun'; readonly runId: string }
  | { readonly id: number; readonly type: 'metrics' }
  /**
   * Another worker learnt (stored) or dropped (null) which provider holds a Responses API response; `expiresAt`: it used a known one.
   * `call` set: the pool's answer to this worker's AffinityAsk (null: the pool knows none, which drops nothing).
   */
  | { readonly id: number; readonly type: 'affinity'; readonly responseId: string; readonly stored: StoredResponse | null; readonly expiresAt?: number; readonly call?: number }
  | { readonly id: number; readonly type: 'close' }
  /** Answered at once: what the worker posted before the answer has been read by the pool (worker-pool.ts, affinityAsk). */
  | { readonly id: number; readonly type: 'sync' }
  /** Peer `peer` exited and was respawned on fresh rings: tunnels through the old ones are over. */
  | { readonly id: number; readonly type: 'replacePeer'; readonly peer: number; readonly toPeer: SharedArrayBuffer; readonly fromPeer: SharedArrayBuffer }
  /** Tests only, honoured when EDGE_TEST_HOOKS=1: `crash` throws an uncaught exception in the worker. */
  | { readonly id: number; readonly type: 'testHook'; readonly hook: 'crash' }
  /** Test only: the worker's thread is busy for `ms` (a long GC pause, a CPU-bound moment). */
  | { readonly id: number; readonly type: 'testHook'; readonly hook: 'stall'; readonly ms: number };

export type ControlReply =
  | { readonly type: 'ready'; readonly value: { readonly httpPort: number; readonly grpcPort: number } }
  | { readonly type: 'reply'; readonly id: number; readonly value?: unknown; readonly error?: string; /** The error was a StartError (an operator's to fix: printed as its message alone). */ readonly startError?: boolean };

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
  | { readonly type: 'event'; readonly event: EdgeEvent | undefined; readonly session: SessionInfo; readonly gone: boolean }
  /** A batch of run reports, for the main thread's run records (sent whether or not anyone subscribes). An I/O worker never posts it: its reports cross as the run wire (run-wire.ts), which the pool decodes into this. */
  /** `workerExited`: the pool closing the runs an exited worker left open (502 worker_exited), which no worker counted. */
  | { readonly type: 'runs'; readonly events: readonly RunEvent[]; readonly workerExited?: true };

/** How many stored responses a data path (and the pool's copy) remembers, and for how long. */
export const STORED_RESPONSE_ENTRIES = 100_000;
export const STORED_RESPONSE_TTL_MS = 24 * 60 * 60 * 1000;

/** Which provider made a stored Response (the Responses API keeps state there). */
export interface StoredResponse {
  /** The alias it was made under (GET / DELETE carry no model). */
  readonly alias: string;
  readonly providerId: string;
  readonly nodeId: string;
  /** The name of the API key that made it (undefined: auth was off): another key finds no such response. */
  readonly owner: string | undefined;
}

/**
 * A worker learnt (or, null, dropped) where a response is stored; the pool
 * passes it to every other worker so a follow-up on any connection finds it.
 */
export interface AffinityMessage {
  readonly type: 'affinity';
  readonly responseId: string;
  readonly stored: StoredResponse | null;
  /**
   * Set when the worker used a response it knew (a follow-up, GET, DELETE): every copy that still
   * knows it makes it the most recently used (StoredResponses.touch; a copy that forgot it, deleted
   * meanwhile, keeps it forgotten); absent: newly learnt.
   */
  readonly expiresAt?: number;
}

/**
 * A worker about to refuse a request for a response it has not heard of asks the pool's copy: the
 * message of the worker that learnt it may still be on its way here (data-plane.ts askForResponse).
 * The pool answers with an 'affinity' control request carrying the same `call`, once every other
 * worker has answered a 'sync' (what each posted before is read by then).
 */
export interface AffinityAsk {
  readonly type: 'affinityAsk';
  readonly call: number;
  readonly responseId: string;
}

/** What one data path (the main thread's, or one worker's) holds, for tests and status. */
export interface PlaneInspection {
  readonly worker: number;
  readonly openExchanges: number;
  /** Requests that reached this data path since start. */
  readonly requests: number;
  /** Per open tunnel: buffered now, outstanding now, and the high-water marks of both since it opened. */
  readonly tunnelBuffers: { runId: string; buffered: number; outstanding: number; window: number; highWaterBuffered: number; highWaterOutstanding: number }[];
  /** lane: the node's stream index; joined: an extra lane of the connection (false: its anchor stream). */
  readonly sessions: { nodeId: string; generation: number; lane: number; joined: boolean; openTunnels: number; agentVersion: string; remoteAddress: string; connectedAtMs: number; lastSeenMs: number }[];
  readonly protocolStats: Record<string, number>;
  /** Tunnels opened through a node in another worker / by another worker through this one. */
  readonly crossTunnelsOut: number;
  readonly crossTunnelsIn: number;
  /** A2A subscriptions relayed between workers: this worker's to others' tasks, others' to its own. */
  readonly a2aRelayedStreams: { readonly remote: number; readonly served: number };
  readonly rings: { name: string; used: number; capacity: number }[];
  /** The lean HTTP/1.1 connection (src/workers/http/lean-http1.ts): requests it read, connections it handed to node:http, connections it holds now. */
  readonly lean: LeanStats;
}

export interface LeanStats {
  readonly requests: number;
  readonly handedOver: number;
  readonly connections: number;
}

/** A ControlRequest before the pool numbers it. */
export type ControlCall = ControlRequest extends infer R ? (R extends ControlRequest ? Omit<R, 'id'> : never) : never;

/**
 * A2A task traffic between I/O workers, relayed by the pool (worker -> main
 * -> worker `to`): a task lives in the worker that ran it, and a GetTask,
 * CancelTask or SubscribeToTask may arrive on a connection another worker
 * owns. `call` pairs a request with its replies at the asking worker.
 * Values are the SDK's task / stream objects (structured-clone safe).
 */
export interface A2ARelayMessage {
  readonly type: 'a2a';
  readonly to: number;
  readonly from: number;
  readonly call: number;
  readonly op: 'get' | 'cancel' | 'subscribe' | 'unsubscribe' | 'reply' | 'event' | 'end' | 'history' | 'remember';
  readonly taskId?: string;
  /** history / remember: the conversation's key (API key, agent, contextId) on the context's home worker. */
  readonly context?: string;
  /** The asking client's API key name (auth on): a task is only shown to the key that made it. */
  readonly keyName?: string;
  /** The agent whose endpoint was asked: a task is only shown through the agent that made it. */
  readonly agentId?: string;
  readonly historyLength?: number;
  readonly value?: unknown;
  /** A failed get / cancel / subscribe: the SDK error's name and message. */
  readonly error?: { readonly name: string; readonly message: string };
}
