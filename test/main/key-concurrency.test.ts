// The main thread's per-key count (I/O workers): a key at its limit is
// refused without taking anything, a release frees exactly what its request
// took (never a refused one's), and a worker that exits frees its slots.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KeyConcurrency } from '../../src/main/key-concurrency.js';

const STRIDE = 64;
const id = (seq: number, worker: number): number => seq * STRIDE + worker;

test('a key takes slots up to its limit, from any worker, and is refused past it', () => {
  const keys = new KeyConcurrency();
  assert.equal(keys.acquire(id(1, 0), 'alice', 2), true);
  assert.equal(keys.acquire(id(1, 3), 'alice', 2), true);
  assert.equal(keys.acquire(id(2, 1), 'alice', 2), false);
  assert.equal(keys.acquire(id(2, 2), 'bob', 1), true, 'another key has its own count');
  assert.equal(keys.inFlight('alice'), 2);
  keys.release(id(1, 3));
  assert.equal(keys.acquire(id(3, 1), 'alice', 2), true);
  assert.deepEqual(keys.load(0).sort((a, b) => a.name.localeCompare(b.name)), [
    { name: 'alice', inFlight: 2 },
    { name: 'bob', inFlight: 1 },
  ]);
});

test('releasing a refused request, or one released already, frees nothing', () => {
  const keys = new KeyConcurrency();
  assert.equal(keys.acquire(id(1, 0), 'alice', 1), true);
  assert.equal(keys.acquire(id(2, 0), 'alice', 1), false);
  keys.release(id(2, 0)); // the client left before the refusal arrived
  assert.equal(keys.inFlight('alice'), 1);
  keys.release(id(1, 0));
  keys.release(id(1, 0));
  assert.equal(keys.inFlight('alice'), 0);
  assert.deepEqual(keys.load(0), [], 'a key with nothing open is forgotten');
  assert.equal(keys.acquire(id(3, 0), 'alice', 1), true);
});

test('the limit comes with each admission: a lowered limit refuses until enough have ended', () => {
  const keys = new KeyConcurrency();
  for (let seq = 1; seq <= 3; seq++) assert.equal(keys.acquire(id(seq, 0), 'alice', 3), true);
  assert.equal(keys.acquire(id(4, 0), 'alice', 2), false);
  keys.release(id(1, 0));
  assert.equal(keys.acquire(id(5, 0), 'alice', 2), false);
  keys.release(id(2, 0));
  assert.equal(keys.acquire(id(6, 0), 'alice', 2), true);
});

test('a worker that exits frees the slots of its requests only', () => {
  const keys = new KeyConcurrency();
  assert.equal(keys.acquire(id(1, 1), 'alice', 4), true);
  assert.equal(keys.acquire(id(2, 1), 'alice', 4), true);
  assert.equal(keys.acquire(id(1, 2), 'alice', 4), true);
  keys.releaseWorker(1, STRIDE);
  assert.equal(keys.inFlight('alice'), 1);
  keys.release(id(1, 1)); // a late record of the gone worker changes nothing
  assert.equal(keys.inFlight('alice'), 1);
});

test('tokens_per_minute: a reservation per admitted request, settled once at its release; a worker that exits leaves its reservations standing', () => {
  const keys = new KeyConcurrency();
  // release() settles at performance.now(): the test's clock is that one, at a limit too slow to refill meanwhile.
  const t = performance.now();
  keys.setLimits([{ name: 'alice', keySha256s: [], models: undefined, maxConcurrent: undefined, tokensPerMinute: 1_000 }], t);
  assert.equal(keys.reserveTokens(id(1, 0), 'bob', 5_000, t), 0, 'no limit: nothing reserved');
  assert.equal(keys.reserveTokens(id(1, 1), 'alice', 600, t), 0);
  assert.equal(keys.reserveTokens(id(2, 1), 'alice', 300, t), 0);
  assert.equal(keys.reserveTokens(id(3, 1), 'alice', 300, t), 0, '100 left: admitted, 200 owed');
  assert.ok(keys.reserveTokens(id(4, 1), 'alice', 1, t) > 0);
  keys.release(id(2, 1), 0); // never reached a provider: its 300 back
  keys.release(id(2, 1), 0); // released twice: given back once
  assert.equal(keys.reserveTokens(id(5, 1), 'alice', 50, t), 0);
  keys.release(id(5, 1), 0);
  keys.release(id(1, 1), 1_000); // used 1,000 of its 600: 400 more owed, 300 short
  assert.ok(keys.reserveTokens(id(6, 1), 'alice', 1, t) > 0);
  keys.releaseWorker(1, STRIDE); // id(3, 1)'s 300 stays spent
  const raised = performance.now();
  keys.setLimits([{ name: 'alice', keySha256s: [], models: undefined, maxConcurrent: undefined, tokensPerMinute: 60_000_000 }], raised);
  assert.equal(keys.reserveTokens(id(7, 1), 'alice', 1, raised + 1), 0, 'raised by a refresh: the debt is paid within 1 ms');
});
