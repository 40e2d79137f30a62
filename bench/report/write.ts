// Writes a run's files side by side: <stamp>.json, <stamp>.md and the
// <stamp>-*.svg charts the markdown links to.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchResult } from '../harness/result.js';
import { buildCharts } from './charts.js';
import { markdownReport } from './markdown.js';

export interface WrittenFiles {
  readonly json: string;
  readonly markdown: string;
  readonly charts: readonly string[];
}

export function writeReport(result: BenchResult, outDir: string): WrittenFiles {
  mkdirSync(outDir, { recursive: true });
  const charts = buildCharts(result);
  const complete: BenchResult = { ...result, charts: charts.map((c) => c.name) };
  const json = join(outDir, `${result.id}.json`);
  const markdown = join(outDir, `${result.id}.md`);
  for (const chart of charts) writeFileSync(join(outDir, chart.name), chart.svg);
  writeFileSync(json, `${JSON.stringify(complete, null, 2)}\n`);
  writeFileSync(markdown, markdownReport(complete, charts));
  return { json, markdown, charts: charts.map((c) => join(outDir, c.name)) };
}
