// The three deadlines of a dispatched exchange on one timer: total
// (limits.tunnel_timeout_ms, from the first dispatch), time to first byte
// (limits.ttfb_timeout_ms, until response HEADERS, per attempt) and idle
// (limits.idle_timeout_ms, between frames once headers arrived). Frames
// only stamp a time; the timer is armed for the earliest deadline and, when
// it fires early because frames moved the idle deadline, re-armed for the
// rest. So a frame costs one clock read, never a timer reset.
import { performance } from 'node:perf_hooks';
import { Errors, type GatewayErrorSpec } from '../../shared/errors.js';

export interface DeadlineLimits {
  readonly tunnelTimeoutMs: number;
  /** 0 = off. */
  readonly ttfbTimeoutMs: number;
  /** 0 = off. */
  readonly idleTimeoutMs: number;
  /** SSE keepalive comments while a streaming request waits for headers; 0 = off. */
  readonly sseKeepaliveMs: number;
}

/** What the deadlines arm a timer for: the exchange keeps the handle (its finish clears it). */
export interface TimedExchange {
  timeout: NodeJS.Timeout | undefined;
  onTimeout(): void;
}

/** The timer fired for a keepalive, not a deadline: send one and re-arm. */
export const KEEPALIVE_DUE = Symbol('keepalive due');

function onDeadlineTimer(owner: TimedExchange): void {
  owner.onTimeout();
}

export class ExchangeDeadlines {
  /** performance.now() of the last frame from the node (HEADERS or DATA). */
  lastFrameAt = 0;
  readonly #startedAt: number;
  #dispatchedAt: number;
  /** When the armed timer fires. */
  #armedFor = Infinity;
  /** Keepalive interval for this exchange: only streaming requests get one. */
  readonly #keepaliveMs: number;
  #lastKeepaliveAt: number;

  readonly #limits: DeadlineLimits;

  constructor(limits: DeadlineLimits, now = performance.now(), streaming = false) {
    this.#limits = limits;
    this.#startedAt = now;
    this.#dispatchedAt = now;
    this.#lastKeepaliveAt = now;
    this.#keepaliveMs = streaming ? limits.sseKeepaliveMs : 0;
  }

  /** A new attempt was dispatched (a retry): time to first byte counts again; total does not. */
  redispatched(now = performance.now()): void {
    this.#dispatchedAt = now;
  }


  /**
   * Back in the queue (a retry, an overloaded provider's requeue): only the
   * total deadline runs there, since it spans retries; the wait must not
   * outlive it only to be dispatched to a provider and cut at once.
   */
  armTotal(owner: TimedExchange, now = performance.now()): void {
    if (owner.timeout !== undefined) clearTimeout(owner.timeout);
    const delay = Math.max(1, this.#startedAt + this.#limits.tunnelTimeoutMs - now);
    this.#armedFor = now + delay;
    owner.timeout = setTimeout(onDeadlineTimer, delay, owner);
  }

  /** The total deadline (limits.tunnel_timeout_ms from the first dispatch) has passed. */
  totalExpired(now = performance.now()): boolean {
    return now >= this.#startedAt + this.#limits.tunnelTimeoutMs;
  }

  /** (Re)arms owner.timeout for the earliest deadline of the current phase. */
  arm(owner: TimedExchange, headersSeen: boolean, now = performance.now()): void {
    if (owner.timeout !== undefined) clearTimeout(owner.timeout);
    const delay = this.delay(headersSeen, now);
    this.#armedFor = now + delay;
    owner.timeout = setTimeout(onDeadlineTimer, delay, owner);
  }

  /**
   * Response headers arrived: from now on the idle deadline applies. The
   * timer armed before them fires no later than now + idle (see #earliest),
   * so it is not touched: a short exchange sets one timer, not two. (Re-armed
   * here, each exchange made and dropped a timer list of its own duration in
   * Node, the costliest timer call in the edge's closed-loop profile.) It is
   * re-armed only when it fires with the exchange still going.
   */
  onHeaders(owner: TimedExchange): void {
    const now = performance.now();
    this.lastFrameAt = now;
    if (this.#limits.idleTimeoutMs > 0 && now + this.#limits.idleTimeoutMs < this.#armedFor) this.arm(owner, true, now);
  }

  onFrame(): void {
    this.lastFrameAt = performance.now();
  }

  /**
   * The timer fired: the deadline that passed, or undefined after re-arming
   * (frames moved the idle deadline on).
   */
  fire(owner: TimedExchange, headersSeen: boolean): GatewayErrorSpec | typeof KEEPALIVE_DUE | undefined {
    owner.timeout = undefined;
    const now = performance.now();
    const spec = this.expired(headersSeen, now);
    if (spec !== undefined) return spec;
    if (!headersSeen && this.#keepaliveMs > 0 && now >= this.#lastKeepaliveAt + this.#keepaliveMs) {
      this.#lastKeepaliveAt = now;
      this.arm(owner, headersSeen, now);
      return KEEPALIVE_DUE;
    }
    this.arm(owner, headersSeen, now);
    return undefined;
  }

  /** Ms until the earliest deadline of the current phase (never below 1). */
  delay(headersSeen: boolean, now = performance.now()): number {
    return Math.max(1, this.#earliest(headersSeen, now) - now);
  }

  /**
   * Called when the timer fires: the deadline that has passed, or undefined
   * when none has yet (frames moved it) and the caller should re-arm for
   * delay() more.
   */
  expired(headersSeen: boolean, now = performance.now()): GatewayErrorSpec | undefined {
    const l = this.#limits;
    if (now >= this.#startedAt + l.tunnelTimeoutMs) return Errors.gatewayTimeout;
    if (!headersSeen) {
      if (l.ttfbTimeoutMs > 0 && now >= this.#dispatchedAt + l.ttfbTimeoutMs) return Errors.firstByteTimeout;
    } else if (l.idleTimeoutMs > 0 && now >= this.lastFrameAt + l.idleTimeoutMs) {
      return Errors.idleTimeout;
    }
    return undefined;
  }

  #earliest(headersSeen: boolean, now: number): number {
    const l = this.#limits;
    let at = this.#startedAt + l.tunnelTimeoutMs;
    if (!headersSeen) {
      if (l.ttfbTimeoutMs > 0) at = Math.min(at, this.#dispatchedAt + l.ttfbTimeoutMs);
      if (this.#keepaliveMs > 0) at = Math.min(at, this.#lastKeepaliveAt + this.#keepaliveMs);
      // Fire no later than the idle deadline of headers arriving now would be,
      // so their arrival never has to move the timer earlier (see onHeaders).
      if (l.idleTimeoutMs > 0) at = Math.min(at, now + l.idleTimeoutMs);
    } else if (l.idleTimeoutMs > 0) {
      at = Math.min(at, this.lastFrameAt + l.idleTimeoutMs);
    }
    return at;
  }
}
