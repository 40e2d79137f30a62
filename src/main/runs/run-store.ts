// Every request, tunnel or cli, is a run: this is where the main thread
// keeps their records, built from the run events the data path reports
// (directly, or batched from each I/O worker), and where those events go on
// to the event bus when someone subscribes. Memory is bounded: runs still
// open are bounded by the open requests; finished ones are kept up to
// `maxFinished`, oldest dropped first, in columns (finished-runs.ts) so that
// no object outlives its request.
import type { EdgeEvent, RunEvent, RunSink } from '../../contract/events.js';
import { FinishedRuns } from './finished-runs.js';
import type { RunRecord } from './run-record.js';

export interface RunFilter {
  readonly state?: string;
  readonly model?: string;
  readonly node?: string;
  readonly session?: string;
  /** The client API key's name. */
  readonly key?: string;
  readonly limit?: number;
  /** A run id: list the runs after it (the next page). */
  readonly before?: string;
  /**
   * `before` was already finished when its page was listed (the page's
   * `next` says so): the open runs were all listed before it. Without it, a
   * finished cursor is taken as one that finished since its page.
   */
  readonly beforeFinished?: boolean;
}

/** The cursor of the page after `records` (the last one, tagged when it is finished), or null when the page was not full. */
export function nextCursor(records: readonly RunRecord[], limit: number): string | null {
  const last = records.at(-1);
  if (last === undefined || records.length < limit) return null;
  return last.state === 'finished' ? `${FINISHED_CURSOR}${last.id}` : last.id;
}

/** The tag of a cursor whose run was finished when its page was listed. */
export const FINISHED_CURSOR = 'finished:';

export const DEFAULT_MAX_FINISHED_RUNS = 1000;

/** Where published events go (the EventBus); kept narrow so the store is testable alone. */
export interface RunEventPublisher {
  readonly active: boolean;
  publish(event: EdgeEvent): void;
}

export class RunStore implements RunSink {
  /** Runs still open, by id, in queue order: at most the requests in flight. */
  readonly #open = new Map<string, RunRecord>();
  /** Each open run's place in queue order (the order of #open): pages compare it, as wall-clock marks tie within a millisecond. */
  readonly #openOrder = new Map<string, number>();
  #queuedCount = 0;
  /** Runs back in the queue after a grant: the node and provider they had gone to. */
  readonly #lastPlace = new Map<string, readonly [string | null, string]>();
  readonly #finished: FinishedRuns;
  /** Text -> the one string kept for it: models, sessions, nodes, providers, outcomes repeat, and from an I/O worker each event brings fresh copies. */
  readonly #interned = new Map<string, string>();
  readonly #bus: RunEventPublisher;
  /** Finished runs dropped to keep the bound, ever. */
  evicted = 0;

  constructor(bus: RunEventPublisher, maxFinished = DEFAULT_MAX_FINISHED_RUNS) {
    this.#bus = bus;
    this.#finished = new FinishedRuns(maxFinished);
  }

  get maxFinished(): number {
    return this.#finished.max;
  }

  /** Runs kept: open ones and finished ones. */
  get size(): number {
    return this.#open.size + this.#finished.size;
  }

  run(event: RunEvent): void {
    const finished = this.#apply(event);
    if (!this.#bus.active) return;
    // A finish reported on no provider (its I/O worker exited under it; it ended in the queue after a requeue):
    // the event names where its record says it ran, or last went, as the record and /metrics do.
    if (finished !== undefined && event.type === 'run.finished' && event.provider === null && finished.provider !== null) this.#bus.publish({ ...event, node: finished.node, provider: finished.provider });
    else this.#bus.publish(event);
    if (event.type === 'run.dispatched') {
      const record = this.#open.get(event.runId);
      // run.started: the request went to the node (the same turn as the grant); kept for existing consumers.
      this.#bus.publish({ type: 'run.started', runId: event.runId, requestId: record?.requestId ?? '', model: event.model, node: event.node, provider: event.provider, queueMs: event.queueMs });
    }
  }

  /** A batch from an I/O worker, in its order. */
  runs(events: readonly RunEvent[]): void {
    for (let i = 0; i < events.length; i++) this.run(events[i]);
  }

  /** The run's record: the live one while open, a new one built from the columns once finished. */
  get(id: string): RunRecord | undefined {
    const open = this.#open.get(id);
    if (open !== undefined) return open;
    const slot = this.#finished.find(id);
    return slot < 0 ? undefined : this.#finished.record(slot);
  }

  /**
   * Newest first: open runs (latest queued first), then finished ones
   * (latest finished first). With `before` (a run id: the last of the
   * previous page), the runs after that one in this order; none when that
   * run is no longer kept.
   */
  list(filter: RunFilter = {}): RunRecord[] {
    const limit = filter.limit ?? 100;
    const out: RunRecord[] = [];
    // The map's order is queue order.
    const open = [...this.#open.values()];
    const finished = this.#finished;
    let openFrom = open.length - 1;
    let finishedFrom = 0;
    /** A cursor that finished since its page: the finished runs ranked before it (newer) that were queued after it were listed before it. */
    let listedAbove = 0;
    let cursorOrder = 0;
    if (filter.before !== undefined) {
      const at = open.findIndex((record) => record.id === filter.before);
      if (at >= 0) openFrom = at - 1;
      else {
        const rank = finished.rankOf(filter.before);
        if (rank < 0) return out;
        if (filter.beforeFinished === true) {
          // Finished already on its page: every open run came before it there.
          openFrom = -1;
        } else {
          // The cursor's run finished after the page before: the open runs queued before it still follow it,
          // and so do those that finished after it (they were open on that page too): only the ones queued after it came before.
          cursorOrder = finished.order(finished.slotOfNewest(rank));
          openFrom = open.length - 1;
          while (openFrom >= 0 && (this.#openOrder.get(open[openFrom].id) ?? 0) > cursorOrder) openFrom--;
          listedAbove = rank;
        }
        finishedFrom = rank + 1;
      }
    }
    if (filter.state !== 'finished') {
      for (let i = openFrom; i >= 0 && out.length < limit; i--) if (matches(open[i], filter)) out.push(open[i]);
    }
    if (filter.state === undefined || filter.state === 'finished') {
      for (let k = 0; k < listedAbove && out.length < limit; k++) {
        const slot = finished.slotOfNewest(k);
        if (finished.order(slot) < cursorOrder && finished.matches(slot, filter)) out.push(finished.record(slot));
      }
      for (let k = finishedFrom; k < finished.size && out.length < limit; k++) {
        const slot = finished.slotOfNewest(k);
        if (finished.matches(slot, filter)) out.push(finished.record(slot));
      }
    }
    return out;
  }

  /** Applies `event` to the records; for a run.finished, returns the run's finished record. */
  #apply(event: RunEvent): RunRecord | undefined {
    switch (event.type) {
      case 'run.queued':
        this.#openOrder.set(event.runId, ++this.#queuedCount);
        this.#open.set(event.runId, {
          id: event.runId,
          requestId: event.requestId,
          model: this.#intern(event.model),
          session: this.#intern(event.session),
          key: event.key === undefined ? null : this.#intern(event.key),
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
        const record = this.#open.get(event.runId);
        if (record === undefined) return;
        record.state = 'running';
        record.node = this.#intern(event.node);
        record.provider = this.#intern(event.provider);
        record.adapter = this.#intern(event.adapter);
        record.attempts = event.attempt;
        record.dispatchedAt = event.at;
        record.queueMs = event.queueMs;
        return;
      }
      case 'run.requeued': {
        const record = this.#open.get(event.runId);
        if (record === undefined) return;
        // Waiting for a grant again: on no provider until the next run.dispatched (attempts keeps the count).
        // Should it end in the queue, its record names where it last went, as its metrics do.
        if (event.provider !== null) this.#lastPlace.set(event.runId, [event.node, event.provider]);
        record.state = 'queued';
        record.node = null;
        record.provider = null;
        record.adapter = null;
        return;
      }
      case 'run.first_byte': {
        const record = this.#open.get(event.runId);
        if (record === undefined) return;
        record.firstByteAt = event.at;
        record.ttfbMs = event.ttfbMs;
        return;
      }
      case 'run.finished': {
        const last = this.#lastPlace.get(event.runId);
        if (last !== undefined) this.#lastPlace.delete(event.runId);
        const record = this.#open.get(event.runId);
        // Unknown, or finished already (a second finish is not kept twice).
        if (record === undefined) return;
        this.#open.delete(event.runId);
        const order = this.#openOrder.get(event.runId) ?? 0;
        this.#openOrder.delete(event.runId);
        // Ended in the queue: how long it waited there (null only while no wait is known).
        if (record.state === 'queued') record.queueMs = event.queueMs;
        record.state = 'finished';
        record.finishedAt = event.at ?? Date.now();
        record.totalMs = event.totalMs;
        record.outcome = this.#intern(event.outcome);
        record.status = event.status;
        record.bytesOut = event.bytesOut;
        record.tokens = event.tokens ?? null;
        record.error = event.error ?? null;
        if (event.node !== null) record.node = this.#intern(event.node);
        if (event.provider !== null) record.provider = this.#intern(event.provider);
        if (last !== undefined && record.provider === null) {
          record.node = last[0] === null ? null : this.#intern(last[0]);
          record.provider = this.#intern(last[1]);
        }
        if (this.#finished.add(record, order)) this.evicted++;
        return record;
      }
      default:
    }
    return undefined;
  }

  /** The kept copy of a repeated text; past INTERN_LIMIT distinct texts (e.g. one session per client), or longer than INTERN_MAX_CHARS (a client's model name can be anything), texts are kept as they come. */
  #intern(text: string): string {
    if (text.length > INTERN_MAX_CHARS) return text;
    const kept = this.#interned.get(text);
    if (kept !== undefined) return kept;
    if (this.#interned.size < INTERN_LIMIT) this.#interned.set(text, text);
    return text;
  }
}

/** Distinct texts interned: models, sessions, nodes, providers, adapters and outcomes of a deployment fit many times over. */
const INTERN_LIMIT = 4096;
/** Longest text interned (session ids are at most 256): the table stays under ~2 MB whatever clients send. */
const INTERN_MAX_CHARS = 256;

function matches(record: RunRecord, filter: RunFilter): boolean {
  return (
    (filter.state === undefined || record.state === filter.state) &&
    (filter.model === undefined || record.model === filter.model) &&
    (filter.node === undefined || record.node === filter.node) &&
    (filter.session === undefined || record.session === filter.session) &&
    (filter.key === undefined || record.key === filter.key)
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
