// Every target a run may measure, in report order. Add a target here (e.g.
// an edge with a different agent config: edgeTarget({ workers, id, agentConfig })).
import type { ModeSettings } from '../harness/modes.js';
import type { TargetSpec } from '../harness/types.js';
import { direct } from './direct.js';
import { edgeTarget } from './edge.js';
import { nginx, nginxAuto } from './nginx.js';
import { portkey } from './portkey.js';

/** workers.count values of the sweep: 0, 1, 2, 4, ... up to max, and max itself. */
export function sweepCounts(max: number): number[] {
  const counts = new Set<number>([0]);
  for (let n = 1; n <= max; n *= 2) counts.add(n);
  counts.add(max);
  return [...counts].sort((a, b) => a - b);
}

export function allTargets(settings: ModeSettings): TargetSpec[] {
  const max = settings.maxWorkers;
  const edges = sweepCounts(max).map((workers) => edgeTarget({ workers, sweepOnly: workers !== 0 && workers !== max }));
  // Frame coalescing on the agent (default on) against off, where it matters: streams.
  const noCoalescing = edgeTarget({
    workers: 0,
    id: 'edge-w0-nocoalesce',
    label: 'edge 2-hop w=0, coalescing off',
    agentConfig: { tunnels: { coalesce_delay_ms: 0 } },
    onlyScenarios: ['streaming', 'many-streams'],
  });
  // One turn's frames of all tunnels in one gRPC message (default on) against one message per frame: many slow streams.
  const noBatching = edgeTarget({
    workers: 0,
    id: 'edge-w0-nobatch',
    label: 'edge 2-hop w=0, frame batching off',
    agentConfig: { tunnels: { batch_frames: false } },
    onlyScenarios: ['streaming', 'many-streams'],
  });
  // Before/after in one run: the same edge (w=0) built from another checkout, beside this one in every scenario.
  const base = settings.baseline;
  const baseline =
    base === undefined
      ? []
      : [
          edgeTarget({ workers: 0, id: 'base-w0', label: `edge 2-hop w=0 at ${base.label}`, dist: base.dist, baseline: base.label }),
          // For changes to the I/O workers' path: the closed loop only, to keep full runs short.
          edgeTarget({ workers: 1, id: 'base-w1', label: `edge 2-hop w=1 at ${base.label}`, dist: base.dist, baseline: base.label, onlyScenarios: ['closed-loop'] }),
        ];
  return [direct, nginx, nginxAuto, portkey, ...edges, ...baseline, noCoalescing, noBatching];
}
