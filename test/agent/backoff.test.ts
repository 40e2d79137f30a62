import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Backoff, upperHalfJitter } from '../../src/agent/backoff.js';

test('the window doubles from initial_ms up to max_ms, and the delay is uniform within it (full jitter)', () => {
  const top = new Backoff(200, 1000, () => 0.999999);
  assert.deepEqual(Array.from({ length: 6 }, () => top.next()), [199, 399, 799, 999, 999, 999]);
  const bottom = new Backoff(200, 1000, () => 0);
  assert.deepEqual(Array.from({ length: 3 }, () => bottom.next()), [0, 0, 0]);
  const mid = new Backoff(200, 1000, () => 0.5);
  assert.deepEqual(Array.from({ length: 4 }, () => mid.next()), [100, 200, 400, 500]);
});

test('reset() starts again from the initial window', () => {
  const backoff = new Backoff(100, 10_000, () => 0.999999);
  for (let i = 0; i < 20; i++) backoff.next();
  assert.equal(backoff.next(), 9999);
  backoff.reset();
  assert.equal(backoff.next(), 99);
});

test('many attempts never overflow past the cap', () => {
  const backoff = new Backoff(1, 3_600_000, () => 0.5);
  let last = 0;
  for (let i = 0; i < 5000; i++) last = backoff.next();
  assert.equal(last, 1_800_000);
});

test('the slowest pace (after a rejection) and fixed delays are jittered within their upper half', () => {
  assert.deepEqual([0, 0.5, 0.999999].map((r) => new Backoff(200, 1000, () => r).slowest()), [500, 750, 999]);
  assert.deepEqual([0, 0.5, 0.999999].map((r) => upperHalfJitter(200, () => r)), [100, 150, 199]);
  const delays = new Set(Array.from({ length: 50 }, () => new Backoff(200, 10_000).slowest()));
  assert.ok(delays.size > 40, 'fifty agents do not share one delay');
});
