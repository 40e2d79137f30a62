// The lossy event bus: node and run events fan out to subscribers, each
// with a bounded buffer of its own. Publishing never waits and never fails:
// when a subscriber's buffer is full its oldest event is dropped and counted
// (per subscriber and in total). Nothing that accounts for leases or tunnel
// bytes goes through here, so a stalled reader costs the data path one
// array store per event and nothing else.
//
// The bus also keeps its last HISTORY events of each kind (run events, and
// the rest), so a client that reconnects with the id of the last event it
// saw (SSE's Last-Event-ID) gets what it missed, or is told it lost some. An id names this process too (its
// boot), so a reconnect to a restarted edge is never taken for a resume.
import { randomBytes } from 'node:crypto';
import { isRunEvent, type EdgeEvent } from '../../contract/events.js';

export const DEFAULT_SUBSCRIBER_BUFFER = 1024;
export const MAX_SUBSCRIBER_BUFFER = 65_536;
/** Events kept for reconnecting clients, of each kind (node and config events are rare: this is minutes to hours of them). */
export const HISTORY = 1024;

/** One published event; its wire form is built once, on first use, and shared. */
export class PublishedEvent {
  #frame: string | undefined;

  constructor(
    readonly boot: string,
    readonly seq: number,
    readonly time: number,
    readonly event: EdgeEvent,
  ) {}

  /** The server-sent-events frame: id (boot-seq), event type, JSON data. */
  get frame(): string {
    this.#frame ??= `id: ${this.boot}-${this.seq}\nevent: ${this.event.type}\ndata: ${JSON.stringify({ seq: this.seq, time: new Date(this.time).toISOString(), ...this.event })}\n\n`;
    return this.#frame;
  }
}

/** What a reconnecting subscriber was given back (see EventBus.subscribe). */
export interface Resumption {
  /** The Last-Event-ID it sent. */
  readonly lastEventId: string;
  /** Events after it, put in its buffer. */
  readonly replayed: number;
  /**
   * 0: the replay is whole. N: the history held N more than the subscription's
   * buffer, so the oldest N were not replayed. null: some events after it are
   * gone (pushed out of the history, published by another boot, or run events
   * not built while nobody wanted them), how many is not known.
   */
  readonly missed: number | null;
  /** The id names another boot of the edge: everything before this process's history is unknown. */
  readonly restarted: boolean;
}

const EVENT_ID = /^([0-9a-f]{1,32})-(\d{1,15})$/;

/** Told (once per batch, never from inside publish) that events are waiting. */
export interface SubscriptionReader {
  readable(subscription: Subscription): void;
  /**
   * The subscription is closed, by its reader or by the bus (closeAll): a
   * reader with a client ends its stream, else the client keeps waiting on
   * a stream that no event will reach again, and never subscribes anew.
   */
  closed?(subscription: Subscription): void;
}

export class Subscription {
  readonly startedAt = Date.now();
  /** Events lost because this subscriber's buffer was full. */
  dropped = 0;
  /** Drops not yet reported to the reader (see takeDropped). */
  #unreported = 0;
  delivered = 0;
  #ring: (PublishedEvent | undefined)[];
  #head = 0;
  #size = 0;
  #wakeQueued = false;
  #closed = false;

  readonly #bus: EventBus;
  readonly #reader: SubscriptionReader;

  constructor(
    readonly id: number,
    readonly capacity: number,
    bus: EventBus,
    reader: SubscriptionReader,
    /** False: node, config and edge events only. Run events (five per request) are built only while some subscriber wants them. */
    readonly runs = true,
  ) {
    this.#bus = bus;
    this.#reader = reader;
    this.#ring = new Array<PublishedEvent | undefined>(capacity);
  }

  get buffered(): number {
    return this.#size;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** @internal called by the bus */
  push(event: PublishedEvent): void {
    const ring = this.#ring;
    if (this.#size === this.capacity) {
      // Full: the oldest event goes, the newest is kept.
      ring[this.#head] = undefined;
      this.#head = (this.#head + 1) % this.capacity;
      this.#size--;
      this.dropped++;
      this.#unreported++;
      this.#bus.countDrop();
    }
    ring[(this.#head + this.#size) % this.capacity] = event;
    this.#size++;
    if (!this.#wakeQueued) {
      this.#wakeQueued = true;
      setImmediate(wakeReader, this);
    }
  }

  /** The oldest buffered event, removed; undefined when empty. */
  shift(): PublishedEvent | undefined {
    if (this.#size === 0) return undefined;
    const event = this.#ring[this.#head];
    this.#ring[this.#head] = undefined;
    this.#head = (this.#head + 1) % this.capacity;
    this.#size--;
    this.delivered++;
    return event;
  }

  /** Drops since the last call, so the reader can tell its client about the gap. */
  takeDropped(): number {
    const n = this.#unreported;
    this.#unreported = 0;
    return n;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ring = [];
    this.#size = 0;
    this.#bus.unsubscribe(this);
    this.#reader.closed?.(this);
  }

  /** @internal setImmediate callback */
  wake(): void {
    this.#wakeQueued = false;
    if (!this.#closed) this.#reader.readable(this);
  }
}

function wakeReader(subscription: Subscription): void {
  subscription.wake();
}

export class EventBus {
  readonly #subscribers = new Set<Subscription>();
  /** Subscribers that want run events. */
  #runReaders = 0;
  #seq = 0;
  #nextId = 1;
  /** The last HISTORY node, provider, config and edge events; run events (five a request) have their own, so they never push those out. */
  readonly #history = new History();
  readonly #runHistory = new History();
  /** The seq at which run events were last switched off (no subscriber wanted them): none were built after it for a while. */
  #runsOffAt = -1;
  /** Names this process in every event id. */
  readonly boot = randomBytes(4).toString('hex');
  /** Events dropped over every subscriber, ever. */
  droppedTotal = 0;
  publishedTotal = 0;
  /** Called when `active` flips (workers mode: I/O workers build run events only while it is true). */
  onActiveChange: ((active: boolean) => void) | undefined;

  /** False when nobody wants run events: the data path skips building them at all. */
  get active(): boolean {
    return this.#runReaders > 0;
  }

  get subscribers(): ReadonlySet<Subscription> {
    return this.#subscribers;
  }

  publish(event: EdgeEvent): void {
    const run = isRunEvent(event);
    // Run events exist only while someone wants them; the others are kept for reconnects even with nobody listening.
    if (run && this.#runReaders === 0) return;
    const published = new PublishedEvent(this.boot, ++this.#seq, Date.now(), event);
    (run ? this.#runHistory : this.#history).add(published);
    if (this.#subscribers.size === 0) return;
    this.publishedTotal++;
    for (const subscription of this.#subscribers) if (!run || subscription.runs) subscription.push(published);
  }

  subscribe(reader: SubscriptionReader, capacity = DEFAULT_SUBSCRIBER_BUFFER, runs = true): Subscription {
    const size = Math.max(1, Math.min(MAX_SUBSCRIBER_BUFFER, Math.floor(capacity)));
    const subscription = new Subscription(this.#nextId++, size, this, reader, runs);
    this.#subscribers.add(subscription);
    if (runs && ++this.#runReaders === 1) this.onActiveChange?.(true);
    return subscription;
  }

  /**
   * A reconnect (SSE's Last-Event-ID): a new subscription whose buffer
   * starts with the events after `lastEventId` that the history still
   * holds, and what was replayed and what is lost.
   */
  resubscribe(reader: SubscriptionReader, capacity: number, runs: boolean, lastEventId: string): { subscription: Subscription; resumption: Resumption } {
    const subscription = this.subscribe(reader, capacity, runs);
    return { subscription, resumption: this.#resume(subscription, lastEventId) };
  }

  #resume(subscription: Subscription, lastEventId: string): Resumption {
    const match = EVENT_ID.exec(lastEventId.trim());
    const sameBoot = match !== null && match[1] === this.boot;
    const last = sameBoot ? Number(match[2]) : 0;
    if (sameBoot && last > this.#seq) {
      // Not an id this boot handed out: nothing can be said about what came after it.
      return { lastEventId, replayed: 0, missed: null, restarted: false };
    }
    const replay: PublishedEvent[] = [];
    this.#history.after(last, replay);
    if (subscription.runs) this.#runHistory.after(last, replay);
    replay.sort(bySeq);
    // The newest the buffer holds: the older ones are missed, said so in `missed`, not dropped as a slow reader's.
    const skipped = Math.max(0, replay.length - subscription.capacity);
    for (let i = skipped; i < replay.length; i++) subscription.push(replay[i]);
    // Whole when nothing after `last` left the histories and, for run events, they were built all along since.
    const whole = sameBoot && this.#history.evictedSeq <= last && (!subscription.runs || (this.#runHistory.evictedSeq <= last && this.#runsOffAt < last));
    return { lastEventId, replayed: replay.length - skipped, missed: whole ? skipped : null, restarted: !sameBoot };
  }

  /** @internal */
  unsubscribe(subscription: Subscription): void {
    if (this.#subscribers.delete(subscription) && subscription.runs && --this.#runReaders === 0) {
      this.#runsOffAt = this.#seq;
      this.onActiveChange?.(false);
    }
  }

  /** @internal */
  countDrop(): void {
    this.droppedTotal++;
  }

  closeAll(): void {
    for (const subscription of [...this.#subscribers]) subscription.close();
  }
}

/** A ring of the last HISTORY published events, and the newest seq it has let go. */
class History {
  readonly #ring: PublishedEvent[] = [];
  #head = 0;
  evictedSeq = 0;

  add(published: PublishedEvent): void {
    const ring = this.#ring;
    if (ring.length < HISTORY) {
      ring.push(published);
      return;
    }
    this.evictedSeq = ring[this.#head].seq;
    ring[this.#head] = published;
    this.#head = (this.#head + 1) % HISTORY;
  }

  /** Appends the kept events after seq `last`, oldest first. */
  after(last: number, out: PublishedEvent[]): void {
    const ring = this.#ring;
    for (let k = 0; k < ring.length; k++) {
      const published = ring[(this.#head + k) % ring.length];
      if (published.seq > last) out.push(published);
    }
  }
}

function bySeq(a: PublishedEvent, b: PublishedEvent): number {
  return a.seq - b.seq;
}
