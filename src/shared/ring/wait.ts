// Atomics.waitAsync with the event loop kept alive while it is pending.
// Node does not count a pending waitAsync as work (nodejs/node#61941): a
// worker whose only pending operation is a ring wait would exit under it. One
// interval per thread is ref'd while any ring wait of that thread is pending
// and unref'd with the last one (created once: ref/unref is cheaper per wait
// than creating and clearing a timer).

export type WaitOutcome = 'ok' | 'not-equal' | 'timed-out';

type WaitAsyncResult =
  | { async: false; value: 'not-equal' | 'timed-out' }
  | { async: true; value: Promise<'ok' | 'timed-out'> };

// lib ES2023 lacks the ES2024 declaration; Node 22+ has the function.
const waitAsync = (
  Atomics as unknown as {
    waitAsync(array: Int32Array, index: number, value: number, timeoutMs?: number): WaitAsyncResult;
  }
).waitAsync;

const KEEP_ALIVE_MS = 1 << 30;
let pending = 0;
let keepAlive: ReturnType<typeof setInterval> | undefined;

function noop(): void {}

function settled(outcome: 'ok' | 'timed-out'): WaitOutcome {
  if (--pending === 0) keepAlive?.unref();
  return outcome;
}

/** Resolves once `array[index]` is notified, no longer equals `value`
 * ('not-equal', without sleeping), or `timeoutMs` passed. Never blocks. */
export function waitChange(array: Int32Array, index: number, value: number, timeoutMs: number): Promise<WaitOutcome> {
  const result = waitAsync(array, index, value, timeoutMs);
  if (!result.async) return Promise.resolve(result.value);
  if (pending++ === 0) {
    if (keepAlive === undefined) keepAlive = setInterval(noop, KEEP_ALIVE_MS);
    else keepAlive.ref();
  }
  return result.value.then(settled);
}
