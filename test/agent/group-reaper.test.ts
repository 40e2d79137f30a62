// The process-group reaper on its own, with real process groups (a detached
// `sleep`, as a cli run's command is): close() stands for the agent's pipe
// closing, which is what the reaper sees whatever way the agent ended.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { GroupReaper } from '../../src/agent/group-reaper.js';
import { isLive } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

/** A process in its own group, like a cli run's command; its pid is the group's id. */
function group(): number {
  const child = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
  child.unref();
  return child.pid as number;
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // already gone
  }
}

test('close(): every group still listed is killed, the removed one is left alone, and the reaper exits', async () => {
  const reaper = new GroupReaper(() => assert.fail('no warning expected'));
  const listed = group();
  const removed = group();
  reaper.add(listed, 100);
  reaper.add(removed, 100);
  reaper.remove(removed);
  const pid = reaper.pid as number;
  assert.ok(pid > 0);
  reaper.close();
  await waitFor(async () => !(await isLive(listed)), 'the listed group to be killed');
  await waitFor(async () => !(await isLive(pid)), 'the reaper to exit');
  assert.ok(await isLive(removed), 'a group removed before is not the reaper\'s to kill');
  killGroup(removed);
});

test('a reaper killed from outside is replaced at once, and the new one is told every live group', async () => {
  const warnings: string[] = [];
  const reaper = new GroupReaper((message) => warnings.push(message));
  const first = group();
  reaper.add(first, 0);
  const old = reaper.pid as number;
  // Past the restart guard (a reaper that dies at once is not restarted in a loop).
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  process.kill(old, 'SIGKILL');
  await waitFor(async () => reaper.pid !== undefined && reaper.pid !== old, 'a new reaper');
  assert.match(warnings.join('\n'), /reaper ended; starting a new one/);
  const second = group();
  reaper.add(second, 0);
  reaper.close();
  await waitFor(async () => !(await isLive(first)) && !(await isLive(second)), 'both groups to be killed by the new reaper');
});

test('with no group ever added, nothing is started', () => {
  const reaper = new GroupReaper(() => assert.fail('no warning expected'));
  assert.equal(reaper.pid, undefined);
  reaper.close();
});
