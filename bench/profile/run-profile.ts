// Profiles the edge and the node agent under one scenario of the 2-hop path:
// starts the mock, then the edge (workers.count 0 by default) and the agent
// with --cpu-prof, drives them with the scenario's load for a few seconds
// (closed-loop: autocannon, 10 connections, 2 KB bodies; open-loop: 500
// req/s paced; large-body: 1 MB bodies (--body-kb) on 2 connections; streaming: 10
// streams of 200 chunks back to back, closed loop; many-streams: 2,000
// streams at 5 tokens/s opened together), stops them
// (SIGTERM: both exit normally, so V8 writes its profiles), and renders each
// profile as a flame graph SVG plus a top-self-time summary (flame.ts).
// Only the edge and the agent are profiled; the mock and the load generator
// are not, so their cost does not blur the picture.
//
//   node dist/bench/profile/run-profile.js [--scenario closed-loop] [--seconds 8] [--warmup 1] [--workers 0] [--out docs/perf] [--name closed-loop-w0] [--body-kb 1024]
// The summary's per-unit figures are per request, or per relayed SSE event for the streaming scenarios.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chatBody } from '../harness/bodies.js';
import { MODES } from '../harness/modes.js';
import { REPO_ROOT } from '../harness/paths.js';
import { Supervisor } from '../harness/processes.js';
import type { RunningTarget } from '../harness/types.js';
import { closedLoop } from '../load/autocannon-load.js';
import { pacedLoad } from '../load/paced-load.js';
import { streamLoad } from '../load/stream-load.js';
import type { LoadResult } from '../harness/types.js';
import { startMock } from '../targets/mock.js';
import { edgeTarget } from '../targets/edge.js';
import { renderProfile, type ProfileSummary } from './flame.js';
import { arg } from './cli-arg.js';

const seconds = Number(arg('seconds', '8'));
/** Unrecorded load first. 1 s (the default, what docs/perf's profiles used) leaves V8 still optimizing; 12+ profiles the steady state (docs/benchmarks.md, Method). */
const warmupS = Number(arg('warmup', '1'));
const workers = Number(arg('workers', '0'));
const outDir = resolve(REPO_ROOT, arg('out', 'docs/perf'));
const scenario = arg('scenario', 'closed-loop');
const name = arg('name', `${scenario}-w${workers}`);
/** large-body: the upload's size. */
const bodyKb = Number(arg('body-kb', '1024'));

interface ProfiledLoad {
  /** What the per-unit columns divide by. */
  readonly unit: 'request' | 'event';
  run(target: RunningTarget, durationS: number): Promise<LoadResult>;
}

const STREAM_HEADERS = (tokens: number, intervalMs: number): Record<string, string> => ({ 'x-mock-tokens': String(tokens), 'x-mock-interval-ms': String(intervalMs), 'x-mock-ttft-ms': '0' });

const LOADS: Readonly<Record<string, ProfiledLoad>> = {
  'closed-loop': {
    unit: 'request',
    run: (t, durationS) => closedLoop({ url: `${t.origin}/v1/chat/completions`, headers: t.headers, body: chatBody(t.model, 2048), connections: 10, durationS }),
  },
  'open-loop': {
    unit: 'request',
    run: (t, durationS) => pacedLoad({ origin: t.origin, path: '/v1/chat/completions', headers: t.headers, body: chatBody(t.model, 2048), rate: 500, durationS }),
  },
  'large-body': {
    unit: 'request',
    run: (t, durationS) => closedLoop({ url: `${t.origin}/v1/chat/completions`, headers: t.headers, body: chatBody(t.model, bodyKb * 1024), connections: 2, durationS }),
  },
  streaming: {
    unit: 'event',
    run: (t, durationS) =>
      streamLoad({ origin: t.origin, path: '/v1/chat/completions', headers: { ...t.headers, ...STREAM_HEADERS(200, 0) }, body: chatBody(t.model, 512, true), concurrency: 10, durationS, minEvents: 200, stallMs: 2_000, deadlineS: durationS + 30 }),
  },
  'many-streams': {
    unit: 'event',
    // Each stream lasts the whole window: 5 tokens/s for durationS.
    run: (t, durationS) =>
      streamLoad({ origin: t.origin, path: '/v1/chat/completions', headers: { ...t.headers, ...STREAM_HEADERS(Math.round(durationS * 5), 200) }, body: chatBody(t.model, 512, true), concurrency: 2_000, openPerSecond: 1_000, minEvents: Math.round(durationS * 5), stallMs: 2_000, deadlineS: durationS * 3 + 30 }),
  },
};
const load = LOADS[scenario];
if (load === undefined) throw new RangeError(`--scenario: expected one of ${Object.keys(LOADS).join(', ')}, got '${scenario}'`);

const workDir = mkdtempSync(join(tmpdir(), 'edge-profile-'));
const supervisor = new Supervisor(workDir);
supervisor.stopWithProcess();

async function main(): Promise<void> {
  const settings = MODES.quick;
  const mock = await startMock(supervisor);
  const profDir = join(workDir, 'prof');
  mkdirSync(profDir);
  // Every Node child spawned from here on (the edge and the agent, not the mock above) writes a profile.
  process.env.BENCH_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${profDir} --cpu-prof-interval=200`;
  const started = await edgeTarget({ workers }).start({ supervisor, mock, workDir, repoRoot: REPO_ROOT, settings });
  if (!('origin' in started)) throw new Error(`edge skipped: ${started.skipped}`);
  const target: RunningTarget = started;
  // Warm-up (JIT, pools), then only the measured window's samples count.
  await load.run(target, warmupS);
  const fromUs = Number(process.hrtime.bigint() / 1000n);
  const result = await load.run(target, seconds);
  const toUs = Number(process.hrtime.bigint() / 1000n);
  const events = (result.metrics.eventsPerS ?? 0) * result.wallS;
  const units = load.unit === 'event' ? events : result.requests;
  const rate = load.unit === 'event' ? `${Math.round(events / result.wallS)} events/s over ${result.requests} streams` : `${Math.round(result.requests / result.wallS)} req/s`;
  console.log(`${scenario} ${seconds} s: ${rate}, ${result.errors} errors, ${result.non2xx} non-2xx`);
  const pids = new Map(target.processes.filter((p) => p.role !== 'mock').map((p) => [p.pid, p.role]));
  await supervisor.stopAll();

  mkdirSync(outDir, { recursive: true });
  const summaries: string[] = [];
  for (const file of readdirSync(profDir)) {
    const pid = Number(/^CPU\.\d+\.\d+\.(\d+)\./.exec(file)?.[1]);
    // Worker threads write their own profiles (same pid): number them by file order.
    const role = pids.get(pid) ?? `pid${pid}`;
    let base = `${name}-${role}`;
    for (let n = 1; summaries.some((s) => s.startsWith(`## ${base}\n`)); n++) base = `${name}-${role}-${n}`;
    const profile = JSON.parse(readFileSync(join(profDir, file), 'utf8'));
    const summary: ProfileSummary = renderProfile(profile, `${base}: ${seconds} s ${scenario}, ${rate}`, { fromUs, toUs });
    // The process that restarted itself with runtime.node_flags (same pid) wrote a profile of its start alone.
    if (summary.samples === 0) {
      console.log(`${file}: no samples in the measured window (the start before a runtime.node_flags restart), skipped`);
      continue;
    }
    writeFileSync(join(outDir, `${base}.svg`), summary.svg);
    renameSync(join(profDir, file), join(workDir, `${base}.cpuprofile`));
    const perUnit = (us: number): string => (us / units).toFixed(1);
    const per = load.unit === 'event' ? 'µs/event' : 'µs/req';
    const lines = [`## ${base}`, '', `${scenario}, ${rate}; samples ${summary.samples}, busy ${(summary.busyUs / 1000).toFixed(0)} ms of ${(summary.totalUs / 1000).toFixed(0)} ms, ${perUnit(summary.busyUs)} µs busy per ${load.unit}`, '', `| self % of busy | ${per} | function | where |`, '|---|---|---|---|'];
    for (const row of summary.top) lines.push(`| ${row.percent.toFixed(1)} | ${perUnit(row.selfUs)} | \`${row.name}\` | ${row.where} |`);
    lines.push('', `| area | % of busy | ${per} |`, '|---|---|---|');
    for (const row of summary.areas) lines.push(`| ${row.area} | ${row.percent.toFixed(1)} | ${perUnit(row.selfUs)} |`);
    summaries.push(lines.join('\n'));
  }
  const text = summaries.join('\n\n') + '\n';
  writeFileSync(join(outDir, `${name}-summary.md`), text);
  console.log(text);
  console.log(`profiles kept in ${workDir}`);
}

main().catch(async (err: unknown) => {
  console.error(err);
  await supervisor.stopAll();
  process.exitCode = 1;
});
