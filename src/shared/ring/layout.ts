// Byte layout of one ring's SharedArrayBuffer; spsc-ring.ts documents it in
// full. Both sides compute every offset from these constants, so a producer
// and a consumer built in different threads agree by construction.

/** Bytes of one cache line; the cursors live on separate lines so the
 * producer's stores do not invalidate the consumer's line and vice versa. */
export const CACHE_LINE = 64;

// Int32 word indexes into the header.
export const MAGIC = 0; // line 0: constants, written once by createRing
export const CAPACITY = 1;
export const CLOSED = 2; // 1 once either side called close()
export const WRITE = (1 * CACHE_LINE) / 4; // line 1: producer cursor
export const READ = (2 * CACHE_LINE) / 4; // line 2: consumer cursor
export const CONSUMER_SLEEPING = (3 * CACHE_LINE) / 4; // line 3: consumer waits on WRITE
export const PRODUCER_SLEEPING = (4 * CACHE_LINE) / 4; // line 4: producer waits on READ

export const HEADER_BYTES = 5 * CACHE_LINE;
export const RING_MAGIC = 0x52494e47; // 'RING'

/** Length-header value that means "the rest of the data area is padding; the
 * next record starts at offset 0". Never a valid length (lengths are >= 0). */
export const PADDING = -1;

export const MIN_CAPACITY = 64;
export const MAX_CAPACITY = 1 << 30;

/** Bytes one record occupies: 4-byte length header + payload, rounded up to
 * 4 so every header (and every payload) starts 4-byte aligned. */
export function recordBytes(length: number): number {
  return (length + 7) & ~3;
}

/** Largest payload a ring of `capacity` accepts. A record at most half the
 * data area always fits into an empty ring even after skipping a tail that is
 * too short for it (tail < record <= capacity / 2), so a writer that waits
 * always makes progress. */
export function maxPayload(capacity: number): number {
  return capacity / 2 - 4;
}

/** Checks that `buffer` was made by createRing and returns its capacity. */
export function ringCapacity(buffer: SharedArrayBuffer): number {
  if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength < HEADER_BYTES + MIN_CAPACITY) {
    throw new TypeError('ring: expected a SharedArrayBuffer made by createRing()');
  }
  const header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
  const capacity = Atomics.load(header, CAPACITY);
  if (Atomics.load(header, MAGIC) !== RING_MAGIC || buffer.byteLength !== HEADER_BYTES + capacity) {
    throw new TypeError('ring: expected a SharedArrayBuffer made by createRing()');
  }
  return capacity;
}

/** Bytes between READ and WRITE, for metrics. READ is loaded first so the
 * result is never negative; clamped because WRITE may have moved on since. */
export function usedBytes(header: Int32Array, capacity: number): number {
  const read = Atomics.load(header, READ);
  return Math.min(capacity, (Atomics.load(header, WRITE) - read) | 0);
}
