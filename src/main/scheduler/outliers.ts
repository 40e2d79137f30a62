// Passive outlier detection, as pure scheduler state (time is passed in,
// randomness injected): a provider whose requests fail for provider causes
// (connect errors, upstream resets, 5xx other than 503) `consecutiveFailures`
// times in a row, or at `failureRate` or more of its last
// `failureRateWindow` requests (once at least `failureRateMinRequests` of
// them were seen since its first failure), is ejected for base × its ejection count (capped, with
// jitter), then half-open: one probe request; its success returns the
// provider, its failure ejects it again for longer. Overload (429/503) and
// node loss are not failures here (fencing handles node loss). An ejection
// that would leave an alias without a serving provider, or eject more than
// `maxEjectionShare` of an alias's providers, is not made: requests keep
// going there (or queue) instead.
import type { OutlierView } from '../../contract/scheduler.js';
import { couldServe, isEligible } from './candidates.js';
import type { GroupState, ProviderState } from './state.js';

export interface OutlierPolicy {
  readonly consecutiveFailures: number;
  readonly baseEjectionMs: number;
  readonly maxEjectionMs: number;
  /** Largest share of an alias's providers that may be ejected at once (0..1). */
  readonly maxEjectionShare: number;
  /** ± this fraction of the ejection time, so ejected providers do not all return at once. */
  readonly jitter: number;
  /** Share of failed requests (0..1) in the window that ejects; 0 = failure-rate ejection off. */
  readonly failureRate: number;
  /** How many of the provider's latest outcomes the rate is taken over. */
  readonly failureRateWindow: number;
  /** Outcomes the window must hold before the rate is judged. */
  readonly failureRateMinRequests: number;
}

export const DEFAULT_OUTLIER_POLICY: OutlierPolicy = {
  consecutiveFailures: 5,
  baseEjectionMs: 30_000,
  maxEjectionMs: 300_000,
  maxEjectionShare: 0.5,
  jitter: 0.1,
  failureRate: 0.5,
  failureRateWindow: 20,
  failureRateMinRequests: 10,
};

export type OutlierPhase = 'healthy' | 'ejected' | 'half_open';
export type Outcome = 'success' | 'failure' | 'neutral';

export type OutlierStatus = OutlierView;

export interface OutlierChange {
  readonly type: 'provider.ejected' | 'provider.half_open' | 'provider.returned';
  readonly provider: string;
  readonly reason: string;
  readonly ejectedMs?: number;
  readonly ejections?: number;
}

class OutlierRecord {
  failures = 0;
  ejections = 0;
  phase: OutlierPhase = 'healthy';
  untilMs = 0;
  reason = '';
  /** Half-open: the single probe is in flight. */
  probing = false;
  /** The probe's lease: only its end is the half-open verdict (a lease granted before the ejection may end meanwhile). */
  probeLeaseId = 0;
  /** When the last ejection ended; a long healthy stretch forgets the ejection count. */
  returnedAtMs = 0;
  /** The latest outcomes (1 = failure) as a ring, from the provider's first failure on. */
  readonly window: Uint8Array;
  windowAt = 0;
  windowCount = 0;
  windowFailures = 0;

  constructor(windowSize: number) {
    this.window = new Uint8Array(Math.max(1, windowSize));
  }

  /** Adds one outcome to the ring; the oldest falls out when it is full. */
  observe(failed: boolean): void {
    const window = this.window;
    if (this.windowCount === window.length) this.windowFailures -= window[this.windowAt];
    else this.windowCount++;
    window[this.windowAt] = failed ? 1 : 0;
    if (failed) this.windowFailures++;
    this.windowAt = (this.windowAt + 1) % window.length;
  }

  clearWindow(): void {
    this.window.fill(0);
    this.windowAt = this.windowCount = this.windowFailures = 0;
  }

  /** This record with an empty window of `size` (everything else as it is). */
  withWindow(size: number): OutlierRecord {
    const next = new OutlierRecord(size);
    next.failures = this.failures;
    next.ejections = this.ejections;
    next.phase = this.phase;
    next.untilMs = this.untilMs;
    next.reason = this.reason;
    next.probing = this.probing;
    next.probeLeaseId = this.probeLeaseId;
    next.returnedAtMs = this.returnedAtMs;
    return next;
  }
}

export class Outliers {
  #policy: OutlierPolicy;
  readonly #random: () => number;
  readonly #records = new Map<ProviderState, OutlierRecord>();
  #listener: ((event: OutlierChange) => void) | undefined;

  constructor(policy: OutlierPolicy = DEFAULT_OUTLIER_POLICY, random: () => number = Math.random) {
    this.#policy = policy;
    this.#random = random;
  }

  /**
   * A refreshed resilience.outliers: the next outcome is judged by it, and
   * the next ejection timed by it; ejections under way keep their end. A new
   * failure_rate_window starts every provider's window afresh (its
   * consecutive failures stand).
   */
  setPolicy(policy: OutlierPolicy): void {
    const resized = policy.failureRateWindow !== this.#policy.failureRateWindow;
    this.#policy = policy;
    if (!resized) return;
    for (const [p, record] of this.#records) this.#records.set(p, record.withWindow(policy.failureRateWindow));
  }

  /** Told of every phase change (for events and logs; never called for counting alone). */
  setListener(listener: (event: OutlierChange) => void): void {
    this.#listener = listener;
  }

  /** Lease `leaseId` was granted on `p`: a half-open provider takes no second request until this probe ends. */
  granted(p: ProviderState, leaseId: number): void {
    const record = this.#records.get(p);
    if (record === undefined || record.phase !== 'half_open') return;
    record.probing = true;
    record.probeLeaseId = leaseId;
    p.held = true;
  }

  /**
   * Lease `leaseId` on `p` ended. `groups`: the aliases `p` serves (for the
   * last-provider and share guards). While half-open only the probe's own
   * lease counts: one granted before the ejection says nothing about now.
   */
  outcome(p: ProviderState, outcome: Outcome, now: number, groups: readonly GroupState[], leaseId: number): void {
    const known = this.#records.get(p);
    if (known !== undefined && known.phase === 'half_open' && (!known.probing || known.probeLeaseId !== leaseId)) return;
    if (outcome === 'neutral') {
      const record = this.#records.get(p);
      if (record?.probing) {
        // The probe ended without a verdict (client left, timeout): the next request probes.
        record.probing = false;
        p.held = false;
      }
      return;
    }
    if (outcome === 'success') {
      const record = this.#records.get(p);
      if (record === undefined) return;
      record.failures = 0;
      if (record.phase === 'healthy') record.observe(false);
      if (record.phase === 'half_open') this.#return(p, record, now, 'the half-open probe succeeded');
      return;
    }
    let record = this.#records.get(p);
    if (record === undefined) {
      record = new OutlierRecord(this.#policy.failureRateWindow);
      this.#records.set(p, record);
    }
    if (record.phase === 'half_open') {
      record.probing = false;
      const refused = this.#guard(p, groups);
      if (refused !== undefined) {
        // Still the last serving provider (the others left while it was out): it stays
        // half-open, one request at a time, and the rest wait for it.
        record.reason = refused;
        p.held = false;
        return;
      }
      this.#eject(p, record, now, 'the half-open probe failed');
      return;
    }
    if (record.phase === 'ejected') return; // a request granted before the ejection
    record.failures++;
    record.observe(true);
    const policy = this.#policy;
    let why: string | undefined;
    if (record.failures >= policy.consecutiveFailures) why = `${record.failures} consecutive failures`;
    else if (
      policy.failureRate > 0 &&
      record.windowCount >= policy.failureRateMinRequests &&
      record.windowFailures >= policy.failureRate * record.windowCount
    ) {
      why = `${record.windowFailures} of its last ${record.windowCount} requests failed`;
    }
    if (why === undefined) return;
    const refusal = this.#guard(p, groups);
    if (refusal !== undefined) {
      record.reason = refusal;
      return;
    }
    this.#eject(p, record, now, why);
  }

  /**
   * A lease on `p` ended with no outcome to judge: fenced with its node,
   * or forgotten with its worker. Were it the half-open probe, the next
   * request probes; left set, the provider would stay held for good.
   */
  ended(p: ProviderState, leaseId: number): void {
    const record = this.#records.get(p);
    if (record === undefined || !record.probing || record.probeLeaseId !== leaseId) return;
    record.probing = false;
    p.held = false;
  }

  /**
   * The node's active health probe of `p` passed: a half-open provider
   * whose probe request is not yet out returns on it (the active probe is
   * its half-open probe). True when it returned.
   */
  activeProbePassed(p: ProviderState, now: number): boolean {
    const record = this.#records.get(p);
    if (record === undefined || record.phase !== 'half_open' || record.probing) return false;
    record.failures = 0;
    this.#return(p, record, now, 'the active health probe passed');
    return true;
  }

  /** Ejections that ended by `now` become half-open. True when a provider became eligible again. */
  expire(now: number): boolean {
    let any = false;
    for (const [p, record] of this.#records) {
      if (record.phase !== 'ejected' || record.untilMs > now) continue;
      record.phase = 'half_open';
      record.probing = false;
      p.held = false;
      p.ejected = false;
      any = true;
      this.#listener?.({ type: 'provider.half_open', provider: p.id, reason: record.reason });
    }
    return any;
  }

  /**
   * Providers left `groups` (their node went, drained, failed its health
   * probe, left the catalog, or went to capacity 0): an alias with no provider serving any more
   * gets its ejected ones back half-open at once, so a probe decides
   * instead of a timer while every request waits. True when any came back.
   */
  lastResort(groups: Iterable<GroupState>): boolean {
    if (this.#records.size === 0) return false;
    let any = false;
    for (const group of groups) {
      let serving = false;
      for (const entry of group.entries) {
        const phase = this.#records.get(entry.provider)?.phase ?? 'healthy';
        if (phase !== 'ejected' && entry.provider.capacity > 0 && couldServe(entry.provider)) {
          serving = true;
          break;
        }
      }
      if (serving) continue;
      for (const entry of group.entries) {
        const p = entry.provider;
        const record = this.#records.get(p);
        if (record === undefined || record.phase !== 'ejected' || !couldServe(p)) continue;
        record.phase = 'half_open';
        record.probing = false;
        record.reason = `back early: the last serving provider of ${group.alias} left`;
        p.held = false;
        p.ejected = false;
        any = true;
        this.#listener?.({ type: 'provider.half_open', provider: p.id, reason: record.reason });
      }
    }
    return any;
  }

  /** The earliest ejection end, for the driver's timer. */
  nextDeadline(): number | undefined {
    let next: number | undefined;
    for (const record of this.#records.values()) if (record.phase === 'ejected' && (next === undefined || record.untilMs < next)) next = record.untilMs;
    return next;
  }

  /** An operator reset the breaker: healthy at once, counts forgotten. False when there was nothing to reset. */
  reset(p: ProviderState): boolean {
    const record = this.#records.get(p);
    if (record === undefined) return false;
    this.#records.delete(p);
    p.held = false;
    p.ejected = false;
    return true;
  }

  /** Has anything to show (an ejection, a half-open state, or failures counted). */
  tracks(p: ProviderState): boolean {
    return this.#records.has(p);
  }

  status(p: ProviderState): OutlierStatus {
    const record = this.#records.get(p);
    if (record === undefined) return { phase: 'healthy', untilMs: undefined, reason: '', ejections: 0, consecutiveFailures: 0 };
    return {
      phase: record.phase,
      untilMs: record.phase === 'ejected' ? record.untilMs : undefined,
      reason: record.reason,
      ejections: record.ejections,
      consecutiveFailures: record.failures,
    };
  }

  /** Why `p` may not be ejected now, if it may not. */
  #guard(p: ProviderState, groups: readonly GroupState[]): string | undefined {
    for (const group of groups) {
      let serving = 0;
      let ejected = 0;
      for (const entry of group.entries) {
        const other = entry.provider;
        if (other === p) continue; // a half-open p being judged again is not one of the others
        const phase = this.#records.get(other)?.phase ?? 'healthy';
        if (phase !== 'healthy') ejected++;
        else if (other.capacity > 0 && isEligible(other)) serving++;
      }
      if (serving === 0) return `not ejected: the last serving provider of ${group.alias}`;
      if (ejected + 1 > this.#policy.maxEjectionShare * group.entries.length) return `not ejected: ${group.alias} is at its largest ejected share`;
    }
    return undefined;
  }

  #eject(p: ProviderState, record: OutlierRecord, now: number, reason: string): void {
    const policy = this.#policy;
    // A long healthy stretch since the last return forgets earlier ejections.
    if (record.ejections > 0 && record.phase === 'healthy' && now - record.returnedAtMs > policy.maxEjectionMs) record.ejections = 0;
    record.ejections++;
    const base = Math.min(policy.baseEjectionMs * record.ejections, policy.maxEjectionMs);
    const jitter = 1 + policy.jitter * (this.#random() * 2 - 1);
    record.untilMs = now + base * jitter;
    record.phase = 'ejected';
    record.reason = reason;
    record.failures = 0;
    record.clearWindow();
    p.held = true;
    p.ejected = true;
    this.#listener?.({ type: 'provider.ejected', provider: p.id, reason, ejectedMs: Math.round(record.untilMs - now), ejections: record.ejections });
  }

  #return(p: ProviderState, record: OutlierRecord, now: number, reason: string): void {
    record.phase = 'healthy';
    record.probing = false;
    record.reason = '';
    record.returnedAtMs = now;
    p.held = false;
    p.ejected = false;
    this.#listener?.({ type: 'provider.returned', provider: p.id, reason });
  }
}
