// What the mock provider observed, for tests in the same process (requestLog,
// stats, events) and for benchmarks in another one (GET /mock/stats).
// Everything is bounded: a long benchmark keeps the last logLimit entries
// and only the newest bodyLogLimit request bodies.

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { Pacer } from './pacer.js';

export interface MockStats {
  /** API requests received (everything but /mock/*). */
  readonly requests: number;
  /** Responses written to the end. */
  readonly completed: number;
  /** Peer closed the connection before the response was complete (a cancelled upstream request). */
  readonly aborted: number;
  /** Failures injected with x-mock-fail (status or reset). */
  readonly failuresInjected: number;
  readonly inFlight: number;
  /** Times a response write returned false and the mock waited for 'drain'. */
  readonly backpressureWaits: number;
  /** Response writes (SSE events, or whole non-streaming bodies). */
  readonly chunksEmitted: number;
}

export interface EmitTime {
  /** Position of the event in its response, from 0 (for SSE: tokens, final chunk, [DONE]). */
  readonly index: number;
  /** performance.now() when it was handed to the socket. */
  readonly atMs: number;
}

export interface MockRequestRecord {
  /** Unique per provider, increasing. */
  readonly id: number;
  readonly method: string;
  /**
   * The request's x-request-id (when a printable token of at most 128
   * characters), else `mock-<id>`: echoed in every chunk of the answer.
   */
  readonly requestId: string;
  /** Tokens the answer carries (the plan's, x-mock-tokens overriding the default); 0 until planned. */
  readonly tokens: number;
  /** Path without the query string. */
  readonly path: string;
  /** The `model` the request carried (undefined until the body is read, or if it had none). */
  readonly model: string | undefined;
  readonly stream: boolean;
  readonly receivedHeaders: IncomingHttpHeaders;
  /** The request body as received; dropped once bodyLogLimit newer bodies arrived. */
  readonly body: Buffer | undefined;
  /** Response status, once headers were written. */
  readonly status: number | undefined;
  /** The x-mock-fail failure injected into this request, if any. */
  readonly failure: string | undefined;
  readonly aborted: boolean;
  readonly completed: boolean;
  readonly chunksEmitted: number;
  readonly backpressureWaits: number;
  /** When each event was handed to the socket; only with the recordEmitTimes option (else empty). */
  readonly emitTimes: readonly EmitTime[];
  readonly receivedAtMs: number;
  readonly endedAtMs: number | undefined;
}

export type MutableRecord = { -readonly [K in keyof MockRequestRecord]: MockRequestRecord[K] } & { emitTimes: EmitTime[] };

export interface LastRequest {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

export type MockEvent = 'request' | 'abort' | 'complete' | 'fail';

/** An x-request-id echoed as is: short and printable, so every chunk stays small and valid. */
const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

export class MockState extends EventEmitter {
  readonly stats = { requests: 0, completed: 0, aborted: 0, failuresInjected: 0, inFlight: 0, backpressureWaits: 0, chunksEmitted: 0 };
  readonly requestLog: MutableRecord[] = [];
  readonly lastRequests = new Map<string, LastRequest>();
  /** Set by close(): connections it ends are not counted as aborts. */
  closing = false;
  /** Responses API: stored response bodies by id (GET, DELETE, previous_response_id). */
  readonly storedResponses = new Map<string, string>();
  /** Makes this mock's response ids unique among several mocks (as a real provider's are). */
  readonly instanceTag = randomBytes(6).toString('hex');
  /** The shared timers streams wait on (ttft, interval). */
  readonly pacer = new Pacer();
  readonly #logLimit: number;
  readonly #recordEmitTimes: boolean;
  readonly #bodyRing: (MutableRecord | undefined)[];
  #bodyNext = 0;
  #nextId = 1;

  constructor(logLimit: number, bodyLogLimit: number, recordEmitTimes: boolean) {
    super();
    this.#logLimit = logLimit;
    this.#recordEmitTimes = recordEmitTimes;
    this.#bodyRing = new Array<MutableRecord | undefined>(bodyLogLimit).fill(undefined);
  }

  open(method: string, path: string, headers: IncomingHttpHeaders): MutableRecord {
    const id = this.#nextId++;
    const tag = headers['x-request-id'];
    const record: MutableRecord = {
      id,
      requestId: typeof tag === 'string' && REQUEST_ID.test(tag) ? tag : `mock-${id}`,
      tokens: 0,
      method,
      path,
      model: undefined,
      stream: false,
      receivedHeaders: headers,
      body: undefined,
      status: undefined,
      failure: undefined,
      aborted: false,
      completed: false,
      chunksEmitted: 0,
      backpressureWaits: 0,
      emitTimes: [],
      receivedAtMs: performance.now(),
      endedAtMs: undefined,
    };
    this.stats.requests++;
    this.stats.inFlight++;
    const log = this.requestLog;
    log.push(record);
    if (log.length > this.#logLimit) log.shift();
    return record;
  }

  /** Stores the body on the record, dropping the body of the record bodyLogLimit bodies ago. */
  keepBody(record: MutableRecord, body: Buffer): void {
    this.lastRequests.set(record.path, { headers: record.receivedHeaders, body });
    const ring = this.#bodyRing;
    if (ring.length === 0) return;
    const evicted = ring[this.#bodyNext];
    if (evicted !== undefined) evicted.body = undefined;
    ring[this.#bodyNext] = record;
    this.#bodyNext = (this.#bodyNext + 1) % ring.length;
    record.body = body;
  }

  emitted(record: MutableRecord, index: number): void {
    record.chunksEmitted++;
    // An object per event of every stream in flight: kept only when a test reads them.
    if (this.#recordEmitTimes) record.emitTimes.push({ index, atMs: performance.now() });
    this.stats.chunksEmitted++;
  }

  reset(): void {
    const s = this.stats;
    s.requests = s.completed = s.aborted = s.failuresInjected = s.backpressureWaits = s.chunksEmitted = 0;
    this.requestLog.length = 0;
    this.lastRequests.clear();
  }
}
