// Exact percentiles over recorded samples (the harness's own clients keep
// every latency; a few hundred thousand numbers at most).
import type { LatencySummary } from './types.js';

/** Nearest-rank percentile of an ascending array; NaN when empty. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function sortedCopy(values: ArrayLike<number>): Float64Array {
  return Float64Array.from(values).sort();
}

export function latencySummary(values: ArrayLike<number>): LatencySummary | null {
  if (values.length === 0) return null;
  const sorted = sortedCopy(values);
  return {
    p50: percentileSorted(sorted, 50),
    p90: percentileSorted(sorted, 90),
    p99: percentileSorted(sorted, 99),
    max: sorted[sorted.length - 1],
  };
}

export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly n: number;
}

/** Median (mean of the middle two for an even count), min and max of the finite values; undefined when none. */
export function spreadOf(values: readonly number[]): Spread | undefined {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return undefined;
  const mid = finite.length >> 1;
  const median = finite.length % 2 === 1 ? finite[mid] : (finite[mid - 1] + finite[mid]) / 2;
  return { median, min: finite[0], max: finite[finite.length - 1], n: finite.length };
}
