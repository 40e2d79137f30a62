// An alias's measured dispatch rate: the times of its last few grants. It
// turns into the Retry-After of a refusal (how long until the queue has moved
// on) and the ETA of a queue position, instead of a constant. Too few or too
// old samples give no rate, and the caller falls back to its constant.
const SAMPLES = 16;
/** Fewer grants than this in the window say nothing about a rate. */
const MIN_SAMPLES = 4;
/** Grants older than this describe another load. */
const MAX_AGE_MS = 60_000;

export class DrainMeter {
  readonly #at = new Float64Array(SAMPLES);
  #count = 0;
  #next = 0;

  dispatched(now: number): void {
    this.#at[this.#next] = now;
    this.#next = (this.#next + 1) % SAMPLES;
    if (this.#count < SAMPLES) this.#count++;
  }

  /** Grants per millisecond over the recent window; undefined when unknown. */
  ratePerMs(now: number): number | undefined {
    if (this.#count < MIN_SAMPLES) return undefined;
    const newest = this.#at[(this.#next + SAMPLES - 1) % SAMPLES];
    const oldest = this.#at[this.#count < SAMPLES ? 0 : this.#next];
    if (now - newest > MAX_AGE_MS) return undefined;
    // The window runs to now: a queue that stopped moving reads as slow, not as its old pace.
    const span = Math.max(now, newest) - oldest;
    if (!(span > 0)) return undefined;
    return (this.#count - 1) / span;
  }

  /** Milliseconds until `dispatches` more grants at the measured rate; undefined when unknown. */
  etaMs(dispatches: number, now: number): number | undefined {
    const rate = this.ratePerMs(now);
    return rate === undefined ? undefined : dispatches / rate;
  }
}
