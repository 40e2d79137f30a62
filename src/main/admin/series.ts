// The console's charts: a small, bounded time series on the main thread
// (180 points, one per 5 s = the last 15 minutes) of requests per second,
// time to first byte p50/p95 and queue wait p50/p95, plus each model
// group's rejects per minute. It is fed by what the edge already keeps:
// every tick it reads the cumulative Prometheus counters and histograms
// (from the main thread's registry, and with I/O workers from each
// worker's, over the control channel the /metrics route uses) and the
// scheduler's per-group reject counts, and stores the difference to the
// previous tick. Nothing is added to the data path; the cost is one
// registry read per thread every 5 s, whether or not a console is open.
import type { GroupStatus } from '../../contract/scheduler.js';

export const SERIES_INTERVAL_MS = 5_000;
export const SERIES_POINTS = 180;

const REQUESTS = 'edge_requests_total';
const TTFB = 'edge_time_to_first_byte_seconds';
const QUEUE = 'edge_queue_wait_seconds';
/** What a reading reads: the metrics a series source must hand over. */
export const SERIES_METRICS: readonly string[] = [REQUESTS, TTFB, QUEUE];

export interface SeriesPoint {
  /** End of the interval, ms since the epoch. */
  readonly t: number;
  /** Requests finished per second over the interval (any status). */
  readonly reqPerSec: number;
  /** Quantiles over the requests finished in the interval, ms; null when none. */
  readonly ttfbP50Ms: number | null;
  readonly ttfbP95Ms: number | null;
  readonly queueP50Ms: number | null;
  readonly queueP95Ms: number | null;
}

/** What one tick reads: cumulative totals since start. */
export interface SeriesReading {
  readonly requests: number;
  /** Cumulative bucket counts by upper bound (seconds; Infinity last), summed over labels and threads. */
  readonly ttfb: ReadonlyMap<number, number>;
  readonly queue: ReadonlyMap<number, number>;
}

export interface SeriesSource {
  /** prom-client getMetricsAsJSON() of every thread that keeps metrics. */
  metricsParts(): Promise<readonly unknown[][]>;
  groups(): readonly GroupStatus[];
}

interface MetricJson {
  readonly name?: string;
  readonly values?: readonly { readonly value: number; readonly labels?: Record<string, string | number>; readonly metricName?: string }[];
}

/** Sums the counter and the two histograms' buckets out of prom-client's JSON form. */
export function readingOf(parts: readonly unknown[][]): SeriesReading {
  let requests = 0;
  const ttfb = new Map<number, number>();
  const queue = new Map<number, number>();
  for (const part of parts) {
    for (const raw of part) {
      const metric = raw as MetricJson;
      if (metric.values === undefined) continue;
      if (metric.name === REQUESTS) {
        for (const v of metric.values) requests += v.value;
      } else if (metric.name === TTFB || metric.name === QUEUE) {
        const into = metric.name === TTFB ? ttfb : queue;
        for (const v of metric.values) {
          if (v.metricName !== `${metric.name}_bucket` || v.labels?.le === undefined) continue;
          const le = v.labels.le === '+Inf' ? Infinity : Number(v.labels.le);
          into.set(le, (into.get(le) ?? 0) + v.value);
        }
      }
    }
  }
  return { requests, ttfb, queue };
}

/**
 * The q-quantile (0..1) of the observations between two cumulative bucket
 * readings, in ms, interpolated linearly inside its bucket as Prometheus's
 * histogram_quantile does; null when nothing was observed.
 */
export function quantileMs(before: ReadonlyMap<number, number> | undefined, after: ReadonlyMap<number, number>, q: number): number | null {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((le) => after.get(le)! - (before?.get(le) ?? 0));
  const total = counts.length > 0 ? counts[counts.length - 1] : 0;
  if (total <= 0) return null;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i] >= rank) {
      const upper = bounds[i];
      // Past the last finite bound there is no width to interpolate in.
      if (upper === Infinity) return lower * 1000;
      const inBucket = counts[i] - below;
      const fraction = inBucket > 0 ? (rank - below) / inBucket : 1;
      return (lower + (upper - lower) * fraction) * 1000;
    }
    lower = bounds[i];
    below = counts[i];
  }
  return lower * 1000;
}

function round1(ms: number | null): number | null {
  return ms === null ? null : Math.round(ms * 10) / 10;
}

export class EdgeSeries {
  readonly #points: SeriesPoint[] = [];
  /** alias → [time, rejectedTotal] samples covering the last minute and a bit. */
  readonly #rejects = new Map<string, [number, number][]>();
  #last: { readonly at: number; readonly reading: SeriesReading } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #ticking = false;

  readonly #source: SeriesSource;

  constructor(
    source: SeriesSource,
    readonly intervalMs = SERIES_INTERVAL_MS,
    readonly capacity = SERIES_POINTS,
  ) {
    this.#source = source;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    void this.tick();
    this.#timer = setInterval(() => void this.tick(), this.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One reading; the first only sets the baseline. Public so tests need not wait 5 s. */
  async tick(now = Date.now()): Promise<void> {
    if (this.#ticking) return; // a slow worker must not stack readings up
    this.#ticking = true;
    try {
      this.#sampleRejects(now);
      const reading = readingOf(await this.#source.metricsParts());
      const last = this.#last;
      this.#last = { at: now, reading };
      if (last === undefined) return;
      const seconds = Math.max(0.001, (now - last.at) / 1000);
      this.#points.push({
        t: now,
        reqPerSec: Math.round((Math.max(0, reading.requests - last.reading.requests) / seconds) * 10) / 10,
        ttfbP50Ms: round1(quantileMs(last.reading.ttfb, reading.ttfb, 0.5)),
        ttfbP95Ms: round1(quantileMs(last.reading.ttfb, reading.ttfb, 0.95)),
        queueP50Ms: round1(quantileMs(last.reading.queue, reading.queue, 0.5)),
        queueP95Ms: round1(quantileMs(last.reading.queue, reading.queue, 0.95)),
      });
      if (this.#points.length > this.capacity) this.#points.shift();
    } catch {
      // A worker that is closing answers nothing: this point is skipped.
    } finally {
      this.#ticking = false;
    }
  }

  #sampleRejects(now: number): void {
    const seen = new Set<string>();
    for (const g of this.#source.groups()) {
      seen.add(g.alias);
      let samples = this.#rejects.get(g.alias);
      if (samples === undefined) this.#rejects.set(g.alias, (samples = []));
      samples.push([now, g.rejectedTotal]);
      // Keep one sample at or before a minute ago, so the window spans a full minute.
      while (samples.length > 2 && samples[1][0] <= now - 60_000) samples.shift();
    }
    for (const alias of this.#rejects.keys()) if (!seen.has(alias)) this.#rejects.delete(alias);
  }

  /** Rejects of the alias in the last minute (since the first sample while the edge is younger than that). */
  rejectsPerMinute(alias: string, currentTotal: number, now = Date.now()): number {
    const samples = this.#rejects.get(alias);
    if (samples === undefined || samples.length === 0) return 0;
    const [at, total] = samples[0];
    const spanMs = Math.max(now - at, this.intervalMs);
    const perMinute = ((currentTotal - total) * 60_000) / Math.max(spanMs, 60_000);
    return Math.round(Math.max(0, perMinute) * 10) / 10;
  }

  get points(): readonly SeriesPoint[] {
    return this.#points;
  }
}
