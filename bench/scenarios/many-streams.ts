// Many concurrent slow streams: S streams open at once (ramped), each at a
// few tokens per second for a while, as a fleet of chat users would hold
// them. Pass: every stream completes and chunks keep arriving (no silence
// longer than the stall threshold); measured: the edge's and agent's peak
// RSS, CPU and event-loop lag, and the time to first byte under that load.
import { chatBody } from '../harness/bodies.js';
import type { ModeSettings, StreamsSetting } from '../harness/modes.js';
import type { LoadResult, RunningTarget, ScenarioContext, ScenarioSpec, Variant } from '../harness/types.js';
import { waitForEphemeralPorts } from '../harness/ports.js';
import { streamLoad } from '../load/stream-load.js';

interface StreamsVariant extends Variant {
  readonly streams: number;
  readonly tokensPerSecond: number;
}

/** A variant's id, `<streams>-streams-<tps>tps` (what the report's goals parse back). */
export function streamsVariantId(setting: StreamsSetting): string {
  return `${setting.streams}-streams-${setting.tokensPerSecond}tps`;
}

/** Above this many streams only the baseline, nginx and our edge run (see skip()). */
const PEER_STREAM_LIMIT = 2_000;

function tokensOf(settings: ModeSettings, tokensPerSecond: number): number {
  return Math.max(1, Math.round(settings.manyStreams.streamS * tokensPerSecond));
}

export const manyStreams: ScenarioSpec<StreamsVariant> = {
  id: 'many-streams',
  title: 'Many concurrent slow streams',
  units: { rate: 'streams/s', latency: 'stream' },
  description:
    'A fixed set of SSE streams opened together (ramped at a fixed opening rate), each receiving a few tokens per second until it ends. ' +
    'streams/s counts the streams that completed whole; stalls = streams with a silence longer than max(2 s, 5 token intervals); peak RSS is per process over the whole run. ' +
    'One run per variant (the figures of interest are memory and completeness, not a rate).',
  columns: [
    { key: 'streams', label: 'streams', unit: '', digits: 0 },
    { key: 'incomplete', label: 'incomplete', unit: '', digits: 0 },
    { key: 'stalls', label: 'stalls', unit: '', digits: 0 },
    { key: 'ttfbP50Ms', label: 'TTFB p50', unit: 'ms', digits: 1 },
    { key: 'ttfbP99Ms', label: 'TTFB p99', unit: 'ms', digits: 1 },
    { key: 'gapP99Ms', label: 'gap p99', unit: 'ms', digits: 0 },
    { key: 'maxGapMs', label: 'gap max', unit: 'ms', digits: 0 },
    { key: 'eventsPerS', label: 'events/s', unit: '', digits: 0 },
  ],
  charts: [{ id: 'rss', title: 'Peak RSS of the proxy processes', unit: 'MB', keys: [{ key: 'rss:proxy', label: 'proxy RSS' }] }],
  appliesTo: (target) => target.sweepOnly !== true,
  variants(settings: ModeSettings): StreamsVariant[] {
    const m = settings.manyStreams;
    return m.variants.map(({ streams, tokensPerSecond }) => ({
      id: streamsVariantId({ streams, tokensPerSecond }),
      label: `${streams.toLocaleString('en-US')} streams x ${tokensOf(settings, tokensPerSecond)} tokens at ${tokensPerSecond}/s`,
      streams,
      tokensPerSecond,
      reps: m.reps,
      skip(target: RunningTarget): string | undefined {
        if (streams > PEER_STREAM_LIMIT && target.id === 'portkey') return `not run above ${PEER_STREAM_LIMIT.toLocaleString('en-US')} streams (see its smaller variant)`;
        return undefined;
      },
    }));
  },
  async warmup(): Promise<void> {},
  async run(ctx: ScenarioContext, target: RunningTarget, variant: StreamsVariant): Promise<LoadResult> {
    // Client -> target and (two-hop) agent -> mock: two connections per stream, plus room.
    const waitedMs = await waitForEphemeralPorts(2 * variant.streams + 2_000);
    if (waitedMs > 0) ctx.log(`  waited ${Math.round(waitedMs / 1000)} s for loopback ports in TIME_WAIT from the previous run`);
    const m = ctx.settings.manyStreams;
    const tokens = tokensOf(ctx.settings, variant.tokensPerSecond);
    const intervalMs = Math.round(1000 / variant.tokensPerSecond);
    const rampS = variant.streams / m.openPerSecond;
    return streamLoad({
      origin: target.origin,
      path: '/v1/chat/completions',
      headers: { ...target.headers, 'x-mock-tokens': String(tokens), 'x-mock-interval-ms': String(intervalMs), 'x-mock-ttft-ms': '0' },
      body: chatBody(target.model, 512, true),
      concurrency: variant.streams,
      openPerSecond: m.openPerSecond,
      minEvents: tokens,
      stallMs: Math.max(2_000, 5 * intervalMs),
      deadlineS: rampS + m.streamS * 3 + 30,
    });
  },
};
