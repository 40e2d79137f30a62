// The CPU probe the benchmark reports rest on (bench/harness/usage.ts, which
// reads utime + stime from /proc): measured against real child processes
// that burn a known amount of CPU, so a probe that reads the wrong fields,
// the wrong clock-tick rate, or wall time instead of CPU time fails here.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import type { RunningTarget } from '../../bench/harness/types.js';
import { UsageProbe } from '../../bench/harness/usage.js';

// Burns `ms` of its own CPU (user + system, by process.cpuUsage) after each "go" line, then prints "done".
const BURNER = `
const readline = require('node:readline');
process.stdout.write('ready\\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const ms = Number(line);
  const start = process.cpuUsage();
  let x = 0;
  for (;;) {
    for (let i = 0; i < 1e5; i++) x += i;
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1000 >= ms) break;
  }
  process.stdout.write('done ' + (x > 0 ? 'ok' : '') + '\\n');
});
`;

// Starts a burner as its child and relays stdin/stdout: its own CPU is ~0, the burn happens one level down.
const PARENT = `
const { spawn } = require('node:child_process');
const child = spawn(process.execPath, ['-e', ${JSON.stringify(BURNER)}], { stdio: ['pipe', 'inherit', 'inherit'] });
process.stdin.pipe(child.stdin);
`;

interface Burner {
  readonly child: ChildProcess;
  /** Resolves at the next line starting with prefix (lines already read count once). */
  line(prefix: string): Promise<void>;
}

function start(script: string): Burner {
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let partial = '';
  let waiter: (() => void) | undefined;
  child.stdout?.on('data', (chunk: Buffer) => {
    const parts = (partial + chunk.toString()).split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
    waiter?.();
  });
  const line = (prefix: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const at = lines.findIndex((l) => l.startsWith(prefix));
        if (at >= 0) {
          lines.splice(0, at + 1);
          waiter = undefined;
          resolve();
        }
      };
      waiter = check;
      child.once('exit', () => reject(new Error(`child exited before printing '${prefix}'`)));
      check();
    });
  return { child, line };
}

function targetOf(pid: number, tree: boolean): RunningTarget {
  return {
    id: 'burner',
    label: 'burner',
    kind: 'baseline',
    hops: 0,
    origin: 'http://127.0.0.1:0',
    model: 'm',
    headers: {},
    processes: [{ role: 'burner', pid, tree }],
    metricsUrl: undefined,
    version: undefined,
    configs: {},
    notes: [],
  };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

test('the usage probe measures a child that burns 300 ms of CPU as 0.2-0.6 s, and an idle one as under 0.1 s', { timeout: 30_000 }, async () => {
  const burner = start(BURNER);
  const { child } = burner;
  try {
    const pid = child.pid ?? assert.fail('no pid');
    await burner.line('ready');

    const idle = new UsageProbe(targetOf(pid, false));
    await idle.start();
    await new Promise((resolve) => setTimeout(resolve, 400));
    const [idleUsage] = (await idle.finish(100)).processes;
    assert.ok(idleUsage.cpuS < 0.1, `idle child: ${idleUsage.cpuS} s of CPU over 400 ms of wall time`);

    const busy = new UsageProbe(targetOf(pid, false));
    await busy.start();
    const done = burner.line('done');
    child.stdin?.write('300\n');
    await done;
    const [busyUsage] = (await busy.finish(1_000)).processes;
    assert.ok(busyUsage.cpuS >= 0.2 && busyUsage.cpuS <= 0.6, `busy child: ${busyUsage.cpuS} s of CPU for a 300 ms burn`);
    assert.ok(busyUsage.mainThreadCpuS >= 0.2 && busyUsage.mainThreadCpuS <= 0.6, `the burn runs on the main thread: ${busyUsage.mainThreadCpuS} s`);
    assert.ok(busyUsage.cpuSPer1k !== null && Math.abs(busyUsage.cpuSPer1k - busyUsage.cpuS) < 1e-9, 'per 1,000 requests over 1,000 requests is the total');
  } finally {
    await stop(child);
  }
});

test('a process tree (as nginx: master + worker) counts its children\'s CPU; the parent alone does not', { timeout: 30_000 }, async () => {
  const burner = start(PARENT);
  const parent = burner.child;
  try {
    const pid = parent.pid ?? assert.fail('no pid');
    await burner.line('ready');
    const tree = new UsageProbe(targetOf(pid, true));
    const alone = new UsageProbe(targetOf(pid, false));
    await tree.start();
    await alone.start();
    const done = burner.line('done');
    parent.stdin?.write('300\n');
    await done;
    const [treeUsage] = (await tree.finish(0)).processes;
    const [aloneUsage] = (await alone.finish(0)).processes;
    assert.ok(treeUsage.cpuS >= 0.2 && treeUsage.cpuS <= 0.6, `tree: ${treeUsage.cpuS} s of CPU for a 300 ms burn in the child`);
    assert.ok(aloneUsage.cpuS < 0.1, `parent alone: ${aloneUsage.cpuS} s`);
    assert.equal(treeUsage.cpuSPer1k, null, 'no requests, no per-request figure');
  } finally {
    // The burner is the parent's child: kill it too (it would otherwise wait on a closed stdin and exit by itself).
    parent.stdin?.end();
    await stop(parent);
  }
});
