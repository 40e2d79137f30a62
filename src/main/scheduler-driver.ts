// Drives the pure Scheduler from the event loop: stamps every call with the
// monotonic clock, arms the one timer the queue deadlines need, and hands
// the scheduler's decisions to the data path AFTER the scheduler call that
// produced them has returned. That last point matters: a decision handler
// may itself call back (a failed send releases its lease), and the
// scheduler must never be re-entered mid-pump.
import { performance } from 'node:perf_hooks';
import type { EdgeConfig } from '../shared/config-types.js';
import type { DecisionHandler, NodeRegistrar, SchedulerPort } from '../contract/scheduler-port.js';
import { Scheduler } from './scheduler/index.js';
import { Outliers } from './scheduler/outliers.js';
import { Overload } from './scheduler/overload.js';
import { outlierPolicyOf, overloadPolicyOf } from './config-resilience.js';
import type {
  AdmitRequest,
  ConnectResult,
  Grant,
  LeaseInfo,
  NodeFailure,
  Overloaded,
  RejectCode,
  ReleaseReason,
  SchedulerSink,
  SchedulerStatus,
} from '../contract/scheduler.js';

export type { DecisionHandler } from '../contract/scheduler-port.js';

interface Rejection {
  readonly requestId: number;
  readonly code: RejectCode;
  readonly retryAfterSec: number;
  readonly retryAfterMs: number | undefined;
}

/** requeue() found no other candidate (delivered in order with grants and rejections). */
/** requeue() queued the request again: the data path may now say it went back to the queue. */
class RequeueAcceptance {
  constructor(readonly requestId: number) {}
}

class RequeueRefusal {
  constructor(readonly requestId: number) {}
}

/** reportStale()'s answer, delivered in order after any re-admission's decision. */
class StaleAnswer {
  constructor(
    readonly requestId: number,
    readonly leaseId: number,
    readonly current: boolean,
  ) {}
}

type Decision = Grant | Rejection | RequeueRefusal | RequeueAcceptance | StaleAnswer;

function isGrant(decision: Decision): decision is Grant {
  return (decision as Grant).leaseId !== undefined && !(decision instanceof StaleAnswer);
}

/**
 * Also the SchedulerPort of a single-threaded edge (workers.count 0): the
 * data path's calls land here directly and answers are delivered through the
 * same decision queue, after the scheduler call returned.
 */
export class SchedulerDriver implements SchedulerSink, SchedulerPort {
  readonly scheduler: Scheduler;
  #handler: DecisionHandler | undefined;
  #registrar: NodeRegistrar | undefined;
  readonly #decisions: Decision[] = [];
  #delivering = false;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Infinity;
  /** One thread: ClientAuth counts each key's open requests where it authenticates. */
  readonly countsKeys = false;

  constructor(config: EdgeConfig) {
    this.scheduler = new Scheduler(config, this, new Outliers(outlierPolicyOf(config)), new Overload(overloadPolicyOf(config)));
  }

  setHandler(handler: DecisionHandler): void {
    this.#handler = handler;
  }

  setRegistrar(registrar: NodeRegistrar): void {
    this.#registrar = registrar;
  }

  // SchedulerSink: only records; delivery happens in flush().
  grant(grant: Grant): void {
    this.#decisions.push(grant);
  }

  reject(requestId: number, code: RejectCode, retryAfterSec: number, retryAfterMs?: number): void {
    this.#decisions.push({ requestId, code, retryAfterSec, retryAfterMs });
  }

  retryRefused(requestId: number): void {
    this.#decisions.push(new RequeueRefusal(requestId));
  }

  /**
   * Runs `fn` with decision delivery held back, then delivers. Used where
   * the data path must finish its own state change (a node session becoming
   * current) before any grant the scheduler made meanwhile reaches it.
   */
  deferDecisions<T>(fn: () => T): T {
    if (this.#delivering) return fn();
    this.#delivering = true;
    let result: T;
    try {
      result = fn();
    } finally {
      this.#delivering = false;
    }
    this.#flush();
    return result;
  }

  /** Answered at once, on this thread. */
  queryQueuePosition(requestId: number): void {
    const at = this.scheduler.queuePosition(requestId, performance.now());
    this.#handler?.onQueuePosition?.(requestId, at?.position ?? 0, at?.etaMs);
  }

  admit(request: AdmitRequest): void {
    this.scheduler.admit(request, performance.now());
    this.#flush();
  }

  cancel(requestId: number): boolean {
    const removed = this.scheduler.cancel(requestId, performance.now());
    this.#flush();
    return removed;
  }

  /** Drops the queued requests and releases the leases of a data path that is gone (see Scheduler.forgetRequests). */
  forgetRequests(belongs: (requestId: number) => boolean): { queued: number; leases: number } {
    const forgotten = this.scheduler.forgetRequests(belongs, performance.now());
    this.#flush();
    return forgotten;
  }

  release(leaseId: number, reason: ReleaseReason, usedTokens = 0, retryAfterMs?: number): boolean {
    const released = this.scheduler.release(leaseId, reason, performance.now(), usedTokens, retryAfterMs);
    this.#flush();
    return released;
  }

  /** Pre-send fence; when stale the request is re-admitted and its new decision delivered. */
  confirm(leaseId: number): boolean {
    const current = this.scheduler.confirm(leaseId, performance.now());
    this.#flush();
    return current;
  }

  /** Failed before the first byte: re-queue once for another provider (see Scheduler.retry). */
  retry(leaseId: number, request: AdmitRequest, excludeProviderId: string): boolean {
    const requeued = this.scheduler.retry(leaseId, request, excludeProviderId, performance.now());
    this.#flush();
    return requeued;
  }

  connect(nodeId: string, announcedProviders?: readonly string[], endpoints?: ReadonlyMap<string, number>, draining = false, unhealthy?: ReadonlySet<string>): ConnectResult | undefined {
    const result = this.scheduler.connect(nodeId, performance.now(), announcedProviders, endpoints, draining, unhealthy);
    this.#flush();
    return result;
  }

  disconnect(nodeId: string, generation: number): readonly LeaseInfo[] | undefined {
    const released = this.scheduler.disconnect(nodeId, generation, performance.now());
    this.#flush();
    return released;
  }

  // --- SchedulerPort (the data path on this thread) ----------------------------

  requeue(leaseId: number, request: AdmitRequest, excludeProviderId: string, providerFailed = false, overloaded?: Overloaded, node?: NodeFailure): void {
    const queued = this.scheduler.retry(leaseId, request, excludeProviderId, performance.now(), providerFailed, overloaded, node);
    this.#decisions.push(queued ? new RequeueAcceptance(request.requestId) : new RequeueRefusal(request.requestId));
    this.#flush();
  }

  /** Decisions are made as records arrive on this thread: nothing waits to be published. */
  publish(): void {}

  confirmSent(leaseId: number): boolean {
    return this.confirm(leaseId);
  }

  /** Never called: countsKeys is false. */
  releaseKey(_requestId: number, _limited: boolean, _usedTokens: number): void {}

  reportStale(requestId: number, leaseId: number): void {
    // With I/O workers no lease is marked sent, so a fence remembers every one as unsent, and a
    // burst of fences over the memory's bound can forget one whose grant is still on its way.
    // confirm() re-admits nothing for it: refused here, or its request would wait with no deadline.
    const known = this.scheduler.decidesFor(leaseId);
    const current = this.scheduler.confirm(leaseId, performance.now());
    if (!known) this.#decisions.push({ requestId, code: 'no_provider_available', retryAfterSec: 1, retryAfterMs: undefined });
    this.#decisions.push(new StaleAnswer(requestId, leaseId, current));
    this.#flush();
  }

  /** Activation and fencing in one step: the registrar makes the session current before any grant is delivered. */
  register(nodeId: string, serial: number, providerIds: readonly string[], endpoints?: ReadonlyMap<string, number>, draining = false, unhealthy?: ReadonlySet<string>): void {
    this.deferDecisions(() => {
      const connected = this.connect(nodeId, providerIds, endpoints, draining, unhealthy);
      this.#registrar?.onConnected(serial, nodeId, connected?.generation ?? 0);
    });
  }

  /** One thread holds every lane, so the driver only checks the generation. */
  joinLane(nodeId: string, serial: number, generation: number): void {
    const current = this.scheduler.currentGeneration(nodeId);
    this.#registrar?.onConnected(serial, nodeId, current !== 0 && current === generation ? generation : 0);
  }

  leaveLane(_nodeId: string, _generation: number): void {}

  setProviderHealth(nodeId: string, providerId: string, healthy: boolean, generation = 0): void {
    if (this.scheduler.setProviderHealth(nodeId, providerId, healthy, performance.now(), generation)) this.onProviderHealth?.(nodeId, providerId, healthy);
    this.#flush();
  }

  setAnnounced(nodeId: string, providerId: string, announced: boolean, endpoints: number | undefined, generation = 0): void {
    this.scheduler.setAnnounced(nodeId, providerId, announced, endpoints, performance.now(), generation);
    this.#flush();
  }

  /** Told when a provider's probe verdict changed in the scheduler (the edge publishes it as an event). */
  onProviderHealth: ((nodeId: string, providerId: string, healthy: boolean) => void) | undefined;

  /** True when it applied (the node is connected, in `generation` when one is named). */
  setDraining(nodeId: string, draining: boolean, generation = 0): boolean {
    const applied = this.scheduler.setDraining(nodeId, draining, performance.now(), generation);
    this.#flush();
    return applied;
  }

  setConfig(config: EdgeConfig): void {
    this.scheduler.outliers.setPolicy(outlierPolicyOf(config));
    this.scheduler.overload.setPolicy(overloadPolicyOf(config));
    this.scheduler.setConfig(config, performance.now());
    this.#flush();
  }

  status(): SchedulerStatus {
    return this.scheduler.status(performance.now());
  }

  /** Operator reset of a provider's outlier breaker; false when it had none. */
  resetOutlier(providerId: string): boolean {
    const reset = this.scheduler.resetOutlier(providerId, performance.now());
    this.#flush();
    return reset;
  }

  close(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  #flush(): void {
    if (this.#delivering) return; // the outer flush loop picks these up
    const handler = this.#handler;
    this.#delivering = true;
    let delivered = 0;
    try {
      // Index loop: handlers may append more decisions while we deliver.
      while (delivered < this.#decisions.length) {
        const decision = this.#decisions[delivered++];
        if (!handler) continue;
        if (decision instanceof RequeueRefusal) handler.onRequeueRefused(decision.requestId);
        else if (decision instanceof RequeueAcceptance) handler.onRequeueAccepted(decision.requestId);
        else if (decision instanceof StaleAnswer) handler.onStaleChecked(decision.requestId, decision.leaseId, decision.current);
        else if (isGrant(decision)) handler.onGrant(decision, -1);
        else handler.onReject(decision.requestId, decision.code, decision.retryAfterSec, decision.retryAfterMs);
      }
    } finally {
      // A throwing handler loses only its own decision, never replays others.
      this.#decisions.splice(0, delivered);
      this.#delivering = false;
    }
    this.#armTimer();
  }

  #armTimer(): void {
    const deadline = this.scheduler.nextDeadline();
    if (deadline === undefined) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#timerAt = Infinity;
      return;
    }
    if (this.#timer && deadline >= this.#timerAt) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timerAt = deadline;
    this.#timer = setTimeout(onDeadline, Math.max(0, deadline - performance.now()) + 1, this);
    this.#timer.unref();
  }

  /** @internal timer callback */
  expire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    this.scheduler.tick(performance.now());
    this.#flush();
  }
}

function onDeadline(driver: SchedulerDriver): void {
  driver.expire();
}
