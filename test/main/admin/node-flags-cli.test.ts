// runtime.node_flags through the real CLI: the edge restarts itself in
// place (same PID, same pipes) with the flags its config asks for (sizes),
// sets the switches it lists in the running process, keeps an operator's
// own choice, and says which flags it runs with in its log and in
// GET /admin/status.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';
import { waitFor } from '../../helpers/stack.js';
import { autoNodeFlags } from '../../../src/shared/node-flags.js';
import { EdgeProcess } from './edge-process.js';
import { opsConfigObject } from './ops-stack.js';

async function flagsOf(edge: EdgeProcess): Promise<{ logged: string[]; status: string[]; pid: number }> {
  const started = await edge.waitForLog((l) => l.msg === 'edge started', 15_000);
  const status = await edge.adminJson('/admin/status');
  assert.equal(started.pid, edge.child.pid, 'the restart kept the PID the operator started');
  assert.equal(status.edge.pid, edge.child.pid);
  return { logged: started.nodeFlags as string[], status: status.edge.nodeFlags as string[], pid: status.edge.pid as number };
}

test('the edge restarts itself once with the sizes runtime.node_flags lists, before it listens, and sets the switch it lists', async () => {
  const sw = '--external-memory-accounted-in-global-limit';
  const edge = await EdgeProcess.start(opsConfigObject({ configure: (raw) => void (raw.runtime = { node_flags: ['--max-semi-space-size=4', sw, '--v8-pool-size=1'] }) }));
  try {
    const { logged, status } = await flagsOf(edge);
    // The sizes came by the restart (the command line), the switch after it, in the running process.
    assert.deepEqual(logged, ['--max-semi-space-size=4', '--v8-pool-size=1', sw]);
    assert.deepEqual(status, logged);
    assert.equal(edge.logs.filter((l) => l.msg === 'edge listening').length, 1, 'one start is logged: the first process opened nothing');
    assert.ok(!edge.logs.some((l) => l.msg === 'runtime.node_flags: running without them'));
    const res = await fetch(`${edge.url}/v1/models`);
    assert.equal(res.status, 200, 'the restarted edge serves');
  } finally {
    await edge.dispose();
  }
});

test("by default (auto) the edge runs with the host's GC-thread and heap flags; [] leaves Node as started", async () => {
  const auto = await EdgeProcess.start(opsConfigObject());
  try {
    const { status } = await flagsOf(auto);
    assert.deepEqual(status, autoNodeFlags(availableParallelism()));
  } finally {
    await auto.dispose();
  }
  const none = await EdgeProcess.start(opsConfigObject({ configure: (raw) => void (raw.runtime = { node_flags: [] }) }));
  try {
    assert.deepEqual((await flagsOf(none)).status, []);
  } finally {
    await none.dispose();
  }
});

test("an operator's own flag (NODE_OPTIONS) wins over the config's for that name", async () => {
  const edge = await EdgeProcess.start(opsConfigObject({ configure: (raw) => void (raw.runtime = { node_flags: ['--v8-pool-size=1', '--max-semi-space-size=4'] }) }), {
    NODE_OPTIONS: '--v8-pool-size=2',
  });
  try {
    // Only the flag the operator did not set was added on the restart.
    assert.deepEqual((await flagsOf(edge)).status, ['--max-semi-space-size=4']);
  } finally {
    await edge.dispose();
  }
});

test('a config warning is logged once, by the restarted process, with stdout a file (as a service manager may give it)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-flags-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const configFile = join(dir, 'edge.yaml');
  // The test node's token is short: one warning about it.
  await writeFile(configFile, toYaml(opsConfigObject({ configure: (raw) => void (raw.runtime = { node_flags: ['--max-semi-space-size=4'] }) })));
  const out = await open(join(dir, 'edge.log'), 'w');
  const cli = fileURLToPath(new URL('../../../src/edge/cli.js', import.meta.url));
  const child = spawn(process.execPath, [cli, '--config', configFile], { stdio: ['ignore', out.fd, 'inherit'], env: { ...process.env, LOG_LEVEL: 'info', NODE_ENV: 'production' } });
  try {
    const log = async (): Promise<string> => readFile(join(dir, 'edge.log'), 'utf8');
    await waitFor(async () => (await log()).includes('"edge listening"'), 'the edge listens', 15_000);
    assert.equal((await log()).split('\n').filter((l) => l.includes('a token this short can be guessed')).length, 1);
  } finally {
    child.kill('SIGKILL');
    await once(child, 'exit');
    await out.close();
  }
});
