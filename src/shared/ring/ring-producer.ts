// Writing side of an SPSC ring (layout: spsc-ring.ts). Owned by one thread.
import {
  CLOSED,
  CONSUMER_SLEEPING,
  HEADER_BYTES,
  PADDING,
  PRODUCER_SLEEPING,
  READ,
  WRITE,
  maxPayload,
  recordBytes,
  ringCapacity,
  usedBytes,
} from './layout.js';
import { waitChange } from './wait.js';

export interface RingUsage {
  readonly capacity: number;
  readonly used: number;
}

export type RingFill = (target: Uint8Array, offset: number) => void;

export class RingProducer {
  readonly capacity: number;
  /** Largest payload tryWrite/reserve accept (capacity / 2 - 4). */
  readonly maxRecordLength: number;
  /** The data area; reserve() returns offsets into it. */
  readonly bytes: Uint8Array;
  /** The data area as a DataView, for encoding fixed layouts in place. */
  readonly view: DataView;
  /** Atomics.notify calls made to wake a sleeping consumer (metrics, tests). */
  notifies = 0;

  readonly #header: Int32Array;
  readonly #words: Int32Array;
  readonly #mask: number;
  /** Next free byte, including reserved but uncommitted records. */
  #writeIndex: number;
  /** Last value stored to WRITE. */
  #published: number;
  /** Last READ value seen; only reloaded when it looks too small. */
  #cachedRead: number;
  #sleepers = 0;

  constructor(buffer: SharedArrayBuffer) {
    const capacity = ringCapacity(buffer);
    this.capacity = capacity;
    this.maxRecordLength = maxPayload(capacity);
    this.#mask = capacity - 1;
    this.#header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    this.#words = new Int32Array(buffer, HEADER_BYTES, capacity / 4);
    this.bytes = new Uint8Array(buffer, HEADER_BYTES, capacity);
    this.view = new DataView(buffer, HEADER_BYTES, capacity);
    this.#writeIndex = this.#published = Atomics.load(this.#header, WRITE);
    this.#cachedRead = Atomics.load(this.#header, READ);
  }

  /** Copies `payload` in as one record and publishes it. False when the ring
   * is full: nothing was written and the caller keeps the payload. */
  tryWrite(payload: Uint8Array): boolean {
    const offset = this.reserve(payload.length);
    if (offset < 0) return false;
    this.bytes.set(payload, offset);
    this.commit();
    return true;
  }

  /** Zero-copy write: `fill(this.bytes, offset)` writes `length` bytes at
   * `offset`, then the record is published. False when full (fill not called). */
  tryWriteWith(length: number, fill: RingFill): boolean {
    const offset = this.reserve(length);
    if (offset < 0) return false;
    fill(this.bytes, offset);
    this.commit();
    return true;
  }

  /** Reserves a record of `length` payload bytes and returns the offset of
   * its payload in `bytes`/`view`, or -1 when it does not fit now. The record
   * is invisible to the consumer until commit(); several reserves may share
   * one commit (producer-side batching). Throws RangeError above
   * maxRecordLength: such a record could never fit. */
  reserve(length: number): number {
    if (length >>> 0 !== length || length > this.maxRecordLength) this.#rejectLength(length);
    const capacity = this.capacity;
    const total = recordBytes(length);
    let w = this.#writeIndex;
    const pos = w & this.#mask;
    const tail = capacity - pos;
    const need = total <= tail ? total : tail + total;
    if (capacity - ((w - this.#cachedRead) | 0) < need) {
      this.#cachedRead = Atomics.load(this.#header, READ);
      if (capacity - ((w - this.#cachedRead) | 0) < need) return -1;
    }
    let at = pos;
    if (total > tail) {
      // Keep every record contiguous: mark the tail as padding, start at 0.
      this.#words[pos >> 2] = PADDING;
      w = (w + tail) | 0;
      at = 0;
    }
    this.#words[at >> 2] = length;
    this.#writeIndex = (w + total) | 0;
    return at + 4;
  }

  /** Publishes every reserved record with one Atomics.store, and wakes the
   * consumer only if it is asleep (one notify per sleep, not per record). */
  commit(): void {
    const w = this.#writeIndex;
    if (w === this.#published) return;
    this.#published = w;
    const header = this.#header;
    Atomics.store(header, WRITE, w);
    // Seq-cst store then load, mirrored by the consumer (flag store then WRITE
    // load): either it sees the new WRITE, or this load sees its flag.
    if (Atomics.load(header, CONSUMER_SLEEPING) !== 0 && Atomics.compareExchange(header, CONSUMER_SLEEPING, 1, 0) === 1) {
      Atomics.notify(header, WRITE);
      this.notifies++;
    }
  }

  /** Whether a record of `length` payload bytes fits now. */
  canWrite(length: number): boolean {
    if (length >>> 0 !== length || length > this.maxRecordLength) this.#rejectLength(length);
    return this.#fits(length, Atomics.load(this.#header, READ));
  }

  /** Bytes not holding unread records. A record also needs its 4-byte header
   * and, near the end of the data area, may need the tail skipped: use
   * canWrite() to ask about one record. */
  freeBytes(): number {
    return this.capacity - ((this.#writeIndex - Atomics.load(this.#header, READ)) | 0);
  }

  usage(): RingUsage {
    return { capacity: this.capacity, used: usedBytes(this.#header, this.capacity) };
  }

  /** Commits what is reserved (the consumer cannot free what it cannot
   * see), then resolves true once a record of `length` payload bytes fits,
   * false if `timeoutMs` passes first or the ring is closed. Never blocks the
   * thread (Atomics.waitAsync); the consumer notifies only while this is
   * pending. */
  waitForSpace(length: number, timeoutMs = Infinity): Promise<boolean> {
    this.commit();
    if (!this.canWrite(length)) return this.#sleepForSpace(length, timeoutMs);
    return Promise.resolve(true);
  }

  /** Marks the ring closed and wakes every waiter on both sides. Records
   * already committed stay readable. */
  close(): void {
    Atomics.store(this.#header, CLOSED, 1);
    Atomics.notify(this.#header, WRITE);
    Atomics.notify(this.#header, READ);
  }

  get closed(): boolean {
    return Atomics.load(this.#header, CLOSED) !== 0;
  }

  #fits(length: number, read: number): boolean {
    this.#cachedRead = read;
    const total = recordBytes(length);
    const tail = this.capacity - (this.#writeIndex & this.#mask);
    return this.capacity - ((this.#writeIndex - read) | 0) >= (total <= tail ? total : tail + total);
  }

  async #sleepForSpace(length: number, timeoutMs: number): Promise<boolean> {
    const header = this.#header;
    const deadline = timeoutMs === Infinity ? Infinity : performance.now() + timeoutMs;
    this.#sleepers++;
    try {
      for (;;) {
        Atomics.store(header, PRODUCER_SLEEPING, 1);
        const read = Atomics.load(header, READ);
        if (this.#fits(length, read)) return true;
        if (Atomics.load(header, CLOSED) !== 0) return false;
        const left = deadline - performance.now();
        if (left <= 0) return false;
        await waitChange(header, READ, read, left);
      }
    } finally {
      if (--this.#sleepers === 0) Atomics.store(header, PRODUCER_SLEEPING, 0);
    }
  }

  #rejectLength(length: number): never {
    throw new RangeError(
      `ring: a record of ${length} bytes is not allowed; the maximum for a ${this.capacity}-byte ring is ${this.maxRecordLength} bytes (capacity / 2 - 4)`,
    );
  }
}
