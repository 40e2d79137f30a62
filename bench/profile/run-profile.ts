// Profiles the edge and the node agent under the closed-loop 2-hop scenario:
// starts the mock, then the edge (workers.count 0 by default) and the agent
// with --cpu-prof, drives them with autocannon for a few seconds, stops them
// (SIGTERM: both exit normally, so V8 writes its profiles), and renders each
// profile as a flame graph SVG plus a top-self-time summary (flame.ts).
// Only the edge and the agent are profiled; the mock and the load generator
// are not, so their cost does not blur the picture.
//
//   node dist/bench/profile/run-profile.js [--seconds 8] [--workers 0] [--out docs/perf] [--name closed-loop-w0]
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chatBody } from '../harness/bodies.js';
import { MODES } from '../harness/modes.js';
import { REPO_ROOT } from '../harness/paths.js';
import { Supervisor } from '../harness/processes.js';
import type { RunningTarget } from '../harness/types.js';
import { closedLoop } from '../load/autocannon-load.js';
import { startMock } from '../targets/mock.js';
import { edgeTarget } from '../targets/edge.js';
import { renderProfile, type ProfileSummary } from './flame.js';

function arg(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

const seconds = Number(arg('seconds', '8'));
const workers = Number(arg('workers', '0'));
const outDir = resolve(REPO_ROOT, arg('out', 'docs/perf'));
const name = arg('name', `closed-loop-w${workers}`);

const workDir = mkdtempSync(join(tmpdir(), 'edge-profile-'));
const supervisor = new Supervisor(workDir);
process.once('exit', () => supervisor.killAllNow());

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
  const body = chatBody(target.model, settings.closedLoop.bodyBytes);
  const url = `${target.origin}/v1/chat/completions`;
  await closedLoop({ url, headers: target.headers, body, connections: settings.closedLoop.connections, durationS: 1 });
  const fromUs = Number(process.hrtime.bigint() / 1000n);
  const result = await closedLoop({ url, headers: target.headers, body, connections: settings.closedLoop.connections, durationS: seconds });
  const toUs = Number(process.hrtime.bigint() / 1000n);
  console.log(`closed loop ${seconds} s: ${Math.round(result.requests / result.wallS)} req/s, ${result.errors} errors, ${result.non2xx} non-2xx`);
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
    const summary: ProfileSummary = renderProfile(profile, `${base}: ${seconds} s closed loop, ${Math.round(result.requests / result.wallS)} req/s, ${result.requests} requests`, { fromUs, toUs });
    writeFileSync(join(outDir, `${base}.svg`), summary.svg);
    renameSync(join(profDir, file), join(workDir, `${base}.cpuprofile`));
    const perRequest = (us: number): string => (us / result.requests).toFixed(1);
    const lines = [`## ${base}`, '', `samples ${summary.samples}, busy ${(summary.busyUs / 1000).toFixed(0)} ms of ${(summary.totalUs / 1000).toFixed(0)} ms, ${perRequest(summary.busyUs)} µs busy per request`, '', '| self % of busy | µs/req | function | where |', '|---|---|---|---|'];
    for (const row of summary.top) lines.push(`| ${row.percent.toFixed(1)} | ${perRequest(row.selfUs)} | \`${row.name}\` | ${row.where} |`);
    lines.push('', '| area | % of busy | µs/req |', '|---|---|---|');
    for (const row of summary.areas) lines.push(`| ${row.area} | ${row.percent.toFixed(1)} | ${perRequest(row.selfUs)} |`);
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
