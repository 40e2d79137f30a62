// How run reports leave the data path for the main thread's run records: in
// order, all of them, one message per turn (workers.count 0) or per delay
// (an I/O worker), and at once when the plane closes. Timers fire in the
// order they are due, so the checks below hold however late the loop runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as turn, setTimeout as sleep } from 'node:timers/promises';
import { RunForwarder } from '../../src/workers/observe/run-forwarder.js';
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

test('with a delay, the reports of several turns share one message', async () => {
  const sent: RunEvent[][] = [];
  const forwarder = new RunForwarder((events) => sent.push(events), 500);
  forwarder.run(report(1));
  await turn();
  forwarder.run(report(2));
  await turn();
  assert.equal(sent.length, 0, 'held across turns');
  await sleep(600);
  assert.deepEqual(ids(sent), [['run-1', 'run-2']]);
});

test("a flush (the plane's close, a fault) sends at once and cancels the pending timer", async () => {
  const delayMs = 2_000;
  const sent: RunEvent[][] = [];
  const forwarder = new RunForwarder((events) => sent.push(events), delayMs);
  forwarder.run(report(1));
  forwarder.run(report(2));
  await sleep(100);
  forwarder.flush();
  assert.deepEqual(ids(sent), [['run-1', 'run-2']], 'flush sends without waiting');
  // A new report starts a new delay; the first timer (due ~100 ms before it) must not send it early.
  forwarder.run(report(3));
  await sleep(delayMs - 60);
  assert.deepEqual(ids(sent), [['run-1', 'run-2']], 'report 3 waits for its own delay');
  await sleep(120);
  assert.deepEqual(ids(sent), [['run-1', 'run-2'], ['run-3']]);
  forwarder.flush();
  assert.equal(sent.length, 2, 'nothing left, nothing sent');
});
