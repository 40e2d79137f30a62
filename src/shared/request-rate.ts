// An API key's request rate (auth.api_keys[].requests_per_minute) as a token
// bucket: it holds up to a minute's worth of requests and refills at the
// rate, so a key idle for a minute may send its whole minute at once and a
// steady key gets exactly its rate. One bucket per key for the whole edge:
// the data path's own with workers.count 0, the scheduler thread's with I/O
// workers (each admission carries the limit its worker's config has).

/** A key's bucket; the limit may change under it (a refresh): tokens it holds stay, capped to the new size. */
export class RequestRate {
  #tokens: number;
  #perMinute: number;
  #at: number;

  constructor(perMinute: number, nowMs: number) {
    this.#perMinute = perMinute;
    this.#tokens = perMinute;
    this.#at = nowMs;
  }

  /**
   * Takes one request's token at `nowMs` (any monotonic ms clock): 0 when
   * taken, else how many ms until one is there (nothing taken). A changed
   * `perMinute` (a refresh) applies from now on.
   */
  take(nowMs: number, perMinute: number): number {
    this.retune(perMinute, nowMs);
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - this.#tokens) * 60_000) / this.#perMinute);
  }

  /**
   * The limit is `perMinute` from `nowMs` on: the time until now refills at
   * the old rate. A refresh tells it at once, not at the key's next request:
   * else the wait since the refresh would refill at the old rate, and a key
   * just raised be refused what the new rate gives.
   */
  retune(perMinute: number, nowMs: number): void {
    this.#refill(nowMs);
    if (perMinute === this.#perMinute) return;
    this.#perMinute = perMinute;
    if (this.#tokens > perMinute) this.#tokens = perMinute;
  }

  #refill(nowMs: number): void {
    const elapsed = nowMs - this.#at;
    this.#at = nowMs;
    if (elapsed > 0) this.#tokens = Math.min(this.#perMinute, this.#tokens + (elapsed * this.#perMinute) / 60_000);
  }
}

/** Retry-After seconds for a wait of `ms` (a key's next request; queue_full's: the queue timeout, the longest a waiter ahead holds its place): whole seconds, at least 1. */
export function retryAfterSecOf(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
