// The bounds of an A2A context's conversation (context-history.ts): turns
// and bytes per context drop the oldest turns first, the number of contexts
// drops the least recently used, and a context expires like a task record.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ContextHistory, historyKey, homeWorkerOf } from '../../src/workers/a2a/context-history.js';

const LIMITS = { maxTurns: 3, maxBytes: 1_000, maxContexts: 2, maxTotalBytes: Number.MAX_SAFE_INTEGER, ttlMs: 60_000 };

test('a context keeps its newest turns within max turns and max bytes', () => {
  const history = new ContextHistory(LIMITS);
  const key = historyKey(undefined, 'writer', 'c1');
  for (let i = 1; i <= 5; i++) history.remember(key, `q${i}`, `a${i}`);
  assert.deepEqual(history.messages(key).map((m) => m.content), ['q3', 'a3', 'q4', 'a4', 'q5', 'a5']);
  history.remember(key, 'x'.repeat(700), 'y'.repeat(300));
  assert.deepEqual(history.messages(key).map((m) => m.content.slice(0, 2)), ['xx', 'yy'], 'the bytes bound dropped every older turn');
  history.remember(key, 'z'.repeat(1_200), '');
  assert.deepEqual(history.messages(key).map((m) => m.content.slice(0, 2)), ['xx', 'yy'], 'a turn over the byte bound on its own is not kept, and the earlier turns stay');
});

test('contexts: the least recently used goes first; keys and agents separate them; a context expires', () => {
  const history = new ContextHistory(LIMITS);
  const a = historyKey('alice', 'writer', 'c');
  const b = historyKey('bob', 'writer', 'c');
  const c = historyKey('alice', 'coder', 'c');
  history.remember(a, 'qa', 'aa');
  history.remember(b, 'qb', 'ab');
  assert.equal(history.messages(b)[0]?.content, 'qb', 'same contextId, another key: another conversation');
  history.remember(a, 'qa2', 'aa2');
  history.remember(c, 'qc', 'ac');
  assert.equal(history.size, 2);
  assert.deepEqual(history.messages(b), [], 'the least recently used context went');
  assert.equal(history.messages(a).length, 4);
  history.setLimits({ ...LIMITS, ttlMs: -1 });
  history.remember(c, 'q', 'a');
  assert.deepEqual(history.messages(c), [], 'expired');
  history.setLimits({ ...LIMITS, maxTurns: 0 });
  history.remember(a, 'q', 'a');
  assert.equal(history.messages(a).length, 4, 'max turns 0: nothing more is remembered');
});

test('the contexts hold at most maxTotalBytes together: the least recently used go first, the newest stays', () => {
  const history = new ContextHistory({ ...LIMITS, maxContexts: 100, maxTotalBytes: 2_500 });
  const keys = [1, 2, 3].map((i) => historyKey(undefined, 'writer', `c${i}`));
  for (const key of keys) history.remember(key, 'q'.repeat(800), 'a'.repeat(100));
  assert.equal(history.totalBytes, 2_700 - 900, 'the first context went');
  assert.deepEqual(history.messages(keys[0]), []);
  assert.equal(history.messages(keys[2]).length, 2);
  history.setLimits({ ...LIMITS, maxContexts: 100, maxTotalBytes: 10 });
  history.remember(keys[2], 'q', 'a');
  assert.equal(history.size, 1, 'a bound below one context keeps the newest alone');
  assert.equal(history.totalBytes, 902);
});

test('a context has one home worker, the same on every worker', () => {
  assert.equal(homeWorkerOf('anything', 0), -1);
  const homes = new Set(Array.from({ length: 64 }, (_, i) => homeWorkerOf(`ctx-${i}`, 4)));
  assert.deepEqual([...homes].sort(), [0, 1, 2, 3]);
  assert.equal(homeWorkerOf('ctx-7', 4), homeWorkerOf('ctx-7', 4));
});
