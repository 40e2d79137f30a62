// The per-token floors the report prints beside the per-token goals: a
// burst of writes in-process, and paced writes to a reader in another
// process. Only that they measure something, and clean up after themselves;
// their values are the host's.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { loopbackWriteFloorUs, pacedTokenFloor } from '../../bench/harness/write-floor.js';

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
