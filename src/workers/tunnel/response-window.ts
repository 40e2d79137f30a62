// Edge side of per-tunnel flow control. The node may have at most `size`
// response bytes outstanding: sent to us but not yet taken by the client's
// socket. A byte is taken when its write has been flushed to the kernel, so
// what the edge buffers for one tunnel never exceeds its window, and a slow
// client holds back only its own tunnel's provider, never the node's stream.

/** Credit goes back in batches of a quarter window: fewer messages, no stall. */
const BATCH_DIVISOR = 4;
/** Flushed entries kept at the front of the list before it is compacted. */
const COMPACT_AFTER = 1024;

export class ResponseWindow {
  /** Bytes received from the node and not yet credited back. */
  outstanding = 0;
  /** Flushed bytes not yet credited back (waiting to fill a batch). */
  #owed = 0;
  readonly #batch: number;
  /** Sizes of writes not yet flushed, oldest first (flush callbacks come in order). */
  #unflushed: number[] = [];
  #head = 0;
  /** Sum of `unflushed` from `head`: what `buffered` reports, kept as it changes so the high-water mark is exact. */
  #buffered = 0;
  #highWaterBuffered = 0;
  #highWaterOutstanding = 0;

  constructor(readonly size: number) {
    this.#batch = Math.max(1, Math.floor(size / BATCH_DIVISOR));
  }

  /** Records `bytes` arriving; false when the node overran its window. */
  receive(bytes: number): boolean {
    this.outstanding += bytes;
    // Recorded before the check: an overrun shows in the mark.
    if (this.outstanding > this.#highWaterOutstanding) this.#highWaterOutstanding = this.outstanding;
    if (this.outstanding > this.size) return false;
    this.#unflushed.push(bytes);
    this.#buffered += bytes;
    if (this.#buffered > this.#highWaterBuffered) this.#highWaterBuffered = this.#buffered;
    return true;
  }

  /**
   * The chunk just received went out as one write of `bytes` instead (an
   * event stream writes whole events: bytes held from earlier chunks join
   * it, its own unfinished event waits); 0: nothing was written, all of it
   * is held. Held bytes stay outstanding, uncredited, until the write that
   * carries them flushes: the window bounds them too.
   */
  wroteLast(bytes: number): void {
    const last = this.#unflushed.length - 1;
    this.#buffered += bytes - this.#unflushed[last];
    if (bytes === 0) this.#unflushed.pop();
    else this.#unflushed[last] = bytes;
    if (this.#buffered > this.#highWaterBuffered) this.#highWaterBuffered = this.#buffered;
  }

  /** The oldest unflushed write reached the kernel; returns credit to grant now (0 = keep batching). */
  flushed(): number {
    if (this.#head >= this.#unflushed.length) return 0;
    const bytes = this.#unflushed[this.#head++];
    this.#owed += bytes;
    this.#buffered -= bytes;
    if (this.#head === this.#unflushed.length) {
      this.#unflushed.length = 0;
      this.#head = 0;
    } else if (this.#head >= COMPACT_AFTER && this.#head * 2 >= this.#unflushed.length) {
      // A client that never catches up never empties the list: drop the flushed prefix.
      this.#unflushed.copyWithin(0, this.#head);
      this.#unflushed.length -= this.#head;
      this.#head = 0;
    }
    if (this.#owed < this.#batch) return 0;
    const credit = this.#owed;
    this.#owed = 0;
    this.outstanding -= credit;
    return credit;
  }

  /** Entries in the write-size list, flushed prefix included (tests check it stays bounded). */
  get trackedWrites(): number {
    return this.#unflushed.length;
  }

  /** Bytes written to the client socket and still buffered in the edge. */
  get buffered(): number {
    return this.#buffered;
  }

  /** The most bytes ever buffered at once for this tunnel (every change counted, not sampled). */
  get highWaterBuffered(): number {
    return this.#highWaterBuffered;
  }

  /** The most bytes the node ever had outstanding on this tunnel, an overrun included. */
  get highWaterOutstanding(): number {
    return this.#highWaterOutstanding;
  }
}
