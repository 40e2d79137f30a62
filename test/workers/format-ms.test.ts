import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatMs3 } from '../../src/workers/observe/exchange-observer.js';

test('timing headers read as toFixed(3) would write them', () => {
  assert.equal(formatMs3(0), '0.000');
  assert.equal(formatMs3(0.0004), '0.000');
  assert.equal(formatMs3(0.007), '0.007');
  assert.equal(formatMs3(0.07), '0.070');
  assert.equal(formatMs3(1.2), '1.200');
  assert.equal(formatMs3(12.3456), '12.346');
  assert.equal(formatMs3(0.9996), '1.000');
  assert.equal(formatMs3(86_400_000.25), '86400000.250');
  // Outside what the headers carry it falls back to the general path rather than writing garbage.
  assert.equal(formatMs3(-1.5), (-1.5).toFixed(3));
  assert.equal(formatMs3(Number.NaN), 'NaN');
  let seed = 11;
  for (let i = 0; i < 20_000; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    const ms = (seed / 2147483648) * 10 ** (i % 7);
    const got = formatMs3(ms);
    assert.match(got, /^\d+\.\d{3}$/);
    // toFixed rounds the exact binary value; ties may land on the other side, never further.
    assert.ok(Math.abs(Number(got) - Number(ms.toFixed(3))) <= 0.0010001, `${ms}: ${got} vs ${ms.toFixed(3)}`);
  }
});
