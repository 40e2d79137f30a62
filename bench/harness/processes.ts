// Every process the harness starts goes through one Supervisor, which stops
// them all at the end, on failure and on Ctrl-C. Each child gets its own
// process group (so nginx's worker dies with its master) and writes its
// output to a log file, never to a pipe the harness must drain mid-benchmark.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface SpawnOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
}

export class ChildHandle {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  /** undefined while running; the exit code (or the signal's name) once it exited. */
  exit: number | string | undefined;
  readonly exited: Promise<void>;
  readonly #child: ChildProcess;

  constructor(name: string, child: ChildProcess, logFile: string) {
    if (child.pid === undefined) throw new Error(`${name}: spawn failed`);
    this.name = name;
    this.pid = child.pid;
    this.logFile = logFile;
    this.#child = child;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exit = code ?? signal ?? 'unknown';
        resolve();
      });
    });
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** The last `bytes` of the child's output. */
  tail(bytes = 2_000): string {
    try {
      const size = statSync(this.logFile).size;
      const text = readFileSync(this.logFile, 'utf8');
      return (size > bytes ? text.slice(-bytes) : text).trim();
    } catch {
      return '';
    }
  }

  /** Signals the child's whole process group (it leads one: spawned detached). */
  signal(signal: NodeJS.Signals): void {
    if (!this.running) return;
    try {
      process.kill(-this.pid, signal);
    } catch {
      this.#child.kill(signal);
    }
  }

  /** SIGTERM, then SIGKILL if it has not exited within graceMs. */
  async stop(graceMs = 3_000): Promise<void> {
    if (!this.running) return;
    this.signal('SIGTERM');
    const timedOut = await Promise.race([this.exited.then(() => false), sleep(graceMs).then(() => true)]);
    if (timedOut) {
      this.signal('SIGKILL');
      await this.exited;
    }
  }
}

export class Supervisor {
  readonly #children: ChildHandle[] = [];
  readonly #logDir: string;

  constructor(logDir: string) {
    this.#logDir = logDir;
  }

  spawn(name: string, command: string, args: readonly string[], options: SpawnOptions = {}): ChildHandle {
    const logFile = join(this.#logDir, `${name}.log`);
    const fd = openSync(logFile, 'a');
    try {
      // BENCH_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") goes to every Node child: profiling a target under load.
      const nodeArgs = command === process.execPath ? (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((a) => a !== '') : [];
      const child = spawn(command, [...nodeArgs, ...args], { cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', fd, fd], detached: true });
      // 'error' (e.g. ENOENT) arrives asynchronously; the handle reports it as an exit.
      child.once('error', () => child.emit('exit', null, 'spawn-error'));
      const handle = new ChildHandle(name, child, logFile);
      this.#children.push(handle);
      return handle;
    } finally {
      closeSync(fd);
    }
  }

  /** Polls `ready` until it resolves true; throws with the child's output if the child exits first or time runs out. */
  async waitReady(child: ChildHandle, ready: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!child.running) throw new Error(`${child.name} exited (${String(child.exit)}) before it was ready:\n${child.tail()}`);
      if (await ready().catch(() => false)) return;
      if (Date.now() > deadline) throw new Error(`${child.name} not ready within ${timeoutMs} ms:\n${child.tail()}`);
      await sleep(50);
    }
  }

  /** Stops every child still running, newest first (agents before the edge, proxies before the mock). */
  async stopAll(): Promise<void> {
    const running = this.#children.filter((c) => c.running).reverse();
    for (const child of running) await child.stop();
  }

  /** Last resort from a synchronous 'exit' handler. */
  killAllNow(): void {
    for (const child of this.#children) child.signal('SIGKILL');
  }

  /**
   * For a script that owns this supervisor for its whole life: SIGINT or
   * SIGTERM stops every child, then exits 130; any other exit kills what is
   * left. Node's default on those signals exits without an 'exit' event, which
   * left the children running.
   */
  stopWithProcess(): void {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) return;
      stopping = true;
      console.error(`\n${signal}: stopping every process this script started`);
      void this.stopAll().finally(() => process.exit(130));
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    process.once('exit', () => this.killAllNow());
  }
}
