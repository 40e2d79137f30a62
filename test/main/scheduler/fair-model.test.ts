// Randomized model test of fair queuing (docs/scheduling.md): thousands of
// random admissions (priorities -1..2, four tenants of weights 1, 1, 2, 4),
// releases (some with the usage the response reported), cancels and ticks
// against the scheduler with fairness on, beside a naive reference model
// (plain maps and linear scans). Checked at every decision:
//  1. priority: no request waits for a provider that a lower band was just
//     granted, unless aging raised that band (effective priority = priority +
//     step x whole seconds its oldest request waited);
//  2. fairness: within a band, no waiting tenant that could use the granted
//     provider has a virtual time below the dispatched tenant's (so none falls
//     behind it by more than that request's charge);
//  3. work conservation: after every step no waiting request has a free
//     candidate, and no grant exceeds capacity;
// and: shed and displaced happen exactly when the policy says, every request
// ends once, and the scheduler's virtual times agree with the model's.
// Replay: FAIR_SEED=<seed> [FAIR_STEPS=<n>] npx node --test dist/test/main/scheduler/fair-model.test.js
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Scheduler } from '../../../src/main/scheduler/scheduler.js';
import type { EdgeConfig } from '../../../src/shared/config-types.js';
import { makeConfig, RecordingSink, type ConfigSpec } from './fixtures.js';
import { mulberry32 } from '../../helpers/prng.js';

const TENANTS = [1, 2, 3, 4];
const WEIGHT: Record<number, number> = { 1: 1, 2: 1, 3: 2, 4: 4 };
const PRIORITIES = [-1, 0, 0, 0, 1, 2];

interface Item {
  id: number;
  alias: string;
  prio: number;
  tenant: number;
  tokens: number;
  seq: number;
  enqueuedAt: number;
  deadline: number;
}
interface MLease {
  item: Item;
  pid: string;
}
interface TenantVt {
  vt: number;
  waiting: number;
}
interface BandState {
  clock: number;
  tenants: Map<number, TenantVt>;
  length: number;
}

class Model {
  readonly caps = new Map<string, number>();
  readonly serves = new Map<string, string[]>();
  readonly maxQueue = new Map<string, number>();
  readonly queued = new Map<number, Item>();
  readonly leases = new Map<number, MLease>();
  readonly bands = new Map<string, BandState>();
  seq = 0;

  constructor(readonly aging: number) {}

  inFlight(pid: string): number {
    let n = 0;
    for (const l of this.leases.values()) if (l.pid === pid) n++;
    return n;
  }

  /** The free candidate with the lowest load ratio (ties by id), as the scheduler must choose. */
  best(alias: string): string | undefined {
    let best: string | undefined;
    let ratio = Infinity;
    for (const pid of this.serves.get(alias) ?? []) {
      const cap = this.caps.get(pid) as number;
      const used = this.inFlight(pid);
      if (used >= cap) continue;
      const r = used / cap;
      if (r < ratio || (r === ratio && pid < (best as string))) {
        best = pid;
        ratio = r;
      }
    }
    return best;
  }

  band(alias: string, prio: number): BandState {
    const key = `${alias}/${prio}`;
    let b = this.bands.get(key);
    if (b === undefined) {
      b = { clock: 0, tenants: new Map(), length: 0 };
      this.bands.set(key, b);
    }
    return b;
  }

  /** Get-or-create a tenant: a new one, or one back from idle, starts at the band's clock. */
  tenant(b: BandState, t: number): TenantVt {
    let s = b.tenants.get(t);
    if (s === undefined) {
      s = { vt: b.clock, waiting: 0 };
      b.tenants.set(t, s);
    } else if (s.waiting === 0 && s.vt < b.clock) s.vt = b.clock;
    return s;
  }

  enqueue(item: Item): void {
    this.queued.set(item.id, item);
    const b = this.band(item.alias, item.prio);
    this.tenant(b, item.tenant).waiting++;
    b.length++;
  }

  dequeue(item: Item): void {
    this.queued.delete(item.id);
    const key = `${item.alias}/${item.prio}`;
    const b = this.bands.get(key) as BandState;
    const s = b.tenants.get(item.tenant) as TenantVt;
    s.waiting--;
    b.length--;
    if (s.waiting === 0 && s.vt <= b.clock) b.tenants.delete(item.tenant);
    if (b.length === 0 && b.tenants.size === 0) this.bands.delete(key);
  }

  charge(item: Item): void {
    const b = this.band(item.alias, item.prio);
    const s = this.tenant(b, item.tenant);
    if (s.vt > b.clock) b.clock = s.vt;
    s.vt += Math.max(1, item.tokens) / WEIGHT[item.tenant];
  }

  correct(item: Item, used: number): void {
    const b = this.bands.get(`${item.alias}/${item.prio}`);
    const s = b?.tenants.get(item.tenant);
    if (b === undefined || s === undefined) return;
    s.vt = Math.max(b.clock, s.vt + (used - Math.max(1, item.tokens)) / WEIGHT[item.tenant]);
  }

  /** Effective priority of each (alias, band) with waiting requests, at `now`. */
  effective(now: number): Map<string, number> {
    const oldest = new Map<string, number>();
    for (const q of this.queued.values()) {
      const key = `${q.alias}/${q.prio}`;
      const o = oldest.get(key);
      if (o === undefined || q.enqueuedAt < o) oldest.set(key, q.enqueuedAt);
    }
    const out = new Map<string, number>();
    for (const [key, at] of oldest) {
      const prio = Number(key.slice(key.indexOf('/') + 1));
      const waited = now - at;
      out.set(key, this.aging > 0 && waited >= 1000 ? prio + this.aging * Math.floor(waited / 1000) : prio);
    }
    return out;
  }
}

function fairConfig(rand: () => number, aging: number): { config: EdgeConfig; model: Model } {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
  const model = new Model(aging);
  const providers = ['p0', 'p1', 'p2', 'p3'];
  for (const p of providers) model.caps.set(p, pick([1, 1, 2, 3]));
  // Two aliases sharing providers: the cross-alias order matters too.
  model.serves.set('a', ['p0', 'p1', 'p2']);
  model.serves.set('b', ['p2', 'p3']);
  model.maxQueue.set('a', pick([3, 6, 12]));
  model.maxQueue.set('b', pick([3, 6, 12]));
  const spec: ConfigSpec = {
    nodes: {
      n0: [{ id: 'p0', capacity: model.caps.get('p0') }, { id: 'p1', capacity: model.caps.get('p1') }],
      n1: [{ id: 'p2', capacity: model.caps.get('p2') }, { id: 'p3', capacity: model.caps.get('p3') }],
    },
    models: [
      { alias: 'a', providers: ['p0', 'p1', 'p2'], maxQueue: model.maxQueue.get('a'), queueTimeoutMs: 4_000 },
      { alias: 'b', providers: ['p2', 'p3'], maxQueue: model.maxQueue.get('b'), queueTimeoutMs: 4_000 },
    ],
    longContextThresholdTokens: 1_000_000_000,
  };
  const base = makeConfig(spec);
  return { config: { ...base, scheduler: { ...base.scheduler, fairness: true, agingStepPerSec: aging } }, model };
}

function runFairModel(seed: number, steps: number): void {
  const rand = mulberry32(seed);
  const int = (n: number): number => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  const aging = seed % 3 === 0 ? 0 : 1; // one seed with strict priority alone, the others with aging
  const { config, model: m } = fairConfig(rand, aging);
  const sink = new RecordingSink();
  const s = new Scheduler(config, sink);
  s.connect('n0', 0);
  s.connect('n1', 0);

  let now = 0;
  let nextId = 1;
  const trail: string[] = [];
  const stats = { grants: 0, agedGrants: 0, shed: 0, displaced: 0, corrections: 0, fullRefusals: 0, timeouts: 0 };
  const ended = new Set<number>();
  const fail = (step: number, msg: string): never => {
    throw new Error(`seed=${seed} step=${step}: ${msg}\nreplay: FAIR_SEED=${seed} FAIR_STEPS=${step + 1}\nlast ops:\n  ${trail.slice(-10).join('\n  ')}`);
  };

  for (let step = 0; step < steps; step++) {
    now += pick([0, 1, 5, 20, 60, 150]);
    const check = (cond: boolean, msg: string): void => {
      if (!cond) fail(step, msg);
    };
    const expiring = new Set<number>();
    for (const q of m.queued.values()) if (q.deadline <= now) expiring.add(q.id);
    for (const id of expiring) m.dequeue(m.queued.get(id) as Item);

    let pending: Item | undefined;
    let expect: 'grant' | 'queue' | 'shed' | 'queue_full' | undefined;
    let victim: Item | undefined;
    let desc: string;
    const roll = rand();
    if (roll < 0.45) {
      // Tenant 1 floods with big prompts more often than the others ask.
      const tenant = rand() < 0.4 ? 1 : pick(TENANTS);
      const alias = rand() < 0.7 ? 'a' : 'b';
      const item: Item = {
        id: nextId++,
        alias,
        prio: pick(PRIORITIES),
        tenant,
        tokens: tenant === 1 ? 500 + int(3_000) : 1 + int(400),
        seq: ++m.seq,
        enqueuedAt: now,
        deadline: now + 4_000,
      };
      desc = `admit #${item.id} ${alias} prio=${item.prio} tenant=${tenant} tokens=${item.tokens}`;
      if (m.best(alias) !== undefined) expect = 'grant';
      else if (item.prio < 0) expect = 'shed';
      else {
        const inQueue = [...m.queued.values()].filter((q) => q.alias === alias);
        if (inQueue.length >= (m.maxQueue.get(alias) as number)) {
          let lowest: number | undefined;
          for (const q of inQueue) if (q.prio < item.prio && (lowest === undefined || q.prio < lowest)) lowest = q.prio;
          if (lowest !== undefined) {
            for (const q of inQueue) if (q.prio === lowest && (victim === undefined || q.seq > victim.seq)) victim = q;
          }
          expect = victim === undefined ? 'queue_full' : 'queue';
        } else expect = 'queue';
      }
      if (victim !== undefined) m.dequeue(victim);
      if (expect === 'queue') m.enqueue(item);
      pending = item;
      s.admit({ requestId: item.id, alias, estimatedTokens: item.tokens, directNodeId: undefined, priority: item.prio, tenantKey: tenant, weight: WEIGHT[tenant] }, now);
    } else if (roll < 0.8) {
      const live = [...m.leases.keys()];
      if (live.length === 0) {
        desc = 'tick (no lease)';
        s.tick(now);
      } else {
        const leaseId = pick(live);
        const lease = m.leases.get(leaseId) as MLease;
        // Some responses report usage: the charge is corrected by it.
        const used = rand() < 0.5 ? 1 + int(4_000) : 0;
        desc = `release ${leaseId} (#${lease.item.id} tenant ${lease.item.tenant}) used=${used}`;
        m.leases.delete(leaseId);
        if (used > 0) {
          m.correct(lease.item, used);
          stats.corrections++;
        }
        check(s.release(leaseId, 'end', now, used) === true, `release(${leaseId}) was not live`);
        ended.add(lease.item.id);
      }
    } else if (roll < 0.88) {
      const ids = [...m.queued.keys()];
      const id = ids.length > 0 ? pick(ids) : 1 + int(nextId);
      desc = `cancel #${id}`;
      const was = m.queued.get(id);
      if (was !== undefined) m.dequeue(was);
      check(s.cancel(id, now) === (was !== undefined), `cancel(${id}) disagrees with the model`);
      if (was !== undefined) ended.add(id);
    } else {
      now += pick([100, 400, 900]);
      desc = 'tick';
      for (const q of m.queued.values()) if (q.deadline <= now) expiring.add(q.id);
      for (const id of expiring) if (m.queued.has(id)) m.dequeue(m.queued.get(id) as Item);
      s.tick(now);
    }
    trail.push(`[${step} t=${now}] ${desc}`);

    const events = sink.take();
    let i = 0;
    for (; i < events.length && expiring.size > 0; i++) {
      const e = events[i];
      check(e.kind === 'reject' && expiring.has(e.requestId) && e.code === 'queue_timeout', `expected an expiry, got ${JSON.stringify(e)}`);
      if (e.kind === 'reject') expiring.delete(e.requestId);
      ended.add(e.kind === 'reject' ? e.requestId : -1);
      stats.timeouts++;
    }
    check(expiring.size === 0, `requests ${[...expiring].join(',')} were due but not expired`);

    // Bands' effective priorities as the pump saw them: taken before its first grant.
    let eff: Map<string, number> | undefined;
    let decided = expect === undefined || expect === 'queue';
    let victimDone = victim === undefined;
    for (; i < events.length; i++) {
      const e = events[i];
      if (e.kind === 'reject') {
        if (victim !== undefined && e.requestId === victim.id) {
          check(e.code === 'displaced' && !victimDone, `victim #${victim.id} got ${e.code}`);
          victimDone = true;
          stats.displaced++;
        } else {
          check(pending !== undefined && e.requestId === pending.id && !decided && e.code === expect, `unexpected reject ${JSON.stringify(e)}, expected ${expect}`);
          decided = true;
          if (e.code === 'shed') stats.shed++;
          else stats.fullRefusals++;
        }
        check(e.retryAfterSec >= 1, `Retry-After ${e.retryAfterSec}`);
        ended.add(e.requestId);
        continue;
      }
      const g = e.grant;
      const queuedItem = m.queued.get(g.requestId);
      let item: Item;
      if (queuedItem !== undefined) item = queuedItem;
      else {
        check(pending !== undefined && g.requestId === pending.id && expect === 'grant' && !decided, `grant for a request that is not waiting: ${JSON.stringify(g)}`);
        item = pending as Item;
        decided = true;
      }
      eff ??= m.effective(now);
      const key = `${item.alias}/${item.prio}`;
      const mine = eff.get(key) ?? item.prio;
      // Work conservation and the provider choice.
      check(m.best(item.alias) === g.providerId, `#${item.id} got ${g.providerId}, best free candidate is ${m.best(item.alias)}`);
      const candidatesOfP = (q: Item): boolean => (m.serves.get(q.alias) as string[]).includes(g.providerId);
      // 1. Priority (with aging).
      for (const q of m.queued.values()) {
        if (q === item || !candidatesOfP(q)) continue;
        const theirs = eff.get(`${q.alias}/${q.prio}`) ?? q.prio;
        check(theirs <= mine, `#${q.id} (band ${q.prio}, effective ${theirs}) waits for ${g.providerId} while #${item.id} (band ${item.prio}, effective ${mine}) got it`);
      }
      if (mine > item.prio) stats.agedGrants++;
      // 2. Fairness within the band: the dispatched tenant had the least virtual time among those who could use the slot.
      if (queuedItem !== undefined) m.dequeue(item);
      const band = m.band(item.alias, item.prio);
      const vtBefore = m.tenant(band, item.tenant).vt;
      for (const q of m.queued.values()) {
        if (q.alias !== item.alias || q.prio !== item.prio || q.tenant === item.tenant || !candidatesOfP(q)) continue;
        const theirs = (band.tenants.get(q.tenant) as TenantVt).vt;
        check(theirs >= vtBefore, `tenant ${q.tenant} (vt ${theirs}) waits in ${key} while tenant ${item.tenant} (vt ${vtBefore}) was dispatched`);
      }
      m.charge(item);
      check(m.inFlight(g.providerId) < (m.caps.get(g.providerId) as number), `grant on full provider ${g.providerId}`);
      m.leases.set(g.leaseId, { item, pid: g.providerId });
      stats.grants++;
    }
    check(decided && victimDone, `no decision for #${pending?.id} (expected ${expect})`);

    // 3. Work conservation, and agreement of the whole state.
    for (const q of m.queued.values()) check(m.best(q.alias) === undefined, `#${q.id} waits while ${m.best(q.alias)} is free`);
    const errors = s.checkInvariants();
    check(errors.length === 0, `invariants: ${errors.join('; ')}`);
    const fair = s.fairnessStatus();
    check(fair !== undefined, 'fairness status missing while fairness is on');
    for (const group of fair?.groups ?? []) {
      for (const b of group.bands) {
        const mb = m.bands.get(`${group.alias}/${b.priority}`);
        for (const t of b.tenants) {
          const mt = mb?.tenants.get(t.tenant);
          check(mt !== undefined && Math.abs(mt.vt - t.virtualTime) < 1e-6, `${group.alias}/${b.priority} tenant ${t.tenant}: vt ${t.virtualTime}, model ${mt?.vt}`);
          check(t.queued === (mt?.waiting ?? 0), `${group.alias}/${b.priority} tenant ${t.tenant}: ${t.queued} queued, model ${mt?.waiting}`);
        }
      }
    }
  }
  for (const id of m.queued.keys()) ended.add(id);
  for (const l of m.leases.values()) ended.add(l.item.id);
  assert.equal([...ended].filter((id) => id > 0).length, nextId - 1, 'every request ends in exactly one place');
  assert.ok(stats.grants > steps / 5, `only ${stats.grants} grants`);
  assert.ok(stats.shed > 0 && stats.displaced > 0 && stats.fullRefusals > 0 && stats.timeouts > 0 && stats.corrections > 0, `seed ${seed}: paths not exercised ${JSON.stringify(stats)}`);
  if (aging > 0) assert.ok(stats.agedGrants > 0, `seed ${seed}: no grant raised by aging ${JSON.stringify(stats)}`);
}

const envSeed = process.env.FAIR_SEED;
const steps = Number(process.env.FAIR_STEPS ?? 10_000);
const seeds = envSeed !== undefined ? [Number(envSeed)] : [0xfa1, 2, 3];

for (const seed of seeds) {
  test(`fair queuing keeps priority, fairness and work conservation over ${steps} random operations (seed ${seed})`, () => {
    runFairModel(seed, steps);
  });
}

test('with no priorities or weights configured the scheduler stays FIFO (no fairness state)', () => {
  const base = makeConfig({ nodes: { n0: [{ id: 'p0', capacity: 1 }] }, models: [{ alias: 'a', providers: ['p0'] }] });
  const sink = new RecordingSink();
  const s = new Scheduler(base, sink);
  s.connect('n0', 0);
  // Priorities and tenants sent anyway are ignored: admission order decides.
  s.admit({ requestId: 1, alias: 'a', estimatedTokens: 10, directNodeId: undefined }, 0);
  s.admit({ requestId: 2, alias: 'a', estimatedTokens: 10, directNodeId: undefined, priority: -1, tenantKey: 7 }, 1);
  s.admit({ requestId: 3, alias: 'a', estimatedTokens: 10, directNodeId: undefined, priority: 5, tenantKey: 8 }, 2);
  const first = sink.takeGrants()[0];
  assert.equal(s.fairnessStatus(), undefined);
  s.release(first.leaseId, 'end', 3);
  assert.deepEqual(sink.takeGrants().map((g) => g.requestId), [2], 'the older request goes first, priority notwithstanding');
});

test('turning fairness on by config with requests waiting: they take the bands they were admitted with (the policy applies to queued requests too)', () => {
  const base = makeConfig({ nodes: { n0: [{ id: 'p0', capacity: 1 }] }, models: [{ alias: 'a', providers: ['p0'] }] });
  const sink = new RecordingSink();
  const s = new Scheduler(base, sink);
  s.connect('n0', 0);
  s.admit({ requestId: 1, alias: 'a', estimatedTokens: 10, directNodeId: undefined }, 0);
  s.admit({ requestId: 2, alias: 'a', estimatedTokens: 10, directNodeId: undefined, priority: 3 }, 1);
  s.admit({ requestId: 3, alias: 'a', estimatedTokens: 10, directNodeId: undefined }, 2);
  const running = sink.takeGrants()[0];
  s.setConfig({ ...base, scheduler: { ...base.scheduler, fairness: true, agingStepPerSec: 0 } }, 3);
  s.admit({ requestId: 4, alias: 'a', estimatedTokens: 10, directNodeId: undefined, priority: 1 }, 4);
  assert.deepEqual(
    s.fairnessStatus()?.groups[0].bands.map((b) => [b.priority, b.queued]),
    [
      [3, 1],
      [1, 1],
      [0, 1],
    ],
  );
  const order: number[] = [];
  let lease = running.leaseId;
  for (let t = 5; t < 8; t++) {
    s.release(lease, 'end', t);
    const g = sink.takeGrants()[0];
    order.push(g.requestId);
    lease = g.leaseId;
  }
  assert.deepEqual(order, [2, 4, 3], 'by band, those admitted under FIFO included');
  assert.deepEqual(s.checkInvariants(), []);
});
