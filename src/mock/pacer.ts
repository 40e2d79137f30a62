// Shared timers for the mock's streams. Ten thousand streams at 5 tokens/s
// would otherwise be 50,000 setTimeout calls a second (a Timeout object and a
// timer-list insert each, and Node runs the tick queue between every two of
// them). Here a stream waiting `delayMs` joins the queue of that delay: entries
// of one queue fall due in the order they were added, so one timer per queue,
// armed for its head, wakes every stream that is due (within SLACK_MS) in one
// callback. A stream's own timing is kept: due = when it asked + delayMs.

/** What a queue wakes. `pacedClosed`: gone while it waited (skipped, already cancelled). */
export interface PacedStream {
  readonly pacedClosed: boolean;
  onPaced(): void;
}

/** Entries due this close to now run in the current wake-up rather than 1 ms later. */
const SLACK_MS = 0.5;
/** Consumed entries are dropped from the front once this many have piled up (amortised O(1)). */
const COMPACT_AT = 4096;

class DelayQueue {
  readonly #pacer: Pacer;
  readonly #delayMs: number;
  #streams: (PacedStream | undefined)[] = [];
  #due: number[] = [];
  #head = 0;
  /** Entries not yet run nor cancelled; at 0 the timer is cleared so a closed mock keeps no process alive. */
  #live = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(pacer: Pacer, delayMs: number) {
    this.#pacer = pacer;
    this.#delayMs = delayMs;
  }

  add(stream: PacedStream): void {
    const now = performance.now();
    this.#streams.push(stream);
    this.#due.push(now + this.#delayMs);
    this.#live++;
    if (this.#timer === undefined) this.#arm(now);
  }

  /** A queued stream closed: it will be skipped when due. */
  cancel(): void {
    if (--this.#live > 0) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#streams = [];
    this.#due = [];
    this.#head = 0;
    this.#pacer.drop(this.#delayMs, this);
  }

  fire(): void {
    this.#timer = undefined;
    const streams = this.#streams;
    const due = this.#due;
    // Only entries present now: a stream re-queued by its own wake-up waits a full delay.
    const end = streams.length;
    const until = performance.now() + SLACK_MS;
    let head = this.#head;
    while (head < end && due[head] <= until) {
      const stream = streams[head] as PacedStream;
      streams[head] = undefined;
      head++;
      if (stream.pacedClosed) continue;
      this.#live--;
      stream.onPaced();
    }
    if (this.#streams !== streams) return; // emptied by a cancel() during a wake-up
    this.#head = head;
    if (this.#live === 0) {
      this.#streams = [];
      this.#due = [];
      this.#head = 0;
      this.#pacer.drop(this.#delayMs, this);
      return;
    }
    if (head >= COMPACT_AT && head * 2 >= streams.length) {
      streams.copyWithin(0, head);
      streams.length -= head;
      due.copyWithin(0, head);
      due.length -= head;
      this.#head = 0;
    }
    if (this.#timer === undefined) this.#arm(performance.now());
  }

  #arm(now: number): void {
    const wait = this.#due[this.#head] - now;
    this.#timer = setTimeout(onQueueTimer, wait < 1 ? 1 : Math.round(wait), this);
  }
}

function onQueueTimer(queue: DelayQueue): void {
  queue.fire();
}

/** One DelayQueue per distinct delay in use. */
export class Pacer {
  readonly #queues = new Map<number, DelayQueue>();

  /** Wakes `stream` (onPaced) after delayMs; returns the queue, to cancel() if the stream closes first. */
  after(delayMs: number, stream: PacedStream): DelayQueue {
    let queue = this.#queues.get(delayMs);
    if (queue === undefined) {
      queue = new DelayQueue(this, delayMs);
      this.#queues.set(delayMs, queue);
    }
    queue.add(stream);
    return queue;
  }

  drop(delayMs: number, queue: DelayQueue): void {
    if (this.#queues.get(delayMs) === queue) this.#queues.delete(delayMs);
  }
}

export type { DelayQueue };
