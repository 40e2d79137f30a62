// An I/O worker's run reports on their way to the main thread's run
// records. The records need every report, subscribers or not, so they
// cannot ride on the subscriber-gated event forwarding; one postMessage per
// report would cost more than the request's own work, so reports go together
// as one message (`runs`), in order: those of one event-loop turn, or, with
// a delay, those of every turn until it runs out. In an I/O worker each
// message costs a structured clone and a wake-up on both threads, whatever
// its size, so workers wait RUN_REPORT_DELAY_MS (docs/architecture.md).
import type { RunEvent, RunSink } from '../../contract/events.js';

/** How long an I/O worker holds run reports before sending them: the run records may lag the data path by this much. */
export const RUN_REPORT_DELAY_MS = 2;

export class RunForwarder implements RunSink {
  readonly #post: (events: RunEvent[]) => void;
  readonly #delayMs: number;
  #batch: RunEvent[] = [];
  #flushQueued = false;

  /** delayMs 0: at the end of the turn (setImmediate); otherwise after that many ms. */
  constructor(post: (events: RunEvent[]) => void, delayMs = 0) {
    this.#post = post;
    this.#delayMs = delayMs;
  }

  run(event: RunEvent): void {
    this.#batch.push(event);
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    if (this.#delayMs > 0) setTimeout(flushRuns, this.#delayMs, this);
    else setImmediate(flushRuns, this);
  }

  /** Sends what was reported since the last flush; the timer or immediate calls it, and the plane's close. */
  flush(): void {
    this.#flushQueued = false;
    if (this.#batch.length === 0) return;
    const batch = this.#batch;
    this.#batch = [];
    this.#post(batch);
  }
}

function flushRuns(forwarder: RunForwarder): void {
  forwarder.flush();
}
