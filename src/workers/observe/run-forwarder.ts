// An I/O worker's run reports on their way to the main thread's run
// records. The records need every report, subscribers or not, so they
// cannot ride on the subscriber-gated event forwarding; one postMessage per
// report would cost more than the request's own work, so the reports of one
// event-loop turn go together as one message (`runs`), in order.
import type { RunEvent, RunSink } from '../../contract/events.js';

export class RunForwarder implements RunSink {
  readonly #post: (events: RunEvent[]) => void;
  #batch: RunEvent[] = [];
  #flushQueued = false;

  constructor(post: (events: RunEvent[]) => void) {
    this.#post = post;
  }

  run(event: RunEvent): void {
    this.#batch.push(event);
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    setImmediate(flushRuns, this);
  }

  /** Sends what this turn reported; called once per turn (and before the worker closes). */
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
