// The per-token floors the report prints beside the per-token goals: a
// burst of writes in-process, and paced writes to a reader in another
// process. Only that they measure something, and clean up after themselves;
// their values are the host's.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { test } from 'node:test';
import { descendants } from '../../bench/harness/proc-stats.js';
import { loopbackWriteFloorUs, pacedTokenFloor } from '../../bench/harness/write-floor.js';
import { alive } from '../helpers/processes.js';

function childPids(): number[] {
  try {
    return readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

test('the write floors measure a positive CPU cost per write, and the paced probe leaves no reader process behind', async () => {
  const burst = await loopbackWriteFloorUs();
  assert.ok(burst !== undefined && burst > 0, `burst floor ${burst}`);
  const paced = await pacedTokenFloor({ streams: 200, tokensPerSecond: 50 }, 1, 300);
  assert.ok(paced !== undefined, 'paced floor measured');
  assert.equal(paced.streams, 200);
  assert.equal(paced.tokensPerSecond, 50);
  assert.ok(paced.writeUs > 0 && Number.isFinite(paced.writeUs), `paced write ${paced.writeUs} µs`);
  assert.ok(paced.readUs > 0 && Number.isFinite(paced.readUs), `paced read ${paced.readUs} µs`);
  for (let i = 0; i < 50 && childPids().length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(childPids(), [], 'the reader process exited');
});

function socketsOf(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).filter((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:');
      } catch {
        return false;
      }
    }).length;
  } catch {
    return 0;
  }
}

test('the paced probe\'s reader exits when the bench dies in the middle of the probe (SIGTERM, a crash): no process left behind', { timeout: 30_000 }, async () => {
  // A bench process in the middle of a long paced probe, killed from outside before it can send the reader 'exit'.
  const module = new URL('../../bench/harness/write-floor.js', import.meta.url).href;
  const bench = spawn(process.execPath, ['--input-type=module', '-e', `import(${JSON.stringify(module)}).then((m) => m.pacedTokenFloor({ streams: 10, tokensPerSecond: 10 }, 100, 2000))`], { stdio: 'ignore' });
  const benchPid = bench.pid ?? assert.fail('no pid');
  let reader: number | undefined;
  try {
    const deadline = Date.now() + 10_000;
    while ((reader = descendants(benchPid)[0]) === undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(reader !== undefined, 'the probe started its reader');
    // Under way: the reader listens and has accepted the probe's 10 connections (its IPC channel is a socket too).
    while (socketsOf(reader) < 12 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(socketsOf(reader) >= 12, `the reader holds the probe's connections: ${socketsOf(reader)} sockets`);
    const exited = once(bench, 'exit');
    bench.kill('SIGKILL');
    await exited;
    for (let i = 0; i < 250 && alive(reader); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(alive(reader), false, `reader ${reader} outlived the bench`);
  } finally {
    bench.kill('SIGKILL');
    if (reader !== undefined && alive(reader)) process.kill(reader, 'SIGKILL');
  }
});
