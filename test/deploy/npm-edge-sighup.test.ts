// README (Commands): under `npm run edge`, SIGHUP goes to the edge's own
// process with `pkill -HUP -f dist/src/edge/cli.js`. That pattern must
// match the edge alone: a `sh -c` wrapper between npm and node matches it
// too, dies of the SIGHUP, npm exits and the edge is left running orphaned.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** What `pkill -f PATTERN` would signal, limited to one process group (other edges on the host are not ours). */
async function pkillMatches(pattern: string, pgid: number): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const [cmdline, stat] = await Promise.all([readFile(`/proc/${entry}/cmdline`, 'utf8'), readFile(`/proc/${entry}/stat`, 'utf8')]).catch(() => ['', '']);
    // stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces, so split after its ')'.
    const group = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    if (group === pgid && cmdline.replaceAll('\0', ' ').includes(pattern)) pids.push(Number(entry));
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('the README\'s pkill -HUP reloads an edge run by `npm run edge` and leaves npm in charge of it', { skip: process.platform !== 'linux' }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-npm-sighup-'));
  const file = join(dir, 'edge.yaml');
  await writeFile(file, toYaml({
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    admin: { host: '127.0.0.1', port: 0 },
    runtime: { node_flags: [] },
    drain: { grace_ms: 1000 },
    nodes: [{ id: 'gpu-1', token: 'node-token-0123456789abcdef', providers: [{ id: 'p', type: 'openai_compat' }] }],
    models: [{ alias: 'llama3', providers: { p: 'served' } }],
  }));
  const npm = spawn('npm', ['run', 'edge', '--', '--config', file], { cwd: root, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
  const lines: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  let partial = '';
  npm.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
    for (const wake of waiters.splice(0)) wake();
  });
  npm.stderr.resume();
  const logged = async (msg: string): Promise<Record<string, unknown>> => {
    for (;;) {
      const line = lines.find((l) => l.msg === msg);
      if (line) return line;
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  const pgid = npm.pid!;
  try {
    const edgePid = (await logged('edge started')).pid as number;
    const matched = await pkillMatches('dist/src/edge/cli.js', pgid);
    assert.deepEqual(matched, [edgePid], 'the pattern matches the edge process alone');
    for (const pid of matched) process.kill(pid, 'SIGHUP');
    assert.equal((await logged('config refresh')).origin, 'SIGHUP');
    // npm still runs the edge: its SIGTERM drains the edge, and both exit 0.
    assert.ok(npm.kill('SIGTERM'), 'npm is still running after the reload');
    assert.equal(await exited, 0);
    assert.ok(!alive(edgePid), 'the edge exited with npm, not left orphaned');
  } finally {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
    await rm(dir, { recursive: true, force: true });
  }
});
