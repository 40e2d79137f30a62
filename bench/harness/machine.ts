// What every result records about where it was measured.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { CLK_TCK } from './proc-stats.js';
import { REPO_ROOT } from './paths.js';
import type { PacedFloor } from './write-floor.js';

export interface MachineInfo {
  readonly cpuModel: string;
  readonly cores: number;
  readonly memoryGB: number;
  readonly os: string;
  readonly node: string;
  readonly clockTicks: number;
  readonly commit: string | undefined;
  /** The working tree had uncommitted changes to tracked files (undefined: unknown). */
  readonly dirty?: boolean;
  readonly autocannon: string | undefined;
  readonly undici: string | undefined;
  /** CPU µs one small loopback TCP write costs its Node writer on this host (write-floor.ts); absent in older results and micro records. */
  readonly loopbackWriteUs?: number;
  /** The same at the per-token goal's pattern: paced writes to a reader in another process (write-floor.ts); absent when no many-streams scenario ran. */
  readonly tokenFloor?: PacedFloor;
}

function packageVersion(name: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(REPO_ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/** Read-only: GIT_OPTIONAL_LOCKS=0 keeps `git status` from refreshing the index. */
function gitDirty(): boolean | undefined {
  try {
    const out = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return out.trim() !== '';
  } catch {
    return undefined;
  }
}

function gitCommit(): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    clockTicks: CLK_TCK,
    commit: gitCommit(),
    dirty: gitDirty(),
    autocannon: packageVersion('autocannon'),
    undici: packageVersion('undici'),
  };
}
