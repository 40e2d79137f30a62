// A warning anyone on the network can trigger (a request without a token, a
// node registering with a wrong one) is logged at most once an interval,
// with the count of those left out since: a flood of them must not become
// a flood of log lines.

export class LogThrottle {
  #unlogged = 0;
  #lastAt = -Infinity;

  constructor(readonly intervalMs: number) {}

  /** Whether to log this one: undefined to leave it out, else how many were left out since the last line. */
  take(now = performance.now()): number | undefined {
    if (now - this.#lastAt < this.intervalMs) {
      this.#unlogged++;
      return undefined;
    }
    this.#lastAt = now;
    const left = this.#unlogged;
    this.#unlogged = 0;
    return left;
  }
}
