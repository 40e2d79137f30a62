// Single-producer single-consumer ring of length-prefixed records over one
// SharedArrayBuffer: worker -> scheduler and scheduler -> worker records, and
// worker <-> worker tunnel bytes. One thread owns the RingProducer, one the
// RingConsumer; both are built from the same buffer (postMessage it over).
//
// Layout (byte offsets; Int32 words, native byte order):
//   line 0    0  MAGIC 'RING', CAPACITY (data bytes), CLOSED flag; written once
//   line 1   64  WRITE  producer cursor: end of the last committed record
//   line 2  128  READ   consumer cursor: start of the first unreleased record
//   line 3  192  CONSUMER_SLEEPING  1 while the consumer waits on WRITE
//   line 4  256  PRODUCER_SLEEPING  1 while the producer waits on READ
//   320          data area, `capacity` bytes, a power of two (64 B .. 1 GiB)
// Each cursor sits alone on its 64-byte cache line, so steady-state traffic
// touches one line per side (plus reads of the other's).
//
// Cursors are free-running 32-bit byte counters that wrap modulo 2^32 (kept
// as int32, arithmetic `| 0`). Because capacity divides 2^32, `cursor & (capacity
// - 1)` is the position across the wrap, and `(WRITE - READ) | 0` is the used
// byte count in [0, capacity] without ambiguity (capacity <= 2^30). So no
// slot is wasted: WRITE == READ is empty, WRITE - READ == capacity is full.
//
// Record: int32 payload length, then the payload, padded to a multiple of 4
// (every header and payload 4-byte aligned). Records never straddle the end:
// one that does not fit in the tail writes the PADDING marker (-1) as a length
// there and starts at offset 0; the reader skips to 0 on the marker. So every
// record is one contiguous view (zero copy on both sides) at the cost of up to
// one record of wasted tail per lap. To guarantee progress, payloads are capped
// at capacity / 2 - 4 bytes (RangeError above): a 64 KB tunnel record needs a
// ring of at least 256 KiB.
//
// Memory ordering: payload bytes and length headers are plain typed-array
// writes; the producer's Atomics.store of WRITE publishes them and the
// consumer's Atomics.load of WRITE acquires them. The consumer's store of READ
// hands the space back the same way. A batch costs one store per side
// (commit() after several reserve(); drain() per call), not one per record.
//
// Wake-ups: a side about to sleep stores its SLEEPING flag, re-loads the other
// cursor and only then Atomics.waitAsync()s on that cursor's word. The other
// side stores its cursor, loads the flag, and only if it is set clears it
// (compareExchange) and calls Atomics.notify: one notify per sleep, none while
// the peer is busy. Both pairs are seq-cst, so a wake-up is never lost. Nobody
// ever blocks: waits are Atomics.waitAsync (legal on the main thread).
//
// Full is backpressure, never loss: tryWrite returns false and the caller
// keeps the record (await waitForSpace, then try again).
import { CAPACITY, HEADER_BYTES, MAGIC, MAX_CAPACITY, MIN_CAPACITY, RING_MAGIC } from './layout.js';

export { RingConsumer, type RingRecordHandler, type RingViewHandler } from './ring-consumer.js';
export { RingProducer, type RingFill, type RingUsage } from './ring-producer.js';
export { maxPayload, recordBytes } from './layout.js';

/** A new, empty ring with `capacityBytes` of data area (a power of two,
 * 64 bytes to 1 GiB). Build a RingProducer and a RingConsumer on it. */
export function createRing(capacityBytes: number): SharedArrayBuffer {
  if (
    !Number.isInteger(capacityBytes) ||
    capacityBytes < MIN_CAPACITY ||
    capacityBytes > MAX_CAPACITY ||
    (capacityBytes & (capacityBytes - 1)) !== 0
  ) {
    throw new RangeError(
      `ring: capacity must be a power of two from ${MIN_CAPACITY} to ${MAX_CAPACITY} bytes, got ${capacityBytes}`,
    );
  }
  const buffer = new SharedArrayBuffer(HEADER_BYTES + capacityBytes);
  const header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
  header[CAPACITY] = capacityBytes;
  header[MAGIC] = RING_MAGIC;
  return buffer;
}
