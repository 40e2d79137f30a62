// Large request bodies (200 KB, 1 MB) in a closed loop, with small 2 KB
// requests at a fixed rate measured alongside: does a big upload hold up the
// small requests sharing the proxy? `small alone` is the same small load
// without the large one, measured next to it for comparison.
import { chatBody } from '../harness/bodies.js';
import type { ModeSettings } from '../harness/modes.js';
import type { LoadResult, RunningTarget, ScenarioContext, ScenarioSpec, Variant } from '../harness/types.js';
import { closedLoop } from '../load/autocannon-load.js';
import { pacedLoad } from '../load/paced-load.js';

interface BodyVariant extends Variant {
  /** 0: the small requests alone. */
  readonly largeBytes: number;
}

function sizeLabel(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MB` : `${Math.round(bytes / 1024)} KB`;
}

function small(ctx: ScenarioContext, target: RunningTarget, durationS: number): Promise<LoadResult> {
  return pacedLoad({
    origin: target.origin,
    path: '/v1/chat/completions',
    headers: target.headers,
    body: chatBody(target.model, 2048),
    rate: ctx.settings.largeBody.smallRate,
    durationS,
  });
}

async function load(ctx: ScenarioContext, target: RunningTarget, variant: BodyVariant, durationS: number): Promise<LoadResult> {
  if (variant.largeBytes === 0) {
    const alone = await small(ctx, target, durationS);
    return { ...alone, metrics: { smallP50Ms: alone.latencyMs?.p50 ?? Number.NaN, smallP99Ms: alone.latencyMs?.p99 ?? Number.NaN, smallSamples: alone.requests } };
  }
  const [large, alongside] = await Promise.all([
    closedLoop({
      url: `${target.origin}/v1/chat/completions`,
      headers: target.headers,
      body: chatBody(target.model, variant.largeBytes),
      connections: ctx.settings.largeBody.largeConnections,
      durationS,
    }),
    small(ctx, target, durationS),
  ]);
  return {
    ...large,
    errors: large.errors + alongside.errors,
    non2xx: large.non2xx + alongside.non2xx,
    metrics: {
      uploadMBPerS: (large.requests * variant.largeBytes) / large.wallS / 1e6,
      smallP50Ms: alongside.latencyMs?.p50 ?? Number.NaN,
      smallP99Ms: alongside.latencyMs?.p99 ?? Number.NaN,
      smallSamples: alongside.requests,
    },
  };
}

export const largeBody: ScenarioSpec<BodyVariant> = {
  id: 'large-body',
  title: 'Large bodies, with small requests alongside',
  units: { rate: 'large req/s', latency: 'large' },
  latencyDigits: 0,
  description:
    'autocannon uploads 200 KB or 1 MB chat bodies in a closed loop while the paced client sends 2 KB requests at a fixed rate. ' +
    'large req/s and latency are the large requests\' (whole milliseconds; in the `small alone` rows, the small requests\'); ' +
    'small p50/p99 are the small requests\' latency, to compare with the `small alone` rows (the same small load on its own). ' +
    'CPU per 1k large requests is all the CPU of the run divided by the large requests: the small load\'s share is in it (the `small alone` rows show that share on its own).',
  columns: [
    { key: 'uploadMBPerS', label: 'upload', unit: 'MB/s', digits: 1 },
    { key: 'smallP50Ms', label: 'small p50', unit: 'ms', digits: 2 },
    { key: 'smallP99Ms', label: 'small p99', unit: 'ms', digits: 2 },
  ],
  charts: [
    { id: 'small-p99', title: 'Small-request p99 alongside large bodies', unit: 'ms', keys: [{ key: 'smallP99Ms', label: 'small p99' }], byVariant: true },
    { id: 'upload', title: 'Large-body throughput', unit: 'req/s', keys: [{ key: 'rps', label: 'req/s' }], requires: 'uploadMBPerS' },
  ],
  appliesTo: (target) => target.sweepOnly !== true,
  variants(settings: ModeSettings): BodyVariant[] {
    const rate = settings.largeBody.smallRate;
    return [
      { id: 'small-alone', label: `small alone (2 KB at ${rate} req/s)`, largeBytes: 0 },
      ...settings.largeBody.sizes.map((bytes) => ({
        id: sizeLabel(bytes).replace(' ', '').toLowerCase(),
        label: `${sizeLabel(bytes)} x ${settings.largeBody.largeConnections} connections + small at ${rate} req/s`,
        largeBytes: bytes,
      })),
    ];
  },
  async warmup(ctx: ScenarioContext, target: RunningTarget, variant: BodyVariant): Promise<void> {
    if (ctx.settings.largeBody.warmupS > 0) await load(ctx, target, variant, ctx.settings.largeBody.warmupS);
  },
  run(ctx: ScenarioContext, target: RunningTarget, variant: BodyVariant): Promise<LoadResult> {
    return load(ctx, target, variant, ctx.settings.largeBody.phaseS);
  },
};
