// Which provider made each stored Response, bounded and expiring: the map
// every data path keeps (workers/http/response-affinity.ts says why) and the
// pool's copy a replacement worker starts from. One structure for both, so the
// two cannot disagree on what is evicted or when an entry expires.

import { STORED_RESPONSE_ENTRIES, STORED_RESPONSE_TTL_MS, type StoredResponse } from './io-protocol.js';

/** A stored response with its expiry (epoch ms). */
export interface StoredEntry extends StoredResponse {
  readonly expiresAt: number;
}

/** The id of a stored response: printable, bounded (it is also put in a tunnel path). */
const RESPONSE_ID = /^[A-Za-z0-9_\-.:]{1,256}$/;

export function isResponseId(id: string): boolean {
  return RESPONSE_ID.test(id);
}

export class StoredResponses {
  // A Map iterates in insertion order: re-inserting on use makes the first key the least recently used.
  readonly #entries = new Map<string, StoredEntry>();
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(maxEntries = STORED_RESPONSE_ENTRIES, ttlMs = STORED_RESPONSE_TTL_MS, now: () => number = Date.now) {
    this.#maxEntries = maxEntries;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** `expiresAt` (epoch ms): when it was learnt earlier (a replacement worker's start); else the TTL from now. */
  remember(id: string, stored: StoredResponse, expiresAt = this.#now() + this.#ttlMs): void {
    // Already expired (a pool's answer or a replacement worker's start, read late): it would only push out a live one.
    // Another thread's use never comes here (touch): it must not bring back an id a DELETE forgot.
    if (!isResponseId(id) || expiresAt <= this.#now()) return;
    this.#entries.delete(id);
    this.#entries.set(id, { alias: stored.alias, providerId: stored.providerId, nodeId: stored.nodeId, owner: stored.owner, expiresAt });
    if (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
  }

  /** The provider that made `id`; undefined when never seen here, evicted or expired. */
  lookup(id: string): StoredEntry | undefined {
    const entry = this.#entries.get(id);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#entries.delete(id);
      return undefined;
    }
    this.#entries.delete(id);
    this.#entries.set(id, entry);
    return entry;
  }

  /**
   * A use told by another thread: makes `id` the most recently used where it is still known, at its own
   * expiry, and never adds it. Added, a use read after the DELETE that forgot it (a worker that had not
   * heard of the DELETE yet used it) would bring a deleted response back, on every thread, for its TTL.
   */
  touch(id: string): void {
    this.lookup(id);
  }

  forget(id: string): void {
    this.#entries.delete(id);
  }

  /** The unexpired entries, least recently used first, each with its expiry (what a replacement worker starts from). */
  unexpired(): [string, StoredResponse, number][] {
    const now = this.#now();
    const out: [string, StoredResponse, number][] = [];
    for (const [id, entry] of this.#entries) {
      if (entry.expiresAt > now) out.push([id, { alias: entry.alias, providerId: entry.providerId, nodeId: entry.nodeId, owner: entry.owner }, entry.expiresAt]);
      else this.#entries.delete(id);
    }
    return out;
  }
}
