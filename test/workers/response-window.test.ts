import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ResponseWindow } from '../../src/workers/tunnel/response-window.js';

test('credit goes back in quarter-window batches, only for flushed bytes', () => {
  const window = new ResponseWindow(1000);
  assert.ok(window.receive(100));
  assert.ok(window.receive(200));
  assert.equal(window.buffered, 300);
  assert.equal(window.flushed(), 0, '100 flushed: below the 250-byte batch');
  assert.equal(window.flushed(), 300, 'the batch is full: everything flushed goes back');
  assert.equal(window.outstanding, 0);
  assert.equal(window.buffered, 0);
});

test('a node that overruns its window is caught', () => {
  const window = new ResponseWindow(1000);
  assert.ok(window.receive(1000));
  assert.equal(window.receive(1), false);
});

test('a client that never catches up does not grow the bookkeeping without bound', () => {
  const window = new ResponseWindow(1 << 30);
  window.receive(10); // stays unflushed throughout: the list is never empty
  for (let i = 0; i < 1_000_000; i++) {
    window.receive(10);
    window.flushed();
  }
  const kept = window.trackedWrites;
  assert.ok(kept < 5_000, `kept ${kept} entries`);
  assert.equal(window.buffered, 10);
});

test('high-water marks keep the most ever buffered and outstanding, an overrun included', () => {
  const window = new ResponseWindow(1000);
  assert.ok(window.receive(600));
  window.flushed(); // 600 flushed, credited
  assert.ok(window.receive(300));
  assert.deepEqual([window.buffered, window.highWaterBuffered, window.highWaterOutstanding], [300, 600, 600]);
  assert.ok(window.receive(700));
  assert.deepEqual([window.buffered, window.highWaterBuffered, window.highWaterOutstanding], [1000, 1000, 1000]);
  assert.equal(window.receive(1), false, 'an overrun');
  assert.equal(window.highWaterOutstanding, 1001, 'the overrun shows in the mark');
  assert.equal(window.highWaterBuffered, 1000, 'the refused bytes were never buffered');
});
