// One model group's FIFO of waiting requests: an intrusive doubly-linked
// list, so a cancel or a grant from the middle is O(1) and nothing is shifted
// or copied on the hot path (the undici fixed-queue idea, plus removal).
import type { GroupState } from './state.js';

/** A request waiting in its group's queue. Owned by exactly one WaitQueue. */
export class QueueItem {
  prev: QueueItem | null = null;
  next: QueueItem | null = null;
  /** Position in the DeadlineHeap; -1 when not in it. */
  heapIndex = -1;

  constructor(
    readonly requestId: number,
    readonly group: GroupState,
    /** Admission order across the whole scheduler; a re-admission keeps its original. */
    readonly seq: number,
    readonly estimatedTokens: number,
    readonly directNodeId: string | undefined,
    readonly enqueuedAt: number,
    readonly deadline: number,
    /** 0 for a first admission, 1 for the one re-admission after a stale fence or a retry. */
    readonly attempt: number,
    /** A retry never goes back to the provider that just failed it. */
    readonly excludeProviderId: string | undefined = undefined,
  ) {}
}

export class WaitQueue {
  head: QueueItem | null = null;
  tail: QueueItem | null = null;
  length = 0;

  push(item: QueueItem): void {
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
  insertBySeq(item: QueueItem): void {
    let after: QueueItem | null = null;
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

  remove(item: QueueItem): void {
    if (item.prev === null) this.head = item.next;
    else item.prev.next = item.next;
    if (item.next === null) this.tail = item.prev;
    else item.next.prev = item.prev;
    item.prev = null;
    item.next = null;
    this.length--;
  }
}
