// The finished runs the run store keeps, column by column: numbers in one
// Float64Array, strings in one array per field. A run that finishes leaves
// no object of its own behind, only its values in slots that are reused.
//
// Why columns: at ~10,000 requests a second the default 1,000 kept runs
// live 0.1 s each, about one scavenge interval. Kept as record objects in
// the run map, they made each of the edge's scavenges find 3-5 MB alive
// (the records themselves, heap snapshots say, are ~0.4 MB) and promote
// most of it, and V8 ran a full mark-compact about every second; kept as
// columns, a scavenge finds ~70 KB and promotes next to nothing
// (docs/benchmarks.md, CPU budget, "Finished runs as columns"). What is
// left per run: its id string, and strings the store interns.
import type { RunRecord } from './run-record.js';

const QUEUED_AT = 0;
const DISPATCHED_AT = 1;
const FIRST_BYTE_AT = 2;
const FINISHED_AT = 3;
const QUEUE_MS = 4;
const TTFB_MS = 5;
const TOTAL_MS = 6;
const ATTEMPTS = 7;
const STATUS = 8;
const BYTES_OUT = 9;
const PROMPT_TOKENS = 10;
const COMPLETION_TOKENS = 11;
/** Its place in queue order (the run store's count of queued runs). */
const ORDER = 12;
const WIDTH = 13;

/** The first allocation; the columns double up to the bound, so a large `max_finished` costs memory only once reached. */
const INITIAL_CAPACITY = 64;

/** What a filter may ask of a finished run without building its record. */
export interface FinishedFilter {
  readonly model?: string;
  readonly node?: string;
  readonly session?: string;
  readonly key?: string;
}

export class FinishedRuns {
  readonly max: number;
  #numbers: Float64Array;
  readonly #ids: string[] = [];
  readonly #requestIds: string[] = [];
  readonly #models: string[] = [];
  readonly #sessions: string[] = [];
  readonly #keys: (string | null)[] = [];
  readonly #nodes: (string | null)[] = [];
  readonly #providers: (string | null)[] = [];
  readonly #adapters: (string | null)[] = [];
  readonly #outcomes: (string | null)[] = [];
  readonly #errors: (string | null)[] = [];
  /** Runs kept; they fill slots 0..count-1 in finish order until `max`, then the ring wraps. */
  #count = 0;
  /** The oldest kept run's slot once the ring wraps (0 before). */
  #oldest = 0;

  constructor(max: number) {
    this.max = max;
    this.#numbers = new Float64Array(Math.min(max, INITIAL_CAPACITY) * WIDTH);
  }

  get size(): number {
    return this.#count;
  }

  /**
   * Keeps a run that just finished; when full, its slot is the oldest run's,
   * which is dropped. Returns whether one was dropped.
   */
  add(record: RunRecord, order = 0): boolean {
    let slot: number;
    let dropped = false;
    if (this.#count < this.max) {
      slot = this.#count++;
      if (slot * WIDTH >= this.#numbers.length) this.#grow();
    } else {
      slot = this.#oldest;
      this.#oldest = slot + 1 === this.max ? 0 : slot + 1;
      dropped = true;
    }
    const n = this.#numbers;
    const at = slot * WIDTH;
    n[at + QUEUED_AT] = record.queuedAt;
    n[at + DISPATCHED_AT] = record.dispatchedAt ?? Number.NaN;
    n[at + FIRST_BYTE_AT] = record.firstByteAt ?? Number.NaN;
    n[at + FINISHED_AT] = record.finishedAt ?? Number.NaN;
    n[at + QUEUE_MS] = record.queueMs ?? Number.NaN;
    n[at + TTFB_MS] = record.ttfbMs ?? Number.NaN;
    n[at + TOTAL_MS] = record.totalMs ?? Number.NaN;
    n[at + ATTEMPTS] = record.attempts;
    n[at + STATUS] = record.status ?? Number.NaN;
    n[at + BYTES_OUT] = record.bytesOut;
    n[at + PROMPT_TOKENS] = record.tokens === null ? Number.NaN : record.tokens.prompt;
    n[at + COMPLETION_TOKENS] = record.tokens === null ? Number.NaN : record.tokens.completion;
    n[at + ORDER] = order;
    this.#ids[slot] = record.id;
    // Usually the same text (no x-request-id): keep one string, not two.
    this.#requestIds[slot] = record.requestId === record.id ? record.id : record.requestId;
    this.#models[slot] = record.model;
    this.#sessions[slot] = record.session;
    this.#keys[slot] = record.key;
    this.#nodes[slot] = record.node;
    this.#providers[slot] = record.provider;
    this.#adapters[slot] = record.adapter;
    this.#outcomes[slot] = record.outcome;
    this.#errors[slot] = record.error;
    return dropped;
  }

  /** The slot of the k-th newest kept run (0 = the latest to finish). */
  slotOfNewest(k: number): number {
    const s = this.#oldest + this.#count - 1 - k;
    return s >= this.#count ? s - this.#count : s;
  }

  /** The run's slot, or -1; newest first, as the runs looked up are mostly recent ones. A scan: lookups are the admin API's, not the data path's. */
  find(id: string): number {
    const rank = this.rankOf(id);
    return rank < 0 ? -1 : this.slotOfNewest(rank);
  }

  /** How many kept runs finished after this one (0: the latest), or -1. */
  rankOf(id: string): number {
    for (let k = 0; k < this.#count; k++) if (this.#ids[this.slotOfNewest(k)] === id) return k;
    return -1;
  }

  matches(slot: number, filter: FinishedFilter): boolean {
    return (
      (filter.model === undefined || this.#models[slot] === filter.model) &&
      (filter.node === undefined || this.#nodes[slot] === filter.node) &&
      (filter.session === undefined || this.#sessions[slot] === filter.session) &&
      (filter.key === undefined || this.#keys[slot] === filter.key)
    );
  }

  /** The run's place in queue order, as given to add. */
  order(slot: number): number {
    return this.#numbers[slot * WIDTH + ORDER];
  }

  /** A new record of the run in `slot`, for the admin API. */
  record(slot: number): RunRecord {
    const n = this.#numbers;
    const at = slot * WIDTH;
    const prompt = n[at + PROMPT_TOKENS];
    return {
      id: this.#ids[slot],
      requestId: this.#requestIds[slot],
      model: this.#models[slot],
      session: this.#sessions[slot],
      key: this.#keys[slot],
      state: 'finished',
      node: this.#nodes[slot],
      provider: this.#providers[slot],
      adapter: this.#adapters[slot],
      attempts: n[at + ATTEMPTS],
      queuedAt: n[at + QUEUED_AT],
      dispatchedAt: orNull(n[at + DISPATCHED_AT]),
      firstByteAt: orNull(n[at + FIRST_BYTE_AT]),
      finishedAt: orNull(n[at + FINISHED_AT]),
      queueMs: orNull(n[at + QUEUE_MS]),
      ttfbMs: orNull(n[at + TTFB_MS]),
      totalMs: orNull(n[at + TOTAL_MS]),
      outcome: this.#outcomes[slot],
      status: orNull(n[at + STATUS]),
      bytesOut: n[at + BYTES_OUT],
      tokens: Number.isNaN(prompt) ? null : { prompt, completion: n[at + COMPLETION_TOKENS] },
      error: this.#errors[slot],
    };
  }

  #grow(): void {
    const grown = new Float64Array(Math.min(this.max, (this.#numbers.length / WIDTH) * 2) * WIDTH);
    grown.set(this.#numbers);
    this.#numbers = grown;
  }
}

function orNull(value: number): number | null {
  return Number.isNaN(value) ? null : value;
}
