// Open loop, non-streaming: requests at a fixed rate, below every target's
// ceiling, so the latency difference to `direct` is the latency the proxy
// adds (the headline "added p50/p99").
import { chatBody } from '../harness/bodies.js';
import type { ModeSettings } from '../harness/modes.js';
import type { LoadResult, RunningTarget, ScenarioContext, ScenarioSpec, Variant } from '../harness/types.js';
import { pacedLoad } from '../load/paced-load.js';

interface RateVariant extends Variant {
  readonly rate: number;
}

function load(ctx: ScenarioContext, target: RunningTarget, rate: number, durationS: number): Promise<LoadResult> {
  return pacedLoad({
    origin: target.origin,
    path: '/v1/chat/completions',
    headers: target.headers,
    body: chatBody(target.model, ctx.settings.openLoop.bodyBytes),
    rate,
    durationS,
  });
}

export const openLoop: ScenarioSpec<RateVariant> = {
  id: 'open-loop',
  title: 'Non-streaming, open loop (latency at a fixed rate)',
  description:
    'Requests leave on a fixed schedule (paced at ~1 ms granularity, undici client, every latency sample kept, timed to the last body byte), whether or not earlier ones were answered. ' +
    'Below a target\'s ceiling this shows the latency it adds over `direct`; above it, requests pile up and latency grows without bound (more than 512 unanswered: the request is shed and counted as an error). ' +
    'Full mode runs each rate long enough for 10,000 samples; the headline quotes no p99 from fewer. ' +
    'For the edge, its timing headers split each answer\'s wait for the head (docs/operations.md, "Timings, precisely"): edge own = `x-edge-overhead-ms`, the edge\'s work before the head; node hop = `x-edge-hop-ms`, gRPC both ways and the agent; provider = `x-edge-upstream-ms`, the mock\'s own time as the agent measured it.',
  columns: [
    { key: 'shed', label: 'shed', unit: '', digits: 0 },
    { key: 'ownP99Ms', label: 'edge own p99', unit: 'ms', digits: 2 },
    { key: 'hopP50Ms', label: 'node hop p50', unit: 'ms', digits: 2 },
    { key: 'hopP99Ms', label: 'node hop p99', unit: 'ms', digits: 2 },
    { key: 'upstreamP99Ms', label: 'provider p99', unit: 'ms', digits: 2 },
  ],
  charts: [{ id: 'latency', title: 'Latency at a fixed rate', unit: 'ms', keys: [{ key: 'p50', label: 'p50' }, { key: 'p99', label: 'p99' }] }],
  appliesTo: (target) => target.sweepOnly !== true,
  variants(settings: ModeSettings): RateVariant[] {
    return settings.openLoop.rates.map((rate) => ({ id: `rate-${rate}`, label: `${rate} req/s, 2 KB body`, rate }));
  },
  async warmup(ctx: ScenarioContext, target: RunningTarget, variant: RateVariant): Promise<void> {
    if (ctx.settings.openLoop.warmupS > 0) await load(ctx, target, variant.rate, ctx.settings.openLoop.warmupS);
  },
  run(ctx: ScenarioContext, target: RunningTarget, variant: RateVariant): Promise<LoadResult> {
    const { durationS, minSamples } = ctx.settings.openLoop;
    // 5 % over: a request shed or answered non-2xx is no sample.
    return load(ctx, target, variant.rate, Math.max(durationS, (minSamples * 1.05) / variant.rate));
  },
};
