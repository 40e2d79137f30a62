// Client API keys: who may call the edge, which models each key may use and
// how many requests it may have open at once. Keys are held only as sha256
// digests (config `auth.api_keys[].key_sha256`); a presented key is hashed
// and the digests compared with timingSafeEqual. Looking the digest up in a
// map first leaks at most timing about the digest, which says nothing about
// any key (sha256 is preimage-resistant), and keeps a check O(1) with many keys.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { KeyLoadEntry } from '../../contract/data-path.js';
import { bearerToken } from '../../shared/bearer.js';
import type { ApiKeyConfig, AuthConfig } from '../../shared/config-types.js';
import { Errors, type GatewayErrorSpec } from '../../shared/errors.js';
import { RequestRate } from '../../shared/request-rate.js';
import { tenantKeyOf } from '../../shared/tenant-key.js';

/** Whether `presented` is one of `digests` (compared in constant time; a loop, not a closure per request). */
function knownBy(digests: readonly Buffer[], presented: Buffer): boolean {
  for (let i = 0; i < digests.length; i++) if (timingSafeEqual(digests[i], presented)) return true;
  return false;
}

/** One configured key and its live count of open requests. */
export class ApiKeyState {
  inFlight = 0;
  /** sha256 of each secret it is known by (one, or a rotation's old and new). */
  digests: readonly Buffer[];
  /** undefined = every model. */
  models: ReadonlySet<string> | undefined;
  /** Infinity = no limit. */
  maxConcurrent: number;
  /** 0 = no limit. */
  requestsPerMinute = 0;
  /** The key's bucket (workers.count 0: with I/O workers the scheduler thread keeps it); made at its first limited request. */
  rate: RequestRate | undefined;
  /** 0 = no limit. */
  tokensPerMinute = 0;
  /** Its token bucket, as `rate` (workers.count 0 only). */
  tokens: RequestRate | undefined;
  // Fair queuing (docs/scheduling.md): the key's band, its weight in it, and whether x-edge-fairness-id is honoured.
  priority = 0;
  weight = 1;
  fairnessHeader = false;
  /** The key's own tenant (src/shared/tenant-key.ts), hashed once. */
  readonly tenantKey: number;
  /**
   * Prefixed to the session a node is told, so that a key's sessions are its
   * own: another key naming the same id (or none) gets another cli working
   * directory, never this key's files and conversation.
   */
  readonly sessionScope: string;
  /** What a request with this key and no fairness headers asks for: built once, not per request. */
  fairness: { readonly priority: number; readonly tenantKey: number; readonly weight: number };

  constructor(
    readonly name: string,
    digests: readonly Buffer[],
    models: readonly string[] | undefined,
    maxConcurrent: number | undefined,
  ) {
    this.digests = digests;
    this.models = models === undefined ? undefined : new Set(models);
    this.maxConcurrent = maxConcurrent ?? Infinity;
    this.tenantKey = tenantKeyOf(name);
    this.sessionScope = `k${createHash('sha256').update(name).digest('hex').slice(0, 16)}.`;
    this.fairness = { priority: 0, tenantKey: this.tenantKey, weight: 1 };
  }

  mayUse(alias: string): boolean {
    return this.models === undefined || this.models.has(alias);
  }

  /** Takes a concurrency slot; false when the key is at its limit. */
  tryAcquire(): boolean {
    if (this.inFlight >= this.maxConcurrent) return false;
    this.inFlight++;
    return true;
  }

  release(): void {
    if (this.inFlight > 0) this.inFlight--;
  }

  /** A refresh set requestsPerMinute and tokensPerMinute: the buckets (if any) take them from `nowMs` on. */
  retuneRate(nowMs: number): void {
    if (this.requestsPerMinute !== 0) this.rate?.retune(this.requestsPerMinute, nowMs);
    if (this.tokensPerMinute !== 0) this.tokens?.retune(this.tokensPerMinute, nowMs);
  }

  /** Reserves a request's estimated tokens at `nowMs`: 0 when reserved (or no limit), else ms until the bucket holds one. */
  reserveTokens(nowMs: number, estimate: number): number {
    if (this.tokensPerMinute === 0) return 0;
    this.tokens ??= new RequestRate(this.tokensPerMinute, nowMs);
    return this.tokens.reserve(nowMs, this.tokensPerMinute, estimate);
  }

  /** The request that reserved `reserved` tokens used `used`. */
  settleTokens(reserved: number, used: number, nowMs: number): void {
    if (used !== reserved) this.tokens?.settle(used - reserved, nowMs);
  }

  /** Takes a request's token of the key's rate at `nowMs`: 0 when taken (or no limit), else ms until one is there. */
  takeRate(nowMs: number): number {
    if (this.requestsPerMinute === 0) return 0;
    this.rate ??= new RequestRate(this.requestsPerMinute, nowMs);
    return this.rate.take(nowMs, this.requestsPerMinute);
  }
}

function setFairness(state: ApiKeyState, key: ApiKeyConfig): void {
  state.priority = key.priority ?? 0;
  state.weight = key.weight ?? 1;
  state.fairnessHeader = key.fairnessHeader ?? false;
  state.fairness = Object.freeze({ priority: state.priority, tenantKey: state.tenantKey, weight: state.weight });
}

export function sha256Hex(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export class ClientAuth {
  /** Keyed by name so a config refresh keeps each key's open-request count. */
  readonly #byName = new Map<string, ApiKeyState>();
  #byDigest = new Map<string, ApiKeyState>();
  /**
   * Removed keys' buckets by name, as main's KeyConcurrency keeps every name's with I/O workers: a refresh
   * that gives the key back does not give it a fresh minute (names come from the config: a bounded set).
   */
  readonly #removedBuckets = new Map<string, { readonly rate: RequestRate | undefined; readonly tokens: RequestRate | undefined }>();

  constructor(auth: AuthConfig | undefined) {
    this.setConfig(auth);
  }

  /** Auth is on as long as at least one key is configured. */
  get enabled(): boolean {
    return this.#byDigest.size > 0;
  }

  setConfig(auth: AuthConfig | undefined): void {
    const keys = auth?.apiKeys ?? [];
    const byDigest = new Map<string, ApiKeyState>();
    const names = new Set<string>();
    for (const key of keys) {
      const digests = key.keySha256s.map((hex) => Buffer.from(hex, 'hex'));
      let state = this.#byName.get(key.name);
      if (state === undefined) {
        state = new ApiKeyState(key.name, digests, key.models, key.maxConcurrent);
        this.#byName.set(key.name, state);
        setFairness(state, key);
        state.requestsPerMinute = key.requestsPerMinute ?? 0;
        state.tokensPerMinute = key.tokensPerMinute ?? 0;
        // A key given back after a refresh removed it finds what it spent still spent.
        const kept = this.#removedBuckets.get(key.name);
        this.#removedBuckets.delete(key.name);
        state.rate = kept?.rate;
        state.tokens = kept?.tokens;
        state.retuneRate(performance.now());
      } else {
        // Requests in flight keep the object they counted on; update it in place.
        state.digests = digests;
        state.models = key.models === undefined ? undefined : new Set(key.models);
        state.maxConcurrent = key.maxConcurrent ?? Infinity;
        // Its bucket stays: what the key used this minute still counts against the new rate, which applies from now.
        state.requestsPerMinute = key.requestsPerMinute ?? 0;
        state.tokensPerMinute = key.tokensPerMinute ?? 0;
        state.retuneRate(performance.now());
        setFairness(state, key);
      }
      for (const hex of key.keySha256s) byDigest.set(hex, state);
      names.add(key.name);
    }
    // A removed key's state is kept while its requests are open (it no longer authenticates): given back by a
    // later refresh, the key finds them counted, as the I/O workers' count by name (KeyConcurrency) does. With
    // workers the data plane counts here too, so those requests' releases see the limit the key has now.
    for (const [name, state] of this.#byName) {
      if (names.has(name) || state.inFlight > 0) continue;
      this.#byName.delete(name);
      if (state.rate !== undefined || state.tokens !== undefined) this.#removedBuckets.set(name, { rate: state.rate, tokens: state.tokens });
    }
    this.#byDigest = byDigest;
  }

  /**
   * The key an `Authorization: Bearer <key>` header names, or the 401 spec.
   * Only call while enabled.
   */
  authenticate(authorization: string | undefined): ApiKeyState | GatewayErrorSpec {
    const token = bearerToken(authorization);
    if (token === undefined) return Errors.invalidApiKey;
    const presented = createHash('sha256').update(token, 'utf8').digest();
    const state = this.#byDigest.get(presented.toString('hex'));
    if (state === undefined || !knownBy(state.digests, presented)) return Errors.invalidApiKey;
    return state;
  }

  /**
   * Open requests by key name (GET /admin/keys): configured keys, and removed ones whose requests are still
   * open; and what the limited ones have left at `nowMs`.
   */
  load(nowMs: number): KeyLoadEntry[] {
    return [...this.#byName.values()].map((k) => {
      const entry: { name: string; inFlight: number; requestsLeft?: number; tokensLeft?: number } = { name: k.name, inFlight: k.inFlight };
      if (k.rate !== undefined && k.requestsPerMinute !== 0) entry.requestsLeft = k.rate.level(nowMs, k.requestsPerMinute);
      if (k.tokens !== undefined && k.tokensPerMinute !== 0) entry.tokensLeft = k.tokens.level(nowMs, k.tokensPerMinute);
      return entry;
    });
  }
}
