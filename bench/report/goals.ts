// The performance goals of issue 17, read from one run's summaries: each
// goal's threshold, the figure measured against it and whether it holds.
// Ratios only ever combine measurements of the same run (the peers and the
// edge under the same conditions), and every figure passes the same gates
// as the headline: a measurement with errors or non-2xx answers, or a p99
// from too few samples, yields "not measured", never a pass.
import { FigureReader, medianOf, type Figure, type Summary } from './summary.js';

export interface GoalRow {
  readonly id: string;
  readonly goal: string;
  /** The threshold as text, e.g. "≥ 5×". */
  readonly threshold: string;
  readonly figure: Figure;
  readonly unit: 'x' | 'ms' | 'µs' | 'MB' | 'streams';
  /** undefined: not measured in this run (or withheld). */
  readonly holds: boolean | undefined;
  /** Context printed beside the figure (the numbers a ratio was built from). */
  readonly detail?: string;
}

export interface GoalInput {
  readonly summaries: readonly Summary[];
  readonly targets: readonly { readonly id: string; readonly kind: string; readonly sweepOnly?: boolean; readonly skipped?: string; readonly workers?: number; readonly baseline?: string }[];
  readonly variants: Readonly<Record<string, readonly string[]>>;
}

/** The many-streams variant the 10,000-stream goal names. */
export const STREAMS_GOAL_VARIANT = '10000-streams-5tps';

const NOT_MEASURED: Figure = { value: undefined };

function row(id: string, goal: string, threshold: string, figure: Figure, unit: GoalRow['unit'], test: (v: number) => boolean, detail?: string): GoalRow {
  return { id, goal, threshold, figure, unit, holds: figure.value === undefined ? undefined : test(figure.value), detail };
}

function scaled(figure: Figure, by: number): Figure {
  return figure.value === undefined ? figure : { value: figure.value * by };
}

function us(figure: Figure): string {
  return figure.value === undefined ? 'n/a' : `${Math.round(figure.value)} µs`;
}

export function goals(input: GoalInput): GoalRow[] {
  const f = new FigureReader(input.summaries);
  const closed = input.variants['closed-loop']?.[0];
  const openVariants = input.variants['open-loop'] ?? [];
  const open = openVariants.includes('rate-500') ? 'rate-500' : openVariants[0];
  // A --baseline build is the before, never the measured edge.
  const edges = input.targets.filter((t) => t.kind === 'ours' && t.baseline === undefined && t.skipped === undefined);
  const ours = edges.filter((t) => t.sweepOnly !== true);
  // The best edge target in the closed loop is the one the throughput goals read.
  let best = ours[0]?.id;
  let bestRps = -1;
  for (const t of ours) {
    const rps = f.get('closed-loop', closed, t.id, 'rps').value ?? -1;
    if (rps > bestRps) {
      bestRps = rps;
      best = t.id;
    }
  }
  const out: GoalRow[] = [];
  if (best === undefined) return out;
  const w0 = edges.find((t) => t.workers === 0)?.id ?? best;
  const w1 = edges.find((t) => t.workers === 1)?.id;

  const rps = f.get('closed-loop', closed, best, 'rps');
  out.push(row('rps-vs-portkey', `closed-loop req/s of the best edge target (${best}) over Portkey's`, '≥ 5×', f.ratio(rps, f.get('closed-loop', closed, 'portkey', 'rps')), 'x', (v) => v >= 5));
  out.push(row('rps-vs-nginx', `closed-loop req/s of ${best} over nginx's (1 worker)`, '≥ 0.35×', f.ratio(rps, f.get('closed-loop', closed, 'nginx', 'rps')), 'x', (v) => v >= 0.35));
  const nginxUs = scaled(f.get('closed-loop', closed, 'nginx', 'cpu1k:nginx'), 1000);
  for (const role of ['edge', 'agent'] as const) {
    const roleUs = scaled(f.get('closed-loop', closed, best, `cpu1k:${role}`), 1000);
    out.push(row(`cpu-${role}-vs-nginx`, `closed-loop CPU per request, the ${role} (${best}) over nginx's`, '≤ 3×', f.ratio(roleUs, nginxUs), 'x', (v) => v <= 3, `${role} ${us(roleUs)}, nginx ${us(nginxUs)}`));
  }
  const rate = open?.replace('rate-', '') ?? '500';
  out.push(row('added-p99', `latency added over direct at ${rate} req/s, p99 (${best})`, '≤ 1 ms', f.diff(f.get('open-loop', open, best, 'p99'), f.get('open-loop', open, 'direct', 'p99')), 'ms', (v) => v <= 1));
  out.push(row('ttfb-added-p50', `streaming time to first byte added over direct, p50 (${best})`, '≤ 0.5 ms', f.diff(f.get('streaming', 'paced', best, 'ttfbP50Ms'), f.get('streaming', 'paced', 'direct', 'ttfbP50Ms')), 'ms', (v) => v <= 0.5));
  if (w1 !== undefined) {
    const cpu0 = scaled(f.get('closed-loop', closed, w0, 'cpu1k:edge'), 1000);
    const cpu1 = scaled(f.get('closed-loop', closed, w1, 'cpu1k:edge'), 1000);
    out.push(row('w1-vs-w0', 'the edge\'s CPU per request with workers.count 1 over workers.count 0', '≤ 1.15×', f.ratio(cpu1, cpu0), 'x', (v) => v <= 1.15, `w=1 ${us(cpu1)}, w=0 ${us(cpu0)}`));
  }
  // Per-token CPU: the goal's own variant when it ran, else the one with the most tokens per second per stream
  // (the longest streams of a run: each stream's setup, its request and tunnel, is spread over the most tokens).
  const streamVariants = input.variants['many-streams'] ?? [];
  const tokenVariant = tokenGoalVariant(streamVariants);
  if (tokenVariant !== undefined) {
    const perEvent = (role: string): Figure => {
      const value = medianOf(input.summaries, 'many-streams', tokenVariant, w0, `usPerEvent:${role}`);
      return value === undefined ? NOT_MEASURED : { value };
    };
    const others = `each stream's setup included; mock ${fmt1(perEvent('mock'))}, stream load generator ${fmt1(perEvent('loadgen'))}`;
    out.push(row('token-edge', `CPU per relayed token (SSE event), the edge (${w0}, ${tokenVariant})`, '≤ 4 µs', perEvent('edge'), 'µs', (v) => v <= 4, others));
    out.push(row('token-agent', `CPU per relayed token (SSE event), the agent (${w0}, ${tokenVariant})`, '≤ 6 µs', perEvent('agent'), 'µs', (v) => v <= 6));
  }
  if (streamVariants.includes(STREAMS_GOAL_VARIANT)) {
    const at = (key: string): number | undefined => medianOf(input.summaries, 'many-streams', STREAMS_GOAL_VARIANT, w0, key);
    const streams = at('streams');
    const completed = at('requests');
    const errors = at('errors');
    const stalls = at('stalls');
    const rss = at('rss:proxy');
    const measured = streams !== undefined && completed !== undefined && errors !== undefined && stalls !== undefined && rss !== undefined;
    out.push({
      id: 'streams-10k',
      goal: `10,000 streams at 5 tokens/s (${w0}): every stream complete, no error, no stall; edge + agent peak RSS`,
      threshold: '10,000 / 0 / 0; ≤ 1,024 MB',
      figure: rss === undefined ? NOT_MEASURED : { value: rss },
      unit: 'MB',
      holds: measured ? completed === 10_000 && errors === 0 && stalls === 0 && rss <= 1024 : undefined,
      detail: measured ? `${completed} completed, ${errors} failed, ${stalls} stalled` : undefined,
    });
  }
  return out;
}

/** The many-streams variant the per-token goals read: the goal's own when it ran, else fastestStreams'. */
export function tokenGoalVariant(ids: readonly string[]): string | undefined {
  return ids.includes(STREAMS_GOAL_VARIANT) ? STREAMS_GOAL_VARIANT : fastestStreams(ids);
}

/** `<streams>-streams-<tps>tps` ids: the highest tokens per second, then the most streams. */
function fastestStreams(ids: readonly string[]): string | undefined {
  const parse = (id: string): [number, number] => {
    const m = /^(\d+)-streams-([\d.]+)tps$/.exec(id);
    return m === null ? [0, 0] : [Number(m[2]), Number(m[1])];
  };
  let best: string | undefined;
  for (const id of ids) {
    if (best === undefined) {
      best = id;
      continue;
    }
    const [tps, streams] = parse(id);
    const [bestTps, bestStreams] = parse(best);
    if (tps > bestTps || (tps === bestTps && streams > bestStreams)) best = id;
  }
  return best;
}

function fmt1(figure: Figure): string {
  return figure.value === undefined ? 'n/a' : `${figure.value.toFixed(1)} µs`;
}
