// Capped exponential backoff with full jitter (the delay is uniform in
// [0, min(max, initial * 2^attempt)]), so a fleet of agents that lost the
// edge at the same moment does not reconnect in lock-step. Fixed-pace
// delays (after a rejection, before re-opening a lane) are jittered too,
// within their upper half, so they keep their pace without the lock-step.

export class Backoff {
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #random: () => number;
  #attempt = 0;

  constructor(initialMs: number, maxMs: number, random: () => number = Math.random) {
    this.#initialMs = initialMs;
    this.#maxMs = maxMs;
    this.#random = random;
  }

  /** The delay before the next attempt, in ms; each call widens the window until the cap. */
  next(): number {
    // 2^attempt stops growing once the window is at the cap, so it never overflows.
    const ceiling = Math.min(this.#maxMs, this.#initialMs * 2 ** this.#attempt);
    if (ceiling < this.#maxMs) this.#attempt++;
    return Math.floor(this.#random() * ceiling);
  }

  /** The slowest pace, jittered: uniform in [max/2, max] (after a rejection, which will not fix itself soon). */
  slowest(): number {
    return upperHalfJitter(this.#maxMs, this.#random);
  }

  /** After a successful registration the next failure starts from the initial window again. */
  reset(): void {
    this.#attempt = 0;
  }
}

/** A delay of about `ms` that never repeats in lock-step: uniform in [ms/2, ms]. */
export function upperHalfJitter(ms: number, random: () => number = Math.random): number {
  return Math.floor(ms / 2 + random() * (ms - ms / 2));
}
