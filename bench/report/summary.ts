// From raw measurements to what a reader compares: every measurement
// flattened to named numbers, repetitions folded into median / min / max,
// and the headline figures (ratios against `direct` and the peers, since
// absolute numbers drift on a shared machine).
import { spreadOf, type Spread } from '../harness/stats.js';
import type { Measurement } from '../harness/types.js';

export interface Summary {
  readonly scenario: string;
  readonly variant: string;
  readonly target: string;
  readonly reps: number;
  readonly values: Readonly<Record<string, Spread>>;
}

/** Every number of a measurement under one flat key (see ChartSpec for the names). */
export function flatten(m: Measurement): Record<string, number> {
  const out: Record<string, number> = { rps: m.rps, requests: m.requests, errors: m.errors, non2xx: m.non2xx, wallS: m.wallS };
  if (m.latencyMs !== null) {
    out.p50 = m.latencyMs.p50;
    out.p90 = m.latencyMs.p90;
    out.p99 = m.latencyMs.p99;
    out.max = m.latencyMs.max;
  }
  if (m.edgeLagP99Ms !== null) out.lagP99Ms = m.edgeLagP99Ms;
  out['cpuS:loadgen'] = m.loadgenCpuS;
  out.loadgenCpuPct = (m.loadgenCpuS / m.wallS) * 100;
  let proxyRss = 0;
  let proxyCpu = 0;
  let proxies = 0;
  for (const p of m.processes) {
    out[`rss:${p.role}`] = p.peakRssMB;
    out[`cpuS:${p.role}`] = p.cpuS;
    if (p.cpuSPer1k !== null) out[`cpu1k:${p.role}`] = p.cpuSPer1k;
    if (m.requests > 0) {
      out[`mainUsPerReq:${p.role}`] = (p.mainThreadCpuS / m.requests) * 1e6;
      for (const [name, cpuS] of Object.entries(p.threads)) out[`threadUsPerReq:${p.role}:${name}`] = (cpuS / m.requests) * 1e6;
    }
    if (p.role !== 'mock') {
      proxies++;
      proxyRss += p.peakRssMB;
      proxyCpu += p.cpuS;
    }
  }
  if (proxies > 0) {
    out['rss:proxy'] = proxyRss;
    out['cpuS:proxy'] = proxyCpu;
    if (m.requests > 0) out['cpu1k:proxy'] = (proxyCpu / m.requests) * 1000;
  }
  for (const [key, value] of Object.entries(m.metrics)) out[key] = value;
  return out;
}

export function summarize(measurements: readonly Measurement[]): Summary[] {
  const groups = new Map<string, Measurement[]>();
  for (const m of measurements) {
    const key = `${m.scenario}\u0000${m.variant}\u0000${m.target}`;
    let group = groups.get(key);
    if (group === undefined) groups.set(key, (group = []));
    group.push(m);
  }
  const out: Summary[] = [];
  for (const group of groups.values()) {
    const flat = group.map(flatten);
    const keys = new Set(flat.flatMap((f) => Object.keys(f)));
    const values: Record<string, Spread> = {};
    for (const key of keys) {
      const spread = spreadOf(flat.map((f) => f[key] ?? Number.NaN));
      if (spread !== undefined) values[key] = spread;
    }
    out.push({ scenario: group[0].scenario, variant: group[0].variant, target: group[0].target, reps: group.length, values });
  }
  return out;
}

/** Median of one key, or undefined when that measurement does not exist. */
export function medianOf(summaries: readonly Summary[], scenario: string, variant: string | undefined, target: string, key: string): number | undefined {
  const s = summaries.find((x) => x.scenario === scenario && (variant === undefined || x.variant === variant) && x.target === target);
  return s?.values[key]?.median;
}

export interface HeadlineFigure {
  /** Stable id, e.g. `closed-loop.rps-vs-portkey`. */
  readonly id: string;
  readonly target: string;
  readonly text: string;
  readonly value: number;
  readonly unit: 'x' | 'ms' | 'MB' | 'events/s' | 'streams' | '';
}

export interface HeadlineInput {
  readonly summaries: readonly Summary[];
  /** Targets measured, in report order. */
  readonly targets: readonly { readonly id: string; readonly label: string; readonly kind: string; readonly sweepOnly?: boolean }[];
  /** Variant ids of each scenario, in run order. */
  readonly variants: Readonly<Record<string, readonly string[]>>;
}

function ratio(a: number | undefined, b: number | undefined): number | undefined {
  return a !== undefined && b !== undefined && b > 0 ? a / b : undefined;
}

function diff(a: number | undefined, b: number | undefined): number | undefined {
  return a !== undefined && b !== undefined ? a - b : undefined;
}

/** The figures the report opens with, for each of our (non-sweep) targets. */
export function headline(input: HeadlineInput): HeadlineFigure[] {
  const { summaries, variants } = input;
  const out: HeadlineFigure[] = [];
  const push = (id: string, target: string, text: string, value: number | undefined, unit: HeadlineFigure['unit']): void => {
    if (value !== undefined && Number.isFinite(value)) out.push({ id, target, text, value, unit });
  };
  const closed = variants['closed-loop']?.[0];
  const open = variants['open-loop']?.[0];
  const largest = variants['large-body']?.at(-1);
  for (const t of input.targets) {
    if (t.kind !== 'ours' || t.sweepOnly === true) continue;
    const m = (scenario: string, variant: string | undefined, target: string, key: string): number | undefined =>
      variant === undefined ? undefined : medianOf(summaries, scenario, variant, target, key);
    const rps = m('closed-loop', closed, t.id, 'rps');
    push('closed-loop.rps', t.id, `${t.label}: closed-loop req/s`, rps, '');
    push('closed-loop.rps-vs-portkey', t.id, `${t.label}: req/s as a multiple of Portkey's`, ratio(rps, m('closed-loop', closed, 'portkey', 'rps')), 'x');
    push('closed-loop.rps-vs-nginx', t.id, `${t.label}: req/s as a fraction of nginx's`, ratio(rps, m('closed-loop', closed, 'nginx', 'rps')), 'x');
    push('closed-loop.rps-vs-direct', t.id, `${t.label}: req/s as a fraction of direct`, ratio(rps, m('closed-loop', closed, 'direct', 'rps')), 'x');
    const rate = open?.replace('rate-', '');
    push('open-loop.added-p50', t.id, `${t.label}: added p50 vs direct at ${rate} req/s`, diff(m('open-loop', open, t.id, 'p50'), m('open-loop', open, 'direct', 'p50')), 'ms');
    push('open-loop.added-p99', t.id, `${t.label}: added p99 vs direct at ${rate} req/s`, diff(m('open-loop', open, t.id, 'p99'), m('open-loop', open, 'direct', 'p99')), 'ms');
    push('streaming.ttfb-added-p50', t.id, `${t.label}: streaming TTFB p50 added vs direct`, diff(m('streaming', 'paced', t.id, 'ttfbP50Ms'), m('streaming', 'paced', 'direct', 'ttfbP50Ms')), 'ms');
    push('streaming.ttfb-added-p99', t.id, `${t.label}: streaming TTFB p99 added vs direct`, diff(m('streaming', 'paced', t.id, 'ttfbP99Ms'), m('streaming', 'paced', 'direct', 'ttfbP99Ms')), 'ms');
    const relay = m('streaming', 'burst', t.id, 'eventsPerS');
    push('streaming.relay', t.id, `${t.label}: SSE events relayed per second (burst)`, relay, 'events/s');
    push('streaming.relay-vs-nginx', t.id, `${t.label}: relay rate as a fraction of nginx's`, ratio(relay, m('streaming', 'burst', 'nginx', 'eventsPerS')), 'x');
    push('streaming.relay-vs-portkey', t.id, `${t.label}: relay rate as a multiple of Portkey's`, ratio(relay, m('streaming', 'burst', 'portkey', 'eventsPerS')), 'x');
    if (largest !== undefined && largest !== 'small-alone') {
      push('large-body.small-p99-alone', t.id, `${t.label}: small-request p99 alone`, m('large-body', 'small-alone', t.id, 'smallP99Ms'), 'ms');
      push('large-body.small-p99-with-large', t.id, `${t.label}: small-request p99 alongside ${largest} uploads`, m('large-body', largest, t.id, 'smallP99Ms'), 'ms');
    }
    for (const v of variants['many-streams'] ?? []) {
      const streams = m('many-streams', v, t.id, 'streams');
      push(`many-streams.${v}.completed`, t.id, `${t.label}: ${v} completed`, m('many-streams', v, t.id, 'requests'), 'streams');
      push(`many-streams.${v}.stalls`, t.id, `${t.label}: ${v} stalled`, streams === undefined ? undefined : m('many-streams', v, t.id, 'stalls'), 'streams');
      push(`many-streams.${v}.rss`, t.id, `${t.label}: ${v} peak RSS, edge + agent`, m('many-streams', v, t.id, 'rss:proxy'), 'MB');
      push(`many-streams.${v}.lag`, t.id, `${t.label}: ${v} edge event-loop lag p99`, m('many-streams', v, t.id, 'lagP99Ms'), 'ms');
    }
  }
  return out;
}
