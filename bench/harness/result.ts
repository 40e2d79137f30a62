// The JSON a run writes (bench/results/<stamp>.json): everything the markdown
// report and the charts are generated from, plus the raw measurements.
import type { HeadlineFigure, Summary } from '../report/summary.js';
import type { MachineInfo } from './machine.js';
import type { ModeSettings } from './modes.js';
import type { ChartSpec, Measurement, MetricColumn, ScenarioUnits, TargetKind } from './types.js';

import type { RingCase } from './scheduler-capacity.js';

export const RESULT_SCHEMA = 1;

export interface TargetRecord {
  readonly id: string;
  readonly label: string;
  readonly kind: TargetKind;
  readonly hops: number;
  readonly workers?: number;
  readonly sweepOnly?: boolean;
  /** Built from another checkout (--baseline): its commit. */
  readonly baseline?: string;
  /** undefined when measured. */
  readonly skipped?: string;
  readonly version?: string;
  readonly configs: Readonly<Record<string, string>>;
  readonly notes: readonly string[];
  readonly roles: readonly string[];
}

export interface ScenarioRecord {
  readonly id: string;
  readonly title: string;
  readonly description: string;
  readonly units: ScenarioUnits | undefined;
  readonly latencyDigits: number | undefined;
  readonly columns: readonly MetricColumn[];
  readonly charts: readonly ChartSpec[];
  readonly variants: readonly { readonly id: string; readonly label: string; readonly reps: number }[];
}

export interface SkipRecord {
  readonly scenario: string;
  readonly variant: string;
  readonly target: string;
  readonly reason: string;
}

export interface BenchResult {
  readonly schema: number;
  /** The timestamp the files are named after, e.g. 2026-11-30T12-00-00Z. */
  readonly id: string;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly durationS: number;
  readonly settings: ModeSettings;
  readonly machine: MachineInfo;
  readonly peers: { readonly nginx: string | undefined; readonly portkey: string | undefined };
  readonly targets: readonly TargetRecord[];
  readonly scenarios: readonly ScenarioRecord[];
  readonly measurements: readonly Measurement[];
  /** Measurements that threw (a target crashed mid-run): reported, never hidden. */
  readonly failures: readonly (SkipRecord & { readonly rep: number })[];
  readonly skips: readonly SkipRecord[];
  readonly summaries: readonly Summary[];
  readonly headline: readonly HeadlineFigure[];
  /** Chart file names, relative to the JSON. */
  readonly charts: readonly string[];
  /** The scheduler thread over the rings (npm run bench:rings), measured with the worker sweep; absent in older results. */
  readonly schedulerRings?: readonly RingCase[];
}
