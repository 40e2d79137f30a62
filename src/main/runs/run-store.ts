// Every request, tunnel or cli, is a run: this is where the main thread
// keeps their records, built from the run events the data path reports
// (directly, or batched from each I/O worker), and where those events go on
// to the event bus when someone subscribes. Memory is bounded: runs still
// open are bounded by the open requests; finished ones are kept up to
// `maxFinished`, oldest dropped first.
import type { EdgeEvent, RunEvent, RunSink } from '../../contract/events.js';

export type RunState = 'queued' | 'running' | 'finished';

export interface RunRecord {
  readonly id: string;
  readonly requestId: string;
  readonly model: string;
  readonly session: string;
  state: RunState;
  node: string | null;
  provider: string | null;
  adapter: string | null;
  attempts: number;
  /** Wall-clock marks, ms since the epoch; null = not (yet) reached. */
  queuedAt: number;
  dispatchedAt: number | null;
  firstByteAt: number | null;
  finishedAt: number | null;
  queueMs: number | null;
  ttfbMs: number | null;
  totalMs: number | null;
  /** end, error, client_closed, timeout, … or the rejection code; null while open. */
  outcome: string | null;
  status: number | null;
  bytesOut: number;
  tokens: { readonly prompt: number; readonly completion: number } | null;
  error: string | null;
}

export interface RunFilter {
  readonly state?: string;
  readonly model?: string;
  readonly node?: string;
  readonly session?: string;
  readonly limit?: number;
}

export const DEFAULT_MAX_FINISHED_RUNS = 1000;

/** Where published events go (the EventBus); kept narrow so the store is testable alone. */
export interface RunEventPublisher {
  readonly active: boolean;
  publish(event: EdgeEvent): void;
}

export class RunStore implements RunSink {
  /** Every kept run, open or finished, by id: one map, so a run that finishes is not moved between two. */
  readonly #records = new Map<string, RunRecord>();
  /** Ids of the finished runs in finish order: appended until maxFinished, then a ring whose #oldest slot is the next to drop. */
  readonly #finishedIds: string[] = [];
  #oldest = 0;
  readonly #bus: RunEventPublisher;
  readonly #maxFinished: number;
  /** Finished runs dropped to keep the bound, ever. */
  evicted = 0;

  constructor(bus: RunEventPublisher, maxFinished = DEFAULT_MAX_FINISHED_RUNS) {
    this.#bus = bus;
    this.#maxFinished = maxFinished;
  }

  get maxFinished(): number {
    return this.#maxFinished;
  }

  get size(): number {
    return this.#records.size;
  }

  run(event: RunEvent): void {
    this.#apply(event);
    if (!this.#bus.active) return;
    this.#bus.publish(event);
    if (event.type === 'run.dispatched') {
      const record = this.#records.get(event.runId);
      // run.started: the request went to the node (the same turn as the grant); kept for existing consumers.
      this.#bus.publish({ type: 'run.started', runId: event.runId, requestId: record?.requestId ?? '', model: event.model, node: event.node, provider: event.provider, queueMs: event.queueMs });
    }
  }

  /** A batch from an I/O worker, in its order. */
  runs(events: readonly RunEvent[]): void {
    for (let i = 0; i < events.length; i++) this.run(events[i]);
  }

  get(id: string): RunRecord | undefined {
    return this.#records.get(id);
  }

  /** Newest first: open runs (latest queued first), then finished ones (latest finished first). */
  list(filter: RunFilter = {}): RunRecord[] {
    const limit = filter.limit ?? 100;
    const out: RunRecord[] = [];
    if (filter.state !== 'finished') {
      // The map's order is queue order; open runs are the ones not finished.
      const open: RunRecord[] = [];
      for (const record of this.#records.values()) if (record.state !== 'finished') open.push(record);
      for (let i = open.length - 1; i >= 0 && out.length < limit; i--) if (matches(open[i], filter)) out.push(open[i]);
    }
    if (filter.state === undefined || filter.state === 'finished') {
      const ids = this.#finishedIds;
      for (let k = ids.length - 1; k >= 0 && out.length < limit; k--) {
        const record = this.#records.get(ids[(this.#oldest + k) % ids.length]);
        if (record !== undefined && matches(record, filter)) out.push(record);
      }
    }
    return out;
  }

  #apply(event: RunEvent): void {
    switch (event.type) {
      case 'run.queued':
        this.#records.set(event.runId, {
          id: event.runId,
          requestId: event.requestId,
          model: event.model,
          session: event.session,
          state: 'queued',
          node: null,
          provider: null,
          adapter: null,
          attempts: 0,
          queuedAt: event.at,
          dispatchedAt: null,
          firstByteAt: null,
          finishedAt: null,
          queueMs: null,
          ttfbMs: null,
          totalMs: null,
          outcome: null,
          status: null,
          bytesOut: 0,
          tokens: null,
          error: null,
        });
        return;
      case 'run.dispatched': {
        const record = this.#records.get(event.runId);
        if (record === undefined || record.state === 'finished') return;
        record.state = 'running';
        record.node = event.node;
        record.provider = event.provider;
        record.adapter = event.adapter;
        record.attempts = event.attempt;
        record.dispatchedAt = event.at;
        record.queueMs = event.queueMs;
        return;
      }
      case 'run.first_byte': {
        const record = this.#records.get(event.runId);
        if (record === undefined || record.state === 'finished') return;
        record.firstByteAt = event.at;
        record.ttfbMs = event.ttfbMs;
        return;
      }
      case 'run.finished': {
        const record = this.#records.get(event.runId);
        if (record === undefined || record.state === 'finished') return;
        record.state = 'finished';
        record.finishedAt = event.at ?? Date.now();
        record.totalMs = event.totalMs;
        record.outcome = event.outcome;
        record.status = event.status;
        record.bytesOut = event.bytesOut;
        record.tokens = event.tokens ?? null;
        record.error = event.error ?? null;
        if (event.node !== null) record.node = event.node;
        if (event.provider !== null) record.provider = event.provider;
        this.#keepFinished(record.id);
        return;
      }
      default:
    }
  }

  /** Appends a finished run's id to the ring; a full ring drops its oldest run first. */
  #keepFinished(id: string): void {
    const ids = this.#finishedIds;
    if (ids.length < this.#maxFinished) {
      ids.push(id);
      return;
    }
    this.#records.delete(ids[this.#oldest]);
    this.evicted++;
    ids[this.#oldest] = id;
    this.#oldest = this.#oldest + 1 === ids.length ? 0 : this.#oldest + 1;
  }
}

function matches(record: RunRecord, filter: RunFilter): boolean {
  return (
    (filter.state === undefined || record.state === filter.state) &&
    (filter.model === undefined || record.model === filter.model) &&
    (filter.node === undefined || record.node === filter.node) &&
    (filter.session === undefined || record.session === filter.session)
  );
}

/** A record as the admin API shows it: wall-clock marks as ISO strings. */
export function runView(record: RunRecord): Record<string, unknown> {
  return {
    ...record,
    queuedAt: iso(record.queuedAt),
    dispatchedAt: iso(record.dispatchedAt),
    firstByteAt: iso(record.firstByteAt),
    finishedAt: iso(record.finishedAt),
  };
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
