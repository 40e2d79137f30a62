// The data path's narrow view of the scheduler. With workers.count 0 the
// SchedulerDriver implements it by direct calls on the same thread; in an
// I/O worker the RemoteScheduler implements it with fixed-size records over
// SharedArrayBuffer rings. So every call here is asynchronous-capable: no
// call returns a scheduler answer, answers come back through the handlers
// (synchronously from the driver, a ring hop later from a worker).
import type { AdmitRequest, Grant, KeyLevels, NodeFailure, Overloaded, RejectCode, ReleaseReason } from './scheduler.js';

/**
 * Why an admission was refused: the scheduler's codes, plus the per-key
 * concurrency and rate limits that the worker pool checks before the
 * scheduler (token_limit_exceeded: over its tokens_per_minute, answered as
 * rate_limit_exceeded with its own message)
 * scheduler when I/O workers share one count per key (never produced by the Scheduler).
 */
export type AdmissionRejectCode = RejectCode | KeyRefusalCode;
/** An API key's own limits refused it (checked before the scheduler). */
export type KeyRefusalCode = 'too_many_concurrent_requests' | 'rate_limit_exceeded' | 'token_limit_exceeded';

/** The refusals of an API key's own limits (with I/O workers their reject records carry its levels, not a Retry-After in ms). */
export function isKeyRefusal(code: AdmissionRejectCode): code is KeyRefusalCode {
  return code === 'too_many_concurrent_requests' || code === 'rate_limit_exceeded' || code === 'token_limit_exceeded';
}

/** An API key's limits (auth.api_keys[].max_concurrent, .requests_per_minute). */
export interface KeyLimit {
  readonly name: string;
  /** Infinity: none. */
  readonly maxConcurrent: number;
  /** 0: none. */
  readonly requestsPerMinute: number;
}

/** Where the scheduler's answers about requests go: the DataPlane. */
export interface DecisionHandler {
  /** `nodeWorker`: the worker thread that holds the node's session; -1 = this thread. */
  onGrant(grant: Grant, nodeWorker: number): void;
  /** `keyLevels`: a key refusal's (I/O workers), what the key has left for its x-ratelimit-* headers. */
  onReject(requestId: number, code: AdmissionRejectCode, retryAfterSec: number, retryAfterMs?: number, keyLevels?: KeyLevels): void;
  /** requeue() found no other candidate: the lease is over and nothing was queued. */
  onRequeueRefused(requestId: number): void;
  /** requeue() queued it again (a grant the requeue made at once may come first). */
  onRequeueAccepted(requestId: number): void;
  /** Answer to reportStale(): true = the scheduler still holds the lease as current
   * (the session vanished where it lived: fail the request); false = re-admitted. */
  onStaleChecked(requestId: number, leaseId: number, current: boolean): void;
  /** Answer to queryQueuePosition(): `position` 1 = next, 0 = not queued (granted or refused meanwhile); `etaMs` undefined = no rate measured yet. */
  onQueuePosition?(requestId: number, position: number, etaMs: number | undefined): void;
}

/** Where the scheduler's answers about node connections go: the NodeGateway. */
export interface NodeRegistrar {
  /** Answer to register(): the new generation, or 0 for a node not in the catalog; `full` (a lane's join, generation 0): its connection already has MAX_NODE_STREAMS streams. */
  onConnected(serial: number, nodeId: string, generation: number, full?: boolean): void;
  /** A newer connection of the node (maybe on another worker) superseded `generation`. */
  onFence(nodeId: string, generation: number): void;
}

export interface SchedulerPort {
  setHandler(handler: DecisionHandler): void;
  setRegistrar(registrar: NodeRegistrar): void;
  /**
   * True when admit() counts the key's open requests on the scheduler's
   * thread (I/O workers: one count per key across all of them); the slot is
   * freed by releaseKey(). False (workers.count 0): ClientAuth counts on the
   * data path's own thread and the port never sees keys.
   */
  readonly countsKeys: boolean;
  /** With countsKeys, a key at its limit is answered onReject('too_many_concurrent_requests'), one over its rate (of requests or tokens) onReject('rate_limit_exceeded'). */
  admit(request: AdmitRequest, limitedKey?: KeyLimit): void;
  /**
   * countsKeys only: the exchange admitted with a key is over (exactly once; a no-op when refused for the key).
   * `limited`: the key has a max_concurrent or a tokens_per_minute now, so its freed slot and its tokens must be seen
   * at once (else they may ride the turn's batch). `usedTokens`: what the request cost its token rate (the provider's
   * report; -1 = it reached one that reported nothing, so its reservation stands; 0 = it reached none).
   */
  releaseKey(requestId: number, limited: boolean, usedTokens: number): void;
  cancel(requestId: number): void;
  /**
   * `usedTokens`: what the response reported (0 = unknown); corrects the fair-queuing charge.
   * `retryAfterMs`: with reason 'overloaded', the provider's Retry-After (undefined: none).
   */
  release(leaseId: number, reason: ReleaseReason, usedTokens?: number, retryAfterMs?: number): void;
  /**
   * What was sent so far reaches the scheduler now, not with this turn's
   * batch (a no-op where the scheduler runs on this thread). For a release
   * the client's next request must not race: an alias with max_queue 0.
   */
  publish(): void;
  /**
   * Failed before the first byte: re-queue once elsewhere; onRequeueRefused when not possible.
   * `overloaded`: the provider answered 429/503 instead; the request keeps its place and may go back to it after its Retry-After.
   * `node`: the failure was its node's, not the provider's (NodeFailure): the request waits as a new arrival would, for
   * any provider including that one once its node is back, rather than failing when no other is up right now.
   */
  requeue(leaseId: number, request: AdmitRequest, excludeProviderId: string, providerFailed?: boolean, overloaded?: Overloaded, node?: NodeFailure): void;
  /**
   * Pre-send fence, called where the node's session lives once its generation
   * matched the grant's. False (driver only) when the lease turned out stale
   * and the request was re-admitted: do not send.
   */
  confirmSent(leaseId: number): boolean;
  /** The node's session was gone or of another generation: onStaleChecked follows. */
  reportStale(requestId: number, leaseId: number): void;
  /** A session authenticated as `nodeId`; `serial` names it in onConnected. `providerIds`: what it announced (the others are no candidates for it); `endpoints`: provider id -> API mask it announced (src/shared/endpoints.ts); `draining`: it registered drained by an operator's command, so the connect that pumps the queues already sends it nothing; `unhealthy`: providers whose probe failed as it registered (no grant until a heartbeat says they pass). */
  register(nodeId: string, serial: number, providerIds: readonly string[], endpoints?: ReadonlyMap<string, number>, draining?: boolean, unhealthy?: ReadonlySet<string>): void;
  disconnect(nodeId: string, generation: number): void;
  /** Another stream (lane) of a connected node asks to join `generation`; onConnected answers it (0: not the current one, or `full`). */
  joinLane(nodeId: string, serial: number, generation: number): void;
  /** A lane of (node, generation) ended; the connection lives on while lane 0 does. */
  leaveLane(nodeId: string, generation: number): void;
  /** `generation`: the connection that asked (its Leaving); 0 = whichever is current (an operator's drain). */
  setDraining(nodeId: string, draining: boolean, generation?: number): void;
  /** Where the request waits in its alias's queue (x-edge-queue-updates): onQueuePosition answers. */
  queryQueuePosition?(requestId: number): void;
  /**
   * The connection `generation` (0: the current one) of the node no longer offers `providerId`, or offers it again
   * with the endpoint mask it announced (undefined: none announced, the config's apply): a config refresh made the
   * provider's type disagree with what the node announced, or agree again.
   */
  setAnnounced(nodeId: string, providerId: string, announced: boolean, endpoints: number | undefined, generation?: number): void;
  /** The node's active health probe of `providerId` changed verdict (an unhealthy provider gets no new requests). */
  /** `generation`: the connection whose heartbeat carried the verdict; 0 = whichever is current. */
  setProviderHealth(nodeId: string, providerId: string, healthy: boolean, generation?: number): void;
}

/** Request ids are seq * ID_STRIDE + worker index, so the scheduler's answers route back by `id % ID_STRIDE`. */
export const ID_STRIDE = 64;
export const MAX_WORKERS = ID_STRIDE;
