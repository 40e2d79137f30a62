// The scheduler thread's capacity, for the worker-count sweep: runs
// dist/bench/scheduler-rings.js (the edge's own WorkerPool and scheduler fed
// by synthetic load workers over the real rings) as a child process once the
// targets are stopped, and keeps its per-case JSON lines for the report.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CaseResult } from '../scheduler-rings.js';
import { DIST, NODE } from './paths.js';

export type RingCase = CaseResult;

const run = promisify(execFile);

export interface RingPlan {
  readonly seconds: number;
  readonly workers: readonly number[];
  readonly inflight: readonly number[];
}

/** Full and quick: one and four load workers, 1 to 256 requests in flight each; smoke: a glance. */
export function ringPlanOf(mode: 'quick' | 'full' | 'smoke'): RingPlan {
  if (mode === 'smoke') return { seconds: 0.2, workers: [1], inflight: [1, 16] };
  return { seconds: mode === 'full' ? 3 : 1, workers: [1, 4], inflight: [1, 4, 16, 64, 256] };
}

export async function measureSchedulerRings(plan: RingPlan): Promise<RingCase[]> {
  const { seconds } = plan;
  const args = [join(DIST, 'bench/scheduler-rings.js'), `--workers=${plan.workers.join(',')}`, `--inflight=${plan.inflight.join(',')}`, `--seconds=${seconds}`];
  const { stdout } = await run(NODE, args, {
    timeout: 60_000 + seconds * 20_000,
    maxBuffer: 1 << 20,
  });
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as RingCase);
}
