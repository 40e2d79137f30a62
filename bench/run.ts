// `npm run bench` (full), `npm run bench:quick`: the benchmark harness.
//   node dist/bench/run.js [--mode quick|full|smoke] [--out DIR]
//                          [--targets direct,nginx,...] [--scenarios closed-loop,...]
//                          [--reps N] [--max-workers N] [--streams 10000@5,...]
//                          [--stream-seconds 60] [--baseline ../other-checkout/dist]
//   node dist/bench/run.js --render bench/results/<stamp>.json   (rebuild its report and charts)
// Writes DIR/<stamp>.json, DIR/<stamp>.md and DIR/<stamp>-*.svg (DIR defaults
// to bench/results). See docs/benchmarks.md.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { isModeName, MODES, type ModeSettings, type StreamsSetting } from './harness/modes.js';
import { RESULTS_DIR } from './harness/paths.js';
import { runBench } from './harness/runner.js';
import { rerender } from './report/rerender.js';
import { SCENARIOS } from './scenarios/index.js';

const USAGE = `usage: node dist/bench/run.js [--mode quick|full|smoke] [--out DIR] [--targets a,b] [--scenarios a,b] [--reps N] [--max-workers N] [--streams N@TPS,...] [--stream-seconds S] [--baseline OTHER_CHECKOUT/dist]
       node dist/bench/run.js --render RESULT.json [--out DIR]
scenarios: ${SCENARIOS.map((s) => s.id).join(', ')}
targets:   direct, nginx, nginx-auto, portkey, edge-w<N>`;

/** --baseline: another checkout's dist/ (built), labelled with that checkout's commit. */
function baselineBuild(value: string): { dist: string; label: string } {
  const dist = resolve(value);
  if (!existsSync(join(dist, 'src/edge/cli.js')) || !existsSync(join(dist, 'src/agent/cli.js'))) {
    throw new RangeError(`--baseline: ${dist} has no src/edge/cli.js and src/agent/cli.js; build that checkout first (npm run build)`);
  }
  let label = 'baseline';
  try {
    label = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dirname(dist), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // not a git checkout: the generic label
  }
  return { dist, label };
}

function withBaseline(targets: readonly string[] | undefined, baseline: string | undefined): readonly string[] | undefined {
  return targets === undefined || baseline === undefined ? targets : [...targets, 'base-w0'];
}

function list(value: string | undefined): string[] | undefined {
  return value === undefined ? undefined : value.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

/** `10000@5,2000@5`: streams@tokens-per-second. */
function streamsList(value: string): StreamsSetting[] {
  return value.split(',').map((part) => {
    const [streams, tps] = part.split('@').map(Number);
    if (!Number.isInteger(streams) || streams < 1 || !(tps > 0)) throw new RangeError(`--streams: expected STREAMS@TOKENS_PER_S[,...], got '${part}'`);
    return { streams, tokensPerSecond: tps };
  });
}

function positiveInt(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`--${name}: expected a whole number, got '${value}'`);
  return n;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      mode: { type: 'string', default: 'quick' },
      out: { type: 'string' },
      targets: { type: 'string' },
      scenarios: { type: 'string' },
      reps: { type: 'string' },
      'max-workers': { type: 'string' },
      streams: { type: 'string' },
      'stream-seconds': { type: 'string' },
      baseline: { type: 'string' },
      render: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help === true) {
    console.log(USAGE);
    return 0;
  }
  if (values.render !== undefined) {
    const { files } = rerender(values.render, values.out);
    console.log(`report: ${files.markdown}\ncharts: ${files.charts.length} SVG files`);
    return 0;
  }
  const mode = values.mode ?? 'quick';
  if (!isModeName(mode)) throw new RangeError(`--mode: expected quick, full or smoke, got '${mode}'`);
  const base = MODES[mode];
  const settings: ModeSettings = {
    ...base,
    // A baseline is measured whatever --targets lists: asking for it is asking for it.
    targets: withBaseline(list(values.targets) ?? base.targets, values.baseline),
    scenarios: list(values.scenarios) ?? base.scenarios,
    reps: positiveInt('reps', values.reps) ?? base.reps,
    maxWorkers: positiveInt('max-workers', values['max-workers']) ?? base.maxWorkers,
    baseline: values.baseline === undefined ? undefined : baselineBuild(values.baseline),
    manyStreams: {
      ...base.manyStreams,
      variants: values.streams === undefined ? base.manyStreams.variants : streamsList(values.streams),
      streamS: positiveInt('stream-seconds', values['stream-seconds']) ?? base.manyStreams.streamS,
    },
  };
  const t0 = performance.now();
  const log = (line: string): void => console.log(`[${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${line}`);
  const { result, files } = await runBench({ settings, outDir: values.out ?? RESULTS_DIR, log });
  console.log(`\nbench ${mode} done in ${Math.round(result.durationS)} s`);
  for (const figure of result.headline.filter((f) => f.id.startsWith('closed-loop') || f.id.startsWith('open-loop'))) {
    const { value, unit } = figure;
    const text = value === null ? `withheld (${figure.withheld ?? '?'})` : unit === 'x' ? `${value.toFixed(2)}x` : unit === 'ms' ? `${value.toFixed(2)} ms` : `${value.toFixed(0)}${unit === '' ? '' : ` ${unit}`}`;
    console.log(`  ${figure.text}: ${text}`);
  }
  console.log(`report: ${files.markdown}\ndata:   ${files.json}\ncharts: ${files.charts.length} SVG files`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n${USAGE}`);
    process.exit(1);
  },
);
