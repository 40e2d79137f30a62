// Run reports from an I/O worker to the main thread's run records, one
// message per event-loop turn. Structured-cloning the report objects cost
// more than the rest of the hand-off together (with workers.count 1, V8's
// serializer and deserializer were ~8 % of the edge's CPU under a closed
// loop, and the deserialized strings were hashed again on every map lookup
// in the run records). So a turn's reports travel as one Float64Array plus the
// few strings the main thread has not seen yet:
//
// - names (models, sessions, API keys, nodes, providers, adapters, outcomes) repeat:
//   each is sent once as a NAME op and then referred to by its id (the
//   table is bounded, and clients' sessions may fill only half of it);
// - a run's id is sent once, with its queued report, and then referred to
//   by a slot number until its finished report frees the slot;
// - anything else (a client's request tag, an error message, a name past
//   the table's bound) goes inline, in the message's `strings`.
//
// A string field is one number: > 0 a name id, < 0 `strings[-code - 1]`,
// 0 none (null, or for a request id: the same as the run id). The decoder
// rebuilds the same RunEvent objects, holding one copy of each name and
// run id, so the run records' lookups hash each string once. The wire is
// ordered (one MessagePort), so an id is always defined before its use.
// One encoder per worker, one decoder per worker on the main thread; the
// decoder also knows which runs are open, so when a worker exits the pool
// can close them in the run records.
import type { RunEvent } from './events.js';

export interface RunWireBatch {
  readonly type: 'runWire';
  readonly numbers: Float64Array<ArrayBuffer>;
  readonly strings: readonly string[];
}

const NAME = 0;
const QUEUED = 1;
const DISPATCHED = 2;
const FIRST_BYTE = 3;
const STARTED = 4;
const FINISHED = 5;
const REQUEUED = 6;

/** Distinct names a worker defines; past it names go inline (a client's model or session text can be anything). */
export const RUN_WIRE_NAME_LIMIT = 4096;
/** Sessions are named by clients, without bound: they may take half the table, so models, nodes and providers always find room. */
const SESSION_NAME_LIMIT = RUN_WIRE_NAME_LIMIT / 2;
/** Longest text kept as a name: longer ones (rare) go inline. */
const NAME_MAX_CHARS = 256;
/** Numbers one report may add: the largest (FINISHED, 15) and NAME ops (3 each) for its at most 4 new names. */
const MAX_EVENT_NUMBERS = 15 + 4 * 3;

export class RunWireEncoder {
  #numbers: Float64Array<ArrayBuffer> = new Float64Array(1024);
  #length = 0;
  #strings: string[] = [];
  readonly #names = new Map<string, number>();
  /** Open runs' slot numbers, by run id: between a queued report and its finished one. */
  readonly #slots = new Map<string, number>();
  readonly #freeSlots: number[] = [];
  #nextSlot = 1;

  /** Open runs this encoder holds a slot for (tests, leak checks). */
  get openRuns(): number {
    return this.#slots.size;
  }

  /** One turn's reports as one message; the encoder is ready for the next turn. */
  encode(events: readonly RunEvent[]): RunWireBatch {
    for (let i = 0; i < events.length; i++) this.#event(events[i]);
    const batch: RunWireBatch = { type: 'runWire', numbers: this.#numbers.slice(0, this.#length), strings: this.#strings };
    this.#length = 0;
    this.#strings = [];
    return batch;
  }

  #event(event: RunEvent): void {
    if (this.#length + MAX_EVENT_NUMBERS > this.#numbers.length) this.#grow();
    switch (event.type) {
      case 'run.queued': {
        // Names first: their NAME ops must precede the report that uses them.
        const model = this.#name(event.model);
        const session = this.#name(event.session, SESSION_NAME_LIMIT);
        // Key names are the config's: a bounded set, always a name once the table has room.
        const key = event.key === undefined ? 0 : this.#name(event.key);
        let slot = this.#slots.get(event.runId);
        if (slot === undefined) {
          slot = this.#freeSlots.pop() ?? this.#nextSlot++;
          this.#slots.set(event.runId, slot);
        }
        this.#push(QUEUED);
        this.#push(slot);
        this.#push(this.#inline(event.runId));
        this.#push(this.#requestId(event.requestId, event.runId));
        this.#push(model);
        this.#push(session);
        this.#push(key);
        this.#push(event.at);
        return;
      }
      case 'run.dispatched': {
        const model = this.#name(event.model);
        const node = this.#name(event.node);
        const provider = this.#name(event.provider);
        const adapter = this.#name(event.adapter);
        this.#push(DISPATCHED);
        this.#push(this.#run(event.runId));
        this.#push(model);
        this.#push(node);
        this.#push(provider);
        this.#push(adapter);
        this.#push(event.attempt);
        this.#push(event.queueMs);
        this.#push(event.at);
        return;
      }
      case 'run.requeued': {
        const model = this.#name(event.model);
        const reason = this.#name(event.reason);
        const node = event.node === null ? 0 : this.#name(event.node);
        const provider = event.provider === null ? 0 : this.#name(event.provider);
        this.#push(REQUEUED);
        this.#push(this.#run(event.runId));
        this.#push(model);
        this.#push(reason);
        this.#push(node);
        this.#push(provider);
        this.#push(event.at);
        return;
      }
      case 'run.first_byte': {
        const model = this.#name(event.model);
        this.#push(FIRST_BYTE);
        this.#push(this.#run(event.runId));
        this.#push(model);
        this.#push(event.ttfbMs);
        this.#push(event.at);
        return;
      }
      case 'run.started': {
        const model = this.#name(event.model);
        const node = this.#name(event.node);
        const provider = this.#name(event.provider);
        this.#push(STARTED);
        this.#push(this.#run(event.runId));
        this.#push(this.#requestId(event.requestId, event.runId));
        this.#push(model);
        this.#push(node);
        this.#push(provider);
        this.#push(event.queueMs);
        return;
      }
      case 'run.finished': {
        const model = this.#name(event.model);
        const node = event.node === null ? 0 : this.#name(event.node);
        const provider = event.provider === null ? 0 : this.#name(event.provider);
        const outcome = this.#name(event.outcome);
        const run = this.#run(event.runId);
        this.#push(FINISHED);
        this.#push(run);
        this.#push(this.#requestId(event.requestId, event.runId));
        this.#push(model);
        this.#push(node);
        this.#push(provider);
        this.#push(event.status);
        this.#push(outcome);
        this.#push(event.totalMs);
        this.#push(event.queueMs);
        this.#push(event.bytesOut);
        this.#push(event.at ?? Number.NaN);
        const tokens = event.tokens ?? null;
        this.#push(tokens === null ? -1 : tokens.prompt);
        this.#push(tokens === null ? -1 : tokens.completion);
        this.#push(event.error === undefined ? 0 : this.#inline(event.error));
        // The decoder frees it too, after reading this report.
        if (run > 0) {
          this.#slots.delete(event.runId);
          this.#freeSlots.push(run);
        }
        return;
      }
      default: {
        // A new RunEvent type fails to compile here until it has an encoding.
        const unknown: never = event;
        throw new Error(`run wire: no encoding for ${(unknown as RunEvent).type}`);
      }
    }
  }

  #push(value: number): void {
    this.#numbers[this.#length++] = value;
  }

  #grow(): void {
    const bigger = new Float64Array(this.#numbers.length * 2);
    bigger.set(this.#numbers.subarray(0, this.#length));
    this.#numbers = bigger;
  }

  /** A request id is the run id unless the client tagged the request: 0 then, the tag inline otherwise. */
  #requestId(requestId: string, runId: string): number {
    return requestId === runId ? 0 : this.#inline(requestId);
  }

  /** The run's slot, or the id inline when it has none (a report without a queued one before it). */
  #run(runId: string): number {
    return this.#slots.get(runId) ?? this.#inline(runId);
  }

  #inline(text: string): number {
    return -this.#strings.push(text);
  }

  #name(text: string, limit = RUN_WIRE_NAME_LIMIT): number {
    const id = this.#names.get(text);
    if (id !== undefined) return id;
    if (text.length > NAME_MAX_CHARS || this.#names.size >= limit) return this.#inline(text);
    const defined = this.#names.size + 1;
    this.#names.set(text, defined);
    this.#push(NAME);
    this.#push(defined);
    this.#push(this.#inline(text));
    return defined;
  }
}

/** A run the worker reported queued and never finished, as its exit leaves it. */
export interface OpenRun {
  readonly runId: string;
  readonly requestId: string;
  readonly model: string;
  /** Wall clock of its queued report. */
  readonly queuedAt: number;
}

export class RunWireDecoder {
  /** By id; index 0 unused. */
  readonly #names: string[] = [''];
  /** Open runs' ids, by slot; their models and queued times beside them. */
  readonly #slots: (string | undefined)[] = [];
  readonly #models: string[] = [];
  readonly #queuedAt: number[] = [];
  /** The client's request tag where it is not the run id. */
  readonly #tags: (string | undefined)[] = [];
  /** Set by a batch that failed part-way: its names and slots are then unknown, so nothing later can be read safely. */
  #broken = false;

  get broken(): boolean {
    return this.#broken;
  }

  /** Runs queued and not finished: what the run records hold open for this worker. */
  openRuns(): OpenRun[] {
    const out: OpenRun[] = [];
    for (let slot = 0; slot < this.#slots.length; slot++) {
      const runId = this.#slots[slot];
      if (runId !== undefined) out.push({ runId, requestId: this.#tags[slot] ?? runId, model: this.#models[slot], queuedAt: this.#queuedAt[slot] });
    }
    return out;
  }

  /**
   * The batch's reports, in order. Throws on a malformed batch (a bug in the
   * encoder, not client input); after that every later batch throws too, as
   * the ids it refers to can no longer be trusted.
   */
  decode(batch: RunWireBatch): RunEvent[] {
    if (this.#broken) throw new Error('run wire: an earlier batch could not be read');
    this.#broken = true;
    const n = batch.numbers;
    const s = batch.strings;
    const out: RunEvent[] = [];
    let i = 0;
    while (i < n.length) {
      const op = n[i++];
      switch (op) {
        case NAME:
          this.#names[n[i]] = this.#text(n[i + 1], s);
          i += 2;
          break;
        case QUEUED: {
          const slot = n[i];
          const runId = this.#text(n[i + 1], s);
          const model = this.#text(n[i + 3], s);
          const tag = n[i + 2] === 0 ? undefined : this.#text(n[i + 2], s);
          this.#slots[slot] = runId;
          this.#models[slot] = model;
          this.#queuedAt[slot] = n[i + 6];
          this.#tags[slot] = tag;
          const key = n[i + 5] === 0 ? undefined : this.#text(n[i + 5], s);
          out.push({ type: 'run.queued', runId, requestId: tag ?? runId, model, session: this.#text(n[i + 4], s), key, at: n[i + 6] });
          i += 7;
          break;
        }
        case DISPATCHED:
          out.push({
            type: 'run.dispatched',
            runId: this.#run(n[i], s),
            model: this.#text(n[i + 1], s),
            node: this.#text(n[i + 2], s),
            provider: this.#text(n[i + 3], s),
            adapter: this.#text(n[i + 4], s),
            attempt: n[i + 5],
            queueMs: n[i + 6],
            at: n[i + 7],
          });
          i += 8;
          break;
        case REQUEUED:
          out.push({
            type: 'run.requeued',
            runId: this.#run(n[i], s),
            model: this.#text(n[i + 1], s),
            reason: this.#text(n[i + 2], s),
            node: n[i + 3] === 0 ? null : this.#text(n[i + 3], s),
            provider: n[i + 4] === 0 ? null : this.#text(n[i + 4], s),
            at: n[i + 5],
          });
          i += 6;
          break;
        case FIRST_BYTE:
          out.push({ type: 'run.first_byte', runId: this.#run(n[i], s), model: this.#text(n[i + 1], s), ttfbMs: n[i + 2], at: n[i + 3] });
          i += 4;
          break;
        case STARTED: {
          const runId = this.#run(n[i], s);
          out.push({ type: 'run.started', runId, requestId: this.#requestId(n[i + 1], runId, s), model: this.#text(n[i + 2], s), node: this.#text(n[i + 3], s), provider: this.#text(n[i + 4], s), queueMs: n[i + 5] });
          i += 6;
          break;
        }
        case FINISHED: {
          const runId = this.#run(n[i], s);
          if (n[i] > 0) {
            this.#slots[n[i]] = undefined;
            this.#models[n[i]] = '';
            this.#tags[n[i]] = undefined;
          }
          const at = n[i + 10];
          const prompt = n[i + 11];
          const error = n[i + 13];
          // One shape whatever is absent (undefined drops out of the JSON the event stream sends, as a missing key would).
          out.push({
            type: 'run.finished',
            runId,
            requestId: this.#requestId(n[i + 1], runId, s),
            model: this.#text(n[i + 2], s),
            node: n[i + 3] === 0 ? null : this.#text(n[i + 3], s),
            provider: n[i + 4] === 0 ? null : this.#text(n[i + 4], s),
            status: n[i + 5],
            outcome: this.#text(n[i + 6], s),
            totalMs: n[i + 7],
            queueMs: n[i + 8],
            bytesOut: n[i + 9],
            at: Number.isNaN(at) ? undefined : at,
            tokens: prompt < 0 ? null : { prompt, completion: n[i + 12] },
            error: error === 0 ? undefined : this.#text(error, s),
          });
          i += 14;
          break;
        }
        default:
          throw new Error(`run wire: unknown op ${op} at ${i - 1}`);
      }
    }
    this.#broken = false;
    return out;
  }

  /** The encoder's request-id code: 0 = the run id. */
  #requestId(code: number, runId: string, strings: readonly string[]): string {
    return code === 0 ? runId : this.#text(code, strings);
  }

  #run(code: number, strings: readonly string[]): string {
    if (code < 0) return this.#text(code, strings);
    const runId = this.#slots[code];
    if (runId === undefined) throw new Error(`run wire: slot ${code} is not open`);
    return runId;
  }

  #text(code: number, strings: readonly string[]): string {
    const text = code < 0 ? strings[-code - 1] : this.#names[code];
    if (text === undefined) throw new Error(`run wire: string ${code} is not defined`);
    return text;
  }
}
