// The vocabulary of the bench harness: targets (what is measured), scenarios
// (how it is loaded) and measurements (what one run of one scenario variant
// against one target produced). New targets and scenarios plug in by
// implementing TargetSpec / ScenarioSpec and joining the registries in
// bench/targets/index.ts and bench/scenarios/index.ts.
import type { ModeSettings } from './modes.js';
import type { Supervisor } from './processes.js';

/** baseline: the mock alone; peer: another proxy; ours: the edge. */
export type TargetKind = 'baseline' | 'peer' | 'ours';

/** A process whose CPU and memory a measurement reports. */
export interface WatchedProcess {
  /** 'mock', 'edge', 'agent', 'nginx', 'portkey'. */
  readonly role: string;
  readonly pid: number;
  /** Also count its child processes (nginx: master + worker). */
  readonly tree: boolean;
}

export interface MockUpstream {
  /** e.g. http://127.0.0.1:41234 */
  readonly origin: string;
  readonly port: number;
  readonly process: WatchedProcess;
}

export interface TargetContext {
  readonly supervisor: Supervisor;
  readonly mock: MockUpstream;
  /** A private temp folder for configs and logs. */
  readonly workDir: string;
  readonly repoRoot: string;
  readonly settings: ModeSettings;
}

export interface TargetInfo {
  readonly id: string;
  readonly label: string;
  readonly kind: TargetKind;
  /** Proxies between the client and the mock: 0 direct, 1 nginx/Portkey, 2 edge + agent. */
  readonly hops: number;
  /** workers.count of an edge target. */
  readonly workers?: number;
  /** Measured only by the throughput sweep, not by every scenario. */
  readonly sweepOnly?: boolean;
  /** Measured only by these scenarios (a variant compared on one axis, e.g. coalescing off). */
  readonly onlyScenarios?: readonly string[];
  /** An edge built from another checkout (--baseline): the commit it is, measured beside this one for before/after in one run. */
  readonly baseline?: string;
}

export interface RunningTarget extends TargetInfo {
  readonly origin: string;
  /** The `model` a request must name on this target. */
  readonly model: string;
  /** Headers every request carries (routing for Portkey). */
  readonly headers: Readonly<Record<string, string>>;
  readonly processes: readonly WatchedProcess[];
  /** Prometheus endpoint with nodejs_eventloop_lag_p99_seconds, when the target has one. */
  readonly metricsUrl: string | undefined;
  readonly version: string | undefined;
  /** Config files the target was started with: name -> text. */
  readonly configs: Readonly<Record<string, string>>;
  readonly notes: readonly string[];
}

export interface SkippedTarget extends TargetInfo {
  readonly skipped: string;
}

export interface TargetSpec extends TargetInfo {
  start(ctx: TargetContext): Promise<RunningTarget | SkippedTarget>;
}

export interface LatencySummary {
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

/** What a load generator reports for one measurement. */
export interface LoadResult {
  readonly wallS: number;
  /** Completed requests (streams, for streaming scenarios). */
  readonly requests: number;
  /** Transport errors, timeouts, streams that did not finish, requests the paced client shed. */
  readonly errors: number;
  readonly non2xx: number;
  readonly latencyMs: LatencySummary | null;
  /** Scenario-specific figures, keyed as the scenario's columns name them. */
  readonly metrics: Readonly<Record<string, number>>;
}

export interface ProcessUsage {
  readonly role: string;
  readonly pid: number;
  readonly cpuS: number;
  /** CPU seconds per 1,000 requests; null when nothing completed. */
  readonly cpuSPer1k: number | null;
  /** CPU of the process's main thread (the event loop), seconds. */
  readonly mainThreadCpuS: number;
  /** Peak resident memory during the measurement, MB. */
  readonly peakRssMB: number;
  /** CPU seconds by thread name. */
  readonly threads: Readonly<Record<string, number>>;
}

export interface Measurement extends LoadResult {
  readonly scenario: string;
  readonly variant: string;
  readonly target: string;
  readonly rep: number;
  readonly rps: number;
  readonly processes: readonly ProcessUsage[];
  /** Edge event-loop lag p99 over the measurement, ms; null when unavailable. */
  readonly edgeLagP99Ms: number | null;
  /** CPU the harness itself (the load generator) used, seconds: it shares the machine with the target. */
  readonly loadgenCpuS: number;
}

export interface MetricColumn {
  readonly key: string;
  readonly label: string;
  readonly unit: string;
  readonly digits?: number;
}

/**
 * One SVG per variant, a bar per target for each key; or, with byVariant,
 * one SVG for the scenario, a bar per target for each variant (first key).
 * Keys are measurement fields (rps, p50, p90, p99, max, errors, non2xx,
 * lagP99Ms), `cpu1k:<role>` / `rss:<role>` (role `proxy`: every process but
 * the mock), or a scenario's own metric keys.
 */
export interface ChartSpec {
  readonly id: string;
  readonly title: string;
  readonly unit: string;
  readonly keys: readonly { readonly key: string; readonly label: string }[];
  readonly byVariant?: boolean;
  /** Drawn only for variants where some target has this key (e.g. no upload chart without uploads). */
  readonly requires?: string;
}

export interface Variant {
  readonly id: string;
  readonly label: string;
  /** Overrides the mode's repetitions (long scenarios run once). */
  readonly reps?: number;
  /** Narrows the scenario's targets for this variant; returns a reason to skip, or undefined. */
  skip?(target: RunningTarget): string | undefined;
}

export interface ScenarioContext {
  readonly settings: ModeSettings;
  readonly log: (line: string) => void;
}

/** How the report names the standard columns of a scenario (streams instead of requests). */
export interface ScenarioUnits {
  /** e.g. 'streams/s'. */
  readonly rate: string;
  /** Prefix of the latency columns, e.g. 'stream' for whole-stream durations. */
  readonly latency: string;
}

export interface ScenarioSpec<V extends Variant = Variant> {
  readonly id: string;
  readonly title: string;
  readonly units?: ScenarioUnits;
  /** Decimals of the latency columns: 0 where the load generator counts whole milliseconds (autocannon). */
  readonly latencyDigits?: number;
  /** One paragraph for the report: what is measured and why. */
  readonly description: string;
  readonly columns: readonly MetricColumn[];
  readonly charts: readonly ChartSpec[];
  appliesTo(target: RunningTarget): boolean;
  variants(settings: ModeSettings): readonly V[];
  /** Unrecorded load before the first repetition (JIT, connection pools). */
  warmup(ctx: ScenarioContext, target: RunningTarget, variant: V): Promise<void>;
  run(ctx: ScenarioContext, target: RunningTarget, variant: V): Promise<LoadResult>;
}
