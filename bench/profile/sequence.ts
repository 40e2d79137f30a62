// Scenarios one after another on the same warmed edge and agent, as the full
// harness runs them, printing each phase's rate, CPU per unit and the peak
// RSS so far. A GC setting can look free in an A/B on fresh processes and
// still cost memory here: once one scenario has raised V8's heap limit,
// every later one may fill it (docs/benchmarks.md, "Big buffers and full
// GCs"). Run it once per setting and compare the lines.
//
//   node dist/bench/profile/sequence.js [--node-args "..."] [--workers 0] [--seconds 10]
//
// Phases: closed loop of 2 KB requests; 1 MB uploads on 2 connections;
// 10 burst streams of 200 events; 2,000 streams at 5 tokens/s; the closed
// loop again. --node-args go to the edge's and the agent's Node command line
// (an operator's flag wins over runtime.node_flags of the same name).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chatBody } from '../harness/bodies.js';
import { MODES } from '../harness/modes.js';
import { REPO_ROOT } from '../harness/paths.js';
import { CLK_TCK, processTicks, statusKb } from '../harness/proc-stats.js';
import { Supervisor } from '../harness/processes.js';
import type { LoadResult, RunningTarget } from '../harness/types.js';
import { closedLoop } from '../load/autocannon-load.js';
import { streamLoad } from '../load/stream-load.js';
import { edgeTarget } from '../targets/edge.js';
import { startMock } from '../targets/mock.js';
import { arg } from './cli-arg.js';

const nodeArgs = arg('node-args', '');
const workers = Number(arg('workers', '0'));
const seconds = Number(arg('seconds', '10'));

interface Phase {
  readonly name: string;
  readonly unit: 'req' | 'event';
  run(t: RunningTarget): Promise<LoadResult>;
}

const BURST = { 'x-mock-tokens': '200', 'x-mock-interval-ms': '0', 'x-mock-ttft-ms': '0' };
const slowTokens = Math.round(seconds * 5);

const closed = (t: RunningTarget): Promise<LoadResult> => closedLoop({ url: `${t.origin}/v1/chat/completions`, headers: t.headers, body: chatBody(t.model, 2048), connections: 10, durationS: seconds });
const PHASES: readonly Phase[] = [
  { name: 'closed loop 2 KB', unit: 'req', run: closed },
  { name: '1 MB uploads', unit: 'req', run: (t) => closedLoop({ url: `${t.origin}/v1/chat/completions`, headers: t.headers, body: chatBody(t.model, 1 << 20), connections: 2, durationS: seconds }) },
  {
    name: 'burst streams',
    unit: 'event',
    run: (t) => streamLoad({ origin: t.origin, path: '/v1/chat/completions', headers: { ...t.headers, ...BURST }, body: chatBody(t.model, 512, true), concurrency: 10, durationS: seconds, minEvents: 200, stallMs: 2_000, deadlineS: seconds + 30 }),
  },
  {
    name: '2,000 slow streams',
    unit: 'event',
    run: (t) =>
      streamLoad({
        origin: t.origin,
        path: '/v1/chat/completions',
        headers: { ...t.headers, 'x-mock-tokens': String(slowTokens), 'x-mock-interval-ms': '200', 'x-mock-ttft-ms': '0' },
        body: chatBody(t.model, 512, true),
        concurrency: 2_000,
        openPerSecond: 1_000,
        minEvents: slowTokens,
        stallMs: 2_000,
        deadlineS: seconds * 3 + 30,
      }),
  },
  { name: 'closed loop again', unit: 'req', run: closed },
];

const workDir = mkdtempSync(join(tmpdir(), 'edge-sequence-'));
const supervisor = new Supervisor(workDir);
supervisor.stopWithProcess();

async function main(): Promise<void> {
  const mock = await startMock(supervisor);
  // The supervisor passes BENCH_NODE_ARGS to every Node child it spawns from now on.
  process.env.BENCH_NODE_ARGS = nodeArgs;
  const started = await edgeTarget({ workers }).start({ supervisor, mock, workDir, repoRoot: REPO_ROOT, settings: MODES.quick });
  if (!('origin' in started)) throw new Error(`edge skipped: ${started.skipped}`);
  const target: RunningTarget = started;
  const pidOf = (role: string): number => target.processes.find((p) => p.role === role)?.pid ?? 0;
  const [edge, agent] = [pidOf('edge'), pidOf('agent')];
  console.log(`node args: ${nodeArgs === '' ? '(none)' : nodeArgs}; workers.count ${workers}; ${seconds} s a phase`);
  for (const phase of PHASES) {
    const [e0, a0] = [processTicks(edge), processTicks(agent)];
    const result = await phase.run(target);
    const [e1, a1] = [processTicks(edge), processTicks(agent)];
    const units = phase.unit === 'req' ? result.requests : (result.metrics.eventsPerS ?? 0) * result.wallS;
    const perUnit = (ticks: number): string => ((ticks / CLK_TCK / units) * 1e6).toFixed(1);
    const failed = result.errors + result.non2xx + (result.metrics.incomplete ?? 0);
    const mb = (pid: number, field: 'VmHWM' | 'VmRSS'): string => (statusKb(pid, field) / 1024).toFixed(0);
    console.log(
      `${phase.name.padEnd(20)} ${(units / result.wallS).toFixed(0).padStart(8)} ${phase.unit}/s${failed > 0 ? ` (${failed} failed)` : ''}; ` +
        `edge ${perUnit(e1 - e0)} + agent ${perUnit(a1 - a0)} µs/${phase.unit}; ` +
        `edge RSS ${mb(edge, 'VmRSS')} MB (peak so far ${mb(edge, 'VmHWM')}), agent peak so far ${mb(agent, 'VmHWM')} MB`,
    );
  }
  await supervisor.stopAll();
}

main().catch(async (err: unknown) => {
  console.error(err);
  await supervisor.stopAll();
  process.exitCode = 1;
});
