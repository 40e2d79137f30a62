// How run reports leave the data path for the main thread's run records: in
// order, all of them, one message per turn (workers.count 0) or per delay
// (an I/O worker), and at once when the plane closes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as turn, setTimeout as sleep } from 'node:timers/promises';
import { RUN_REPORT_DELAY_MS, RunForwarder } from '../../src/workers/observe/run-forwarder.js';
import type { RunEvent } from '../../src/contract/events.js';

const report = (n: number): RunEvent => ({ type: 'run.first_byte', runId: `run-${n}`, model: 'm', ttfbMs: n, at: n });
const ids = (batches: RunEvent[][]): string[][] => batches.map((b) => b.map((e) => e.runId));

test('without a delay, one turn of reports is one message, in order', async () => {
  const sent: RunEvent[][] = [];
  const forwarder = new RunForwarder((events) => sent.push(events));
  forwarder.run(report(1));
  forwarder.run(report(2));
  assert.equal(sent.length, 0, 'nothing leaves before the turn ends');
  await turn();
  forwarder.run(report(3));
  await turn();
  assert.deepEqual(ids(sent), [['run-1', 'run-2'], ['run-3']]);
});

test("with a delay, the reports of several turns share one message; close's flush sends the rest at once", async () => {
  const sent: RunEvent[][] = [];
  const forwarder = new RunForwarder((events) => sent.push(events), RUN_REPORT_DELAY_MS);
  forwarder.run(report(1));
  await turn();
  forwarder.run(report(2));
  await turn();
  assert.equal(sent.length, 0, 'held across turns');
  await sleep(RUN_REPORT_DELAY_MS + 20);
  assert.deepEqual(ids(sent), [['run-1', 'run-2']]);
  forwarder.run(report(3));
  forwarder.flush();
  assert.deepEqual(ids(sent), [['run-1', 'run-2'], ['run-3']], 'flush sends without waiting');
  await sleep(RUN_REPORT_DELAY_MS + 20);
  forwarder.run(report(4));
  await sleep(RUN_REPORT_DELAY_MS + 20);
  assert.deepEqual(ids(sent), [['run-1', 'run-2'], ['run-3'], ['run-4']], 'the timer left from before the flush sends nothing twice');
});
