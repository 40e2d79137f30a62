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
    // Only the grants of the last minute count: an old burst would make a slow queue look fast.
    let recent = 0;
    let oldest = newest;
    for (let i = 1; i <= this.#count; i++) {
      const at = this.#at[(this.#next + SAMPLES - i) % SAMPLES];
      if (now - at > MAX_AGE_MS) break;
      recent++;
      oldest = at;
    }
    if (recent < MIN_SAMPLES) return undefined;
    // The window runs to now: a queue that stopped moving reads as slow, not as its old pace.
    const span = Math.max(now, newest) - oldest;
    if (!(span > 0)) return undefined;
    return (recent - 1) / span;
  }

  /** Milliseconds until `dispatches` more grants at the measured rate; undefined when unknown. */
  etaMs(dispatches: number, now: number): number | undefined {
    const rate = this.ratePerMs(now);
    return rate === undefined ? undefined : dispatches / rate;
  }
}
