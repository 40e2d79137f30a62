// One model group's FIFO of waiting requests: an intrusive doubly-linked
// list, so a cancel or a grant from the middle is O(1) and nothing is shifted
// or copied on the hot path (the undici fixed-queue idea, plus removal).
/** What a queue entry carries for the queue: its links and its admission order. */
export interface QueueLink<T> {
  prev: T | null;
  next: T | null;
  /** Admission order; insertBySeq keeps it increasing. */
  readonly seq: number;
}

export class WaitQueue<T extends QueueLink<T>> {
  head: T | null = null;
  tail: T | null = null;
  length = 0;

  push(item: T): void {
    item.prev = this.tail;
    item.next = null;
    if (this.tail === null) this.head = item;
    else this.tail.next = item;
    this.tail = item;
    this.length++;
  }

  /**
   * Inserts keeping `seq` increasing. Used by re-admission, whose item is
   * older than most waiters, so the walk from the head is short.
   */
  insertBySeq(item: T): void {
    let after: T | null = null;
    let cur = this.head;
    while (cur !== null && cur.seq < item.seq) {
      after = cur;
      cur = cur.next;
    }
    if (after === null) {
      item.prev = null;
      item.next = this.head;
      if (this.head === null) this.tail = item;
      else this.head.prev = item;
      this.head = item;
    } else {
      item.prev = after;
      item.next = after.next;
      if (after.next === null) this.tail = item;
      else after.next.prev = item;
      after.next = item;
    }
    this.length++;
  }

  remove(item: T): void {
    if (item.prev === null) this.head = item.next;
    else item.prev.next = item.next;
    if (item.next === null) this.tail = item.prev;
    else item.next.prev = item.prev;
    item.prev = null;
    item.next = null;
    this.length--;
  }
}
