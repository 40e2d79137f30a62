// An API key's request rate as a token bucket: a minute's worth at once, then
// exactly the rate, with the wait a refused request is told; a changed rate
// (a refresh) applies from then on without giving back what was spent.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RequestRate, retryAfterSecOf } from '../../src/shared/request-rate.js';

test('a minute\'s worth at once, then refused with the wait until the next one', () => {
  const rate = new RequestRate(3, 0);
  assert.equal(rate.take(0, 3), 0);
  assert.equal(rate.take(0, 3), 0);
  assert.equal(rate.take(0, 3), 0);
  assert.equal(rate.take(0, 3), 20_000, 'one request each 20 s at 3 a minute');
  assert.equal(rate.take(5_000, 3), 15_000, 'the wait shrinks as time passes; a refusal spends nothing');
  assert.equal(rate.take(20_000, 3), 0, 'one back after 20 s');
  assert.equal(rate.take(20_000, 3), 20_000);
});

test('an idle key refills to its minute, never beyond', () => {
  const rate = new RequestRate(2, 0);
  rate.take(0, 2);
  rate.take(0, 2);
  // Ten idle minutes hold one minute: two, then a wait.
  assert.equal(rate.take(10 * 60_000, 2), 0);
  assert.equal(rate.take(10 * 60_000, 2), 0);
  assert.ok(rate.take(10 * 60_000, 2) > 0);
});

test('a refresh changes the rate from now on: spent tokens stay spent, a lower rate caps what is held', () => {
  const rate = new RequestRate(60, 0);
  for (let i = 0; i < 60; i++) assert.equal(rate.take(0, 60), 0);
  assert.equal(rate.take(0, 60), 1_000, 'one a second at 60 a minute');
  assert.equal(rate.take(0, 6000), 10, 'raised: the next comes at the new rate, not a fresh minute');
  assert.equal(rate.take(10, 6000), 0);
  const lowered = new RequestRate(100, 0);
  assert.equal(lowered.take(0, 2), 0, 'lowered to 2 with 100 held: 2 are left, one taken');
  assert.equal(lowered.take(0, 2), 0);
  assert.equal(lowered.take(0, 2), 30_000);
});

test('Retry-After is whole seconds, at least one', () => {
  assert.equal(retryAfterSecOf(1), 1);
  assert.equal(retryAfterSecOf(1_000), 1);
  assert.equal(retryAfterSecOf(1_001), 2);
  assert.equal(retryAfterSecOf(20_000), 20);
});

test('tokens: reserved while the bucket holds one, settled to what was used; the debt of a large request is waited out', () => {
  const tokens = new RequestRate(600, 0);
  assert.equal(tokens.reserve(0, 600, 100), 0);
  tokens.settle(400 - 100, 0); // used 400: 200 left
  assert.equal(tokens.reserve(0, 600, 50), 0);
  tokens.settle(-50, 0); // refused downstream, never served: all given back
  assert.equal(tokens.reserve(0, 600, 1_000), 0, 'admitted with 200 left though it may use more: 800 owed');
  assert.equal(tokens.reserve(0, 600, 1), 80_100, '801 tokens at 10 a second until one is held');
  assert.equal(tokens.reserve(80_100, 600, 1), 0);
  tokens.settle(-10_000, 80_100);
  assert.equal(tokens.reserve(80_100, 600, 600), 0, 'given back, never more than a minute: 600');
  assert.ok(tokens.reserve(80_100, 600, 1) > 0);
});

test('a clock read earlier than the last one refills nothing, and the time is not counted twice', () => {
  const rate = new RequestRate(60, 0);
  for (let i = 0; i < 60; i++) rate.take(10_000, 60);
  assert.equal(rate.take(5_000, 60), 1_000, 'an earlier reading: still a second to wait');
  assert.equal(rate.take(10_500, 60), 500, 'half a second since the last real reading, not 5.5 s');
});
