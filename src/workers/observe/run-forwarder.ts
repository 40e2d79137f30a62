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
  /** The timer or immediate that will flush, while one is pending. */
  #pending: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** The timer's or immediate's callback: it has fired, so there is nothing to clear. */
  readonly #fire = (): void => {
    this.#pending = undefined;
    this.flush();
  };

  /** delayMs 0: at the end of the turn (setImmediate); otherwise after that many ms. */
  constructor(post: (events: RunEvent[]) => void, delayMs = 0) {
    this.#post = post;
    this.#delayMs = delayMs;
  }

  run(event: RunEvent): void {
    this.#batch.push(event);
    if (this.#pending !== undefined) return;
    this.#pending = this.#delayMs > 0 ? setTimeout(this.#fire, this.#delayMs) : setImmediate(this.#fire);
  }

  /** Sends what was reported since the last flush; the timer or immediate calls it, and the plane's close. */
  flush(): void {
    const pending = this.#pending;
    if (pending !== undefined) {
      // Called early (close, a fault): the pending one would find nothing to send.
      this.#pending = undefined;
      if (this.#delayMs > 0) clearTimeout(pending as NodeJS.Timeout);
      else clearImmediate(pending as NodeJS.Immediate);
    }
    if (this.#batch.length === 0) return;
    const batch = this.#batch;
    this.#batch = [];
    this.#post(batch);
  }
}
