// Fixed-size scheduler records for the worker <-> scheduler rings, encoded in
// place in the ring (reserve, encode into producer.view, commit) and decoded
// in place (consumer.drainInPlace), so neither side allocates per record.
//
// One 64-byte layout for every kind (little-endian, offsets in bytes):
//    0 u8  kind        RecordKind
//    1 u8  code        ReleaseReason / AdmissionRejectCode (see the tables below); confirm reply: 1 = current
//    2 u16 worker      grant: index of the worker holding the node's session; admit, requeue: the API kind; else 0
//    4 u32 generation  node connection generation; admit: the API key's max_concurrent (0 = none)
//    8 f64 requestId   integers up to 2^53, as the data path mints them
//   16 f64 leaseId     integers up to 2^53, as the scheduler mints them
//   24 u32 nodeId      interned name id, 0 = none
//   28 u32 providerId  interned name id, 0 = none; admit: the API key's name
//   32 u32 nameId      interned: the alias (admit) or served model (grant)
//   36 u32 rate        admit: the API key's requests_per_minute (0 = none); else 0
//   40 f64 value       admit: estimatedTokens; grant: queuedMs; reject: retryAfterSec; keyRelease: tokens used
//   48 u32 extraId     interned: admit, requeue: the pinned provider (0 = none); else 0
//   52 u32 aux         admit: the tenant's fair-queuing weight (0 = default 1); else 0
//   56 f64 session     admit, requeue: the session's 53-bit key (0 = none; sessionKeyOf); else 0
// Fields per kind (unlisted fields are 0):
//   admit      requestId, nameId (alias), nodeId (direct dispatch), value, session, worker (API kind), extraId (pinned provider);
//              fair queuing: code (priority, int8 two's complement), leaseId (tenant key, u32), aux (weight);
//              with I/O workers, for any API key: providerId (key name), generation (its limit; 0 = counted only),
//              rate (its requests per minute; 0 = none)
//   grant      requestId, leaseId, generation, nodeId, providerId, nameId, value; with I/O workers, for a key with a
//              requests_per_minute or tokens_per_minute (encodeKeyLevels): aux (1 | 2: which are there), rate
//              (requests left, floored), session (tokens left; below 0: a debt)
//   reject     requestId, code, value; aux: Retry-After in ms (0 = none), but for a key's refusal (isKeyRefusal):
//              what the key has left, as a grant's (encodeKeyLevels)
//   release    leaseId, code (requestId when known), value (tokens the response reported, 0 = unknown)
//   confirm    leaseId; the reply also carries code (1 = current, 0 = stale)
//   connect    nodeId; the reply also carries generation
//   disconnect nodeId, generation; code 1 = only a lane of that connection ended
// I/O workers (docs/architecture.md has the full tables) add, worker -> main:
//   cancel     requestId
//   requeue    requestId, leaseId, nameId (alias), nodeId (direct), providerId (excluded), value (tokens), session, worker (API), extraId (pinned)
//   sent       (no longer written: RemoteScheduler.confirmSent says why; the kind stays reserved)
//   stale      requestId, leaseId: the session was gone or of another generation
//   announce   requestId = the session's serial, providerId: one provider the node announced (all of them precede its connect);
//              code: its endpoint mask | 0x80 when the node announced endpoints for it (0 = none announced: config applies)
//              | 0x40 when its health probe failed as the node registered
//   connect    requestId = the session's serial, nodeId; code 1 = a lane joining `generation`, 2 = a node registering drained
//   draining   nodeId, code (1 = draining)
//   keyRelease requestId: the exchange admitted with a key is over (once per exchange); value: the tokens it cost the
//              key's tokens_per_minute (-1 = its reservation stands, 0 = none)
//   health     nodeId, providerId, code (1 = its active probe passes, 0 = fails)
//   announced  nodeId, providerId, generation, code: 0 = no longer offered by that connection, else ANNOUNCED_AGAIN
//              | its endpoint mask | 0x80 when the node announced endpoints for it (as announce's)
//   (release: with code overloaded, value = the provider's Retry-After in ms, -1 = none;
//    requeue: code 2 = overloaded (429/503), generation = Retry-After ms + 1, 0 = none; code 3 = the node is leaving;
//    code 4 = the node's stream closed under it (NodeFailure 'lost'))
// and main -> worker:
//   grant      as above, plus worker
//   reject     as above; code too_many_concurrent_requests = the key was at its limit, rate_limit_exceeded = over its
//              requests per minute, token_limit_exceeded = over its tokens per minute (not admitted either way)
//   requeued   requestId, code (1 = requeued, 0 = refused; only refusals are sent)
//   staleChecked requestId, leaseId, code (1 = still current)
//   connected  requestId = serial, nodeId, generation (0 = unknown node); code 1 = a lane refused, its connection has MAX_NODE_STREAMS streams
//   fence      nodeId, generation: close that session, a newer one is current
// and, both ways, queuePosition: worker -> main requestId (where does it wait?); main -> worker requestId,
//   generation (its position, 1 = next; 0 = not queued), value (ETA in ms from the measured drain rate; -1 = unknown)
//
// Names travel once per ring as `string` records (variable size: u8 kind at
// 0, u32 id at 4, UTF-8 from 8 to the record's end), written by RecordWriter
// before the first record that uses the id; the ring is FIFO, so the reader
// has always learnt a name before it meets its id. Each ring direction has its
// own table: the writer assigns ids, the reader learns them.
import type { KeyLevels, ReleaseReason } from './scheduler.js';
import type { AdmissionRejectCode } from './scheduler-port.js';
import type { RingProducer } from '../shared/ring/ring-producer.js';

export const RECORD_BYTES = 64;
/** announce: set in `code` when the node announced endpoints for the provider (the low bits are the mask). */
export const ANNOUNCED_ENDPOINTS = 0x80;
/** announce: set in `code` when the node registered with the provider's health probe failing. */
export const ANNOUNCED_UNHEALTHY = 0x40;
/** announced: set in `code` when the connection offers the provider again (the low bits as announce's). */
export const ANNOUNCED_AGAIN = 0x40;
export const STRING_HEADER_BYTES = 8;

export const RecordKind = {
  admit: 1,
  grant: 2,
  reject: 3,
  release: 4,
  confirm: 5,
  connect: 6,
  disconnect: 7,
  string: 8,
  cancel: 9,
  requeue: 10,
  sent: 11,
  stale: 12,
  draining: 13,
  requeued: 14,
  staleChecked: 15,
  connected: 16,
  fence: 17,
  keyRelease: 18,
  announce: 19,
  queuePosition: 20,
  health: 21,
  announced: 22,
} as const;
export type RecordKindCode = (typeof RecordKind)[keyof typeof RecordKind];

// Record<...> makes tsc fail here when a reason or code is added upstream.
const RELEASE_REASON_CODES: Record<ReleaseReason, number> = {
  end: 1,
  error: 2,
  client_closed: 3,
  send_failed: 4,
  body_build_failed: 5,
  timeout: 6,
  fenced: 7,
  stale_generation: 8,
  provider_failed: 9,
  run_cancelled: 10,
  overloaded: 11,
  shutting_down: 12,
};
const REJECT_CODES: Record<AdmissionRejectCode, number> = {
  model_not_found: 1,
  node_not_found: 2,
  queue_full: 3,
  queue_timeout: 4,
  no_provider_available: 5,
  too_many_concurrent_requests: 6,
  api_not_served: 7,
  pinned_provider_gone: 8,
  shed: 9,
  displaced: 10,
  context_length_exceeded: 11,
  rate_limit_exceeded: 12,
  token_limit_exceeded: 13,
};
const RELEASE_REASONS = invert(RELEASE_REASON_CODES);
const REJECTS = invert(REJECT_CODES);

export function releaseReasonCode(reason: ReleaseReason): number {
  return RELEASE_REASON_CODES[reason];
}
export function releaseReasonOf(code: number): ReleaseReason {
  return decodeCode(RELEASE_REASONS, code, 'release reason');
}
export function rejectCodeCode(code: AdmissionRejectCode): number {
  return REJECT_CODES[code];
}
export function rejectCodeOf(code: number): AdmissionRejectCode {
  return decodeCode(REJECTS, code, 'reject code');
}

/** One decoded (or to-be-encoded) record. Reuse one instance per side. */
export class SchedulerRecord {
  kind = 0;
  code = 0;
  worker = 0;
  generation = 0;
  requestId = 0;
  leaseId = 0;
  nodeId = 0;
  providerId = 0;
  nameId = 0;
  session = 0;
  extraId = 0;
  aux = 0;
  rate = 0;
  value = 0;

  /** Zeroes every field and sets `kind`, ready to fill for the next write. */
  reset(kind: RecordKindCode): this {
    this.kind = kind;
    this.code = this.worker = this.generation = this.requestId = this.leaseId = 0;
    this.nodeId = this.providerId = this.nameId = this.session = this.value = 0;
    this.extraId = this.aux = this.rate = 0;
    return this;
  }
}

export function encodeRecord(view: DataView, offset: number, r: SchedulerRecord): void {
  view.setUint32(offset, r.kind | (r.code << 8) | (r.worker << 16), true);
  view.setUint32(offset + 4, r.generation, true);
  view.setFloat64(offset + 8, r.requestId, true);
  view.setFloat64(offset + 16, r.leaseId, true);
  view.setUint32(offset + 24, r.nodeId, true);
  view.setUint32(offset + 28, r.providerId, true);
  view.setUint32(offset + 32, r.nameId, true);
  view.setUint32(offset + 36, r.rate, true);
  view.setUint32(offset + 48, r.extraId, true);
  view.setUint32(offset + 52, r.aux, true);
  view.setFloat64(offset + 40, r.value, true);
  view.setFloat64(offset + 56, r.session, true);
}

export function decodeRecord(view: DataView, offset: number, out: SchedulerRecord): void {
  out.kind = view.getUint8(offset);
  out.code = view.getUint8(offset + 1);
  out.worker = view.getUint16(offset + 2, true);
  out.generation = view.getUint32(offset + 4, true);
  out.requestId = view.getFloat64(offset + 8, true);
  out.leaseId = view.getFloat64(offset + 16, true);
  out.nodeId = view.getUint32(offset + 24, true);
  out.providerId = view.getUint32(offset + 28, true);
  out.nameId = view.getUint32(offset + 32, true);
  out.rate = view.getUint32(offset + 36, true);
  out.extraId = view.getUint32(offset + 48, true);
  out.aux = view.getUint32(offset + 52, true);
  out.value = view.getFloat64(offset + 40, true);
  out.session = view.getFloat64(offset + 56, true);
}

/** Grant, and a key's refusal: what the request's API key has left, in rate (requests, floored), session (tokens) and aux (1: requests there, 2: tokens there). */
export function encodeKeyLevels(r: SchedulerRecord, levels: KeyLevels): void {
  if (!Number.isNaN(levels.requests)) {
    r.aux |= 1;
    r.rate = Math.max(0, Math.min(0xffffffff, Math.floor(levels.requests)));
  }
  if (!Number.isNaN(levels.tokens)) {
    r.aux |= 2;
    r.session = levels.tokens;
  }
}

/** Grant, a key's refusal: the key levels back; undefined when none were written. */
export function decodeKeyLevels(r: SchedulerRecord): KeyLevels | undefined {
  if (r.aux === 0) return undefined;
  return { requests: (r.aux & 1) === 0 ? Number.NaN : r.rate, tokens: (r.aux & 2) === 0 ? Number.NaN : r.session };
}

/** Admit: the request's fair-queuing fields into code (priority), leaseId (tenant key) and aux (weight). */
export function encodeFairness(r: SchedulerRecord, request: { readonly priority?: number; readonly tenantKey?: number; readonly weight?: number }): void {
  const priority = Math.max(-128, Math.min(127, Math.trunc(request.priority ?? 0)));
  r.code = priority & 0xff;
  r.leaseId = (request.tenantKey ?? 0) >>> 0;
  r.aux = Math.max(0, Math.min(0xffffffff, Math.trunc(request.weight ?? 0)));
}

/** Admit: the fair-queuing fields back (priority sign-extended from int8). */
export function decodeFairness(r: SchedulerRecord): { priority: number; tenantKey: number; weight: number } {
  return { priority: (r.code << 24) >> 24, tenantKey: r.leaseId, weight: r.aux === 0 ? 1 : r.aux };
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();

/** Writing side of one ring direction: interns names and writes records. */
export class RecordWriter {
  readonly #ids = new Map<string, number>();

  readonly #producer: RingProducer;
  readonly #commitEach: boolean;

  /** `commitEach` false: records stay reserved until the owner calls
   * producer.commit() (RecordChannel batches commits, so wake-ups). */
  constructor(producer: RingProducer, commitEach = true) {
    this.#producer = producer;
    this.#commitEach = commitEach;
  }

  /** The id of `name`, writing its `string` record first if the reader has
   * not seen it yet. 0 when that record does not fit now: backpressure, as
   * for write(); nothing was interned and the call can be repeated. */
  intern(name: string): number {
    const known = this.#ids.get(name);
    if (known !== undefined) return known;
    const length = STRING_HEADER_BYTES + Buffer.byteLength(name, 'utf8');
    const offset = this.#producer.reserve(length);
    if (offset < 0) return 0;
    const id = this.#ids.size + 1;
    this.#producer.view.setUint32(offset, RecordKind.string, true);
    this.#producer.view.setUint32(offset + 4, id, true);
    utf8.encodeInto(name, this.#producer.bytes.subarray(offset + STRING_HEADER_BYTES, offset + length));
    if (this.#commitEach) this.#producer.commit();
    this.#ids.set(name, id);
    return id;
  }

  /** Writes `record` as one ring record. False when the ring is full. */
  write(record: SchedulerRecord): boolean {
    const offset = this.#producer.reserve(RECORD_BYTES);
    if (offset < 0) return false;
    encodeRecord(this.#producer.view, offset, record);
    if (this.#commitEach) this.#producer.commit();
    return true;
  }
}

/** Reading side of one ring direction: learns names, decodes records. */
export class RecordReader {
  readonly #names: string[] = [''];

  readonly #view: DataView;
  readonly #bytes: Uint8Array;

  constructor(view: DataView, bytes: Uint8Array) {
    this.#view = view;
    this.#bytes = bytes;
  }

  /** Decodes the ring record at (offset, length) into `out`. Returns false
   * for a `string` record, which it consumes by learning the name. */
  decode(offset: number, length: number, out: SchedulerRecord): boolean {
    if (this.#view.getUint8(offset) === RecordKind.string) {
      const id = this.#view.getUint32(offset + 4, true);
      this.#names[id] = utf8Decoder.decode(this.#bytes.subarray(offset + STRING_HEADER_BYTES, offset + length));
      return false;
    }
    if (length !== RECORD_BYTES) throw new Error(`ring: scheduler record of ${length} bytes, expected ${RECORD_BYTES}`);
    decodeRecord(this.#view, offset, out);
    return true;
  }

  /** The name behind an interned id; undefined for 0 or an unknown id. */
  nameOf(id: number): string | undefined {
    return id === 0 ? undefined : this.#names[id];
  }
}

function invert<K extends string>(codes: Record<K, number>): K[] {
  const names: K[] = [];
  for (const name of Object.keys(codes) as K[]) names[codes[name]] = name;
  return names;
}

function decodeCode<K extends string>(names: readonly K[], code: number, what: string): K {
  const name = names[code];
  if (name === undefined) throw new RangeError(`ring: unknown ${what} ${code}`);
  return name;
}
