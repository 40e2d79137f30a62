// An API key's request rate (auth.api_keys[].requests_per_minute) and token
// rate (.tokens_per_minute), each a token bucket: it holds up to a minute's
// worth and refills at the rate, so a key idle for a minute may send its
// whole minute at once and a steady key gets exactly its rate. One bucket of
// each per key for the whole edge: the data path's own with workers.count 0,
// the scheduler thread's with I/O workers (each admission carries the
// request limit its worker's config has; the token limit is read from the
// scheduler thread's config).
//
// A token bucket is charged in two steps, since a response's size is known
// only at its end: a request is admitted while the bucket holds a token,
// reserving its estimated prompt, and settled when it ends with what its
// provider reported (prompt + completion), or nothing when it never reached
// one. The bucket may go below 0: a request larger than what is left, or
// than a minute, is still served, and the key's next waits for the debt.

/** A key's bucket (of requests or tokens); the limit may change under it (a refresh): tokens it holds stay, capped to the new size. */
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
    return this.reserve(nowMs, perMinute, 1);
  }

  /**
   * Takes `cost` while the bucket holds at least one: 0 when taken (it may
   * go below 0), else ms until it holds one (nothing taken).
   */
  reserve(nowMs: number, perMinute: number, cost: number): number {
    this.retune(perMinute, nowMs);
    if (this.#tokens >= 1) {
      this.#tokens -= cost;
      return 0;
    }
    return Math.ceil(((1 - this.#tokens) * 60_000) / this.#perMinute);
  }

  /** What the bucket holds at `nowMs` (below 0: a debt), the limit `perMinute` from now on. */
  level(nowMs: number, perMinute: number): number {
    this.retune(perMinute, nowMs);
    return this.#tokens;
  }

  /** A request used `delta` more than it reserved (negative: less, given back); never more than a minute's is held. */
  settle(delta: number, nowMs: number): void {
    this.#refill(nowMs);
    this.#tokens = Math.min(this.#perMinute, this.#tokens - delta);
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
    // A caller's clock read before a later one's (a retry with the time taken before it): the refill is not undone.
    if (elapsed <= 0) return;
    this.#at = nowMs;
    this.#tokens = Math.min(this.#perMinute, this.#tokens + (elapsed * this.#perMinute) / 60_000);
  }
}

/** Retry-After seconds for a wait of `ms` (a key's next request; queue_full's: the queue timeout, the longest a waiter ahead holds its place): whole seconds, at least 1. */
export function retryAfterSecOf(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
