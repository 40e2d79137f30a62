// A RecordWriter that never drops: when the ring is full, records wait in an
// ordered backlog (copies, names kept as strings) that is flushed as the
// consumer frees space (waitForSpace). Once a backlog exists every new record
// joins it, so order is kept. Used for worker <-> scheduler records.
// Records are written at once but committed (made visible, the sleeping
// reader woken) once per batch: waking the other thread costs far more than
// a record, and per request several records go each way.
import { RECORD_BYTES, RecordWriter, SchedulerRecord, STRING_HEADER_BYTES } from './scheduler-records.js';
import type { RingProducer } from '../shared/ring/ring-producer.js';

class Backlogged {
  readonly record = new SchedulerRecord();
  constructor(
    source: SchedulerRecord,
    readonly node: string | undefined,
    readonly provider: string | undefined,
    readonly name: string | undefined,
    readonly extra: string | undefined,
  ) {
    Object.assign(this.record, source);
  }
}

export class RecordChannel {
  readonly #writer: RecordWriter;
  readonly #backlog: Backlogged[] = [];
  #flushing = false;
  #commitQueued = false;
  readonly #commitQueuedRecords = this.commit.bind(this);
  /** Records that had to wait for space (metrics, tests). */
  backlogged = 0;

  readonly #producer: RingProducer;

  constructor(producer: RingProducer) {
    this.#producer = producer;
    this.#writer = new RecordWriter(producer, false);
  }

  /** Writes `record`, interning the names given (their ids go into nodeId,
   * providerId, nameId, extraId). The reader sees it after the current batch. */
  send(record: SchedulerRecord, node?: string, provider?: string, name?: string, extra?: string): void {
    if (this.#backlog.length === 0 && this.#tryWrite(record, node, provider, name, extra)) {
      if (!this.#commitQueued) this.#queueCommit();
      return;
    }
    this.backlogged++;
    this.#backlog.push(new Backlogged(record, node, provider, name, extra));
    if (!this.#flushing) void this.#flush();
  }

  /** Publishes every record written so far (and wakes the reader if it sleeps). */
  commit(): void {
    this.#commitQueued = false;
    this.#producer.commit();
  }

  #queueCommit(): void {
    this.#commitQueued = true;
    // setImmediate, not a microtask: one commit covers every record of this
    // event-loop turn (many sockets' callbacks), and batches more (measured).
    setImmediate(this.#commitQueuedRecords);
  }

  get pending(): number {
    return this.#backlog.length;
  }

  #tryWrite(record: SchedulerRecord, node: string | undefined, provider: string | undefined, name: string | undefined, extra?: string): boolean {
    if (node !== undefined && (record.nodeId = this.#writer.intern(node)) === 0) return false;
    if (provider !== undefined && (record.providerId = this.#writer.intern(provider)) === 0) return false;
    if (name !== undefined && (record.nameId = this.#writer.intern(name)) === 0) return false;
    if (extra !== undefined && (record.extraId = this.#writer.intern(extra)) === 0) return false;
    return this.#writer.write(record);
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#backlog.length > 0) {
        const head = this.#backlog[0];
        if (this.#tryWrite(head.record, head.node, head.provider, head.name, head.extra)) {
          this.#backlog.shift();
          if (!this.#commitQueued) this.#queueCommit();
          continue;
        }
        const need = Math.max(RECORD_BYTES, STRING_HEADER_BYTES + Math.max(byteLength(head.node), byteLength(head.provider), byteLength(head.name), byteLength(head.extra)));
        if (!(await this.#producer.waitForSpace(need)) && this.#producer.closed) return;
      }
    } finally {
      this.#flushing = false;
    }
  }
}

function byteLength(name: string | undefined): number {
  return name === undefined ? 0 : Buffer.byteLength(name, 'utf8');
}
