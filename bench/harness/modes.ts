// Durations and sizes of each mode. quick: under 2 minutes with the build;
// full: the committed report (about 21 minutes on a 2-core machine);
// smoke: the few seconds `npm test` spends keeping the harness honest.
import os from 'node:os';

export type ModeName = 'quick' | 'full' | 'smoke';

export interface StreamsSetting {
  readonly streams: number;
  readonly tokensPerSecond: number;
}

export interface ModeSettings {
  readonly mode: ModeName;
  /** Repetitions of each measurement; the report shows the median and the spread. */
  readonly reps: number;
  /** Pause before each measurement: lets sockets close and timers settle. */
  readonly settleMs: number;
  /** Highest workers.count of the edge targets (the sweep runs 0..maxWorkers). */
  readonly maxWorkers: number;
  /** Target ids this mode runs by default (undefined: all). */
  readonly targets: readonly string[] | undefined;
  /** --baseline: another checkout's build, measured as target base-w0 (absent: no baseline). */
  readonly baseline?: { readonly dist: string; readonly label: string };
  /** Scenario ids this mode runs by default (undefined: all). */
  readonly scenarios: readonly string[] | undefined;
  readonly closedLoop: { readonly durationS: number; readonly warmupS: number; readonly connections: number; readonly bodyBytes: number };
  readonly openLoop: {
    readonly durationS: number;
    readonly warmupS: number;
    readonly rates: readonly number[];
    readonly bodyBytes: number;
    /** Each rate runs at least minSamples / rate seconds, so its p99 rests on this many samples (the report quotes no p99 from fewer than 10,000). */
    readonly minSamples: number;
  };
  readonly streaming: {
    readonly durationS: number;
    readonly warmupS: number;
    /** Paced: TTFB and tail at a realistic token interval. */
    readonly paced: { readonly concurrency: number; readonly tokens: number; readonly intervalMs: number };
    /** Burst: tokens as fast as the socket takes them, to find the relay rate. */
    readonly burst: { readonly concurrency: number; readonly tokens: number };
  };
  readonly largeBody: {
    readonly phaseS: number;
    readonly warmupS: number;
    readonly sizes: readonly number[];
    readonly largeConnections: number;
    /** Rate of the small requests measured alongside, per second. */
    readonly smallRate: number;
  };
  readonly manyStreams: {
    /** Concurrent streams and tokens per second of each variant. */
    readonly variants: readonly StreamsSetting[];
    /** How long each stream lasts (tokens = streamS x tokensPerSecond). */
    readonly streamS: number;
    /** Streams opened per second while ramping up. */
    readonly openPerSecond: number;
    readonly reps: number;
  };
}

const cores = os.availableParallelism();

const QUICK: ModeSettings = {
  mode: 'quick',
  reps: 1,
  settleMs: 200,
  maxWorkers: cores,
  targets: undefined,
  scenarios: undefined,
  closedLoop: { durationS: 1.5, warmupS: 0.5, connections: 10, bodyBytes: 2048 },
  openLoop: { durationS: 1.5, warmupS: 0.3, rates: [500], bodyBytes: 2048, minSamples: 0 },
  streaming: {
    durationS: 1,
    warmupS: 0.2,
    paced: { concurrency: 20, tokens: 20, intervalMs: 10 },
    burst: { concurrency: 10, tokens: 200 },
  },
  largeBody: { phaseS: 1, warmupS: 0.3, sizes: [1024 * 1024], largeConnections: 2, smallRate: 200 },
  manyStreams: { variants: [{ streams: 200, tokensPerSecond: 5 }], streamS: 2, openPerSecond: 1000, reps: 1 },
};

const FULL: ModeSettings = {
  mode: 'full',
  reps: 3,
  settleMs: 500,
  maxWorkers: cores,
  targets: undefined,
  scenarios: undefined,
  // 12 s of warm-up: V8 was still optimizing the edge's functions 8-16 s into load (--trace-opt: 535 in the
  // first 4 s, 67 in seconds 8-12, 25 in 12-16): a shorter one charges that one-time cost to the measured
  // requests of every Node target (ours and Portkey alike). Later scenarios run on the warmed processes.
  closedLoop: { durationS: 5, warmupS: 12, connections: 10, bodyBytes: 2048 },
  // 10,000 samples (+5 %): 21 s at 500 req/s, 5.25 s at 2,000 req/s.
  openLoop: { durationS: 3, warmupS: 1, rates: [500, 2000], bodyBytes: 2048, minSamples: 10_000 },
  streaming: {
    durationS: 4,
    warmupS: 1,
    paced: { concurrency: 20, tokens: 20, intervalMs: 10 },
    burst: { concurrency: 10, tokens: 200 },
  },
  largeBody: { phaseS: 2.5, warmupS: 1, sizes: [200 * 1024, 1024 * 1024], largeConnections: 2, smallRate: 200 },
  // 10,000 streams at 1 token/s: the same 10k SSE events/s as 2,000 at 5/s. At 5 tokens/s (50k events/s) the
  // mock and the client alone, with no proxy between them, already fall behind on 2 cores (see docs/benchmarks.md);
  // on a larger host: --streams 10000@5.
  manyStreams: {
    variants: [
      { streams: 2_000, tokensPerSecond: 5 },
      { streams: 10_000, tokensPerSecond: 1 },
    ],
    streamS: 15,
    openPerSecond: 1_000,
    reps: 1,
  },
};

const SMOKE: ModeSettings = {
  mode: 'smoke',
  reps: 1,
  settleMs: 100,
  maxWorkers: 0,
  targets: ['direct', 'edge-w0'],
  scenarios: ['closed-loop', 'open-loop', 'streaming'],
  closedLoop: { durationS: 1, warmupS: 0.2, connections: 4, bodyBytes: 2048 },
  openLoop: { durationS: 1, warmupS: 0, rates: [100], bodyBytes: 2048, minSamples: 0 },
  streaming: {
    durationS: 0.5,
    warmupS: 0,
    paced: { concurrency: 4, tokens: 5, intervalMs: 5 },
    burst: { concurrency: 2, tokens: 50 },
  },
  largeBody: { phaseS: 0.5, warmupS: 0, sizes: [200 * 1024], largeConnections: 1, smallRate: 50 },
  manyStreams: { variants: [{ streams: 20, tokensPerSecond: 10 }], streamS: 1, openPerSecond: 1000, reps: 1 },
};

export const MODES: Readonly<Record<ModeName, ModeSettings>> = { quick: QUICK, full: FULL, smoke: SMOKE };

export function isModeName(value: string): value is ModeName {
  return value === 'quick' || value === 'full' || value === 'smoke';
}
