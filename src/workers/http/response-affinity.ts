// Which provider made each stored Response (the Responses API keeps state on
// the provider: `previous_response_id`, GET and DELETE /v1/responses/{id}).
// The edge learns the id from the response stream it relays and remembers
// id -> provider in a bounded LRU with a TTL, so a follow-up goes to that
// provider and never silently to another one. Held per data-path thread:
// with I/O workers, every worker holds the whole map: a worker other than the one
// that relayed the first response learns it through the worker pool (the
// relaying worker posts it; the pool passes it on), so a follow-up sent
// before that message lands (well under a millisecond after the response's
// first event) may be answered 404, never misrouted.

import { STORED_RESPONSE_ENTRIES, STORED_RESPONSE_TTL_MS, type StoredResponse } from '../../contract/io-protocol.js';
import { RESPONSE_BY_ID } from './api-routes.js';

export type { StoredResponse };

interface Entry extends StoredResponse {
  readonly expiresAt: number;
}

export const DEFAULT_AFFINITY_ENTRIES = STORED_RESPONSE_ENTRIES;
export const DEFAULT_AFFINITY_TTL_MS = STORED_RESPONSE_TTL_MS;

/** The id of a stored response: printable, bounded (it is also put in a tunnel path). */
const RESPONSE_ID = /^[A-Za-z0-9_\-.:]{1,256}$/;

export function isResponseId(id: string): boolean {
  return RESPONSE_ID.test(id);
}

/**
 * The id in a stored response's own path (`/v1/responses/{id}`, any query
 * aside), percent-decoded as the router decodes it for the lookup and as the
 * provider reads it: `%72esp_1` is `resp_1` to both.
 */
export function storedResponseIdOf(path: string): string | undefined {
  const query = path.indexOf('?');
  let id = RESPONSE_BY_ID.exec(query < 0 ? path : path.slice(0, query))?.[1];
  if (id !== undefined && id.includes('%')) {
    try {
      id = decodeURIComponent(id);
    } catch {
      return undefined;
    }
  }
  return id !== undefined && isResponseId(id) ? id : undefined;
}

export class ResponseAffinity {
  // A Map iterates in insertion order: re-inserting on use makes the first key the least recently used.
  readonly #entries = new Map<string, Entry>();
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(maxEntries = DEFAULT_AFFINITY_ENTRIES, ttlMs = DEFAULT_AFFINITY_TTL_MS, now: () => number = Date.now) {
    this.#maxEntries = maxEntries;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** `expiresAt` (epoch ms): when it was learnt earlier (a replacement worker's start); else the TTL from now. */
  remember(id: string, stored: StoredResponse, expiresAt = this.#now() + this.#ttlMs): void {
    if (!isResponseId(id)) return;
    this.#entries.delete(id);
    this.#entries.set(id, { alias: stored.alias, providerId: stored.providerId, nodeId: stored.nodeId, owner: stored.owner, expiresAt });
    if (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
  }

  /** The provider that made `id`; undefined when never seen here, evicted or expired. */
  lookup(id: string): StoredResponse | undefined {
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

  forget(id: string): void {
    this.#entries.delete(id);
  }
}

const ID_IN_HEAD = /"id"\s*:\s*"([^"\\]{1,256})"/;

/**
 * The response id from the head of a Responses API body: the first `"id"`,
 * which is the response's own in both shapes (a JSON response object opens
 * with it; a stream opens with response.created carrying the response).
 */
export function responseIdFromHead(head: Buffer): string | undefined {
  const match = ID_IN_HEAD.exec(head.toString('latin1'));
  return match === null ? undefined : match[1];
}
