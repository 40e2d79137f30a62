// The scheduler's mutable records. They outlive config swaps: a provider's
// in-flight count and a node's connection survive setConfig, only their
// configured fields are rewritten.
import type { LeaseInfo } from '../../contract/scheduler.js';
import { WaitQueue } from './wait-queue.js';
import type { FairQueue } from './fair.js';
import { DrainMeter } from './drain-meter.js';
import { ENDPOINTS, type ApiKind } from '../../shared/endpoints.js';

/** A request waiting in its group's queue. Owned by exactly one WaitQueue. */
export class QueueItem {
  prev: QueueItem | null = null;
  next: QueueItem | null = null;
  /** Position in the DeadlineHeap; -1 when not in it. */
  heapIndex = -1;

  constructor(
    readonly requestId: number,
    readonly group: GroupState,
    /** Admission order across the whole scheduler; a re-admission keeps its original. */
    readonly seq: number,
    readonly estimatedTokens: number,
    readonly directNodeId: string | undefined,
    readonly enqueuedAt: number,
    readonly deadline: number,
    /** 0 for a first admission, 1 for the one re-admission after a stale fence or a retry. */
    readonly attempt: number,
    /** A retry never goes back to the provider that just failed it, on the connection that failed it (see excludeNodeId). */
    public excludeProviderId: string | undefined = undefined,
    readonly api: ApiKind = 0,
    readonly pinnedProviderId: string | undefined = undefined,
  ) {}

  /** The request's session key (0 = none): while its node is connected it only takes candidates there. */
  sessionKey = 0;
  /** A retry's excluded provider's node: its next connection lifts the exclusion (it is not the connection that failed). */
  excludeNodeId: string | undefined = undefined;
  // Fair queuing (fair.ts): kept while fairness is off too, so turning it on orders what already waits.
  /** Priority band (already lowered by the client if it asked). */
  priority = 0;
  /** Tenant: the API key's or the allowed fairness id's 32-bit key (0 = the anonymous tenant). */
  tenantKey = 0;
  weight = 1;
  /** A retry or re-admission: its tenant was charged at its first dispatch, and is not again. */
  charged = false;
  /** Links in its tenant's FIFO. */
  tPrev: QueueItem | null = null;
  tNext: QueueItem | null = null;
}

/** A configured node and its current connection, if any. */
export class NodeState {
  inCatalog = false;
  connected = false;
  /** Generation of the current (or last) connection; 0 = never connected. */
  generation = 0;
  connectedSinceMs: number | undefined = undefined;
  /** Per connection: a node that said Leaving takes no new grants. */
  draining = false;
  /** Per connection: the provider ids the node announced at Register; undefined = every configured one (the caller did not say). */
  announced: ReadonlySet<string> | undefined = undefined;
  /** Per connection: provider id -> endpoint mask the node announced; a provider absent here keeps its configured mask. */
  announcedEndpoints: ReadonlyMap<string, number> | undefined = undefined;
  /** Live leases minted on this node, so fencing is O(its leases). */
  readonly leases = new Set<Lease>();

  constructor(readonly id: string) {}
}

/** A provider: one capacity budget shared by every alias it serves. */
export class ProviderState {
  inCatalog = false;
  capacity = 0;
  maxContextTokens: number | undefined = undefined;
  enabled = false;
  /** APIs it serves by config (bit mask of src/shared/endpoints.ts); a node's announcement overrides it. */
  endpoints = 0;
  /** Always equals the number of live leases on this provider on its current node (its slot). */
  inFlight = 0;
  /**
   * Live leases on this provider id on nodes a refresh moved it away from: they hold those nodes'
   * processes, not this slot, so they take none of its capacity; they end or are fenced there.
   */
  elsewhere = 0;
  /** Distinct served model names, for status. */
  servedModels: readonly string[] = [];
  /** A cli provider: each session's directory lives in its own cwd_root, so a session's turns keep to it (scheduler #affinityProviderOf). */
  holdsSessions = false;
  /**
   * Set when config lowered capacity below inFlight (or removed the
   * provider): the excess leases were granted under the old budget and may
   * finish; no new grant is made until inFlight is below capacity again.
   */
  excessAllowed = false;
  /** Ejected as an outlier, or half-open with its probe in flight (outliers.ts): no new grants. */
  held = false;
  /**
   * Ejected (not half-open): still a candidate for the requests no other
   * provider of the alias could serve (an API or a window only it has), so
   * those are served instead of timing out (candidates.ts `pickSole`).
   */
  ejected = false;
  /** AIMD limit after a 429/503 (overload.ts): at most this many in flight while below capacity; Infinity = none. */
  overloadLimit = Infinity;
  /** Inside the provider's Retry-After (overload.ts): no new grants, yet still a candidate (requests queue for it). */
  overloadHeld = false;
  /** The node's active health probe fails (the agent's heartbeat says so): no new grants until it passes. */
  unhealthy = false;

  constructor(
    readonly id: string,
    public node: NodeState,
  ) {}
}

/** One provider of a model group, with the name it serves the alias under. */
export interface GroupEntry {
  readonly provider: ProviderState;
  readonly servedModel: string;
}

/** A model group (alias): its policy, its providers and its FIFO. */
export class GroupState {
  inCatalog = false;
  maxQueue = 0;
  queueTimeoutMs = 0;
  /** Sorted by provider id, then node id: the tie-break order. */
  entries: readonly GroupEntry[] = [];
  readonly queue = new WaitQueue<QueueItem>();
  /** Requests of this alias refused by the queue (queue_full, queue_timeout, no_provider_available on expiry); the console's rejects per minute. */
  rejected = 0;

  // Scratch of one pump. Capacity only shrinks during a pump, so an item
  // that found no free candidate proves that every later item of this group
  // with the same or a narrower candidate set finds none either.
  cursor: QueueItem | null = null;
  /** Per API: smallest candidate-narrowing token count that failed for an undirected item. */
  readonly failUndirected: number[] = [Infinity, Infinity, Infinity, Infinity, Infinity];
  /** Queued requests per API: an ejected provider's room matters to the pump only while one of its sole APIs waits. */
  readonly queuedByApi = new Int32Array(ENDPOINTS.length);
  /** Same, per API and direct-dispatch node id (key: api + '\0' + node id). */
  readonly failByNode = new Map<string, number>();
  /** Bands and tenants (fair.ts) while fairness is on; undefined: the FIFO alone decides. */
  fair: FairQueue<QueueItem> | undefined = undefined;
  /** Pump scratch: the effective priority of the band `cursor` comes from (0 when FIFO). */
  cursorRank = 0;
  /** Measured dispatch rate: Retry-After of refusals, ETA of queue positions. */
  readonly drain = new DrainMeter();

  constructor(readonly alias: string) {}
}

/** A live grant: the slot is counted against its provider until released. */
export class Lease {
  /** Set by confirm(): the request was cleared to be sent. */
  confirmed = false;
  /** The request's session key (0 = none), kept for a re-admission. */
  sessionKey = 0;
  /** The node this grant moved its session from (Grant.sessionMovedFrom), else undefined. */
  sessionMovedFrom: string | undefined = undefined;
  /** When the request was first queued (or admitted): an overload requeue waits on from there (aging). */
  enqueuedAt = 0;
  /**
   * The fair queue its tenant was charged in (granted while fair queuing was on), else undefined: the
   * reported usage corrects that charge only there (fairness turned off and on again is a new queue).
   */
  chargedIn: FairQueue<QueueItem> | undefined = undefined;
  /** Fair queuing: where the charge went, so the reported usage can correct it (and a re-admission keeps its band). */
  priority = 0;
  tenantKey = 0;
  weight = 1;

  constructor(
    readonly leaseId: number,
    readonly requestId: number,
    readonly alias: string,
    readonly provider: ProviderState,
    readonly node: NodeState,
    readonly generation: number,
    // What re-admission needs to put the request back where it was.
    readonly seq: number,
    readonly estimatedTokens: number,
    readonly directNodeId: string | undefined,
    readonly attempt: number,
    readonly api: ApiKind = 0,
    readonly pinnedProviderId: string | undefined = undefined,
  ) {}

  info(): LeaseInfo {
    return {
      leaseId: this.leaseId,
      requestId: this.requestId,
      alias: this.alias,
      nodeId: this.node.id,
      providerId: this.provider.id,
      generation: this.generation,
    };
  }
}
