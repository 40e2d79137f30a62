// SIGTERM ends the edge and the agent when the reader of their stdout has
// gone (a parent that died or closed its end of the pipe): pino's exit
// flush of the log lines still buffered must give up on EPIPE, not retry
// them for ever (sonic-boom 4 does, and then no later signal helps). With
// the pipe open the same flush still delivers the last lines. The real
// CLIs as child processes.
import assert from 'node:assert/strict';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Readable } from 'node:stream';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';
import { waitUntil } from '../helpers/stack.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** A CLI to run: its bin, its config, and the messages of its start and last log lines. */
interface Program {
  readonly bin: string;
  readonly config: Record<string, unknown>;
  readonly started: string;
  readonly stopped: string;
}

const EDGE: Program = {
  bin: 'dist/src/edge/bin.js',
  started: 'edge started',
  stopped: 'edge stopped',
  config: {
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    admin: { host: '127.0.0.1', port: 0 },
    runtime: { node_flags: [] },
    drain: { grace_ms: 100 },
    nodes: [{ id: 'gpu-1', token: 'token-gpu-1-0123456789', providers: [{ id: 'p1', type: 'openai_compat', capacity: 1 }] }],
    models: [{ alias: 'm', providers: { p1: 'served' } }],
  },
};

const AGENT: Program = {
  bin: 'dist/src/agent/bin.js',
  started: 'node agent starting',
  stopped: 'stopped',
  config: {
    // Nothing listens there: the agent keeps dialling, which is fine for a stop.
    edge: { address: '127.0.0.1:9' },
    node: { id: 'gpu-1', token: 'token-gpu-1-0123456789' },
    runtime: { node_flags: [] },
    providers: [{ id: 'p1', type: 'openai_compat', base_url: 'http://127.0.0.1:9' }],
  },
};

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'edge-stdout-gone-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Child = ChildProcessByStdio<null, Readable, Readable>;

interface Started {
  readonly child: Child;
  readonly messages: string[];
}

/** Starts `program` with stdout and stderr on pipes; resolves once its start line has come. */
async function start(program: Program): Promise<Started> {
  const file = join(dir, `${program.bin.replace(/\W/g, '-')}.yaml`);
  await writeFile(file, toYaml(program.config));
  const child = spawn(process.execPath, [join(ROOT, program.bin), '--config', file], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'info', NODE_ENV: 'production' },
  });
  const messages: string[] = [];
  let partial = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.startsWith('{')) messages.push(String((JSON.parse(line) as { msg: unknown }).msg));
  });
  child.stderr.resume();
  await waitUntil(() => messages.includes(program.started) || child.exitCode !== null, `${program.bin} to start`, 30_000);
  assert.equal(child.exitCode, null, `${program.bin} exited while starting: ${JSON.stringify(messages)}`);
  return { child, messages };
}

const exited = (child: Child): boolean => child.exitCode !== null || child.signalCode !== null;

async function stopsWithStdoutGone(program: Program): Promise<void> {
  const { child } = await start(program);
  try {
    // The parent's ends of the pipes close: every later write of the child's fails with EPIPE.
    child.stdout.destroy();
    child.stderr.destroy();
    child.kill('SIGTERM');
    await waitUntil(() => exited(child), `${program.bin} to exit on SIGTERM with its stdout gone`, 10_000);
    assert.equal(child.exitCode, 0);
  } finally {
    if (!exited(child)) child.kill('SIGKILL');
  }
}

async function stopsWithLastLines(program: Program): Promise<void> {
  const { child, messages } = await start(program);
  try {
    const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
    child.kill('SIGTERM');
    assert.equal(await closed, 0);
    assert.ok(messages.includes(program.stopped), `the last lines reached the reader: ${JSON.stringify(messages)}`);
  } finally {
    if (!exited(child)) child.kill('SIGKILL');
  }
}

test('the edge exits on SIGTERM when the reader of its stdout has gone', () => stopsWithStdoutGone(EDGE));
test('the node agent exits on SIGTERM when the reader of its stdout has gone', () => stopsWithStdoutGone(AGENT));
test('the edge still writes its last log lines on SIGTERM with the pipe open', () => stopsWithLastLines(EDGE));
test('the node agent still writes its last log lines on SIGTERM with the pipe open', () => stopsWithLastLines(AGENT));
