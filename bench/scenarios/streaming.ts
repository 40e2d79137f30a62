// Streaming (SSE): the mock emits K chunks per completion. `paced`: chunks
// 10 ms apart, the time to first byte and the whole-stream tail that a chat
// user feels; `burst`: chunks as fast as the sockets take them, the relay
// rate (SSE events per second) a target sustains.
import { chatBody } from '../harness/bodies.js';
import type { ModeSettings } from '../harness/modes.js';
import type { LoadResult, RunningTarget, ScenarioContext, ScenarioSpec, Variant } from '../harness/types.js';
import { streamLoad } from '../load/stream-load.js';

interface StreamVariant extends Variant {
  readonly concurrency: number;
  readonly tokens: number;
  readonly intervalMs: number;
}

function load(target: RunningTarget, variant: StreamVariant, durationS: number): Promise<LoadResult> {
  return streamLoad({
    origin: target.origin,
    path: '/v1/chat/completions',
    headers: {
      ...target.headers,
      'x-mock-tokens': String(variant.tokens),
      'x-mock-interval-ms': String(variant.intervalMs),
      'x-mock-ttft-ms': '0',
    },
    body: chatBody(target.model, 512, true),
    concurrency: variant.concurrency,
    durationS,
    minEvents: variant.tokens,
    stallMs: 1_000,
    deadlineS: durationS + 30,
  });
}

export const streaming: ScenarioSpec<StreamVariant> = {
  id: 'streaming',
  title: 'Streaming (SSE)',
  units: { rate: 'streams/s', latency: 'stream' },
  description:
    'Closed loop of streaming chat completions (raw-socket SSE client, bench/load/stream-load.ts). The mock sends its first token right after the headers, so time to first byte (TTFB) is the proxy\'s own delay. ' +
    'Latency columns are whole-stream durations; events/s is SSE events relayed per second; gap p99 is the 99th percentile of each stream\'s longest silence between chunks.',
  columns: [
    { key: 'ttfbP50Ms', label: 'TTFB p50', unit: 'ms', digits: 2 },
    { key: 'ttfbP99Ms', label: 'TTFB p99', unit: 'ms', digits: 2 },
    { key: 'eventsPerS', label: 'events/s', unit: '', digits: 0 },
    { key: 'gapP99Ms', label: 'gap p99', unit: 'ms', digits: 1 },
    { key: 'incomplete', label: 'incomplete', unit: '', digits: 0 },
  ],
  charts: [
    { id: 'ttfb', title: 'Time to first byte', unit: 'ms', keys: [{ key: 'ttfbP50Ms', label: 'p50' }, { key: 'ttfbP99Ms', label: 'p99' }] },
    { id: 'events', title: 'SSE events relayed', unit: 'events/s', keys: [{ key: 'eventsPerS', label: 'events/s' }] },
  ],
  appliesTo: (target) => target.sweepOnly !== true,
  variants(settings: ModeSettings): StreamVariant[] {
    const { paced, burst } = settings.streaming;
    return [
      { id: 'paced', label: `${paced.concurrency} streams x ${paced.tokens} chunks, ${paced.intervalMs} ms apart`, ...paced },
      { id: 'burst', label: `${burst.concurrency} streams x ${burst.tokens} chunks, back to back`, ...burst, intervalMs: 0 },
    ];
  },
  async warmup(ctx: ScenarioContext, target: RunningTarget, variant: StreamVariant): Promise<void> {
    if (ctx.settings.streaming.warmupS > 0) await load(target, variant, ctx.settings.streaming.warmupS);
  },
  run(ctx: ScenarioContext, target: RunningTarget, variant: StreamVariant): Promise<LoadResult> {
    return load(target, variant, ctx.settings.streaming.durationS);
  },
};
