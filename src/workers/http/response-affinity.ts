// Which provider made each stored Response (the Responses API keeps state on
// the provider: `previous_response_id`, GET and DELETE /v1/responses/{id}).
// The edge learns the id from the response stream it relays and remembers
// id -> provider in a bounded LRU with a TTL, so a follow-up goes to that
// provider and never silently to another one. Held per data-path thread:
// with I/O workers, a follow-up that lands on another worker than the one
// that relayed the first response is not recognised (404, never misrouted).

export interface StoredResponse {
  /** The alias the response was made under (GET / DELETE carry no model). */
  readonly alias: string;
  readonly providerId: string;
  readonly nodeId: string;
}

interface Entry extends StoredResponse {
  readonly expiresAt: number;
}

export const DEFAULT_AFFINITY_ENTRIES = 100_000;
export const DEFAULT_AFFINITY_TTL_MS = 24 * 60 * 60 * 1000;

/** The id of a stored response: printable, bounded (it is also put in a tunnel path). */
const RESPONSE_ID = /^[A-Za-z0-9_\-.:]{1,256}$/;

export function isResponseId(id: string): boolean {
  return RESPONSE_ID.test(id);
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

  remember(id: string, stored: StoredResponse): void {
    if (!isResponseId(id)) return;
    this.#entries.delete(id);
    this.#entries.set(id, { alias: stored.alias, providerId: stored.providerId, nodeId: stored.nodeId, expiresAt: this.#now() + this.#ttlMs });
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
