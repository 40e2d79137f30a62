// x-ratelimit-reset-* durations at the edges of their units: a value that
// rounds up to a whole minute carries into the minutes, as OpenAI writes it
// (`1m0s`, `2m0s`), never `60s` or `1m60s`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { durationOf } from '../../../src/workers/http/rate-limit-headers.js';

test('a duration that rounds to a whole minute carries into the minutes', () => {
  assert.equal(durationOf(59_996), '1m0s');
  assert.equal(durationOf(119_999), '2m0s');
  assert.equal(durationOf(60_000), '1m0s');
  assert.equal(durationOf(59_990), '59.99s');
  assert.equal(durationOf(999), '999ms');
  assert.equal(durationOf(61_250), '1m1.25s');
});
