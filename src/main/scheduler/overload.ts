// Overload backoff, as pure scheduler state (time is passed in): a provider
// that answers 429 or 503 is busy, not broken, so it is neither failed nor
// ejected. Its effective concurrency is halved (AIMD: floor 1) and no new
// request goes to it until its Retry-After has passed (a default hold when
// it sent none). Each window of successes (as many as the current limit)
// raises the limit by one; at its configured capacity the provider is
// healthy again. Further 429s during a hold are the same episode: they
// extend the hold but do not halve again, so a burst of in-flight refusals
// does not collapse the limit to 1.
import type { OverloadView } from '../../contract/scheduler.js';
import type { ProviderState } from './state.js';

export interface OverloadPolicy {
  /** Hold after a 429/503 that carried no Retry-After, ms. */
  readonly defaultRetryAfterMs: number;
  /** A provider's Retry-After is capped at this, ms (a typo of 86400 must not park it for a day). */
  readonly maxRetryAfterMs: number;
}

/** The shortest hold after a 429/503, ms (a Retry-After of 0 included). */
const MIN_HOLD_MS = 1;

export const DEFAULT_OVERLOAD_POLICY: OverloadPolicy = {
  defaultRetryAfterMs: 1_000,
  maxRetryAfterMs: 60_000,
};


export interface OverloadChange {
  readonly type: 'provider.overloaded' | 'provider.overload_cleared';
  readonly provider: string;
  /** The new effective concurrency limit (capacity when cleared). */
  readonly limit: number;
  readonly holdMs?: number;
}

class OverloadRecord {
  limit = 1;
  successes = 0;
  untilMs = 0;
  overloads = 0;
}

export class Overload {
  #policy: OverloadPolicy;
  readonly #records = new Map<ProviderState, OverloadRecord>();
  #listener: ((event: OverloadChange) => void) | undefined;

  constructor(policy: OverloadPolicy = DEFAULT_OVERLOAD_POLICY) {
    this.#policy = policy;
  }

  /** A refreshed resilience.overload: the next 429/503 is held by it; holds under way keep their end. */
  setPolicy(policy: OverloadPolicy): void {
    this.#policy = policy;
  }

  setListener(listener: (event: OverloadChange) => void): void {
    this.#listener = listener;
  }

  /** `p` answered 429/503; `retryAfterMs` from its Retry-After (undefined: it sent none). */
  overloaded(p: ProviderState, retryAfterMs: number | undefined, now: number): void {
    const policy = this.#policy;
    // At least MIN_HOLD_MS: a Retry-After of 0 must still keep the request it sent back from the requeue's own
    // pump, or the tie-break hands it straight back here while another provider is free (and halves again).
    const holdMs = Math.min(Math.max(MIN_HOLD_MS, retryAfterMs ?? policy.defaultRetryAfterMs), Math.max(MIN_HOLD_MS, policy.maxRetryAfterMs));
    let record = this.#records.get(p);
    if (record !== undefined && record.untilMs > now) {
      // The same episode: requests already in flight when it began.
      record.overloads++;
      if (now + holdMs > record.untilMs) record.untilMs = now + holdMs;
      return;
    }
    if (record === undefined) {
      record = new OverloadRecord();
      record.limit = Math.max(1, p.capacity);
      this.#records.set(p, record);
    }
    record.overloads++;
    record.limit = Math.max(1, Math.floor(Math.min(record.limit, p.capacity) / 2));
    record.successes = 0;
    record.untilMs = now + holdMs;
    p.overloadLimit = record.limit;
    p.overloadHeld = holdMs > 0;
    this.#listener?.({ type: 'provider.overloaded', provider: p.id, limit: record.limit, holdMs: Math.round(holdMs) });
  }

  /** A request on `p` ended well: one step towards the next +1. */
  succeeded(p: ProviderState): void {
    const record = this.#records.get(p);
    if (record === undefined || p.overloadHeld) return;
    if (++record.successes < record.limit) return;
    record.successes = 0;
    record.limit++;
    if (record.limit >= p.capacity) {
      this.#records.delete(p);
      p.overloadLimit = Infinity;
      this.#listener?.({ type: 'provider.overload_cleared', provider: p.id, limit: p.capacity });
      return;
    }
    p.overloadLimit = record.limit;
  }

  /** Holds that ended by `now` are lifted. True when a provider may take requests again. */
  expire(now: number): boolean {
    let any = false;
    for (const [p, record] of this.#records) {
      if (!p.overloadHeld || record.untilMs > now) continue;
      p.overloadHeld = false;
      any = true;
    }
    return any;
  }

  /** The earliest hold end, for the driver's timer. */
  nextDeadline(): number | undefined {
    let next: number | undefined;
    for (const [p, record] of this.#records) if (p.overloadHeld && (next === undefined || record.untilMs < next)) next = record.untilMs;
    return next;
  }

  /** An operator reset: full capacity at once. */
  reset(p: ProviderState): boolean {
    if (!this.#records.delete(p)) return false;
    p.overloadLimit = Infinity;
    p.overloadHeld = false;
    return true;
  }

  tracks(p: ProviderState): boolean {
    return this.#records.has(p);
  }

  /** When `p`'s Retry-After hold ends; undefined while it is not held. */
  heldUntil(p: ProviderState): number | undefined {
    return p.overloadHeld ? this.#records.get(p)?.untilMs : undefined;
  }

  status(p: ProviderState): OverloadView | undefined {
    const record = this.#records.get(p);
    if (record === undefined) return undefined;
    return { limit: record.limit, heldUntilMs: p.overloadHeld ? record.untilMs : undefined, overloads: record.overloads };
  }
}
