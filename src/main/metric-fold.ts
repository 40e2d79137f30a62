// What exited I/O workers had counted, kept as one part: each exit's last
// scrape (counters and histograms) is added into it, series by series, so
// the pool holds one retired part however many workers came and went, and a
// scrape merges one part more, not one per exit.

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
