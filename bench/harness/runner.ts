// One benchmark run: start the mock and every available target, run each
// scenario variant against each target (repetitions interleaved across
// targets, their order rotated, so drift on a shared machine spreads evenly),
// stop everything, and write the report. Every process started is stopped on
// success, failure and Ctrl-C alike.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { tokenGoalVariant } from '../report/goals.js';
import { headline, summarize } from '../report/summary.js';
import { writeReport, type WrittenFiles } from '../report/write.js';
import { SCENARIOS } from '../scenarios/index.js';
import { streamsVariantId } from '../scenarios/many-streams.js';
import { allTargets } from '../targets/index.js';
import { startMock } from '../targets/mock.js';
import { nginxVersion } from '../targets/nginx.js';
import { portkeyVersion } from '../targets/portkey.js';
import { machineInfo } from './machine.js';
import type { ModeSettings } from './modes.js';
import { REPO_ROOT } from './paths.js';
import { Supervisor } from './processes.js';
import { measureSchedulerRings, ringPlanOf, type RingCase } from './scheduler-capacity.js';
import { RESULT_SCHEMA, type BenchResult, type ScenarioRecord, type SkipRecord, type TargetRecord } from './result.js';
import type { Measurement, RunningTarget, ScenarioContext, SkippedTarget, TargetContext, TargetSpec } from './types.js';
import { UsageProbe } from './usage.js';
import { loopbackWriteFloorUs, pacedTokenFloor, type PacedFloor } from './write-floor.js';

export interface RunOptions {
  readonly settings: ModeSettings;
  readonly outDir: string;
  readonly log?: (line: string) => void;
}

export function stampOf(date: Date): string {
  return date.toISOString().replace(/\.\d+Z$/, 'Z').replace(/:/g, '-');
}

/** The paced floor at the pattern the per-token goals will read, when a many-streams scenario runs (smoke: one short pass). */
async function tokenFloorOf(settings: ModeSettings): Promise<PacedFloor | undefined> {
  if (settings.scenarios !== undefined && !settings.scenarios.includes('many-streams')) return undefined;
  const variants = settings.manyStreams.variants;
  const id = tokenGoalVariant(variants.map(streamsVariantId));
  const setting = variants.find((v) => streamsVariantId(v) === id);
  if (setting === undefined) return undefined;
  return settings.mode === 'smoke' ? pacedTokenFloor(setting, 1, 300) : pacedTokenFloor(setting);
}

function tokenFloorText(floor: PacedFloor | undefined): string {
  return floor === undefined ? '' : `; at ${floor.streams} streams x ${floor.tokensPerSecond}/s a paced write ${floor.writeUs.toFixed(1)}, its read ${floor.readUs.toFixed(1)} µs`;
}

function isSkipped(t: RunningTarget | SkippedTarget): t is SkippedTarget {
  return 'skipped' in t;
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n').slice(0, 3).join(' / ');
}

async function startTarget(spec: TargetSpec, ctx: TargetContext): Promise<RunningTarget | SkippedTarget> {
  try {
    return await spec.start(ctx);
  } catch (err) {
    return { id: spec.id, label: spec.label, kind: spec.kind, hops: spec.hops, workers: spec.workers, sweepOnly: spec.sweepOnly, skipped: `failed to start: ${firstLine(err)}` };
  }
}

export async function runBench(options: RunOptions): Promise<{ result: BenchResult; files: WrittenFiles }> {
  const { settings } = options;
  const log = options.log ?? ((line: string) => console.log(line));
  const started = new Date();
  const workDir = mkdtempSync(join(os.tmpdir(), 'edge-bench-'));
  const supervisor = new Supervisor(workDir);
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (interrupted) return;
    interrupted = true;
    log(`\n${signal}: stopping every process the bench started`);
    void supervisor.stopAll().finally(() => process.exit(130));
  };
  const onExit = (): void => supervisor.killAllNow();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('exit', onExit);

  let ok = false;
  try {
    // Before any target starts: the floor is the host's, measured quiet.
    const machine = { ...machineInfo(), loopbackWriteUs: await loopbackWriteFloorUs(), tokenFloor: await tokenFloorOf(settings) };
    const peers = { nginx: await nginxVersion(), portkey: portkeyVersion() };
    log(`bench ${settings.mode}: ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, loopback write ${machine.loopbackWriteUs?.toFixed(1) ?? '?'} µs CPU${tokenFloorText(machine.tokenFloor)}; logs in ${workDir}`);
    const mock = await startMock(supervisor);
    const ctx: TargetContext = { supervisor, mock, workDir, repoRoot: REPO_ROOT, settings };
    const specs = allTargets(settings).filter((t) => settings.targets === undefined || settings.targets.includes(t.id));
    const startedTargets = await Promise.all(specs.map((spec) => startTarget(spec, ctx)));
    const targets: RunningTarget[] = [];
    const records: TargetRecord[] = [];
    for (const t of startedTargets) {
      if (isSkipped(t)) {
        log(`  target ${t.id}: skipped (${t.skipped})`);
        records.push({ id: t.id, label: t.label, kind: t.kind, hops: t.hops, workers: t.workers, sweepOnly: t.sweepOnly, baseline: t.baseline, skipped: t.skipped, configs: {}, notes: [], roles: [] });
      } else {
        log(`  target ${t.id}: ${t.origin}${t.notes.length > 0 ? ` (${t.notes.join('; ')})` : ''}`);
        targets.push(t);
        records.push({
          id: t.id,
          label: t.label,
          kind: t.kind,
          hops: t.hops,
          workers: t.workers,
          sweepOnly: t.sweepOnly,
          baseline: t.baseline,
          version: t.version,
          configs: t.configs,
          notes: t.notes,
          roles: t.processes.map((p) => p.role),
        });
      }
    }

    const scenarioCtx: ScenarioContext = { settings, log };
    const measurements: Measurement[] = [];
    const failures: (SkipRecord & { rep: number })[] = [];
    const skips: SkipRecord[] = [];
    const scenarioRecords: ScenarioRecord[] = [];
    for (const scenario of SCENARIOS) {
      if (settings.scenarios !== undefined && !settings.scenarios.includes(scenario.id)) continue;
      const variants = scenario.variants(settings);
      scenarioRecords.push({
        id: scenario.id,
        title: scenario.title,
        description: scenario.description,
        units: scenario.units,
        latencyDigits: scenario.latencyDigits,
        columns: scenario.columns,
        charts: scenario.charts,
        variants: variants.map((v) => ({ id: v.id, label: v.label, reps: v.reps ?? settings.reps })),
      });
      for (const variant of variants) {
        const applicable: RunningTarget[] = [];
        for (const target of targets.filter((t) => scenario.appliesTo(t) && (t.onlyScenarios === undefined || t.onlyScenarios.includes(scenario.id)))) {
          const reason = variant.skip?.(target);
          if (reason === undefined) applicable.push(target);
          else skips.push({ scenario: scenario.id, variant: variant.id, target: target.id, reason });
        }
        log(`${scenario.id} / ${variant.label}`);
        const broken = new Set<string>();
        for (const target of applicable) {
          try {
            await scenario.warmup(scenarioCtx, target, variant);
          } catch (err) {
            log(`  ${target.id}: warmup failed: ${firstLine(err)}`);
          }
        }
        const reps = variant.reps ?? settings.reps;
        for (let rep = 0; rep < reps; rep++) {
          const order = applicable.map((_, i) => applicable[(i + rep) % applicable.length]);
          for (const target of order) {
            if (broken.has(target.id)) continue;
            await sleep(settings.settleMs);
            const probe = new UsageProbe(target);
            try {
              await probe.start();
              const load = await scenario.run(scenarioCtx, target, variant);
              const usage = await probe.finish(load.requests);
              const m: Measurement = { ...load, scenario: scenario.id, variant: variant.id, target: target.id, rep, rps: load.requests / load.wallS, ...usage };
              measurements.push(m);
              log(`  ${target.id.padEnd(10)} run ${rep + 1}/${reps}: ${describe(m)}`);
            } catch (err) {
              await probe.finish(0).catch(() => undefined);
              failures.push({ scenario: scenario.id, variant: variant.id, target: target.id, rep, reason: firstLine(err) });
              log(`  ${target.id.padEnd(10)} run ${rep + 1}/${reps}: FAILED ${firstLine(err)}`);
              // A target whose processes died cannot be measured again in this variant.
              if (target.processes.some((p) => !processAlive(p.pid))) broken.add(target.id);
            }
          }
        }
      }
    }

    await supervisor.stopAll();
    let schedulerRings: RingCase[] | undefined;
    if (scenarioRecords.some((s) => s.id === 'closed-loop')) {
      // With the targets gone, so the main thread's figures are the scheduler's alone.
      log('scheduler thread over the rings (npm run bench:rings)');
      try {
        schedulerRings = await measureSchedulerRings(ringPlanOf(settings.mode));
        for (const c of schedulerRings) log(`  ${c.workers} load worker(s) x ${c.inflightPerWorker} in flight: ${c.requestsPerSec.toLocaleString('en-US')} req/s, main thread ${c.mainUsPerRequest} µs/req`);
      } catch (err) {
        log(`  FAILED ${firstLine(err)}`);
      }
    }
    const finished = new Date();
    const summaries = summarize(measurements);
    const result: BenchResult = {
      schema: RESULT_SCHEMA,
      id: stampOf(started),
      startedAt: started.toISOString(),
      finishedAt: finished.toISOString(),
      durationS: (finished.getTime() - started.getTime()) / 1000,
      settings,
      machine,
      peers,
      targets: records,
      scenarios: scenarioRecords,
      measurements,
      failures,
      skips,
      summaries,
      headline: headline({ summaries, targets: records.filter((r) => r.skipped === undefined), variants: Object.fromEntries(scenarioRecords.map((s) => [s.id, s.variants.map((v) => v.id)])) }),
      charts: [],
      schedulerRings,
    };
    const files = writeReport(result, options.outDir);
    ok = true;
    return { result, files };
  } finally {
    await supervisor.stopAll();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('exit', onExit);
    // Keep the child logs when something went wrong; they are the evidence.
    if (ok) rmSync(workDir, { recursive: true, force: true });
    else log(`child process logs kept in ${workDir}`);
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function describe(m: Measurement): string {
  const parts = [`${Math.round(m.rps).toLocaleString('en-US')} req/s`];
  if (m.latencyMs !== null) parts.push(`p50 ${m.latencyMs.p50.toFixed(2)} p99 ${m.latencyMs.p99.toFixed(2)} ms`);
  if (m.errors > 0 || m.non2xx > 0) parts.push(`errors ${m.errors} non-2xx ${m.non2xx}`);
  for (const key of ['ttfbP50Ms', 'eventsPerS', 'smallP99Ms', 'stalls']) {
    const v = m.metrics[key];
    if (v !== undefined) parts.push(`${key} ${Number.isInteger(v) ? v : v.toFixed(2)}`);
  }
  const rss = m.processes.filter((p) => p.role !== 'mock').map((p) => `${p.role} ${Math.round(p.peakRssMB)} MB`);
  if (rss.length > 0) parts.push(rss.join(', '));
  return parts.join(', ');
}
