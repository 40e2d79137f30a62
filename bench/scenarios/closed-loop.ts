// Closed loop, non-streaming: autocannon with N connections and a 2 KB chat
// body, as fast as the target answers. The headline throughput figure, and
// (over the edge targets with workers.count 0..N) the worker-count sweep.
import { chatBody } from '../harness/bodies.js';
import type { ModeSettings } from '../harness/modes.js';
import type { LoadResult, RunningTarget, ScenarioContext, ScenarioSpec, Variant } from '../harness/types.js';
import { closedLoop as autocannonLoop } from '../load/autocannon-load.js';

interface ClosedVariant extends Variant {
  readonly connections: number;
  readonly bodyBytes: number;
}

function load(target: RunningTarget, variant: ClosedVariant, durationS: number): Promise<LoadResult> {
  return autocannonLoop({
    url: `${target.origin}/v1/chat/completions`,
    headers: target.headers,
    body: chatBody(target.model, variant.bodyBytes),
    connections: variant.connections,
    durationS,
  });
}

export const closedLoop: ScenarioSpec<ClosedVariant> = {
  id: 'closed-loop',
  title: 'Non-streaming, closed loop (max throughput)',
  latencyDigits: 0,
  description:
    'autocannon, non-streaming chat completions with a 2 KB body, each connection sending its next request as soon as the previous one is answered. ' +
    'Measures the most requests per second each target sustains; latency here is queueing at saturation (whole milliseconds, autocannon\'s resolution).',
  columns: [],
  charts: [
    { id: 'rps', title: 'Throughput', unit: 'req/s', keys: [{ key: 'rps', label: 'req/s' }] },
    { id: 'latency', title: 'Latency at saturation', unit: 'ms', keys: [{ key: 'p50', label: 'p50' }, { key: 'p99', label: 'p99' }] },
  ],
  appliesTo: () => true,
  variants(settings: ModeSettings): ClosedVariant[] {
    const c = settings.closedLoop;
    return [{ id: `2kb-c${c.connections}`, label: `2 KB body, ${c.connections} connections`, connections: c.connections, bodyBytes: c.bodyBytes }];
  },
  async warmup(ctx: ScenarioContext, target: RunningTarget, variant: ClosedVariant): Promise<void> {
    if (ctx.settings.closedLoop.warmupS > 0) await load(target, variant, ctx.settings.closedLoop.warmupS);
  },
  run(ctx: ScenarioContext, target: RunningTarget, variant: ClosedVariant): Promise<LoadResult> {
    return load(target, variant, ctx.settings.closedLoop.durationS);
  },
};
