// Every queued item across all groups, ordered by deadline, so expiry and
// nextDeadline() are O(1) to peek and O(log n) to change. A heap rather than
// per-group scans because deadlines are not monotone within a group: a
// queue_timeout lowered by config, or a re-admitted item, can expire before
// items queued ahead of it.
import type { QueueItem } from './state.js';

function earlier(a: QueueItem, b: QueueItem): boolean {
  return a.deadline < b.deadline || (a.deadline === b.deadline && a.seq < b.seq);
}

export class DeadlineHeap {
  readonly #items: QueueItem[] = [];

  get size(): number {
    return this.#items.length;
  }

  peek(): QueueItem | undefined {
    return this.#items[0];
  }

  push(item: QueueItem): void {
    item.heapIndex = this.#items.length;
    this.#items.push(item);
    this.#up(item.heapIndex);
  }

  remove(item: QueueItem): void {
    const i = item.heapIndex;
    if (i < 0) return;
    const last = this.#items.pop() as QueueItem;
    item.heapIndex = -1;
    if (last === item) return;
    this.#items[i] = last;
    last.heapIndex = i;
    this.#up(i);
    this.#down(last.heapIndex);
  }

  /** For invariant checks: true when every parent is due no later than its children. */
  isValid(): boolean {
    const items = this.#items;
    for (let i = 0; i < items.length; i++) {
      if (items[i].heapIndex !== i) return false;
      if (i > 0 && earlier(items[i], items[(i - 1) >> 1])) return false;
    }
    return true;
  }

  #up(i: number): void {
    const items = this.#items;
    const item = items[i];
    while (i > 0) {
      const parentIndex = (i - 1) >> 1;
      const parent = items[parentIndex];
      if (!earlier(item, parent)) break;
      items[i] = parent;
      parent.heapIndex = i;
      i = parentIndex;
    }
    items[i] = item;
    item.heapIndex = i;
  }

  #down(i: number): void {
    const items = this.#items;
    const n = items.length;
    const item = items[i];
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const child = r < n && earlier(items[r], items[l]) ? r : l;
      if (!earlier(items[child], item)) break;
      items[i] = items[child];
      items[i].heapIndex = i;
      i = child;
    }
    items[i] = item;
    item.heapIndex = i;
  }
}
