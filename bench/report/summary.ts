// From raw measurements to what a reader compares: every measurement
// flattened to named numbers, repetitions folded into median / min / max,
// and the headline figures (ratios against `direct` and the peers, since
// absolute numbers drift on a shared machine). Two gates keep the headline
// honest: a figure that involves a measurement with errors or non-2xx
// answers is withheld (a proxy that fails fast would otherwise look fast),
// and a p99 from fewer than MIN_P99_SAMPLES samples is not quoted.
import { spreadOf, type Spread } from '../harness/stats.js';
import type { Measurement } from '../harness/types.js';

/** Below this many samples per repetition a p99 is noise (the 1 % tail is under 100 values): not quoted. */
export const MIN_P99_SAMPLES = 10_000;

export interface Summary {
  readonly scenario: string;
  readonly variant: string;
  readonly target: string;
  readonly reps: number;
  readonly values: Readonly<Record<string, Spread>>;
  /** Errors and non-2xx answers summed over the repetitions; a summary with either is flagged and kept out of every ratio. */
  readonly errors: number;
  readonly non2xx: number;
}

/** No repetition saw an error or a non-2xx answer. */
export function isClean(s: Summary): boolean {
  return s.errors === 0 && s.non2xx === 0;
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
  // Streaming scenarios: CPU per relayed SSE event of every process, the load generator's included (its cost counts too).
  const events = (m.metrics.eventsPerS ?? 0) * m.wallS;
  if (events > 0) {
    for (const p of m.processes) out[`usPerEvent:${p.role}`] = (p.cpuS / events) * 1e6;
    out['usPerEvent:loadgen'] = (m.loadgenCpuS / events) * 1e6;
  }
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
    const errors = group.reduce((n, m) => n + m.errors, 0);
    const non2xx = group.reduce((n, m) => n + m.non2xx, 0);
    out.push({ scenario: group[0].scenario, variant: group[0].variant, target: group[0].target, reps: group.length, values, errors, non2xx });
  }
  return out;
}

/** Median of one key, or undefined when that measurement does not exist. */
export function medianOf(summaries: readonly Summary[], scenario: string, variant: string | undefined, target: string, key: string): number | undefined {
  const s = summaries.find((x) => x.scenario === scenario && (variant === undefined || x.variant === variant) && x.target === target);
  return s?.values[key]?.median;
}

/** A figure for the report: its value, or why it is withheld; both undefined when it was not measured. */
export interface Figure {
  readonly value: number | undefined;
  readonly withheld?: string;
}

const NOT_MEASURED: Figure = { value: undefined };

/** Where each p99-like key's sample count lives: latency p99s count the answered requests (or streams). */
function samplesOf(s: Summary, key: string): number | undefined {
  if (key === 'smallP99Ms') return s.values.smallSamples?.min;
  if (key === 'p99' || key === 'ttfbP99Ms') return s.values.requests?.min;
  return undefined;
}

function isTailKey(key: string): boolean {
  return key === 'p99' || key === 'ttfbP99Ms' || key === 'smallP99Ms';
}

/**
 * The medians the headline reads, through both gates: a measurement with
 * errors or non-2xx answers yields no figure (and so no ratio or difference
 * built on it), and a p99 needs MIN_P99_SAMPLES samples in every repetition.
 */
export class FigureReader {
  readonly #summaries: readonly Summary[];

  constructor(summaries: readonly Summary[]) {
    this.#summaries = summaries;
  }

  summary(scenario: string, variant: string | undefined, target: string): Summary | undefined {
    if (variant === undefined) return undefined;
    return this.#summaries.find((x) => x.scenario === scenario && x.variant === variant && x.target === target);
  }

  get(scenario: string, variant: string | undefined, target: string, key: string): Figure {
    const s = this.summary(scenario, variant, target);
    const median = s?.values[key]?.median;
    if (s === undefined || median === undefined) return NOT_MEASURED;
    if (!isClean(s)) return { value: undefined, withheld: `${target}: ${s.errors} errors, ${s.non2xx} non-2xx` };
    if (isTailKey(key)) {
      const samples = samplesOf(s, key);
      if (samples === undefined || samples < MIN_P99_SAMPLES) {
        return { value: undefined, withheld: `p99 not quoted: ${samples === undefined ? 'sample count unknown' : `${Math.round(samples).toLocaleString('en-US')} samples`}, under ${MIN_P99_SAMPLES.toLocaleString('en-US')}` };
      }
    }
    return { value: median };
  }

  ratio(a: Figure, b: Figure): Figure {
    return combine(a, b, (x, y) => (y > 0 ? x / y : undefined));
  }

  diff(a: Figure, b: Figure): Figure {
    return combine(a, b, (x, y) => x - y);
  }
}

function combine(a: Figure, b: Figure, op: (x: number, y: number) => number | undefined): Figure {
  if (a.withheld !== undefined) return a;
  if (b.withheld !== undefined) return b;
  if (a.value === undefined || b.value === undefined) return NOT_MEASURED;
  const value = op(a.value, b.value);
  return value === undefined || !Number.isFinite(value) ? NOT_MEASURED : { value };
}

export interface HeadlineFigure {
  /** Stable id, e.g. `closed-loop.rps-vs-portkey`. */
  readonly id: string;
  readonly target: string;
  readonly text: string;
  /** null when withheld. */
  readonly value: number | null;
  /** Why the figure is not quoted: errors or non-2xx answers in a measurement it is built on, or too few samples for a p99. */
  readonly withheld?: string;
  readonly unit: 'x' | 'ms' | 'MB' | 'events/s' | 'streams' | 'µs' | '';
}

export interface HeadlineInput {
  readonly summaries: readonly Summary[];
  /** Targets measured, in report order. */
  readonly targets: readonly { readonly id: string; readonly label: string; readonly kind: string; readonly sweepOnly?: boolean }[];
  /** Variant ids of each scenario, in run order. */
  readonly variants: Readonly<Record<string, readonly string[]>>;
}

/** The figures the report opens with, for each of our (non-sweep) targets; withheld ones say why. */
export function headline(input: HeadlineInput): HeadlineFigure[] {
  const { summaries, variants } = input;
  const f = new FigureReader(summaries);
  const out: HeadlineFigure[] = [];
  const push = (id: string, target: string, text: string, figure: Figure, unit: HeadlineFigure['unit']): void => {
    if (figure.value !== undefined) out.push({ id, target, text, value: figure.value, unit });
    else if (figure.withheld !== undefined) out.push({ id, target, text, value: null, withheld: figure.withheld, unit });
  };
  const closed = variants['closed-loop']?.[0];
  const open = variants['open-loop']?.[0];
  const largest = variants['large-body']?.at(-1);
  for (const t of input.targets) {
    if (t.kind !== 'ours' || t.sweepOnly === true) continue;
    const rps = f.get('closed-loop', closed, t.id, 'rps');
    push('closed-loop.rps', t.id, `${t.label}: closed-loop req/s (2xx answers)`, rps, '');
    const cpu = f.get('closed-loop', closed, t.id, 'cpu1k:proxy');
    push('closed-loop.cpu-per-request', t.id, `${t.label}: CPU per request, edge + agent`, cpu.value === undefined ? cpu : { value: cpu.value * 1000 }, 'µs');
    push('closed-loop.rps-vs-portkey', t.id, `${t.label}: req/s as a multiple of Portkey's`, f.ratio(rps, f.get('closed-loop', closed, 'portkey', 'rps')), 'x');
    push('closed-loop.rps-vs-nginx', t.id, `${t.label}: req/s as a fraction of nginx's (1 worker)`, f.ratio(rps, f.get('closed-loop', closed, 'nginx', 'rps')), 'x');
    push('closed-loop.rps-vs-nginx-auto', t.id, `${t.label}: req/s as a fraction of nginx's (worker_processes auto)`, f.ratio(rps, f.get('closed-loop', closed, 'nginx-auto', 'rps')), 'x');
    push('closed-loop.rps-vs-direct', t.id, `${t.label}: req/s as a fraction of direct`, f.ratio(rps, f.get('closed-loop', closed, 'direct', 'rps')), 'x');
    const rate = open?.replace('rate-', '');
    push('open-loop.added-p50', t.id, `${t.label}: added p50 vs direct at ${rate} req/s`, f.diff(f.get('open-loop', open, t.id, 'p50'), f.get('open-loop', open, 'direct', 'p50')), 'ms');
    push('open-loop.added-p99', t.id, `${t.label}: added p99 vs direct at ${rate} req/s`, f.diff(f.get('open-loop', open, t.id, 'p99'), f.get('open-loop', open, 'direct', 'p99')), 'ms');
    push('streaming.ttfb-added-p50', t.id, `${t.label}: streaming TTFB p50 added vs direct`, f.diff(f.get('streaming', 'paced', t.id, 'ttfbP50Ms'), f.get('streaming', 'paced', 'direct', 'ttfbP50Ms')), 'ms');
    push('streaming.ttfb-added-p99', t.id, `${t.label}: streaming TTFB p99 added vs direct`, f.diff(f.get('streaming', 'paced', t.id, 'ttfbP99Ms'), f.get('streaming', 'paced', 'direct', 'ttfbP99Ms')), 'ms');
    const relay = f.get('streaming', 'burst', t.id, 'eventsPerS');
    push('streaming.relay', t.id, `${t.label}: SSE events relayed per second (burst)`, relay, 'events/s');
    push('streaming.relay-vs-nginx', t.id, `${t.label}: relay rate as a fraction of nginx's`, f.ratio(relay, f.get('streaming', 'burst', 'nginx', 'eventsPerS')), 'x');
    push('streaming.relay-vs-portkey', t.id, `${t.label}: relay rate as a multiple of Portkey's`, f.ratio(relay, f.get('streaming', 'burst', 'portkey', 'eventsPerS')), 'x');
    if (largest !== undefined && largest !== 'small-alone') {
      push('large-body.small-p99-alone', t.id, `${t.label}: small-request p99 alone`, f.get('large-body', 'small-alone', t.id, 'smallP99Ms'), 'ms');
      push('large-body.small-p99-with-large', t.id, `${t.label}: small-request p99 alongside ${largest} uploads`, f.get('large-body', largest, t.id, 'smallP99Ms'), 'ms');
    }
    for (const v of variants['many-streams'] ?? []) {
      // Completion and stalls are the point of this scenario: quoted even with errors (the errors are the finding).
      const at = (key: string): Figure => {
        const value = medianOf(summaries, 'many-streams', v, t.id, key);
        return { value };
      };
      if (at('streams').value === undefined) continue;
      push(`many-streams.${v}.completed`, t.id, `${t.label}: ${v} completed`, at('requests'), 'streams');
      push(`many-streams.${v}.errors`, t.id, `${t.label}: ${v} failed`, at('errors'), 'streams');
      push(`many-streams.${v}.stalls`, t.id, `${t.label}: ${v} stalled`, at('stalls'), 'streams');
      push(`many-streams.${v}.rss`, t.id, `${t.label}: ${v} peak RSS, edge + agent`, at('rss:proxy'), 'MB');
      push(`many-streams.${v}.lag`, t.id, `${t.label}: ${v} edge event-loop lag p99`, at('lagP99Ms'), 'ms');
    }
  }
  return out;
}
