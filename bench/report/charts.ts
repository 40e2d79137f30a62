// Which SVGs a result gets: the charts each scenario declares, and the
// worker-count sweep. Returns file names and contents; write.ts saves them.
import type { BenchResult, TargetRecord } from '../harness/result.js';
import type { ChartSpec } from '../harness/types.js';
import { barChartSvg, type BarSeries } from './svg.js';
import type { Summary } from './summary.js';

export interface ChartFile {
  readonly name: string;
  readonly title: string;
  /** The scenario (or 'worker-sweep') the chart belongs to. */
  readonly section: string;
  /** The variant it shows; undefined for a chart across variants. */
  readonly variant: string | undefined;
  readonly svg: string;
}

function summaryOf(summaries: readonly Summary[], scenario: string, variant: string, target: string): Summary | undefined {
  return summaries.find((s) => s.scenario === scenario && s.variant === variant && s.target === target);
}

function seriesOf(name: string, key: string, summaries: readonly (Summary | undefined)[]): BarSeries {
  return {
    name,
    values: summaries.map((s) => s?.values[key]?.median),
    lows: summaries.map((s) => s?.values[key]?.min),
    highs: summaries.map((s) => s?.values[key]?.max),
  };
}

function measuredIn(result: BenchResult, scenario: string): TargetRecord[] {
  return result.targets.filter((t) => result.summaries.some((s) => s.scenario === scenario && s.target === t.id));
}

export function buildCharts(result: BenchResult): ChartFile[] {
  const files: ChartFile[] = [];
  const stamp = result.id;
  const spreadNote = result.settings.reps > 1 ? `median of ${result.settings.reps} runs; whiskers: min-max` : 'one run';
  for (const scenario of result.scenarios) {
    const targets = measuredIn(result, scenario.id);
    if (targets.length === 0) continue;
    for (const chart of scenario.charts) {
      if (chart.byVariant === true) {
        const key = chart.keys[0].key;
        // Legend names: the variant label up to its first ' x ' or '(' ('1 MB x 2 connections ...' -> '1 MB').
        const series = scenario.variants.map((v) => seriesOf(v.label.split(/ x | \(/)[0].trim(), key, targets.map((t) => summaryOf(result.summaries, scenario.id, v.id, t.id))));
        files.push(chartFile(stamp, scenario.id, undefined, chart, targets, series, spreadNote));
        continue;
      }
      for (const variant of scenario.variants) {
        const rows = targets.map((t) => summaryOf(result.summaries, scenario.id, variant.id, t.id));
        if (rows.every((r) => r === undefined)) continue;
        if (chart.requires !== undefined && rows.every((r) => r?.values[chart.requires as string] === undefined)) continue;
        const series = chart.keys.map((k) => seriesOf(k.label, k.key, rows));
        files.push(chartFile(stamp, scenario.id, variant, chart, targets, series, variant.reps > 1 ? spreadNote : 'one run'));
      }
    }
  }
  const sweep = result.targets.filter((t) => t.workers !== undefined && t.baseline === undefined);
  const closed = result.scenarios.find((s) => s.id === 'closed-loop');
  if (closed !== undefined && sweep.length > 1) {
    const variant = closed.variants[0];
    const rows = sweep.map((t) => summaryOf(result.summaries, closed.id, variant.id, t.id));
    const chart: ChartSpec = { id: 'rps', title: 'Worker-count sweep: edge throughput', unit: 'req/s', keys: [{ key: 'rps', label: 'req/s' }] };
    files.push(chartFile(stamp, 'worker-sweep', undefined, chart, sweep, [seriesOf('req/s', 'rps', rows)], `${variant.label}; n/a = refused by the edge`));
  }
  return files;
}

function chartFile(
  stamp: string,
  section: string,
  variant: { readonly id: string; readonly label: string } | undefined,
  chart: ChartSpec,
  targets: readonly TargetRecord[],
  series: readonly BarSeries[],
  subtitle: string,
): ChartFile {
  const name = `${stamp}-${section}${variant === undefined ? '' : `-${variant.id}`}-${chart.id}.svg`;
  const title = variant === undefined ? chart.title : `${chart.title}: ${variant.label}`;
  return { name, title, section, variant: variant?.id, svg: barChartSvg({ title, subtitle, unit: chart.unit, categories: targets.map((t) => t.label), series }) };
}
