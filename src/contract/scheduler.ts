// The narrow interface between the scheduler (main thread, pure state
// machine) and everything that drives it (HTTP and gRPC data path, admin).
// Everything crossing it is a small flat record so that, with I/O workers,
// the same calls travel as fixed-size records over SharedArrayBuffer rings.

import type { ApiKind } from '../shared/endpoints.js';

/** Why a lease ended. Every lease ends exactly once, with one of these. */
export type ReleaseReason =
  | 'end' // terminal END frame
  | 'error' // terminal ERROR frame
  | 'client_closed' // client closed or aborted
  | 'send_failed' // the tunnel request could not be written to the node
  | 'body_build_failed' // the rewritten body could not be produced
  | 'timeout' // tunnel deadline passed
  | 'fenced' // its node generation was superseded or disconnected
  | 'shutting_down' // the edge's drain grace ran out with it still open (the client got shutting_down); says nothing about the provider
  | 'stale_generation' // pre-send fence found the node had reconnected
  | 'run_cancelled' // an operator (or an A2A client) cancelled the run
  | 'overloaded' // the provider answered 429/503 and it was relayed to the client (overload backoff, not a failure)
  | 'provider_failed'; // the provider failed it: connect error, upstream reset, or a 5xx other than 503 (counts toward outlier ejection)

/** Why an admission failed. Maps 1:1 onto the gateway's error catalogue. */
export type RejectCode =
  | 'model_not_found' // alias not in the catalog
  | 'node_not_found' // direct dispatch named a node that serves no provider for the alias
  | 'queue_full' // group queue at max_queue
  | 'queue_timeout' // waited queue_timeout with candidates connected but busy
  | 'no_provider_available' // waited queue_timeout and no candidate was ever connected/eligible
  | 'api_not_served' // no provider of the alias serves the request's API (endpoints)
  | 'pinned_provider_gone' // the provider holding the request's state (a stored Response) is not serving
  | 'shed' // fairness on: a sheddable (negative priority) request found the alias saturated; never queued
  | 'displaced' // fairness on: a higher band arrived at a full queue and took this request's place
  | 'context_length_exceeded'; // long-context class, and no provider of the alias declares a context window that covers it

export interface AdmitRequest {
  /** Unique per admission attempt stream, chosen by the data path. */
  readonly requestId: number;
  /** Model alias the client asked for (the group key). */
  readonly alias: string;
  /** Estimated input tokens (see estimateInputTokens); decides the long-context class. */
  readonly estimatedTokens: number;
  /** Direct dispatch: only providers on this node are candidates. */
  readonly directNodeId: string | undefined;
  /** A named session's key, up to 53 bits (0 or absent: none): its requests keep to the node that served it while connected. */
  readonly sessionKey?: number;
  /** The client API the request speaks (src/shared/endpoints.ts); only providers serving it are candidates. Default: chat. */
  readonly api?: ApiKind;
  /** Only this provider may serve it (it holds state the request needs, e.g. previous_response_id). */
  readonly pinnedProviderId?: string | undefined;
  // Fair queuing (docs/scheduling.md); ignored while fairness is off.
  /** Priority band: the API key's, or lower if the client asked (x-edge-priority). Negative = sheddable. Default 0. */
  readonly priority?: number;
  /** The tenant's 32-bit key (API key name or allowed fairness id, hashed); 0 = the anonymous tenant. */
  readonly tenantKey?: number;
  /** The tenant's weight (> 0; default 1): its share of its band grows with it. */
  readonly weight?: number;
}

export interface Grant {
  readonly requestId: number;
  /** Unique per lease; the handle for release(). A re-admission gets a new one. */
  readonly leaseId: number;
  readonly nodeId: string;
  readonly providerId: string;
  /** Served model name the body's `model` must be rewritten to. */
  readonly servedModel: string;
  /** Node connection generation the lease was minted for. */
  readonly generation: number;
  /** Time spent queued before this grant, ms. */
  readonly queuedMs: number;
  /**
   * The node the request's session was on, when this grant moved it (that
   * node gone, draining, or unable to take the request): the state held
   * there (a cli session's directory, a warm cache) did not come along.
   * Undefined otherwise.
   */
  readonly sessionMovedFrom: string | undefined;
  /**
   * I/O workers: what the request's API key had left of its requests_per_minute and tokens_per_minute when
   * it was granted (the scheduler thread holds those buckets); undefined for a key without either, and at
   * workers.count 0 (the data path reads its own).
   */
  readonly keyLevels?: KeyLevels;
}

/** What an API key's buckets hold: requests and tokens (may be below 0: a debt); NaN for a limit that is off. */
export interface KeyLevels {
  readonly requests: number;
  readonly tokens: number;
}

/** Receives the scheduler's decisions, synchronously, from inside its calls. */
export interface SchedulerSink {
  grant(grant: Grant): void;
  /** `retryAfterSec`: whole seconds (0 = none); `retryAfterMs`: the same hint to the millisecond (from the alias's measured drain rate, when known). */
  reject(requestId: number, code: RejectCode, retryAfterSec: number, retryAfterMs?: number): void;
  /**
   * A request put back by `retry` was granted again, and that lease was
   * fenced before it was sent (with I/O workers: granted to a connection
   * whose disconnect was still on its way to the scheduler). It is not
   * queued again: the data path answers with the first failure, as when
   * `retry` returns false.
   */
  retryRefused(requestId: number): void;
}

export interface LeaseInfo {
  readonly leaseId: number;
  readonly requestId: number;
  readonly alias: string;
  readonly nodeId: string;
  readonly providerId: string;
  readonly generation: number;
}

export interface ConnectResult {
  readonly generation: number;
  /** Leases of the superseded generation, released as `fenced`. */
  readonly fenced: readonly LeaseInfo[];
}

export interface ProviderStatus {
  readonly id: string;
  readonly nodeId: string;
  readonly capacity: number;
  readonly inFlight: number;
  /** Requests queued in groups this provider serves. */
  readonly queued: number;
  readonly loadRatio: number;
  readonly connected: boolean;
  /** The node's current connection announced this provider at Register, and its type there agrees with the config (false: no candidate until it does). */
  readonly announced: boolean;
  readonly enabled: boolean;
  readonly draining: boolean;
  readonly servedModels: readonly string[];
  /** The APIs it serves: what its node announced, else its config (or type defaults). */
  readonly endpoints: readonly string[];
  /** Present unless the provider is healthy and has no failures counted (outlier ejection). */
  readonly outlier?: OutlierView;
  /** Present while a 429/503 keeps its concurrency below capacity (overload backoff). */
  readonly overload?: OverloadView;
  /** True while the node's active health probe of it fails (no new requests). */
  readonly unhealthy?: boolean;
}

/**
 * A failure before the first byte that was the node's, not its provider's: `leaving` = the node refused the tunnel as it
 * leaves (node_leaving; its connection drains from then on), `lost` = the node's stream closed under it (node_disconnected:
 * an agent killed or restarted comes back, and a lane that dropped leaves the connection's other lanes serving).
 */
export type NodeFailure = 'leaving' | 'lost';

/** A retry caused by a 429/503: `retryAfterMs` from the provider's Retry-After (undefined: none sent). */
export interface Overloaded {
  readonly retryAfterMs: number | undefined;
}

/** A provider's overload state (src/main/scheduler/overload.ts): the limit below its capacity, and the hold if one runs. */
export interface OverloadView {
  readonly limit: number;
  /** End of the Retry-After hold (ms, the scheduler's clock); undefined when none runs. */
  readonly heldUntilMs: number | undefined;
  /** 429/503 answers since it was last at full capacity. */
  readonly overloads: number;
}

/** A provider's passive outlier state (src/main/scheduler/outliers.ts). */
export interface OutlierView {
  readonly phase: 'healthy' | 'ejected' | 'half_open';
  /** Ejected: when it becomes half-open, on the scheduler's clock (performance.now() ms). */
  readonly untilMs: number | undefined;
  readonly reason: string;
  readonly ejections: number;
  readonly consecutiveFailures: number;
}

export interface GroupStatus {
  readonly alias: string;
  readonly queueDepth: number;
  readonly maxQueue: number;
  readonly queueTimeoutMs: number;
  /** How long the head of the queue has waited (0 when empty). */
  readonly oldestWaitMs: number;
  /** Requests refused by this alias's queue since start (queue full, or expired while waiting). */
  readonly rejectedTotal: number;
}

export interface NodeStatus {
  readonly id: string;
  readonly connected: boolean;
  readonly generation: number;
  readonly connectedSinceMs: number | undefined;
  readonly draining: boolean;
  /** Live leases on the node (its open requests), whichever provider each is on now. */
  readonly leases: number;
}

export interface SchedulerStatus {
  readonly nodes: readonly NodeStatus[];
  readonly providers: readonly ProviderStatus[];
  readonly groups: readonly GroupStatus[];
  readonly liveLeases: number;
  /** Present while fair queuing is on (docs/scheduling.md). */
  readonly fairness?: FairnessStatus;
}

// Fair queuing's view, per alias, band and tenant (src/main/scheduler/fair.ts).
/** A tenant known to a band: waiting, or idle with a debt (virtual time above the band's clock). */
export interface FairTenantStatus {
  /** The tenant's 32-bit key (src/shared/tenant-key.ts). */
  readonly tenant: number;
  readonly queued: number;
  readonly virtualTime: number;
  readonly weight: number;
}
export interface FairBandStatus {
  readonly priority: number;
  readonly queued: number;
  /** Where a tenant back from idle starts. */
  readonly clock: number;
  readonly tenants: readonly FairTenantStatus[];
}
export interface FairGroupStatus {
  readonly alias: string;
  readonly bands: readonly FairBandStatus[];
  /** Grants per tenant since fairness went on for the alias (every band), for each tenant's share. */
  readonly dispatches: readonly { readonly tenant: number; readonly dispatched: number }[];
  /** Changes whenever `dispatches` starts again from 0 (the table filled, or fairness was turned on anew). */
  readonly dispatchPeriod: number;
}
export interface FairnessStatus {
  readonly agingStepPerSec: number;
  readonly groups: readonly FairGroupStatus[];
}

