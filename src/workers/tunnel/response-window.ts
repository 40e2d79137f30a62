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
  private owed = 0;
  private readonly batch: number;
  /** Sizes of writes not yet flushed, oldest first (flush callbacks come in order). */
  private unflushed: number[] = [];
  private head = 0;

  constructor(readonly size: number) {
    this.batch = Math.max(1, Math.floor(size / BATCH_DIVISOR));
  }

  /** Records `bytes` arriving; false when the node overran its window. */
  receive(bytes: number): boolean {
    this.outstanding += bytes;
    if (this.outstanding > this.size) return false;
    this.unflushed.push(bytes);
    return true;
  }

  /** The oldest unflushed write reached the kernel; returns credit to grant now (0 = keep batching). */
  flushed(): number {
    if (this.head >= this.unflushed.length) return 0;
    this.owed += this.unflushed[this.head++];
    if (this.head === this.unflushed.length) {
      this.unflushed.length = 0;
      this.head = 0;
    } else if (this.head >= COMPACT_AFTER && this.head * 2 >= this.unflushed.length) {
      // A client that never catches up never empties the list: drop the flushed prefix.
      this.unflushed.copyWithin(0, this.head);
      this.unflushed.length -= this.head;
      this.head = 0;
    }
    if (this.owed < this.batch) return 0;
    const credit = this.owed;
    this.owed = 0;
    this.outstanding -= credit;
    return credit;
  }

  /** Bytes written to the client socket and still buffered in the edge. */
  get buffered(): number {
    let sum = 0;
    for (let i = this.head; i < this.unflushed.length; i++) sum += this.unflushed[i];
    return sum;
  }
}
