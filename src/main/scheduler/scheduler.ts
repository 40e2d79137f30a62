// The scheduler: admission, queues, leases and node generations as one
// synchronous state machine. No I/O, no timers, no clock: every call gets
// `now` (ms) and finishes its whole transition (expire, act, pump) before it
// returns, so each "critical section" of the contract is one plain call.
//
// Decisions go to the sink after the transition, in order, from inside the
// call that produced them; a sink that calls back in is safe (its decisions
// are appended and delivered by the outer call).
import type { EdgeConfig } from '../../shared/config-types.js';
import { buildCatalog } from './catalog.js';
import {
  contextNeed,
  groupServes,
  hasEligibleCandidate,
  isEligible,
  providerServes,
  hasFreeProvider,
  failureIsMonotone,
  pickCandidate,
  servesOnNode,
  someFits,
  fits,
  type Wanted,
} from './candidates.js';
import { DeadlineHeap } from './deadline-heap.js';
import { retryAfterSecOf } from '../../shared/request-rate.js';
import { FairQueue } from './fair.js';
import { fairnessOf, type Fairness } from './fairness-config.js';
import { checkInvariants } from './invariants.js';
import { Registry } from './registry.js';
import { Outliers, type Outcome, type OutlierStatus } from './outliers.js';
import { Overload } from './overload.js';
import { Lease, QueueItem, type GroupEntry, type GroupState, type NodeState, type ProviderState } from './state.js';
import { buildStatus } from './status.js';
import type { ApiKind } from '../../shared/endpoints.js';
import type {
  AdmitRequest,
  ConnectResult,
  Grant,
  LeaseInfo,
  NodeFailure,
  Overloaded,
  ProviderStatus,
  RejectCode,
  ReleaseReason,
  SchedulerSink,
  SchedulerStatus,
  FairBandStatus,
  FairGroupStatus,
  FairnessStatus,
  FairTenantStatus,
} from '../../contract/scheduler.js';

/**
 * Leases fenced before confirm() are remembered so the pending send can
 * still re-admit its request. The data path ends each with confirm() or
 * release(); the cap only bounds memory if a caller forgets.
 */
const MAX_FENCED_UNSENT = 10_000;

/** Sessions remembered for node affinity; the least recently granted goes first. */
const MAX_SESSIONS = 100_000;

/** Retry-After for the second stale fence: the node flapped twice, retry soon. */
const STALE_RETRY_AFTER_SEC = 1;

const NO_LEASES: readonly LeaseInfo[] = Object.freeze([]);

/** What the data path is told when a retried request's new lease is fenced unsent. */
class RetryRefusal {
  constructor(readonly requestId: number) {}
}

/** attempt of a queue item and its lease: 0 = first dispatch; READMITTED after a stale fence; RETRIED when put back by retry(). */
const READMITTED = 1;
const RETRIED = 2;

class Rejection {
  /** Whole seconds for Retry-After (at least 1 when not 0), from the hint in ms. */
  readonly retryAfterSec: number;

  constructor(
    readonly requestId: number,
    readonly code: RejectCode,
    /** Seconds (0 = retrying does not help soon); or, from #retryAfter, a measured hint in ms. */
    retryAfter: number,
    readonly retryAfterMs: number = retryAfter * 1000,
  ) {
    this.retryAfterSec = retryAfter === 0 ? 0 : Math.max(1, Math.ceil(this.retryAfterMs / 1000));
  }
}

export interface CapacityExcess {
  readonly providerId: string;
  readonly inFlight: number;
  readonly capacity: number;
}

export class Scheduler {
  /** Scratch for #wantOf: what the request being placed asks of its candidates. */
  readonly #want: { directNodeId: string | undefined; api: ApiKind; pinnedProviderId: string | undefined } = { directNodeId: undefined, api: 0, pinnedProviderId: undefined };
  readonly #sink: SchedulerSink;
  readonly #registry = new Registry();
  /** Groups with a non-empty queue: what a pump walks. */
  readonly #waiting = new Set<GroupState>();
  readonly #queued = new Map<number, QueueItem>();
  readonly #deadlines = new DeadlineHeap();
  readonly #leases = new Map<number, Lease>();
  /**
   * Session key -> the node that last served it, whatever the alias: a cli
   * session's directory lives on that node, so a turn sent under another
   * alias (a client switching models) must find it too, or be told it moved.
   */
  readonly #affinity = new Map<number, string>();
  /**
   * Session key -> the provider that last served it (on its #affinity node):
   * each cli provider has its own cwd_root and runs one process per session,
   * so while that provider serves the alias a turn goes to it, not to
   * another provider of the same node without the session's directory. An
   * HTTP provider holds no session state: its sessions keep to the node only.
   */
  readonly #affinityProvider = new Map<number, string>();
  /**
   * Session key -> the node it moved from, where the grant that moved it
   * ended with its client gone before its answer: that client never read
   * x-edge-session-moved-from, so the session's next grant says it (unless
   * it goes back to that node, whose state is still there).
   */
  readonly #untold = new Map<number, string>();
  /** Leases fenced before confirm(): leaseId -> the released lease. */
  readonly #fencedUnsent = new Map<number, Lease>();
  readonly #outbox: (Grant | Rejection | RetryRefusal)[] = [];
  #delivering = false;
  /** Reused by every pump: the groups still being walked. */
  readonly #active: GroupState[] = [];
  #lastSeq = 0;
  #lastLeaseId = 0;
  #lastGeneration = 0;
  /**
   * Queue order for retries whose lease is already gone (fenced with its
   * node): below every admission seq, increasing, so they wait ahead of
   * everyone and in the order they failed.
   */
  #lastRetrySeq = -Number.MAX_SAFE_INTEGER;
  #now = -Infinity;
  /** Grants made while their provider was full: must stay 0 (checked by checkInvariants). */
  #grantsOverCapacity = 0;
  /** Passive outlier ejection (outliers.ts); fed by lease outcomes. */
  readonly outliers: Outliers;
  /** Fair queuing policy from config (fairness-config.ts); off = FIFO, today's behaviour. */
  #fairness: Fairness;
  /** Overload backoff (overload.ts): AIMD limits and Retry-After holds, fed by 429/503 answers. */
  readonly overload: Overload;

  constructor(config: EdgeConfig, sink: SchedulerSink, outliers: Outliers = new Outliers(), overload: Overload = new Overload()) {
    this.#sink = sink;
    this.outliers = outliers;
    this.#fairness = fairnessOf(config);
    this.overload = overload;
    this.#registry.apply(buildCatalog(config));
    this.#applyFairness();
  }

  // --- Admission ------------------------------------------------------------

  /**
   * Grants at once when a candidate has a free slot (no queued request can
   * use a free slot: every call ends with a pump), otherwise queues, or
   * rejects: model_not_found, node_not_found, api_not_served,
   * pinned_provider_gone, context_length_exceeded, shed, queue_full (or
   * displaces a lower band's waiter, which gets displaced).
   */
  admit(req: AdmitRequest, now: number): void {
    this.#expire(now);
    if (this.#queued.has(req.requestId)) {
      this.#flush(); // expiries already decided still go out
      throw new RangeError(`request ${req.requestId} is already queued`);
    }
    const group = this.#registry.groups.get(req.alias);
    if (group === undefined || !group.inCatalog) {
      this.#outbox.push(new Rejection(req.requestId, 'model_not_found', 0));
    } else if (req.directNodeId !== undefined && !servesOnNode(group, req.directNodeId, req.pinnedProviderId)) {
      this.#outbox.push(new Rejection(req.requestId, 'node_not_found', 0));
    } else if (!groupServes(group, req.api ?? 0)) {
      this.#outbox.push(new Rejection(req.requestId, 'api_not_served', 0));
    } else if (req.pinnedProviderId !== undefined && !pinnedServes(group, req.pinnedProviderId, req.api ?? 0)) {
      this.#outbox.push(new Rejection(req.requestId, 'pinned_provider_gone', 0));
    } else if (req.directNodeId !== undefined && !someFits(group, this.#wantOf(req.directNodeId, req.api, req.pinnedProviderId), 0)) {
      // The named node has providers of the alias, but none serves this API: waiting would only end in a timeout.
      this.#outbox.push(new Rejection(req.requestId, 'node_not_found', 0));
    } else {
      const need = contextNeed(req.estimatedTokens, this.#registry.longThreshold);
      if (need > 0 && !someFits(group, this.#wantOf(req.directNodeId, req.api, req.pinnedProviderId), need)) {
        // No provider it may go to (its node, its stored response's provider, its API), connected or not, takes it:
        // waiting would only end in a timeout.
        group.rejected++;
        this.#outbox.push(new Rejection(req.requestId, 'context_length_exceeded', 0));
        this.#flush();
        return;
      }
      const sessionKey = req.sessionKey ?? 0;
      const entry = this.#candidateFor(group, req, need);
      const seq = ++this.#lastSeq;
      const fair = group.fair;
      // Band and tenant are kept whatever the policy: fairness turned on by a refresh orders the queue by them.
      const asked = req.priority ?? 0;
      const priority = fair === undefined ? 0 : asked;
      if (entry !== undefined) {
        if (fair !== undefined) fair.charge(priority, req.tenantKey ?? 0, weightOf(req.weight), req.estimatedTokens);
        this.#grant(group, entry, req.requestId, seq, req.estimatedTokens, req.directNodeId, 0, 0, sessionKey, req.api ?? 0, req.pinnedProviderId);
        this.#tagLease(asked, req.tenantKey ?? 0, weightOf(req.weight), fair);
      } else if (fair !== undefined && priority < 0) {
        // Sheddable: never waits behind anyone while the alias is saturated.
        group.rejected++;
        this.#outbox.push(this.#refusal(req.requestId, 'shed', group, 1));
      } else if (group.queue.length >= group.maxQueue && !this.#displaceFor(group, priority)) {
        group.rejected++;
        this.#outbox.push(this.#refusal(req.requestId, 'queue_full', group, 1));
      } else {
        const item = new QueueItem(
          req.requestId,
          group,
          seq,
          req.estimatedTokens,
          req.directNodeId,
          now,
          now + group.queueTimeoutMs,
          0,
          undefined,
          req.api ?? 0,
          req.pinnedProviderId,
        );
        item.sessionKey = sessionKey;
        item.priority = asked;
        item.tenantKey = req.tenantKey ?? 0;
        item.weight = weightOf(req.weight);
        group.queue.push(item);
        this.#track(item);
      }
    }
    this.#flush();
  }

  /**
   * Fairness on, queue full: an arrival of a higher band takes the place of
   * the newest request of the lowest band below it, which is refused as
   * displaced. False when no lower band waits (the arrival is refused).
   */
  #displaceFor(group: GroupState, priority: number): boolean {
    const victim = group.fair?.victimBelow(priority);
    if (victim === undefined) return false;
    this.#dequeue(victim);
    group.rejected++;
    this.#outbox.push(this.#refusal(victim.requestId, 'displaced', group, 1));
    return true;
  }

  /**
   * A refusal whose Retry-After is when it clears: after `dispatches` more
   * grants of the alias at its measured rate (retry-after-ms exact, the
   * Retry-After header in whole seconds, at least 1); the queue timeout's
   * whole seconds while no rate is known. Between 0.1 s and the queue timeout.
   */
  #refusal(requestId: number, code: RejectCode, group: GroupState, dispatches: number): Rejection {
    const eta = group.drain.etaMs(dispatches, this.#now);
    const hold = this.#holdLeftMs(group);
    // No rate: the queue timeout stays the hint; a hold only raises it, never cuts it to the hold's few seconds.
    if (eta === undefined && (hold === undefined || hold <= group.queueTimeoutMs)) return new Rejection(requestId, code, retryAfterSecOf(group.queueTimeoutMs));
    let ms = eta === undefined ? 100 : Math.ceil(Math.min(Math.max(eta, 100), group.queueTimeoutMs));
    // Every provider it could go to waits out a Retry-After: a client back sooner would only queue again.
    if (hold !== undefined && hold > ms) ms = Math.ceil(hold);
    return new Rejection(requestId, code, ms / 1000, ms);
  }

  /** While every provider that could serve the alias is held by a provider's Retry-After: ms to the first hold's end. */
  #holdLeftMs(group: GroupState): number | undefined {
    let first: number | undefined;
    for (const entry of group.entries) {
      const p = entry.provider;
      if (!isEligible(p)) continue;
      const until = this.overload.heldUntil(p);
      if (until === undefined) return undefined;
      if (first === undefined || until < first) first = until;
    }
    return first === undefined ? undefined : Math.max(0, first - this.#now);
  }

  /**
   * An admission to `alias` now, at `priority`, would be refused for want
   * of room: no free provider slot, and its queue at max_queue or (fairness
   * on) the request sheddable. A hint for the I/O worker pool, which then
   * reads the other workers' rings first (a release may wait there); the
   * decision stays admit's. With `request`: also when the free slots are
   * none it may take (its session's node busy, the node it named, the
   * provider holding its stored response).
   */
  saturated(alias: string, priority = 0, request?: AdmitRequest): boolean {
    const group = this.#registry.groups.get(alias);
    if (group === undefined || !(group.queue.length >= group.maxQueue || (priority < 0 && group.fair !== undefined))) return false;
    if (!hasFreeProvider(group)) return true;
    if (request === undefined) return false;
    return this.#candidateFor(group, request, contextNeed(request.estimatedTokens, this.#registry.longThreshold)) === undefined;
  }

  /** The free slot a new request would be granted now, if any. */
  #candidateFor(group: GroupState, req: AdmitRequest, need: number): GroupEntry | undefined {
    // A pinned request goes where its state is; otherwise a named session keeps to its node (and its provider there).
    const direct = req.directNodeId ?? (req.pinnedProviderId === undefined ? this.#affinityNode(group, req.sessionKey ?? 0, req.api ?? 0, need) : undefined);
    const pinned = req.pinnedProviderId ?? (req.directNodeId === undefined ? this.#affinityProviderOf(group, req.sessionKey ?? 0, req.api ?? 0, need) : undefined);
    return pickCandidate(group, this.#wantOf(direct, req.api, pinned), need);
  }

  /**
   * Queue position of a waiting request (1 = next) in its alias's policy order (FIFO: with the older waiters of aliases sharing its
   * providers), and the ETA from the measured rate; undefined when not queued.
   * `now` is the asker's clock: asked each second while nothing else happens, the time of the scheduler's last call would freeze
   * aging (a band that aged past another is still told it is behind it) and the drain window (a stalled queue keeps its old pace).
   */
  queuePosition(requestId: number, now: number = this.#now): { position: number; etaMs: number | undefined } | undefined {
    const item = this.#queued.get(requestId);
    if (item === undefined) return undefined;
    const at = Math.max(now, this.#now);
    const group = item.group;
    const position = group.fair === undefined ? fifoPosition(item) + this.#olderSharing(item) : group.fair.position(item, at, this.#fairness.agingStepPerSec);
    return { position, etaMs: group.drain.etaMs(position, at) };
  }

  /**
   * FIFO: the older waiters of the other aliases that share a provider `item` could take. The pump
   * serves the globally oldest waiter a provider can take, so they go first; a position of 1 must
   * mean next. Queues are in admission (seq) order: each walk stops at the first younger waiter.
   */
  #olderSharing(item: QueueItem): number {
    if (this.#waiting.size < 2) return 0;
    const want = this.#wantItem(item);
    const need = contextNeed(item.estimatedTokens, this.#registry.longThreshold);
    let n = 0;
    for (const other of this.#waiting) {
      if (other === item.group || !sharesProvider(item.group, other, want, need)) continue;
      for (let cur = other.queue.head; cur !== null && cur.seq < item.seq; cur = cur.next) n++;
    }
    return n;
  }

  /** The lease just minted carries its charge's band and tenant (usage correction, re-admission). */
  #tagLease(priority: number, tenantKey: number, weight: number, chargedIn: FairQueue<QueueItem> | undefined): void {
    const lease = this.#leases.get(this.#lastLeaseId) as Lease;
    lease.chargedIn = chargedIn;
    lease.priority = priority;
    lease.tenantKey = tenantKey;
    lease.weight = weight;
  }

  /** The client went away while queued: removed, nothing reserved. False if not queued. */
  cancel(requestId: number, now: number): boolean {
    this.#expire(now);
    const item = this.#queued.get(requestId);
    if (item !== undefined) this.#dequeue(item);
    this.#flush();
    return item !== undefined;
  }

  /**
   * The data path that held these requests is gone (an I/O worker exited):
   * its queued requests are dropped and its leases released, wherever their
   * nodes live, so no slot stays counted for a client nobody serves. Their
   * decisions would have nowhere to go, so none is made for them.
   */
  forgetRequests(belongs: (requestId: number) => boolean, now: number): { queued: number; leases: number } {
    this.#expire(now);
    let queued = 0;
    let leases = 0;
    for (const item of [...this.#queued.values()]) {
      if (!belongs(item.requestId)) continue;
      this.#dequeue(item);
      queued++;
    }
    for (const lease of [...this.#leases.values()]) {
      if (!belongs(lease.requestId)) continue;
      this.#dropLease(lease);
      this.outliers.ended(lease.provider, lease.leaseId);
      leases++;
    }
    for (const lease of [...this.#fencedUnsent.values()]) if (belongs(lease.requestId)) this.#fencedUnsent.delete(lease.leaseId);
    this.#pump();
    this.#flush();
    return { queued, leases };
  }

  /** Expires due queued requests and pumps. */
  tick(now: number): void {
    this.#expire(now);
    this.#pump();
    this.#flush();
  }

  /** Earliest queued deadline (ms), for the driver's single timer. */
  nextDeadline(): number | undefined {
    return earliest(earliest(this.#deadlines.peek()?.deadline, this.outliers.nextDeadline()), this.overload.nextDeadline());
  }

  // --- Leases ---------------------------------------------------------------

  /**
   * Ends a lease. True only for the call that actually released it. The
   * reason does not change the accounting (every release frees the slot the
   * same way); it feeds the provider's outlier state (a provider failure, a
   * success, or neither).
   */
  release(leaseId: number, reason: ReleaseReason, now: number, usedTokens = 0, retryAfterMs?: number): boolean {
    this.#expire(now);
    const lease = this.#leases.get(leaseId);
    // The response said what the request cost: the tenant's charge is corrected by the difference.
    if (lease !== undefined && usedTokens > 0 && chargedIn(lease, this.#registry.groups.get(lease.alias)?.fair)) lease.chargedIn?.correct(lease.priority, lease.tenantKey, lease.weight, usedTokens - chargeOfTokens(lease.estimatedTokens));
    if (lease === undefined) {
      // Ending a fenced lease also ends its claim to a re-admission.
      this.#fencedUnsent.delete(leaseId);
      this.#flush();
      return false;
    }
    this.#dropLease(lease);
    // The client that was to be told its session moved left first: the session's next answer tells it.
    if (reason === 'client_closed' && lease.sessionMovedFrom !== undefined && this.#affinity.get(lease.sessionKey) === lease.node.id) {
      this.#untold.set(lease.sessionKey, lease.sessionMovedFrom);
    }
    // A lease on a node a refresh moved the provider away from says how that node's process did, not the
    // provider's new slot: neutral there (a half-open probe's ends without a verdict), and no overload hold.
    const here = lease.node === lease.provider.node;
    this.outliers.outcome(lease.provider, here ? outcomeOf(reason) : 'neutral', now, this.#groupsOf(lease.provider), lease.leaseId);
    if (here && reason === 'end') this.overload.succeeded(lease.provider);
    else if (here && reason === 'overloaded') this.overload.overloaded(lease.provider, retryAfterMs, now);
    this.#forgetIfGone(lease.provider);
    this.#pump();
    this.#flush();
    return true;
  }

  /** The outlier state of a provider, for status. */
  outlierStatus(providerId: string): OutlierStatus | undefined {
    const provider = this.#registry.providers.get(providerId);
    return provider === undefined ? undefined : this.outliers.status(provider);
  }

  /** An operator reset the provider's breaker (ejection and overload limit): it takes requests again at once. */
  resetOutlier(providerId: string, now: number): boolean {
    this.#expire(now);
    const provider = this.#registry.providers.get(providerId);
    const ejection = provider !== undefined && this.outliers.reset(provider);
    const overload = provider !== undefined && this.overload.reset(provider);
    const reset = ejection || overload;
    if (reset) this.#pump();
    this.#flush();
    return reset;
  }

  /** The node's providers stopped serving: the aliases they leave without one get their ejected providers back (Outliers.lastResort). True when any came back. */
  #lastResortFor(node: NodeState): boolean {
    const groups = new Set<GroupState>();
    for (const p of this.#registry.providers.values()) if (p.node === node) for (const group of this.#groupsOf(p)) groups.add(group);
    return groups.size > 0 && this.outliers.lastResort(groups);
  }

  /** Waiters of `groups` pinned to `providerId`: refused pinned_provider_gone (admit's answer for them now). */
  #refusePinnedTo(groups: readonly GroupState[], providerId: string): void {
    for (const group of groups) {
      for (let item = group.queue.head; item !== null; ) {
        const next = item.next;
        if (item.pinnedProviderId === providerId) this.#refuseQueued(item, group, 'pinned_provider_gone');
        item = next;
      }
    }
  }

  /** A waiter out of the queue with a refusal a new request would get now (no Retry-After: waiting would not help). */
  #refuseQueued(item: QueueItem, group: GroupState, code: RejectCode): void {
    this.#dequeue(item);
    group.rejected++;
    this.#outbox.push(new Rejection(item.requestId, code, 0));
  }

  #groupsOf(provider: ProviderState): GroupState[] {
    const groups: GroupState[] = [];
    for (const group of this.#registry.groups.values()) if (group.entries.some((e) => e.provider === provider)) groups.push(group);
    return groups;
  }

  /**
   * Pre-send fence. True when the lease's generation is still its node's
   * current connection (the request may be sent). Otherwise false, and the
   * request is re-admitted once, keeping its original place in the queue
   * order; a second stale fence rejects it (no_provider_available). A lease
   * fenced by connect/disconnect before this call counts as stale here.
   */
  confirm(leaseId: number, now: number): boolean {
    this.#expire(now);
    const lease = this.#leases.get(leaseId);
    let current = false;
    if (lease !== undefined) {
      if (lease.node.connected && lease.generation === lease.node.generation) {
        lease.confirmed = true;
        current = true;
      } else {
        // Released as 'stale_generation'; unreachable while fencing releases
        // every lease of a superseded generation, kept as a safety net.
        this.#dropLease(lease);
        this.outliers.ended(lease.provider, lease.leaseId);
        this.#readmit(lease, now);
      }
    } else {
      const fenced = this.#fencedUnsent.get(leaseId);
      if (fenced !== undefined) {
        this.#fencedUnsent.delete(leaseId);
        this.#readmit(fenced, now);
      }
    }
    if (!current) this.#pump();
    this.#flush();
    return current;
  }

  /**
   * A dispatched request failed before any response byte reached its client
   * (the provider refused or reset, or the node went away): ends its lease
   * (if still live) and puts the request back in its queue, once, for any
   * candidate but `excludeProviderId`. It keeps its place (the lease's
   * admission order; ahead of every waiter if the lease was already
   * fenced) and max_queue does not apply. False, with the lease ended and
   * nothing queued, when no other candidate exists (the caller reports the
   * original failure); otherwise the grant or rejection follows as usual.
   * `node`: the failure was the node's (NodeFailure), so nothing is held
   * against the provider and the request is queued as an arrival would be,
   * whether or not a candidate is up now (the node's own provider again once
   * it is back, or on a lane still up), up to its queue deadline; `leaving`
   * (a rolling restart) also drains that connection from now on.
   */
  retry(leaseId: number, req: AdmitRequest, excludeProviderId: string, now: number, providerFailed = false, overloaded?: Overloaded, node?: NodeFailure): boolean {
    const leaving = node === 'leaving';
    if (node !== undefined) excludeProviderId = '';
    this.#expire(now);
    const lease = this.#leases.get(leaseId);
    // The retry keeps the band and tenant its first dispatch was charged to.
    const tagged = lease ?? this.#fencedUnsent.get(leaseId);
    let seq: number;
    let attempt = RETRIED;
    let enqueuedAt = now;
    if (lease !== undefined) {
      seq = lease.seq;
      this.#dropLease(lease);
      // The node said it is leaving: its connection takes nothing more (as its Leaving would tell), even when
      // the edge had not heard (an agent drained by command, the edge's drain lifted); a reconnect or an undrain ends it.
      if (leaving && lease.node.connected && lease.node.generation === lease.generation && !lease.node.draining) {
        lease.node.draining = true;
        this.#lastResortFor(lease.node);
      }
      this.outliers.outcome(lease.provider, providerFailed ? 'failure' : 'neutral', now, this.#groupsOf(lease.provider), lease.leaseId);
      if (overloaded !== undefined) {
        // Busy, not broken: its limit drops and its Retry-After holds new
        // grants, so the pump below sends the request to another free
        // provider or leaves it waiting at its old place for this one.
        this.overload.overloaded(lease.provider, overloaded.retryAfterMs, now);
        excludeProviderId = '';
        attempt = lease.attempt;
        // Back at its old place, it has waited since its admission: its band's aging must not restart.
        enqueuedAt = lease.enqueuedAt;
      }
      this.#forgetIfGone(lease.provider);
    } else {
      this.#fencedUnsent.delete(leaseId);
      seq = ++this.#lastRetrySeq;
    }
    // The exclusion is of the provider as the failed connection reached it: when its node has already
    // connected again, it is a fresh candidate (else the retry would wait for the others while it idles).
    const failedOn = tagged?.node ?? this.#registry.providers.get(excludeProviderId)?.node;
    if (failedOn !== undefined && failedOn.connected && failedOn.generation !== tagged?.generation) excludeProviderId = '';
    let requeued = false;
    const group = this.#registry.groups.get(req.alias);
    if (
      group !== undefined &&
      group.inCatalog &&
      !this.#queued.has(req.requestId) &&
      (req.directNodeId === undefined || servesOnNode(group, req.directNodeId, req.pinnedProviderId)) &&
      // A pinned request whose provider is gone (capacity 0, disabled, left, or its id moved by a refresh to
      // another node, a process that never saw the stored response) is not queued again: its failure answers now.
      (req.pinnedProviderId === undefined ||
        (pinnedServes(group, req.pinnedProviderId, req.api ?? 0) && (lease === undefined || this.#registry.providers.get(req.pinnedProviderId)?.node.id === lease.node.id)))
    ) {
      const need = contextNeed(req.estimatedTokens, this.#registry.longThreshold);
      if (node !== undefined || hasEligibleCandidate(group, this.#wantOf(req.directNodeId, req.api, req.pinnedProviderId), need, excludeProviderId)) {
        const item = new QueueItem(req.requestId, group, seq, req.estimatedTokens, req.directNodeId, enqueuedAt, now + group.queueTimeoutMs, attempt, excludeProviderId === '' ? undefined : excludeProviderId, req.api ?? 0, req.pinnedProviderId);
        item.sessionKey = req.sessionKey ?? 0;
        if (excludeProviderId !== '') item.excludeNodeId = failedOn?.id;
        // Charged at its first dispatch only if this fair queue charged it: one granted under FIFO (or a queue since replaced) is charged at its next.
        item.charged = tagged === undefined || chargedIn(tagged, group.fair);
        item.priority = tagged?.priority ?? req.priority ?? 0;
        item.tenantKey = tagged?.tenantKey ?? req.tenantKey ?? 0;
        item.weight = tagged?.weight ?? weightOf(req.weight);
        group.queue.insertBySeq(item);
        this.#track(item);
        requeued = true;
      }
    }
    this.#pump();
    this.#flush();
    return requeued;
  }

  lease(leaseId: number): LeaseInfo | undefined {
    return this.#leases.get(leaseId)?.info();
  }

  /** Whether confirm(leaseId) can still decide for it: the lease is live, or fenced and remembered as unsent. */
  decidesFor(leaseId: number): boolean {
    return this.#leases.has(leaseId) || this.#fencedUnsent.has(leaseId);
  }

  // --- Nodes ----------------------------------------------------------------

  /**
   * A node connected (or reconnected). Supersedes its current connection in
   * the same step: that generation's leases are released as fenced and
   * returned, a new generation is minted, its providers become candidates
   * and every queue is pumped. Undefined for a node not in the catalog.
   * `announcedProviders`: the ids the node said it runs; a configured
   * provider missing from it is no candidate for this connection
   * (undefined: all of them). `draining`: the node registered drained (an
   * operator's command it still obeys): set before the queues pump, so that
   * none of their waiters is granted to a node that would refuse it.
   * `unhealthy`: providers whose probe failed as the node registered.
   */
  connect(nodeId: string, now: number, announcedProviders?: readonly string[], announcedEndpoints?: ReadonlyMap<string, number>, draining = false, unhealthy?: ReadonlySet<string>): ConnectResult | undefined {
    this.#expire(now);
    const node = this.#registry.nodes.get(nodeId);
    if (node === undefined || !node.inCatalog) {
      this.#flush();
      return undefined;
    }
    const fenced = node.connected ? this.#fence(node) : NO_LEASES;
    node.connected = true;
    node.generation = ++this.#lastGeneration;
    node.connectedSinceMs = now;
    node.draining = draining; // draining belongs to a connection (the agent's Leaving, or how it registered)
    node.announced = announcedProviders === undefined ? undefined : new Set(announcedProviders);
    node.announcedEndpoints = announcedEndpoints === undefined || announcedEndpoints.size === 0 ? undefined : announcedEndpoints;
    // Probe results belong to a connection: the new one reports its own, the first of them with its register.
    for (const p of this.#registry.providers.values()) if (p.node === node) p.unhealthy = unhealthy?.has(p.id) === true;
    // Retries kept off this node's providers were kept off the connection that failed them, not this one.
    for (const item of this.#queued.values()) {
      if (item.excludeNodeId !== nodeId) continue;
      item.excludeProviderId = undefined;
      item.excludeNodeId = undefined;
    }
    // A connection that announces less may leave an alias nothing but ejected providers.
    this.#lastResortFor(node);
    this.#pump();
    this.#flush();
    return { generation: node.generation, fenced };
  }

  /**
   * Connection (node, generation) ended. A late callback for a superseded
   * generation returns undefined and touches nothing. Otherwise its leases
   * are released as fenced and returned, the node goes offline, queues pump.
   */
  disconnect(nodeId: string, generation: number, now: number): LeaseInfo[] | undefined {
    this.#expire(now);
    const node = this.#registry.nodes.get(nodeId);
    if (node === undefined || !node.connected || node.generation !== generation) {
      this.#flush();
      return undefined;
    }
    const fenced = this.#fence(node);
    node.connected = false;
    node.connectedSinceMs = undefined;
    node.draining = false;
    this.#registry.forgetNodeIfUnused(node);
    this.#lastResortFor(node);
    this.#pump();
    this.#flush();
    return fenced;
  }

  /** The generation of the node's live connection; 0 when it is not connected (a lane may join only the current one). */
  currentGeneration(nodeId: string): number {
    const node = this.#registry.nodes.get(nodeId);
    return node !== undefined && node.connected ? node.generation : 0;
  }

  /**
   * The node's active health probe of a provider (reported in its
   * heartbeats): an unhealthy provider gets no new grants until it passes
   * again; its open leases run on. A passing probe also returns a half-open
   * provider (it stands in for the probe request). True when the probe
   * verdict changed. `generation` (0: the current one): a verdict from a
   * connection already superseded belongs to no provider of the new one.
   */
  setProviderHealth(nodeId: string, providerId: string, healthy: boolean, now: number, generation = 0): boolean {
    this.#expire(now);
    const provider = this.#registry.providers.get(providerId);
    let changed = false;
    if (provider !== undefined && provider.node.id === nodeId && provider.node.connected && (generation === 0 || provider.node.generation === generation)) {
      changed = provider.unhealthy === healthy;
      provider.unhealthy = !healthy;
      const returned = healthy && this.outliers.activeProbePassed(provider, now);
      // Unhealthy, its sessions' waiters may go elsewhere (and providers may come back as a last resort).
      if (!healthy && changed) {
        this.outliers.lastResort(this.#groupsOf(provider));
        this.#pump();
      }
      if (healthy && (changed || returned)) this.#pump();
    }
    this.#flush();
    return changed;
  }

  /**
   * Takes a provider out of what the node's connection announced, or puts
   * it back, as if its Register had left it out or named it: the data path
   * withdraws one whose type a config refresh made disagree with the node's
   * (its open leases run on). `endpoints`: the mask the node announced for
   * it (undefined: its config's). True when it changed. `generation` (0:
   * the current one): a word about a superseded connection changes nothing.
   */
  setAnnounced(nodeId: string, providerId: string, announced: boolean, endpoints: number | undefined, now: number, generation = 0): boolean {
    this.#expire(now);
    const node = this.#registry.nodes.get(nodeId);
    let changed = false;
    if (node !== undefined && node.connected && (generation === 0 || node.generation === generation)) {
      // Undefined meant every configured provider: spelt out, so that one can be left out.
      const ids = new Set(node.announced ?? [...this.#registry.providers.values()].filter((p) => p.node === node).map((p) => p.id));
      changed = ids.has(providerId) !== announced;
      if (announced) ids.add(providerId);
      else ids.delete(providerId);
      node.announced = ids;
      const masks = new Map(node.announcedEndpoints);
      if (announced && endpoints !== undefined) masks.set(providerId, endpoints);
      else masks.delete(providerId);
      node.announcedEndpoints = masks.size === 0 ? undefined : masks;
      // The provider may be one the catalog names only from the config swap that follows (workers.count 0).
      const provider = this.#registry.providers.get(providerId);
      if (changed && provider !== undefined && provider.node === node) {
        if (!announced) {
          const groups = this.#groupsOf(provider);
          // Withdrawn, its sessions' waiters may go elsewhere (and providers may come back as a last resort);
          // those pinned to it (its stored responses) are told now, as a new request would be, not at their deadline.
          this.#refusePinnedTo(groups, providerId);
          this.outliers.lastResort(groups);
        }
        this.#pump();
      }
    }
    this.#flush();
    return changed;
  }

  /**
   * A draining node gets no new grants; its open leases run to their end.
   * Draining belongs to a connection: `generation` (0: the current one, an
   * operator's drain) names the one whose agent said Leaving, and a late
   * word from a superseded connection does not drain the new one.
   */
  /** True when it applied: the node is connected (in that generation, when one is named). */
  setDraining(nodeId: string, draining: boolean, now: number, generation = 0): boolean {
    this.#expire(now);
    const node = this.#registry.nodes.get(nodeId);
    const applies = node !== undefined && node.connected && (generation === 0 || node.generation === generation);
    if (applies) {
      const changed = node.draining !== draining;
      node.draining = draining;
      // Undrained, it takes waiters again; drained, its sessions' waiters may go elsewhere, as may
      // waiters for providers it brought back half-open.
      const returned = draining && this.#lastResortFor(node);
      if (changed || returned) this.#pump();
    }
    this.#flush();
    return applies;
  }

  // --- Config ---------------------------------------------------------------

  /**
   * Live catalog swap. Queued requests and leases stay; queued deadlines
   * stay; the new policy applies to new admissions. Leases on a provider
   * that disappeared (or whose capacity dropped) stay counted until they end.
   */
  setConfig(config: EdgeConfig, now: number): void {
    this.#expire(now);
    this.#fairness = fairnessOf(config);
    // A provider id the refresh moves to another node names a process that never saw its waiters' stored responses.
    const nodeBefore = new Map<string, string>();
    const providersBefore = [...this.#registry.providers.values()];
    for (const provider of providersBefore) nodeBefore.set(provider.id, provider.node.id);
    this.#registry.apply(buildCatalog(config));
    for (const provider of providersBefore) this.#forgetIfGone(provider);
    this.#refuseOrphans(nodeBefore);
    this.#applyFairness();
    this.outliers.lastResort(this.#registry.groups.values());
    this.#pump();
    this.#flush();
  }

  /**
   * Waiters the new catalog leaves nothing for are answered now, as a new
   * request would be, rather than at their deadline (up to a day away): a
   * removed alias's with model_not_found, one pinned to a provider the alias
   * no longer has, or has disabled or at capacity 0, with pinned_provider_gone
   * (one only out of service for now still waits for it) or moved to another
   * node (`nodeBefore`: each provider's node before the refresh), one for a
   * node the alias no longer has a provider on (x-edge-node) with node_not_found,
   * one long (by the new threshold) past every window it may go to with
   * context_length_exceeded, as admission would answer it.
   */
  #refuseOrphans(nodeBefore: ReadonlyMap<string, string>): void {
    for (const group of [...this.#registry.groups.values()]) {
      for (let item = group.queue.head; item !== null; ) {
        const next = item.next;
        const pinned = item.pinnedProviderId;
        const code: RejectCode | undefined = !group.inCatalog
          ? 'model_not_found'
          : pinned !== undefined && !group.entries.some((entry) => servesPinned(entry.provider, pinned, nodeBefore))
            ? 'pinned_provider_gone'
            : item.directNodeId !== undefined && !servesOnNode(group, item.directNodeId, item.pinnedProviderId)
              ? 'node_not_found'
              : this.#outgrown(item)
                ? 'context_length_exceeded'
                : undefined;
        if (code !== undefined) this.#refuseQueued(item, group, code);
        item = next;
      }
    }
  }

  /** A long waiter no provider it may go to (connected or not) declares a window for: admission's check, again. */
  #outgrown(item: QueueItem): boolean {
    const need = contextNeed(item.estimatedTokens, this.#registry.longThreshold);
    return need > 0 && !someFits(item.group, this.#wantOf(item.directNodeId, item.api, item.pinnedProviderId), need);
  }

  // --- Introspection --------------------------------------------------------

  /** `now` (the clock admit() gets) dates the oldest waiter; without it, the last time the scheduler saw. */
  status(now: number = this.#now): SchedulerStatus {
    const fairness = this.fairnessStatus();
    const status = fairness === undefined ? buildStatus(this.#registry, this.#leases.size, now) : { ...buildStatus(this.#registry, this.#leases.size, now), fairness };
    if (!status.providers.some((p) => this.#tracked(p.id))) return status;
    return { ...status, providers: status.providers.map((p) => (this.#tracked(p.id) ? this.#withGuards(p) : p)) };
  }

  #tracked(providerId: string): boolean {
    const provider = this.#registry.providers.get(providerId);
    return provider !== undefined && (this.outliers.tracks(provider) || this.overload.tracks(provider) || provider.unhealthy);
  }

  /** A provider's status with its outlier, overload and probe state added. */
  #withGuards(p: ProviderStatus): ProviderStatus {
    const provider = this.#registry.providers.get(p.id) as ProviderState;
    const overload = this.overload.status(provider);
    return {
      ...p,
      ...(this.outliers.tracks(provider) ? { outlier: this.outliers.status(provider) } : {}),
      ...(overload === undefined ? {} : { overload }),
      ...(provider.unhealthy ? { unhealthy: true } : {}),
    };
  }

  /** Empty when every invariant holds. For tests and debug endpoints. */
  checkInvariants(): string[] {
    return checkInvariants({
      nodes: this.#registry.nodes,
      providers: this.#registry.providers,
      groups: this.#registry.groups,
      waiting: this.#waiting,
      queued: this.#queued,
      deadlines: this.#deadlines,
      leases: this.#leases,
      fencedUnsent: this.#fencedUnsent,
      longThreshold: this.#registry.longThreshold,
      now: this.#now,
      grantsOverCapacity: this.#grantsOverCapacity,
      wantOf: (item) => this.#wantItem(item),
    });
  }

  /**
   * Providers whose in-flight exceeds a capacity that config lowered (or a
   * provider config removed): allowed, since those leases were granted under
   * the old budget; no new grant goes there until they drain below it.
   */
  capacityExcess(): CapacityExcess[] {
    const out: CapacityExcess[] = [];
    for (const p of this.#registry.providers.values()) {
      if (p.inFlight > p.capacity) out.push({ providerId: p.id, inFlight: p.inFlight, capacity: p.capacity });
    }
    return out;
  }

  // --- Internals ------------------------------------------------------------

  #grant(
    group: GroupState,
    entry: GroupEntry,
    requestId: number,
    seq: number,
    estimatedTokens: number,
    directNodeId: string | undefined,
    attempt: number,
    queuedMs: number,
    sessionKey: number,
    api: ApiKind,
    pinnedProviderId: string | undefined,
  ): void {
    const provider = entry.provider;
    const node = provider.node;
    if (provider.inFlight >= provider.capacity) this.#grantsOverCapacity++;
    group.drain.dispatched(this.#now);
    provider.inFlight++;
    const lease = new Lease(
      ++this.#lastLeaseId,
      requestId,
      group.alias,
      provider,
      node,
      node.generation,
      seq,
      estimatedTokens,
      directNodeId,
      attempt,
      api,
      pinnedProviderId,
    );
    this.outliers.granted(provider, lease.leaseId);
    lease.sessionKey = sessionKey;
    lease.enqueuedAt = this.#now - queuedMs;
    let movedFrom: string | undefined;
    if (sessionKey !== 0) {
      const untold = this.#untold.get(sessionKey);
      if (untold !== undefined) this.#untold.delete(sessionKey);
      const before = untold ?? this.#affinity.get(sessionKey);
      if (before !== undefined && before !== node.id) movedFrom = before;
      lease.sessionMovedFrom = movedFrom;
      pinSession(this.#affinity, this.#affinityProvider, this.#untold, sessionKey, node.id, provider.id);
    }
    this.#leases.set(lease.leaseId, lease);
    node.leases.add(lease);
    const grant: Grant = {
      requestId,
      leaseId: lease.leaseId,
      nodeId: node.id,
      providerId: provider.id,
      servedModel: entry.servedModel,
      generation: node.generation,
      queuedMs,
      sessionMovedFrom: movedFrom,
    };
    this.#outbox.push(grant);
  }

  #dropLease(lease: Lease): void {
    const provider = lease.provider;
    this.#leases.delete(lease.leaseId);
    lease.node.leases.delete(lease);
    // A lease on a node the provider was moved away from held that node's slot, not this one.
    if (lease.node === provider.node) provider.inFlight--;
    else provider.elsewhere--;
    if (provider.inFlight <= provider.capacity) provider.excessAllowed = false;
    if (!provider.inCatalog && provider.inFlight + provider.elsewhere === 0) {
      this.#registry.providers.delete(provider.id);
      this.#forgetIfGone(provider);
    }
    this.#registry.forgetNodeIfUnused(lease.node);
  }

  /**
   * A provider dropped from the registry (it left config; its last lease, if
   * any, ended) takes its ejection and overload hold with it: no timer runs
   * on, no provider.half_open is published for a provider that is gone, and
   * one added back starts healthy. Called again after an outcome recorded on
   * its last lease, which may have started a record.
   */
  #forgetIfGone(provider: ProviderState): void {
    if (this.#registry.providers.get(provider.id) === provider) return;
    this.outliers.reset(provider);
    this.overload.reset(provider);
  }

  /** Releases every lease of the node's current generation as fenced. */
  #fence(node: NodeState): LeaseInfo[] {
    const fenced: LeaseInfo[] = [];
    for (const lease of node.leases) {
      fenced.push(lease.info());
      this.#dropLease(lease);
      this.outliers.ended(lease.provider, lease.leaseId);
      if (!lease.confirmed) this.#rememberFencedUnsent(lease);
    }
    return fenced;
  }

  #rememberFencedUnsent(lease: Lease): void {
    if (this.#fencedUnsent.size >= MAX_FENCED_UNSENT) {
      const oldest = this.#fencedUnsent.keys().next();
      if (!oldest.done) this.#fencedUnsent.delete(oldest.value);
    }
    this.#fencedUnsent.set(lease.leaseId, lease);
  }

  /** Puts a request whose lease went stale back in its queue, once. */
  #readmit(lease: Lease, now: number): void {
    if (lease.attempt === RETRIED) {
      this.#outbox.push(new RetryRefusal(lease.requestId));
      return;
    }
    if (lease.attempt >= READMITTED) {
      this.#outbox.push(new Rejection(lease.requestId, 'no_provider_available', STALE_RETRY_AFTER_SEC));
      return;
    }
    const group = this.#registry.groups.get(lease.alias);
    if (group === undefined || !group.inCatalog) {
      this.#outbox.push(new Rejection(lease.requestId, 'model_not_found', 0));
      return;
    }
    if (lease.directNodeId !== undefined && !servesOnNode(group, lease.directNodeId, lease.pinnedProviderId)) {
      this.#outbox.push(new Rejection(lease.requestId, 'node_not_found', 0));
      return;
    }
    if (this.#queued.has(lease.requestId)) return; // the caller admitted it again already
    // It already passed admission: max_queue does not apply, and its
    // original sequence puts it ahead of everyone who came after it. The
    // pump that follows grants it at once if a candidate is free.
    const item = new QueueItem(
      lease.requestId,
      group,
      lease.seq,
      lease.estimatedTokens,
      lease.directNodeId,
      now,
      now + group.queueTimeoutMs,
      READMITTED,
      undefined,
      lease.api,
      lease.pinnedProviderId,
    );
    item.sessionKey = lease.sessionKey;
    item.charged = chargedIn(lease, group.fair);
    item.priority = lease.priority;
    item.tenantKey = lease.tenantKey;
    item.weight = lease.weight;
    group.queue.insertBySeq(item);
    this.#track(item);
  }

  #track(item: QueueItem): void {
    item.group.fair?.push(item);
    item.group.queuedByApi[item.api]++;
    this.#queued.set(item.requestId, item);
    this.#deadlines.push(item);
    this.#waiting.add(item.group);
  }

  #dequeue(item: QueueItem): void {
    const group = item.group;
    group.queue.remove(item);
    group.fair?.remove(item);
    group.queuedByApi[item.api]--;
    this.#queued.delete(item.requestId);
    this.#deadlines.remove(item);
    if (group.queue.length === 0) {
      this.#waiting.delete(group);
      const groups = this.#registry.groups;
      if (!group.inCatalog && groups.get(group.alias) === group) groups.delete(group.alias);
    }
  }

  /** Rejects every queued request whose deadline is at or before `now`. */
  #expire(now: number): void {
    if (now > this.#now) this.#now = now;
    const ejectionsEnded = this.outliers.expire(now);
    const holdsEnded = this.overload.expire(now);
    for (;;) {
      const item = this.#deadlines.peek();
      if (item === undefined || item.deadline > now) break;
      const group = item.group;
      const need = contextNeed(item.estimatedTokens, this.#registry.longThreshold);
      // A pinned request whose provider went away is told that, not that the alias has no provider.
      const code: RejectCode = hasEligibleCandidate(group, this.#wantItem(item), need, item.excludeProviderId)
        ? 'queue_timeout'
        : item.pinnedProviderId !== undefined
          ? 'pinned_provider_gone'
          : 'no_provider_available';
      this.#dequeue(item);
      group.rejected++;
      // A timeout retried waits behind the queue that is there now; a missing provider has no rate to go by.
      this.#outbox.push(code === 'queue_timeout' ? this.#refusal(item.requestId, code, group, group.queue.length + 1) : new Rejection(item.requestId, code, retryAfterSecOf(group.queueTimeoutMs)));
    }
    // A hold that ended frees slots: those still waiting take them before the call does
    // anything (an admit would otherwise take one ahead of them, and FIFO would break).
    if (ejectionsEnded || holdsEnded) this.#pump();
  }

  /**
   * Grants every queued request that has a free candidate, oldest first
   * across all groups (a provider shared by several aliases serves the
   * globally oldest eligible waiter). A waiter whose candidates are all busy
   * is skipped, not a barrier. One pass suffices: capacity only shrinks
   * during a pump, so an item that found nothing free will not later.
   */
  #pump(): void {
    if (this.#waiting.size === 0) return;
    const active = this.#active;
    active.length = 0; // in case a previous pump was cut short by a throw
    for (const group of this.#waiting) {
      if (!hasFreeProvider(group)) continue;
      const fair = group.fair;
      if (fair === undefined) group.cursor = group.queue.head;
      else {
        fair.prepare(this.#now, this.#fairness.agingStepPerSec);
        group.cursor = fair.next();
        group.cursorRank = fair.currentEffective();
      }
      group.failUndirected.fill(Infinity);
      if (group.failByNode.size > 0) group.failByNode.clear();
      active.push(group);
    }
    const threshold = this.#registry.longThreshold;
    while (active.length > 0) {
      // Few groups wait at once; a linear scan for the oldest cursor is cheapest.
      // By effective priority first (always 0 while fairness is off), then by admission order.
      let at = 0;
      let oldest = (active[0].cursor as QueueItem).seq;
      let rank = active[0].cursorRank;
      for (let i = 1; i < active.length; i++) {
        const seq = (active[i].cursor as QueueItem).seq;
        const r = active[i].cursorRank;
        if (r > rank || (r === rank && seq < oldest)) {
          oldest = seq;
          rank = r;
          at = i;
        }
      }
      const group = active[at];
      const item = group.cursor as QueueItem;
      const fair = group.fair;
      if (fair === undefined) group.cursor = item.next;
      else fair.skip(item);
      const need = contextNeed(item.estimatedTokens, threshold);
      const want = this.#wantItem(item);
      if (!knownToFail(group, want, need)) {
        const entry = pickCandidate(group, want, need, item.excludeProviderId);
        if (entry !== undefined) {
          this.#dequeue(item);
          if (fair !== undefined && !item.charged) fair.charge(item.priority, item.tenantKey, item.weight, item.estimatedTokens);
          this.#grant(
            group,
            entry,
            item.requestId,
            item.seq,
            item.estimatedTokens,
            item.directNodeId,
            item.attempt,
            this.#now - item.enqueuedAt,
            item.sessionKey,
            item.api,
            item.pinnedProviderId,
          );
          this.#tagLease(item.priority, item.tenantKey, item.weight, fair);
        } else if (item.excludeProviderId === undefined && want.pinnedProviderId === undefined && failureIsMonotone(group, want.api ?? 0)) {
          // A retry's or a pinned request's candidate set is narrower than its peers': its failure proves nothing about theirs
          // (nor does one kept to its session's cli provider: another provider of that node may be free).
          rememberFailure(group, want, need);
        }
      }
      if (fair !== undefined) {
        group.cursor = fair.next();
        group.cursorRank = fair.currentEffective();
      }
      // Stop walking a group once nothing of it is free (the common case
      // after a release: one grant, then every slot is taken again).
      if (group.cursor === null || !hasFreeProvider(group)) {
        group.cursor = null;
        active[at] = active[active.length - 1];
        active.pop();
      }
    }
  }

  /**
   * Session affinity: the node that last served this session, while a
   * provider of the alias there could take this request (eligible: enabled,
   * with capacity, healthy, not ejected, on a connected node that is not draining; serving
   * its API; with the context it needs); otherwise undefined (any candidate,
   * and the next grant pins the session there). Waiting for a node that
   * cannot serve it would end only in a timeout.
   */
  #affinityNode(group: GroupState, sessionKey: number, api: ApiKind, need: number): string | undefined {
    if (sessionKey === 0) return undefined;
    const nodeId = this.#affinity.get(sessionKey);
    if (nodeId === undefined) return undefined;
    for (const entry of group.entries) {
      const p = entry.provider;
      if (takesSessionTurn(p, nodeId, api, need)) return nodeId;
    }
    return undefined;
  }

  /** What a request asks of its candidates, in one reused object (the scheduler is synchronous). */
  #wantOf(directNodeId: string | undefined, api: ApiKind | undefined, pinnedProviderId: string | undefined): Wanted {
    const want = this.#want;
    want.directNodeId = directNodeId;
    want.api = api ?? 0;
    want.pinnedProviderId = pinnedProviderId;
    return want;
  }

  #wantItem(item: QueueItem): Wanted {
    return this.#wantOf(this.#directOf(item), item.api, item.pinnedProviderId ?? this.#sessionProviderOf(item));
  }

  /** The provider a queued item's session keeps to (see #affinityProviderOf), unless it named a node, was pinned or retries elsewhere. */
  #sessionProviderOf(item: QueueItem): string | undefined {
    if (item.sessionKey === 0 || item.directNodeId !== undefined || item.excludeProviderId !== undefined || item.pinnedProviderId !== undefined) return undefined;
    return this.#affinityProviderOf(item.group, item.sessionKey, item.api, contextNeed(item.estimatedTokens, this.#registry.longThreshold));
  }

  /**
   * The provider that last served the session, when it is a cli provider of
   * this alias on the session's node that could take the request (as
   * #affinityNode judges); otherwise undefined, and the node's affinity alone
   * applies (a client switching to an alias that provider does not serve).
   */
  #affinityProviderOf(group: GroupState, sessionKey: number, api: ApiKind, need: number): string | undefined {
    if (sessionKey === 0) return undefined;
    const providerId = this.#affinityProvider.get(sessionKey);
    const nodeId = this.#affinity.get(sessionKey);
    if (providerId === undefined || nodeId === undefined) return undefined;
    for (const entry of group.entries) {
      const p = entry.provider;
      if (p.id === providerId && p.holdsSessions && takesSessionTurn(p, nodeId, api, need)) return providerId;
    }
    return undefined;
  }

  /** The node a queued item must go to: the one it named, else its session's (a retry elsewhere, or a pinned request, keeps neither). */
  #directOf(item: QueueItem): string | undefined {
    if (item.directNodeId !== undefined || item.excludeProviderId !== undefined || item.pinnedProviderId !== undefined) return item.directNodeId;
    return this.#affinityNode(item.group, item.sessionKey, item.api, contextNeed(item.estimatedTokens, this.#registry.longThreshold));
  }

  /** Gives every group a FairQueue while fairness is on (rebuilt from its FIFO when it turns on), none while off. */
  #applyFairness(): void {
    const on = this.#fairness.enabled;
    for (const group of this.#registry.groups.values()) {
      if (on === (group.fair !== undefined)) continue;
      group.cursorRank = 0;
      if (!on) {
        group.fair = undefined;
        continue;
      }
      const fair = new FairQueue<QueueItem>();
      group.fair = fair;
      for (let item = group.queue.head; item !== null; item = item.next) fair.push(item);
    }
  }

  /** Fairness view for status: per alias, per band and tenant, depth, vt and dispatches. */
  fairnessStatus(): FairnessStatus | undefined {
    if (!this.#fairness.enabled) return undefined;
    const groups: FairGroupStatus[] = [];
    for (const group of this.#registry.groups.values()) {
      const fair = group.fair;
      if (fair === undefined) continue;
      const bands: FairBandStatus[] = [];
      for (const band of fair.bands.values()) {
        const tenants: FairTenantStatus[] = [];
        for (const t of band.tenants.values()) tenants.push({ tenant: t.key, queued: t.length, virtualTime: t.vt, weight: t.weight });
        tenants.sort((a, b) => a.tenant - b.tenant);
        bands.push({ priority: band.priority, queued: band.length, clock: band.clock, tenants });
      }
      bands.sort((a, b) => b.priority - a.priority);
      const dispatches = [...fair.dispatchedBy].map(([tenant, dispatched]) => ({ tenant, dispatched })).sort((a, b) => a.tenant - b.tenant);
      groups.push({ alias: group.alias, bands, dispatches, dispatchPeriod: fair.dispatchPeriod });
    }
    groups.sort((a, b) => (a.alias < b.alias ? -1 : a.alias > b.alias ? 1 : 0));
    return { agingStepPerSec: this.#fairness.agingStepPerSec, groups };
  }

  #flush(): void {
    if (this.#delivering) return; // the outer call's loop delivers these
    this.#delivering = true;
    const outbox = this.#outbox;
    let delivered = 0;
    try {
      while (delivered < outbox.length) {
        const decision = outbox[delivered++];
        if (decision instanceof Rejection) this.#sink.reject(decision.requestId, decision.code, decision.retryAfterSec, decision.retryAfterMs);
        else if (decision instanceof RetryRefusal) this.#sink.retryRefused(decision.requestId);
        else this.#sink.grant(decision);
      }
    } finally {
      // A throwing sink loses only the decision it threw on.
      if (delivered === outbox.length) outbox.length = 0;
      else outbox.splice(0, delivered);
      this.#delivering = false;
    }
  }

}

/** `p`, on the session's node `nodeId`, could take the session's next turn (its API, its context): the session keeps to it. */
function takesSessionTurn(p: ProviderState, nodeId: string, api: ApiKind, need: number): boolean {
  return p.node.id === nodeId && p.capacity > 0 && isEligible(p) && providerServes(p, api) && (need === 0 || (p.maxContextTokens ?? 0) >= need);
}

/** Some provider `group`'s request (as `want`, `need`) could take is also one of `other`'s. */
function sharesProvider(group: GroupState, other: GroupState, want: Wanted, need: number): boolean {
  for (const entry of group.entries) {
    if (!fits(entry.provider, want, need)) continue;
    for (const theirs of other.entries) if (theirs.provider === entry.provider) return true;
  }
  return false;
}

/** 1 + the requests ahead in a FIFO queue. */
function fifoPosition(item: QueueItem): number {
  let n = 1;
  for (let cur = item.prev; cur !== null; cur = cur.prev) n++;
  return n;
}

function weightOf(weight: number | undefined): number {
  return weight !== undefined && weight > 0 && Number.isFinite(weight) ? weight : 1;
}

/** What a tenant was charged at dispatch (fair.ts chargeOf). */
function chargeOfTokens(tokens: number): number {
  return tokens >= 1 ? tokens : 1;
}

/** Remembers (or refreshes) which node serves the session; the least recently granted is forgotten past the bound. */
function pinSession(affinity: Map<number, string>, providers: Map<number, string>, untold: Map<number, string>, sessionKey: number, nodeId: string, providerId: string): void {
  affinity.delete(sessionKey);
  affinity.set(sessionKey, nodeId);
  providers.set(sessionKey, providerId);
  if (affinity.size > MAX_SESSIONS) {
    const forgotten = affinity.keys().next().value as number;
    affinity.delete(forgotten);
    providers.delete(forgotten);
    untold.delete(forgotten);
  }
}

// The failure memo is per API: requests of another API have other candidates.
function knownToFail(group: GroupState, want: Wanted, need: number): boolean {
  const api = want.api ?? 0;
  if (need >= group.failUndirected[api]) return true;
  if (want.directNodeId === undefined) return false;
  const failed = group.failByNode.get(api + '\0' + want.directNodeId);
  return failed !== undefined && need >= failed;
}

function rememberFailure(group: GroupState, want: Wanted, need: number): void {
  const api = want.api ?? 0;
  if (want.directNodeId === undefined) {
    if (need < group.failUndirected[api]) group.failUndirected[api] = need;
    return;
  }
  const key = api + '\0' + want.directNodeId;
  const failed = group.failByNode.get(key);
  if (failed === undefined || need < failed) group.failByNode.set(key, need);
}

/**
 * The pinned provider is in the alias, enabled with capacity, on a
 * connected node that is not leaving, and serves the API: otherwise its
 * state is out of reach and the request is refused at once (capacity 0 is
 * an operator taking it out of rotation). One only out of service for now
 * is waited for, as any request waits for a busy provider: failing its
 * probe or held by an ejection, its deadline answers pinned_provider_gone if
 * it does not come back; in a Retry-After (overloaded, there), queue_timeout
 * with a Retry-After, as for any request.
 */
function pinnedServes(group: GroupState, providerId: string, api: ApiKind): boolean {
  for (const entry of group.entries) {
    const p = entry.provider;
    if (p.id !== providerId) continue;
    const node = p.node;
    return p.enabled && p.capacity > 0 && p.inCatalog && node.connected && !node.draining && (node.announced === undefined || node.announced.has(p.id)) && providerServes(p, api);
  }
  return false;
}

/**
 * After a refresh, `provider` can still take its pinned waiters: the one
 * they name, in service, on the node it was on before (`nodeBefore`): the
 * same id on another node is a process that never saw their responses.
 */
function servesPinned(provider: ProviderState, pinnedProviderId: string, nodeBefore: ReadonlyMap<string, string>): boolean {
  if (provider.id !== pinnedProviderId || !provider.enabled || provider.capacity <= 0) return false;
  const before = nodeBefore.get(pinnedProviderId);
  return before === undefined || before === provider.node.id;
}

function earliest(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined || a <= b ? a : b;
}

/** What a lease's end says about its provider's health. */
function outcomeOf(reason: ReleaseReason): Outcome {
  if (reason === 'end') return 'success';
  if (reason === 'provider_failed') return 'failure';
  return 'neutral';
}

/** The lease's tenant was charged in `fair` (the group's fair queue now): its usage corrects that charge, and a requeue is not charged again. */
function chargedIn(lease: Lease, fair: FairQueue<QueueItem> | undefined): boolean {
  return lease.chargedIn !== undefined && lease.chargedIn === fair;
}
