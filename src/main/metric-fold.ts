// What exited I/O workers had counted (each exit's last scrape: counters and
// histograms), kept so that totals never go down, and the order a scrape adds
// the parts in. Sums of floats depend on that order: a total added up in
// another order than the scrape before can come out an ulp lower, which
// Prometheus reads as a counter reset (rate() jumps).

/** One sample of a prom-client JSON scrape. */
export interface MetricValueJson {
  value: number;
  readonly labels?: Readonly<Record<string, string | number>>;
  /** A histogram's `_bucket`, `_sum` or `_count` series. */
  readonly metricName?: string;
}

/** One metric of a prom-client JSON scrape, as the fold reads it. */
export interface FoldableMetric {
  readonly name: string;
  readonly type: string;
  readonly values: MetricValueJson[];
}

/** Adds `add`'s samples into `into` (same metric, same series and labels: summed; new ones: copied). */
export function foldMetrics(into: FoldableMetric[], add: readonly FoldableMetric[]): void {
  for (const metric of add) {
    const target = into.find((m) => m.name === metric.name);
    if (target === undefined) {
      into.push({ ...metric, values: metric.values.map((v) => ({ ...v })) });
      continue;
    }
    const byKey = new Map(target.values.map((v) => [seriesKey(v), v]));
    for (const v of metric.values) {
      const same = byKey.get(seriesKey(v));
      if (same !== undefined) same.value += v.value;
      else {
        const copy = { ...v };
        target.values.push(copy);
        byKey.set(seriesKey(copy), copy);
      }
    }
  }
}

function seriesKey(v: MetricValueJson): string {
  const labels = v.labels === undefined ? [] : Object.entries(v.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `${v.metricName ?? ''}\n${JSON.stringify(labels)}`;
}

/** Retired parts kept per worker index before the oldest two are folded into one. */
const MAX_RETIRED_PARTS = 8;

/**
 * Each worker index's retired parts, in the order its workers exited. A
 * scrape takes them just before that index's live part: the parts before an
 * exit and after it are the same numbers in the same order (the exited
 * worker's last scrape where its live part was; its replacement, new, adds
 * nothing yet), so the totals come out exactly as before. Past
 * MAX_RETIRED_PARTS exits of one index, each further exit folds its oldest
 * two: from then on a total may come out an ulp lower at that index's exits
 * (a crash-looping worker, where bounded memory is worth more).
 */
export class RetiredMetrics {
  readonly #byIndex: FoldableMetric[][][] = [];

  retire(index: number, lastScrape: readonly FoldableMetric[]): void {
    const counted = lastScrape.filter((metric) => metric.type === 'counter' || metric.type === 'histogram');
    const parts = (this.#byIndex[index] ??= []);
    parts.push([]);
    foldMetrics(parts[parts.length - 1], counted);
    if (parts.length > MAX_RETIRED_PARTS) {
      const [oldest] = parts.splice(0, 1);
      foldMetrics(oldest, parts[0]);
      parts[0] = oldest;
    }
  }

  /** Every part for a scrape: worker index by index, its retired parts, then its live one (`live[index]`, if any). */
  ordered(live: readonly unknown[], workers: number): unknown[] {
    const parts: unknown[] = [];
    for (let index = 0; index < Math.max(workers, this.#byIndex.length); index++) {
      for (const retired of this.#byIndex[index] ?? []) parts.push(retired);
      if (live[index] !== undefined) parts.push(live[index]);
    }
    return parts;
  }
}
