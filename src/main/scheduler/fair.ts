// Fair queuing for one alias (docs/scheduling.md): priority bands, and inside
// each band weighted fair queuing charged by tokens between tenants. Only
// used when fairness is on; with it off the group's plain FIFO decides alone.
//
// Every queued item is in its group's FIFO (status, deadlines, max_queue) and,
// here, in its tenant's FIFO inside its band. A tenant's virtual time (vt)
// grows by charge / weight at each dispatch; the pump serves, within the band
// of highest effective priority, the tenant with the least vt. A tenant
// returning from idle starts at the band's clock (the start vt of the last
// dispatch), so it banks no credit for the time it was away.

/** What fair queuing needs of a queued request (state.ts T); its own links for the tenant's FIFO. */
export interface FairItem<T> {
  readonly seq: number;
  readonly enqueuedAt: number;
  readonly estimatedTokens: number;
  /** 0 = first admission (pushed in arrival order); re-admissions are inserted by seq and arrived later. */
  readonly attempt: number;
  readonly priority: number;
  readonly tenantKey: number;
  readonly weight: number;
  /** A retry or re-admission: dispatch charges its tenant nothing more. */
  readonly charged: boolean;
  tPrev: T | null;
  tNext: T | null;
}

/** Idle tenants kept per band (their debt) before the oldest idle ones are forgotten. */
const MAX_IDLE_TENANTS = 10_000;

export class Tenant<T extends FairItem<T>> {
  vt = 0;
  head: T | null = null;
  tail: T | null = null;
  length = 0;
  /** Pump scratch: the next item of this tenant to try, in admission order. */
  cursor: T | null = null;

  constructor(
    readonly key: number,
    public weight: number,
  ) {}
}

export class Band<T extends FairItem<T>> {
  /** Start vt of the band's last dispatch: where a tenant returning from idle starts. */
  clock = 0;
  length = 0;
  readonly tenants = new Map<number, Tenant<T>>();
  /** Pump scratch: the band's effective priority at the pump's clock (aging included). */
  effective = 0;

  constructor(readonly priority: number) {}

  tenant(key: number, weight: number): Tenant<T> {
    let t = this.tenants.get(key);
    if (t === undefined) {
      t = new Tenant<T>(key, weight);
      t.vt = this.clock;
      this.tenants.set(key, t);
    } else {
      t.weight = weight;
      if (t.length === 0 && t.vt < this.clock) t.vt = this.clock; // back from idle: no banked credit
    }
    return t;
  }
}

/** Numbers each period of dispatch counting, across all queues: a new queue or a cleared table is a new one. */
let dispatchPeriods = 0;

export class FairQueue<T extends FairItem<T>> {
  readonly bands = new Map<number, Band<T>>();
  /** Grants per tenant key (status: each tenant's share of dispatches). */
  readonly dispatchedBy = new Map<number, number>();
  /** The period `dispatchedBy` counts in: a reader of the counts tells a restart from a count that grew. */
  dispatchPeriod = ++dispatchPeriods;
  /** Pump scratch: bands by effective priority, highest first. */
  readonly order: Band<T>[] = [];
  #at = 0;

  /** Adds an item to its tenant's FIFO, keeping admission (seq) order (re-admissions keep theirs). */
  push(item: T): void {
    const band = this.#band(item.priority);
    const t = band.tenant(item.tenantKey, item.weight);
    let after = t.tail;
    while (after !== null && after.seq > item.seq) after = after.tPrev;
    item.tPrev = after;
    item.tNext = after === null ? t.head : after.tNext;
    if (item.tNext === null) t.tail = item;
    else item.tNext.tPrev = item;
    if (after === null) t.head = item;
    else after.tNext = item;
    t.length++;
    band.length++;
  }

  remove(item: T): void {
    const band = this.bands.get(item.priority) as Band<T>;
    const t = band.tenants.get(item.tenantKey) as Tenant<T>;
    if (t.cursor === item) t.cursor = item.tNext;
    if (item.tPrev === null) t.head = item.tNext;
    else item.tPrev.tNext = item.tNext;
    if (item.tNext === null) t.tail = item.tPrev;
    else item.tNext.tPrev = item.tPrev;
    item.tPrev = null;
    item.tNext = null;
    t.length--;
    band.length--;
    if (t.length === 0 && t.vt <= band.clock) band.tenants.delete(t.key);
    if (band.length === 0 && band.tenants.size === 0) this.bands.delete(band.priority);
  }

  /**
   * Charges a dispatch: the band's clock moves to the tenant's start vt and
   * the tenant's vt grows by its charge over its weight.
   */
  charge(priority: number, tenantKey: number, weight: number, tokens: number): void {
    const band = this.#band(priority);
    const t = band.tenant(tenantKey, weight);
    if (t.vt > band.clock) band.clock = t.vt;
    t.vt += chargeOf(tokens) / t.weight;
    const counts = this.dispatchedBy;
    if (counts.size >= MAX_IDLE_TENANTS && !counts.has(tenantKey)) {
      counts.clear(); // bounded: a new period of counting starts
      this.dispatchPeriod = ++dispatchPeriods;
    }
    counts.set(tenantKey, (counts.get(tenantKey) ?? 0) + 1);
    this.#pruneIdle(band);
  }

  /** The response reported what the request really cost: the tenant's vt moves by the difference, never below the clock. */
  correct(priority: number, tenantKey: number, weight: number, delta: number): void {
    const band = this.bands.get(priority);
    const t = band?.tenants.get(tenantKey);
    if (band === undefined || t === undefined) return; // idle and forgotten: nothing owed
    t.vt = Math.max(band.clock, t.vt + delta / weight);
  }

  /** Pump start: effective priorities at `now`, bands ordered, every tenant's cursor at its head. */
  prepare(now: number, agingStepPerSec: number): void {
    const order = this.order;
    order.length = 0;
    for (const band of this.bands.values()) {
      if (band.length === 0) continue;
      for (const t of band.tenants.values()) t.cursor = t.head;
      band.effective = effectivePriority(band.priority, now - oldestOf(band), agingStepPerSec);
      order.push(band);
    }
    order.sort(byEffective);
    this.#at = 0;
  }

  /** The next item the policy would serve in this pump (null when every band is walked), and its band's effective priority. */
  next(): T | null {
    const order = this.order;
    while (this.#at < order.length) {
      const band = order[this.#at];
      let best: Tenant<T> | null = null;
      for (const t of band.tenants.values()) {
        const c = t.cursor;
        if (c === null) continue;
        if (best === null || t.vt < best.vt || (t.vt === best.vt && c.seq < (best.cursor as T).seq)) best = t;
      }
      if (best !== null) return best.cursor;
      this.#at++;
    }
    return null;
  }

  /** Effective priority of the band the pump is walking. */
  currentEffective(): number {
    return this.#at < this.order.length ? this.order[this.#at].effective : -Infinity;
  }

  /** The pump tried `item` and did not place it: its tenant moves on to its next item. */
  skip(item: T): void {
    const t = this.bands.get(item.priority)?.tenants.get(item.tenantKey);
    if (t !== undefined && t.cursor === item) t.cursor = item.tNext;
  }

  /** The newest item of the lowest band whose priority is below `priority` (what an arrival of that band displaces). */
  victimBelow(priority: number): T | undefined {
    let lowest: Band<T> | undefined;
    for (const band of this.bands.values()) {
      if (band.length > 0 && band.priority < priority && (lowest === undefined || band.priority < lowest.priority)) lowest = band;
    }
    if (lowest === undefined) return undefined;
    let newest: T | undefined;
    for (const t of lowest.tenants.values()) if (t.tail !== null && (newest === undefined || t.tail.seq > newest.seq)) newest = t.tail;
    return newest;
  }

  /**
   * 1 + the requests the policy would serve before `item` if nothing else
   * arrived: every request of a band ranked above its band, then its band's
   * dispatch order replayed (least virtual time first, charges added).
   * O(band length x tenants); queues are short (max_queue).
   */
  position(item: T, now: number, agingStepPerSec: number): number {
    const mine = this.bands.get(item.priority);
    if (mine === undefined) return 1;
    const myEffective = effectivePriority(mine.priority, now - oldestOf(mine), agingStepPerSec);
    let ahead = 0;
    for (const band of this.bands.values()) {
      if (band === mine || band.length === 0) continue;
      const effective = effectivePriority(band.priority, now - oldestOf(band), agingStepPerSec);
      if (effective > myEffective || (effective === myEffective && band.priority > mine.priority)) ahead += band.length;
    }
    const vt = new Map<Tenant<T>, number>();
    const next = new Map<Tenant<T>, T | null>();
    for (const t of mine.tenants.values()) {
      vt.set(t, t.vt);
      next.set(t, t.head);
    }
    for (;;) {
      let best: Tenant<T> | undefined;
      for (const [t, head] of next) {
        if (head === null) continue;
        if (best === undefined || (vt.get(t) as number) < (vt.get(best) as number) || ((vt.get(t) as number) === (vt.get(best) as number) && head.seq < (next.get(best) as T).seq)) best = t;
      }
      if (best === undefined) return ahead + 1; // not found: cannot happen for a queued item
      const head = next.get(best) as T;
      if (head === item) return ahead + 1;
      ahead++;
      // As dispatch does: a retried request was charged at its first dispatch.
      if (!head.charged) vt.set(best, (vt.get(best) as number) + chargeOf(head.estimatedTokens) / best.weight);
      next.set(best, head.tNext);
    }
  }

  #band(priority: number): Band<T> {
    let band = this.bands.get(priority);
    if (band === undefined) {
      band = new Band<T>(priority);
      this.bands.set(priority, band);
    }
    return band;
  }

  #pruneIdle(band: Band<T>): void {
    if (band.tenants.size <= MAX_IDLE_TENANTS) return;
    for (const t of band.tenants.values()) {
      if (band.tenants.size <= MAX_IDLE_TENANTS / 2) break;
      if (t.length === 0) band.tenants.delete(t.key);
    }
  }
}

/** A request's charge: its tokens, at least 1 (an empty prompt still takes a slot). */
export function chargeOf(tokens: number): number {
  return tokens >= 1 ? tokens : 1;
}

/** Base priority raised by `step` for every whole second waited: low bands never starve. */
export function effectivePriority(priority: number, waitedMs: number, agingStepPerSec: number): number {
  if (agingStepPerSec <= 0 || !(waitedMs >= 1000)) return priority;
  return priority + agingStepPerSec * Math.floor(waitedMs / 1000);
}

/**
 * When the band's longest waiter arrived. First admissions are pushed in
 * arrival order, so each tenant's first one (after any re-admissions, which
 * sit ahead by seq but arrived later) is its oldest: O(tenants), not O(queue).
 */
function oldestOf<T extends FairItem<T>>(band: Band<T>): number {
  let oldest = Infinity;
  for (const t of band.tenants.values()) {
    for (let item = t.head; item !== null; item = item.tNext) {
      if (item.enqueuedAt < oldest) oldest = item.enqueuedAt;
      if (item.attempt === 0) break;
    }
  }
  return oldest;
}

function byEffective<T extends FairItem<T>>(a: Band<T>, b: Band<T>): number {
  if (a.effective !== b.effective) return b.effective - a.effective;
  return b.priority - a.priority;
}
