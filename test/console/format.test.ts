// The console's number formatting (console/src/format.ts, loaded from its
// build in dist/console as the browser loads it): each value is printed in
// the unit its rounded value belongs to, so no cell ever reads "60.0 s",
// "1 min 60 s" or "10.0 ms".
import assert from 'node:assert/strict';
import { test } from 'node:test';

interface Format {
  ms(value: number | null | undefined): string;
  seconds(value: number): string;
  rate(value: number, unit: string): string;
  uptime(seconds: number): string;
  count(value: number): string;
}
const format = (await import(new URL('../../console/format.js', import.meta.url).href)) as Format;

test('seconds: a value that rounds up to the next unit is printed in that unit', () => {
  assert.equal(format.seconds(59.94), '59.9 s');
  assert.equal(format.seconds(59.96), '1 min 0 s');
  assert.equal(format.seconds(119.6), '2 min 0 s');
  assert.equal(format.seconds(61), '1 min 1 s');
  assert.equal(format.seconds(3599.6), '1 h 0 min');
  assert.equal(format.seconds(7199), '2 h 0 min');
  assert.equal(format.seconds(3725), '1 h 2 min');
});

test('ms: the same at each boundary, and a dash for no value', () => {
  assert.equal(format.ms(9.94), '9.9 ms');
  assert.equal(format.ms(9.96), '10 ms');
  assert.equal(format.ms(9_999.4), '9999 ms');
  assert.equal(format.ms(9_999.6), '10.0 s');
  assert.equal(format.ms(59_960), '1 min 0 s');
  assert.equal(format.ms(null), '–');
  assert.equal(format.ms(Number.NaN), '–');
});

test('rate: one decimal below 10, whole numbers from where it rounds to 10', () => {
  assert.equal(format.rate(9.94, '/min'), '9.9 /min');
  assert.equal(format.rate(9.96, '/min'), '10 /min');
  assert.equal(format.rate(12.4, '/min'), '12 /min');
});

test('uptime: minutes, then hours and minutes, then days and hours; never thousands of minutes', () => {
  assert.equal(format.uptime(59), '0 min');
  assert.equal(format.uptime(3599), '59 min');
  assert.equal(format.uptime(3600), '1 h 0 min');
  assert.equal(format.uptime(86_399), '23 h 59 min');
  assert.equal(format.uptime(12 * 86_400 + 3 * 3600 + 125), '12 d 3 h');
});

test('count: exact below 10,000, then k, M and G, each printed in the unit its rounded value belongs to', () => {
  assert.equal(format.count(0), '0');
  assert.equal(format.count(9_999), '9999');
  assert.equal(format.count(10_000), '10.0 k');
  assert.equal(format.count(99_949), '99.9 k');
  assert.equal(format.count(99_950), '100 k');
  assert.equal(format.count(999_499), '999 k');
  assert.equal(format.count(999_500), '1.00 M');
  assert.equal(format.count(9_994_999), '9.99 M');
  assert.equal(format.count(9_995_000), '10.0 M');
  assert.equal(format.count(999_949_999), '999.9 M');
  assert.equal(format.count(999_950_000), '1.00 G');
  // A debt (a key's tokens left below 0) in the same units as the counts beside it.
  assert.equal(format.count(-4_000), '-4000');
  assert.equal(format.count(-24_011), '-24.0 k');
  assert.equal(format.count(-1_500_000), '-1.50 M');
});
