// Reading side of an SPSC ring (layout: spsc-ring.ts). Owned by one thread.
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
import type { RingUsage } from './ring-producer.js';
import { waitChange } from './wait.js';

/** Receives one record as a view into the ring, valid only during the call. */
export type RingViewHandler = (view: Uint8Array) => void;
/** Receives one record as (payload offset, length) into consumer.bytes/view:
 * no view allocated per record. Valid only during the call. */
export type RingRecordHandler = (offset: number, length: number) => void;

export class RingConsumer {
  readonly capacity: number;
  /** The data area; drainInPlace() hands out offsets into it. */
  readonly bytes: Uint8Array;
  /** The data area as a DataView, for decoding fixed layouts in place. */
  readonly view: DataView;
  /** Atomics.notify calls made to wake a sleeping producer (metrics, tests). */
  notifies = 0;

  readonly #header: Int32Array;
  readonly #words: Int32Array;
  readonly #mask: number;
  readonly #maxLength: number;
  /** Start of the next unread record (past records handed out by read()). */
  #readIndex: number;
  /** Last value stored to READ: records before it are free for the producer. */
  #published: number;
  /** Last WRITE value seen; only reloaded when everything up to it is read. */
  #cachedWrite: number;
  #sleepers = 0;

  constructor(buffer: SharedArrayBuffer) {
    const capacity = ringCapacity(buffer);
    this.capacity = capacity;
    this.#maxLength = maxPayload(capacity);
    this.#mask = capacity - 1;
    this.#header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    this.#words = new Int32Array(buffer, HEADER_BYTES, capacity / 4);
    this.bytes = new Uint8Array(buffer, HEADER_BYTES, capacity);
    this.view = new DataView(buffer, HEADER_BYTES, capacity);
    this.#readIndex = this.#published = Atomics.load(this.#header, READ);
    this.#cachedWrite = Atomics.load(this.#header, WRITE);
  }

  /** Next record as a view into the ring (no copy), or undefined when empty.
   * The view stays valid until the next read(), drain*(), release() or
   * waitForData() call, which hands its bytes back to the producer. */
  read(): Uint8Array | undefined {
    if (this.#readIndex !== this.#published) this.#publish();
    let r = this.#readIndex;
    if (r === this.#cachedWrite) {
      this.#cachedWrite = Atomics.load(this.#header, WRITE);
      if (r === this.#cachedWrite) return undefined;
    }
    let pos = r & this.#mask;
    let length = this.#words[pos >> 2];
    if (length === PADDING) {
      r = (r + this.capacity - pos) | 0;
      pos = 0;
      length = this.#words[0];
    }
    if (length >>> 0 > this.#maxLength) this.#corrupt(length);
    this.#readIndex = (r + recordBytes(length)) | 0;
    return this.bytes.subarray(pos + 4, pos + 4 + length);
  }

  /** Hands the records returned by read() back to the producer. */
  release(): void {
    if (this.#readIndex !== this.#published) this.#publish();
  }

  /** Calls `handler` with a view of each record committed so far, up to
   * `max`, then frees them all with one Atomics.store. If `handler` throws,
   * the records up to and including that one are consumed and the error
   * propagates. Not reentrant. Returns the number of records handled. */
  drain(handler: RingViewHandler, max = 0x7fffffff): number {
    // One closure per batch, not per record: the same walk as drainInPlace.
    const bytes = this.bytes;
    return this.drainInPlace((offset, length) => handler(bytes.subarray(offset, offset + length)), max);
  }

  /** drain() without a view per record: `handler(offset, length)` reads the
   * payload from `bytes`/`view`. The allocation-free path for fixed records. */
  drainInPlace(handler: RingRecordHandler, max = 0x7fffffff): number {
    const end = (this.#cachedWrite = Atomics.load(this.#header, WRITE));
    let r = this.#readIndex;
    let count = 0;
    try {
      while (r !== end && count < max) {
        let pos = r & this.#mask;
        let length = this.#words[pos >> 2];
        if (length === PADDING) {
          r = (r + this.capacity - pos) | 0;
          pos = 0;
          length = this.#words[0];
        }
        if (length >>> 0 > this.#maxLength) this.#corrupt(length);
        r = (r + recordBytes(length)) | 0;
        count++;
        handler(pos + 4, length);
      }
    } finally {
      this.#readIndex = r;
      if (r !== this.#published) this.#publish();
    }
    return count;
  }

  /** Whether a committed record is waiting to be read. */
  hasData(): boolean {
    if (this.#readIndex !== this.#cachedWrite) return true;
    this.#cachedWrite = Atomics.load(this.#header, WRITE);
    return this.#readIndex !== this.#cachedWrite;
  }

  usage(): RingUsage {
    return { capacity: this.capacity, used: usedBytes(this.#header, this.capacity) };
  }

  /** Releases records returned by read(), then resolves true once a record
   * is readable, false if `timeoutMs` passes first or the ring is closed and
   * empty. Never blocks (Atomics.waitAsync); the producer notifies only while
   * this is pending. Resolves in a microtask when data is already there, so a
   * drain loop that must let other work run yields (setImmediate) itself. */
  waitForData(timeoutMs = Infinity): Promise<boolean> {
    this.release();
    if (this.hasData()) return Promise.resolve(true);
    return this.#sleepForData(timeoutMs);
  }

  /** Marks the ring closed and wakes every waiter on both sides. */
  close(): void {
    Atomics.store(this.#header, CLOSED, 1);
    Atomics.notify(this.#header, WRITE);
    Atomics.notify(this.#header, READ);
  }

  get closed(): boolean {
    return Atomics.load(this.#header, CLOSED) !== 0;
  }

  #publish(): void {
    const header = this.#header;
    this.#published = this.#readIndex;
    Atomics.store(header, READ, this.#readIndex);
    // Mirror of RingProducer.commit(): notify only a producer that sleeps.
    if (Atomics.load(header, PRODUCER_SLEEPING) !== 0 && Atomics.compareExchange(header, PRODUCER_SLEEPING, 1, 0) === 1) {
      Atomics.notify(header, READ);
      this.notifies++;
    }
  }

  async #sleepForData(timeoutMs: number): Promise<boolean> {
    const header = this.#header;
    const deadline = timeoutMs === Infinity ? Infinity : performance.now() + timeoutMs;
    this.#sleepers++;
    try {
      for (;;) {
        Atomics.store(header, CONSUMER_SLEEPING, 1);
        const write = Atomics.load(header, WRITE);
        if (write !== this.#readIndex) return true;
        if (Atomics.load(header, CLOSED) !== 0) return false;
        const left = deadline - performance.now();
        if (left <= 0) return false;
        await waitChange(header, WRITE, write, left);
      }
    } finally {
      if (--this.#sleepers === 0) Atomics.store(header, CONSUMER_SLEEPING, 0);
    }
  }

  #corrupt(length: number): never {
    throw new Error(`ring: corrupt record length ${length} (more than one producer, or a foreign writer?)`);
  }
}
