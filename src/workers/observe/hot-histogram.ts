// A Prometheus histogram with one label (the model) whose observe() is a
// bucket search and three additions. prom-client's Histogram, even through a
// cached labels() child, converts, validates and hashes its labels on every
// observation: with four histograms per request that was ~2.5 % of the
// edge's busy time in the closed-loop profile (docs/perf). This one keeps
// plain arrays per label value and hands prom-client's registry the same
// shapes its Histogram does (get() for JSON and the worker aggregation,
// getForPromString() for the text exposition), so /metrics reads the same.
import type { Registry } from 'prom-client';

interface Series {
  readonly label: string;
  /** counts[i]: observations in bucket i alone (not cumulative); the last slot is above every bound. */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

/** One observation target, bound to a label value (the pre-bound child). */
export class HotSeries {
  readonly #series: Series;
  readonly #bounds: readonly number[];

  constructor(series: Series, bounds: readonly number[]) {
    this.#series = series;
    this.#bounds = bounds;
  }

  observe(value: number): void {
    // prom-client throws on these; a metric must never break a request, so they are dropped.
    if (!Number.isFinite(value)) return;
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]) i++;
    const series = this.#series;
    series.counts[i]++;
    series.sum += value;
    series.count++;
  }
}

interface ValuePair {
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}

export class HotHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #labelName: string;
  readonly #bounds: readonly number[];
  readonly #series = new Map<string, Series>();

  constructor(options: { name: string; help: string; labelName: string; buckets: readonly number[]; registry: Registry }) {
    this.name = options.name;
    this.help = options.help;
    this.#labelName = options.labelName;
    this.#bounds = [...options.buckets].sort((a, b) => a - b);
    // Any object with name and get() is a metric to the registry: the same duck typing its own metrics rely on.
    options.registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The series of one label value, created on first use. */
  labels(value: string): HotSeries {
    let series = this.#series.get(value);
    if (series === undefined) {
      series = { label: value, counts: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 };
      this.#series.set(value, series);
    }
    return new HotSeries(series, this.#bounds);
  }

  /** As prom-client's Histogram.getForPromString: the series label in sharedLabels, `le` in labels. */
  getForPromString(): { name: string; help: string; type: string; values: ValuePair[]; aggregator: string } {
    const values: ValuePair[] = [];
    const bucket = `${this.name}_bucket`;
    for (const series of this.#series.values()) {
      const shared = { [this.#labelName]: series.label };
      let acc = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        acc += series.counts[i];
        values.push({ labels: { le: this.#bounds[i] }, sharedLabels: shared, value: acc, metricName: bucket, exemplar: null });
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels: shared, value: series.count, metricName: bucket, exemplar: null });
      values.push({ labels: {}, sharedLabels: shared, value: series.sum, metricName: `${this.name}_sum`, exemplar: undefined });
      values.push({ labels: {}, sharedLabels: shared, value: series.count, metricName: `${this.name}_count`, exemplar: undefined });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** As prom-client's Histogram.get: labels merged (for getMetricsAsJSON and AggregatorRegistry). */
  async get(): Promise<{ name: string; help: string; type: string; values: ValuePair[]; aggregator: string }> {
    const data = this.getForPromString();
    data.values = data.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } }));
    return data;
  }

  reset(): void {
    this.#series.clear();
  }
}
