// Open requests per API key across all I/O workers (workers.count > 0). Each
// worker authenticates on its own ClientAuth, so the one count per key that
// auth.api_keys[].max_concurrent limits lives here, on the scheduler's
// thread, checked before the admission reaches the scheduler. Every key's
// open requests are counted, limited or not, so that a limit a config
// refresh adds counts the requests already open (as ClientAuth's local count
// does with workers.count 0, where this class is not used). Each key's
// request rate (requests_per_minute) and token rate (tokens_per_minute) are
// one bucket each here too, for the same reason: requests of one key reach
// every worker. The token limits are this thread's config's (an admission
// record has no room left for them), set at start and by each refresh.
import type { KeyLoadEntry } from '../contract/data-path.js';
import type { KeyLevels } from '../contract/scheduler.js';
import type { ApiKeyConfig } from '../shared/config-types.js';
import { RequestRate } from '../shared/request-rate.js';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** An admitted request's tokens, reserved of its key's bucket until it ends. */
class TokenReservation {
  constructor(readonly bucket: RequestRate, readonly tokens: number) {}
}

class KeyCount {
  inFlight = 0;
  constructor(readonly name: string) {}
}

export class KeyConcurrency {
  /** Keys with open requests only: an entry goes when its count reaches 0. */
  readonly #byName = new Map<string, KeyCount>();
  /** requestId -> the count it holds a slot of; a release frees exactly what was taken. */
  readonly #held = new Map<number, KeyCount>();
  /** Key name -> its bucket, from its first limited request on (names come from the config: a bounded set). */
  readonly #rates = new Map<string, RequestRate>();
  /** Key name -> its tokens_per_minute (keys with one only). */
  #tokenLimits = new Map<string, number>();
  /** Key name -> its requests_per_minute (keys with one only), for what a grant says is left. */
  #requestLimits = new Map<string, number>();
  /** Key name -> its token bucket, as #rates. */
  readonly #tokens = new Map<string, RequestRate>();
  /** requestId -> the tokens it reserved, settled at its release. */
  readonly #reserved = new Map<number, TokenReservation>();

  /**
   * Takes a slot of key `name` for `requestId`; false (nothing taken) when
   * the key already has `limit` open (0: no limit, only counted). The limit
   * comes with each admission (the worker's config snapshot), so a refresh
   * needs nothing here.
   */
  acquire(requestId: number, name: string, limit: number): boolean {
    let count = this.#byName.get(name);
    if (count === undefined) {
      count = new KeyCount(name);
      this.#byName.set(name, count);
    } else if (limit > 0 && count.inFlight >= limit) {
      return false;
    }
    count.inFlight++;
    this.#held.set(requestId, count);
    return true;
  }

  /**
   * Takes a request's token of key `name`'s rate (`perMinute`, from the
   * admission's config snapshot) at `nowMs`: 0 when taken, else ms until
   * one is there (nothing taken).
   */
  takeRate(name: string, perMinute: number, nowMs: number): number {
    let rate = this.#rates.get(name);
    if (rate === undefined) this.#rates.set(name, (rate = new RequestRate(perMinute, nowMs)));
    return rate.take(nowMs, perMinute);
  }

  /**
   * Reserves `estimate` tokens of key `name`'s tokens_per_minute for `requestId` at `nowMs`: 0 when reserved
   * (or the key has no such limit), else ms until its bucket holds one (nothing reserved).
   */
  reserveTokens(requestId: number, name: string, estimate: number, nowMs: number): number {
    const perMinute = this.#tokenLimits.get(name);
    if (perMinute === undefined) return 0;
    let bucket = this.#tokens.get(name);
    if (bucket === undefined) this.#tokens.set(name, (bucket = new RequestRate(perMinute, nowMs)));
    const tokens = Math.max(1, estimate);
    const waitMs = bucket.reserve(nowMs, perMinute, tokens);
    if (waitMs === 0) this.#reserved.set(requestId, new TokenReservation(bucket, tokens));
    return waitMs;
  }

  /** The config (at start and each refresh): each key's buckets take their new limits from now (the admissions' snapshots follow). */
  setLimits(keys: readonly ApiKeyConfig[], nowMs: number): void {
    const tokenLimits = new Map<string, number>();
    const requestLimits = new Map<string, number>();
    for (const key of keys) {
      if (key.requestsPerMinute !== undefined) {
        requestLimits.set(key.name, key.requestsPerMinute);
        this.#rates.get(key.name)?.retune(key.requestsPerMinute, nowMs);
      }
      if (key.tokensPerMinute === undefined) continue;
      tokenLimits.set(key.name, key.tokensPerMinute);
      this.#tokens.get(key.name)?.retune(key.tokensPerMinute, nowMs);
    }
    this.#tokenLimits = tokenLimits;
    this.#requestLimits = requestLimits;
  }

  /**
   * What the key of open request `requestId` has left of its limits now (x-ratelimit-*); undefined: a key
   * without either, or none. Called for every grant: an edge without limits reads no clock here.
   */
  levelsOf(requestId: number): KeyLevels | undefined {
    if (this.#requestLimits.size === 0 && this.#tokenLimits.size === 0) return undefined;
    const name = this.#held.get(requestId)?.name;
    return name === undefined ? undefined : this.levelsOfKey(name, performance.now());
  }

  /** What key `name` has left of its limits at `nowMs` (a refusal's x-ratelimit-*); undefined: it has neither. */
  levelsOfKey(name: string, nowMs: number): KeyLevels | undefined {
    const requests = this.#requestLimits.get(name);
    const tokens = this.#tokenLimits.get(name);
    if (requests === undefined && tokens === undefined) return undefined;
    return {
      requests: requests === undefined ? Number.NaN : (this.#rates.get(name)?.level(nowMs, requests) ?? requests),
      tokens: tokens === undefined ? Number.NaN : (this.#tokens.get(name)?.level(nowMs, tokens) ?? tokens),
    };
  }

  /**
   * The exchange is over. A request refused by acquire() (or released already) holds nothing: a no-op.
   * `usedTokens`: what it cost its key's token rate, settling its reservation (-1: the reservation stands; 0: given back).
   */
  release(requestId: number, usedTokens = -1): void {
    const reservation = this.#reserved.get(requestId);
    if (reservation !== undefined) {
      this.#reserved.delete(requestId);
      if (usedTokens >= 0 && usedTokens !== reservation.tokens) reservation.bucket.settle(usedTokens - reservation.tokens, performance.now());
    }
    const count = this.#held.get(requestId);
    if (count === undefined) return;
    this.#held.delete(requestId);
    if (--count.inFlight === 0) this.#byName.delete(count.name);
  }

  /** A worker exited: the slots its requests held (requestId % stride = worker) are free; their reservations stand (usage unknown). */
  releaseWorker(worker: number, stride: number): void {
    for (const requestId of [...this.#held.keys()]) if (requestId % stride === worker) this.release(requestId);
  }

  /** Open requests of `name` (0 when none). */
  inFlight(name: string): number {
    return this.#byName.get(name)?.inFlight ?? 0;
  }

  /** Keys with open requests and their counts, and what the limited ones have left at `nowMs` (GET /admin/keys). */
  load(nowMs: number): KeyLoadEntry[] {
    const out = new Map<string, Mutable<KeyLoadEntry>>();
    const entry = (name: string): Mutable<KeyLoadEntry> => {
      let e = out.get(name);
      if (e === undefined) out.set(name, (e = { name, inFlight: 0 }));
      return e;
    };
    for (const c of this.#byName.values()) entry(c.name).inFlight = c.inFlight;
    for (const [name, perMinute] of this.#requestLimits) {
      const bucket = this.#rates.get(name);
      if (bucket !== undefined) entry(name).requestsLeft = bucket.level(nowMs, perMinute);
    }
    for (const [name, perMinute] of this.#tokenLimits) {
      const bucket = this.#tokens.get(name);
      if (bucket !== undefined) entry(name).tokensLeft = bucket.level(nowMs, perMinute);
    }
    return [...out.values()];
  }
}
