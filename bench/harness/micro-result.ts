// The record a microbenchmark leaves behind when run with `--save`
// (npm run bench:micro): its results, the lines it printed, and where it was
// measured (CPU, cores, Node, commit, whether the tree was dirty, load average), written to
// bench/results/<stamp>-<bench>.json. README and docs/benchmarks.md cite
// these files by name, so every published microbenchmark figure can be
// traced to the run that produced it.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { machineInfo, type MachineInfo } from './machine.js';
import { RESULTS_DIR } from './paths.js';

export interface MicroResult<R> {
  readonly bench: string;
  /** The timestamp the file is named after. */
  readonly id: string;
  readonly startedAt: string;
  readonly command: string;
  readonly machine: MachineInfo;
  /** os.loadavg() when the bench finished (1, 5, 15 minutes): on a shared machine, how busy the cores were. */
  readonly loadAverage: readonly number[];
  readonly results: R;
  /** What the bench printed for humans, line by line. */
  readonly text: readonly string[];
}

/** `--save` writes into bench/results/, `--save=DIR` into DIR; absent: nothing is written. */
export function saveDirOf(argv: readonly string[]): string | undefined {
  const arg = argv.find((a) => a === '--save' || a.startsWith('--save='));
  if (arg === undefined) return undefined;
  return arg === '--save' ? RESULTS_DIR : arg.slice('--save='.length);
}

export function stampOf(date: Date): string {
  return date.toISOString().replace(/\.\d+Z$/, 'Z').replace(/:/g, '-');
}

/** Writes the record when `--save` was given; returns the file written, if any. */
export function saveMicroResult<R>(bench: string, started: Date, results: R, text: readonly string[], argv: readonly string[] = process.argv): string | undefined {
  const dir = saveDirOf(argv);
  if (dir === undefined) return undefined;
  const id = stampOf(started);
  const record: MicroResult<R> = {
    bench,
    id,
    startedAt: started.toISOString(),
    command: argv.slice(1).map((a) => a.replace(/^.*\/dist\//, 'dist/')).join(' '),
    machine: machineInfo(),
    loadAverage: os.loadavg().map((n) => Math.round(n * 100) / 100),
    results,
    text,
  };
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${id}-${bench}.json`);
  writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
  return file;
}
