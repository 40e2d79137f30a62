// The notify-driven consumer loop every ring reader runs (main thread and
// workers alike): sleep in Atomics.waitAsync until the producer commits,
// drain a bounded batch in place, repeat. waitForData resolves in a
// microtask when data is already there, so a busy ring would starve the
// event loop's I/O: every few batches the loop yields with setImmediate.
import type { RingConsumer, RingRecordHandler } from './ring-consumer.js';

const BATCH_RECORDS = 256;
const BATCHES_PER_YIELD = 4;

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Runs until the ring is closed (and drained). Handler errors go to `onError`; the loop goes on. */
export async function drainLoop(consumer: RingConsumer, handler: RingRecordHandler, onError: (err: unknown) => void): Promise<void> {
  let batches = 0;
  for (;;) {
    if (!(await consumer.waitForData())) {
      if (consumer.closed) return;
      continue;
    }
    try {
      consumer.drainInPlace(handler, BATCH_RECORDS);
    } catch (err) {
      onError(err);
    }
    if (++batches % BATCHES_PER_YIELD === 0) await nextTurn();
  }
}
