// `--render FILE.json`: rebuilds the markdown and charts of an earlier run
// from its measurements, with the current report code and scenario texts.
// The measurements themselves are never touched.
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { RESULT_SCHEMA, type BenchResult } from '../harness/result.js';
import { SCENARIOS } from '../scenarios/index.js';
import { headline, summarize } from './summary.js';
import { writeReport, type WrittenFiles } from './write.js';

export function rerender(file: string, outDir = dirname(file)): { result: BenchResult; files: WrittenFiles } {
  const old = JSON.parse(readFileSync(file, 'utf8')) as BenchResult;
  if (old.schema !== RESULT_SCHEMA) throw new Error(`${file}: result schema ${old.schema}, this harness reads ${RESULT_SCHEMA}`);
  const scenarios = old.scenarios.map((record) => {
    const spec = SCENARIOS.find((s) => s.id === record.id);
    if (spec === undefined) return record;
    return { ...record, title: spec.title, description: spec.description, units: spec.units, latencyDigits: spec.latencyDigits, columns: spec.columns, charts: spec.charts };
  });
  const summaries = summarize(old.measurements);
  const result: BenchResult = {
    ...old,
    scenarios,
    summaries,
    headline: headline({
      summaries,
      targets: old.targets.filter((t) => t.skipped === undefined),
      variants: Object.fromEntries(scenarios.map((s) => [s.id, s.variants.map((v) => v.id)])),
    }),
  };
  return { result, files: writeReport(result, outDir) };
}
