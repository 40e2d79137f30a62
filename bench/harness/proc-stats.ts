// Linux /proc readers: CPU ticks (utime + stime) per process and per thread,
// children, resident memory and its peak. Everything returns undefined or
// zero for a process that is gone instead of throwing: a measurement of a
// crashed target still gets written, with the crash visible in its errors.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

/** Clock ticks per second of utime/stime (getconf CLK_TCK; 100 on every common Linux). */
export const CLK_TCK = detectClockTicks();

function detectClockTicks(): number {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** utime + stime of a /proc stat line; the command name may hold spaces and parentheses, so fields count from the last ')'. */
function ticksOfStat(stat: string | undefined): number {
  if (stat === undefined) return 0;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime is field 14, stime field 15.
  return Number(fields[11]) + Number(fields[12]);
}

/** CPU ticks of the whole process (all its threads, live ones). */
export function processTicks(pid: number): number {
  return ticksOfStat(readText(`/proc/${pid}/stat`));
}

export interface ThreadTicks {
  readonly main: number;
  /** Ticks by thread name (comm), the main thread included under its own name. */
  readonly byName: ReadonlyMap<string, number>;
}

export function threadTicks(pid: number): ThreadTicks {
  const byName = new Map<string, number>();
  let main = 0;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return { main, byName };
  }
  for (const tid of tids) {
    const ticks = ticksOfStat(readText(`/proc/${pid}/task/${tid}/stat`));
    if (tid === String(pid)) main = ticks;
    const name = (readText(`/proc/${pid}/task/${tid}/comm`) ?? '?').trim();
    byName.set(name, (byName.get(name) ?? 0) + ticks);
  }
  return { main, byName };
}

/** Direct and indirect children (needs /proc/<pid>/task/<tid>/children, present on every mainstream kernel). */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const current = queue.shift() as number;
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${current}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      const text = readText(`/proc/${current}/task/${tid}/children`) ?? '';
      for (const part of text.split(' ')) {
        const child = Number(part);
        if (part !== '' && Number.isInteger(child)) {
          out.push(child);
          queue.push(child);
        }
      }
    }
  }
  return out;
}

/** A VmXXX field of /proc/<pid>/status in kB. */
export function statusKb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const text = readText(`/proc/${pid}/status`);
  if (text === undefined) return 0;
  const at = text.indexOf(`${field}:`);
  if (at < 0) return 0;
  return Number.parseInt(text.slice(at + field.length + 1).trim(), 10) || 0;
}

/** Resets VmHWM to the current RSS (echo 5 > clear_refs); false where the kernel or permissions refuse. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}
