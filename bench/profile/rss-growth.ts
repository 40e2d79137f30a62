// The edge's resident memory over a sustained closed loop: N closed loops of
// S seconds in a row against one edge (w=0), its RSS read from /proc after
// each. A peak RSS from one short run says little (the heap grows to its
// working size over tens of seconds); a curve that flattens is growth, one
// that keeps climbing is a leak. With --base, the same for another build, one
// after the other, so two builds' curves can be compared.
//
//   node dist/bench/profile/rss-growth.js [--base OTHER/dist] [--rounds 6] [--seconds 8]
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chatBody } from '../harness/bodies.js';
import { MODES } from '../harness/modes.js';
import { REPO_ROOT } from '../harness/paths.js';
import { Supervisor } from '../harness/processes.js';
import { closedLoop } from '../load/autocannon-load.js';
import { startMock } from '../targets/mock.js';
import { edgeTarget } from '../targets/edge.js';
import { arg } from './cli-arg.js';

const baseDist = arg('base', '');
const rounds = Number(arg('rounds', '6'));
const seconds = Number(arg('seconds', '8'));
const workDir = mkdtempSync(join(tmpdir(), 'edge-rss-'));
const supervisor = new Supervisor(workDir);
supervisor.stopWithProcess();

function rssMB(pid: number): number {
  const match = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match === null ? Number.NaN : Math.round(Number(match[1]) / 1024);
}

async function curve(name: string, dist: string | undefined, mock: Awaited<ReturnType<typeof startMock>>): Promise<void> {
  const spec = dist === undefined ? edgeTarget({ workers: 0 }) : edgeTarget({ workers: 0, id: 'base-w0', dist, baseline: name });
  const started = await spec.start({ supervisor, mock, workDir, repoRoot: REPO_ROOT, settings: MODES.full });
  if (!('origin' in started)) throw new Error(`${name}: ${started.skipped}`);
  const edge = started.processes.find((p) => p.role === 'edge');
  if (edge === undefined) throw new Error('no edge process');
  const body = chatBody(started.model, 2048);
  const points: string[] = [];
  for (let round = 0; round < rounds; round++) {
    const result = await closedLoop({ url: `${started.origin}/v1/chat/completions`, headers: started.headers, body, connections: 10, durationS: seconds });
    points.push(`${Math.round(result.requests / result.wallS)} req/s ${rssMB(edge.pid)} MB`);
  }
  console.log(`${name}: ${points.join(' | ')}`);
  for (const p of started.processes) if (p.role !== 'mock') process.kill(p.pid, 'SIGTERM');
}

async function main(): Promise<void> {
  const mock = await startMock(supervisor);
  console.log(`edge RSS after each of ${rounds} closed loops of ${seconds} s (10 connections, 2 KB bodies, w=0)`);
  await curve('this', undefined, mock);
  if (baseDist !== '') await curve('base', baseDist, mock);
  await supervisor.stopAll();
}

main().catch(async (err: unknown) => {
  console.error(err);
  await supervisor.stopAll();
  process.exitCode = 1;
});
