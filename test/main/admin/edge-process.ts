// Runs the edge CLI as a child process (the way an operator does) with a
// config file in a temp folder, and reads its JSON log lines.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';

const CLI = fileURLToPath(new URL('../../../src/edge/cli.js', import.meta.url));

export interface LogLine {
  readonly msg: string;
  readonly level: number;
  readonly [key: string]: unknown;
}

export class EdgeProcess {
  readonly logs: LogLine[] = [];
  readonly exited: Promise<number | null>;
  httpPort = 0;
  grpcPort = 0;
  adminPort = 0;
  #partial = '';

  private constructor(
    readonly child: ChildProcess,
    readonly dir: string,
    readonly configFile: string,
  ) {
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => this.#onData(chunk));
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => process.stderr.write(`[edge stderr] ${chunk}`));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  /** Writes `raw` (YAML-shaped) to a temp file and starts `edge --config FILE`; resolves once it listens. */
  static async start(raw: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<EdgeProcess> {
    const dir = await mkdtemp(join(tmpdir(), 'edge-ops-'));
    const configFile = join(dir, 'edge.yaml');
    await writeFile(configFile, toYaml(raw));
    const child = spawn(process.execPath, [CLI, '--config', configFile], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'info', NODE_ENV: 'production', ...env },
    });
    const edge = new EdgeProcess(child, dir, configFile);
    const listening = await edge.waitForLog((l) => l.msg === 'edge listening', 15_000);
    edge.httpPort = listening.httpPort as number;
    edge.grpcPort = listening.grpcPort as number;
    edge.adminPort = listening.adminPort as number;
    return edge;
  }

  get url(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  get adminUrl(): string {
    return `http://127.0.0.1:${this.adminPort}`;
  }

  async rewriteConfig(raw: Record<string, unknown>): Promise<void> {
    await writeFile(this.configFile, toYaml(raw));
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Resolves with the first log line (past or future) that matches. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs = 5_000): Promise<LogLine> {
    const seen = this.logs.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.child.stdout?.off('data', check);
        reject(new Error(`no matching edge log line within ${timeoutMs} ms; last lines:\n${this.logs.slice(-5).map((l) => JSON.stringify(l)).join('\n')}`));
      }, timeoutMs);
      const check = (): void => {
        const found = this.logs.find(match);
        if (!found) return;
        clearTimeout(timer);
        this.child.stdout?.off('data', check);
        resolve(found);
      };
      this.child.stdout?.on('data', check);
      this.child.once('exit', () => {
        clearTimeout(timer);
        reject(new Error(`the edge exited before the expected log line; last lines:\n${this.logs.slice(-5).map((l) => JSON.stringify(l)).join('\n')}`));
      });
    });
  }

  async adminJson(path: string): Promise<any> {
    const res = await fetch(`${this.adminUrl}${path}`);
    return res.json();
  }

  /** Kills the child if it still runs and removes the temp folder. */
  async dispose(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
    await rm(this.dir, { recursive: true, force: true });
  }

  #onData(chunk: string): void {
    const text = this.#partial + chunk;
    const lines = text.split('\n');
    this.#partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      try {
        this.logs.push(JSON.parse(line) as LogLine);
      } catch {
        this.logs.push({ msg: line, level: 0 });
      }
    }
  }
}
