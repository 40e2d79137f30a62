// Hand-written protobuf wire codec for the tunnel's hot messages: the
// EdgeMessage cases tunnel_request, tunnel_request_batch, credit and cancel, and the NodeMessage
// cases frame and frame_batch. Every request crosses the gRPC stream at least
// three times (request, headers frame, end frame), and a CPU profile of the
// closed loop put @bufbuild/protobuf's reflection-driven toBinary/fromBinary
// at ~6 % of the edge's and ~11 % of the agent's busy time. This codec walks
// the fields directly, sizing each message once and writing it into a single
// Buffer. proto/edge/v1/tunnel.proto stays the one schema: everything this
// file does not know (other cases, unknown fields, a wire type it does not
// expect, a negative enum) goes through the generated code, whole message at
// a time, and test/shared/tunnel-codec.test.ts round-trips both directions
// against the generated code. Messages come back exactly as fromBinary builds
// them: every field present with its default, bytes as views of the input.
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  EdgeMessageSchema,
  NodeMessageSchema,
  type EdgeMessage,
  type FlowCredit,
  type FrameBatch,
  type Header,
  type NodeMessage,
  type TunnelCancel,
  type TunnelFrame,
  type TunnelRequest,
  type TunnelRequestBatch,
} from '../gen/edge/v1/tunnel_pb.js';

// ---- sizes -----------------------------------------------------------------

function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  return 5;
}

/** Tag + length prefix + payload of a length-delimited field of `length` bytes (field numbers < 16: a one-byte tag). */
function delimitedSize(length: number): number {
  return 1 + varintSize(length) + length;
}

/**
 * UTF-8 length. Header names, ids and paths are short ASCII: counting them in
 * JS beats a call into C++ (Buffer.byteLength) per string.
 */
function utf8Length(value: string): number {
  const length = value.length;
  if (length > 64) return Buffer.byteLength(value);
  for (let i = 0; i < length; i++) if (value.charCodeAt(i) >= 0x80) return Buffer.byteLength(value);
  return length;
}

function stringSize(value: string): number {
  return value.length === 0 ? 0 : delimitedSize(utf8Length(value));
}

function uintFieldSize(value: number): number {
  return value === 0 ? 0 : 1 + varintSize(value);
}

function headerBodySize(header: Header): number {
  return stringSize(header.name) + stringSize(header.value);
}

function headersSize(headers: readonly Header[]): number {
  let size = 0;
  for (let i = 0; i < headers.length; i++) size += delimitedSize(headerBodySize(headers[i]));
  return size;
}

function requestBodySize(r: TunnelRequest): number {
  let size =
    stringSize(r.runId) +
    uintFieldSize(r.tunnelId) +
    stringSize(r.providerId) +
    uintFieldSize(r.adapter) +
    stringSize(r.target) +
    stringSize(r.method) +
    stringSize(r.path) +
    headersSize(r.headers) +
    (r.body.byteLength === 0 ? 0 : delimitedSize(r.body.byteLength)) +
    (r.stream ? 2 : 0) +
    uintFieldSize(r.timeoutMs) +
    stringSize(r.sessionId) +
    uintFieldSize(r.initialCredit) +
    uintFieldSize(r.ttfbTimeoutMs) +
    // Field 16: a two-byte tag.
    (r.idleTimeoutMs === 0 ? 0 : 2 + varintSize(r.idleTimeoutMs));
  for (const key in r.metadata) size += delimitedSize(mapEntrySize(key, r.metadata[key]));
  return size;
}

/** protobuf-es writes both key and value of a map entry, defaults included: so do we (byte-identical output). */
function mapEntrySize(key: string, value: string): number {
  return delimitedSize(utf8Length(key)) + delimitedSize(utf8Length(value));
}

function frameBodySize(f: TunnelFrame): number {
  return (
    uintFieldSize(f.tunnelId) +
    uintFieldSize(f.seq) +
    uintFieldSize(f.kind) +
    uintFieldSize(f.status) +
    headersSize(f.headers) +
    (f.data.byteLength === 0 ? 0 : delimitedSize(f.data.byteLength)) +
    stringSize(f.errorCode) +
    stringSize(f.errorMessage) +
    uintFieldSize(f.upstreamUs)
  );
}

// ---- writing ---------------------------------------------------------------

/** A cursor over one exactly sized Buffer. */
class Writer {
  readonly buf: Buffer;
  pos = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  varint(value: number): void {
    const buf = this.buf;
    let v = value >>> 0;
    while (v > 0x7f) {
      buf[this.pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[this.pos++] = v;
  }

  uintField(tag: number, value: number): void {
    if (value === 0) return;
    this.buf[this.pos++] = tag;
    this.varint(value);
  }

  stringField(tag: number, value: string): void {
    if (value.length === 0) return;
    this.rawString(tag, value);
  }

  /** Written even when empty (map entries). */
  rawString(tag: number, value: string): void {
    if (value.length < 0x80 && this.#ascii(tag, value)) return;
    const buf = this.buf;
    buf[this.pos++] = tag;
    const length = Buffer.byteLength(value);
    this.varint(length);
    this.pos += buf.write(value, this.pos, length, 'utf8');
  }

  /**
   * Tag, one-byte length and the units of a string under 128 units, in one
   * pass that is also the ASCII check (the sizes were counted before, so no
   * second scan to learn the length). False, nothing written: a unit is not
   * ASCII, so its UTF-8 length differs.
   */
  #ascii(tag: number, value: string): boolean {
    const buf = this.buf;
    const length = value.length;
    let pos = this.pos;
    buf[pos] = tag;
    buf[pos + 1] = length;
    pos += 2;
    for (let i = 0; i < length; i++) {
      const code = value.charCodeAt(i);
      if (code >= 0x80) return false;
      buf[pos++] = code;
    }
    this.pos = pos;
    return true;
  }

  bytesField(tag: number, value: Uint8Array): void {
    if (value.byteLength === 0) return;
    this.buf[this.pos++] = tag;
    this.varint(value.byteLength);
    this.buf.set(value, this.pos);
    this.pos += value.byteLength;
  }

  headers(tag: number, headers: readonly Header[]): void {
    for (let i = 0; i < headers.length; i++) {
      const header = headers[i];
      const name = header.name;
      const value = header.value;
      // The common header: both ASCII and the entry under 128 bytes, so its
      // length is one byte, filled in once the strings are written.
      const size = (name.length === 0 ? 0 : 2 + name.length) + (value.length === 0 ? 0 : 2 + value.length);
      if (size < 0x80) {
        const start = this.pos;
        this.buf[start] = tag;
        this.buf[start + 1] = size;
        this.pos = start + 2;
        if ((name.length === 0 || this.#ascii(0x0a, name)) && (value.length === 0 || this.#ascii(0x12, value))) continue;
        this.pos = start;
      }
      this.buf[this.pos++] = tag;
      this.varint(headerBodySize(header));
      this.stringField(0x0a, name);
      this.stringField(0x12, value);
    }
  }
}

// Tags: (field number << 3) | wire type (0 varint, 2 length-delimited).

function writeRequest(w: Writer, r: TunnelRequest): void {
  w.stringField(0x0a, r.runId);
  w.uintField(0x10, r.tunnelId);
  w.stringField(0x1a, r.providerId);
  w.uintField(0x20, r.adapter);
  w.stringField(0x2a, r.target);
  w.stringField(0x32, r.method);
  w.stringField(0x3a, r.path);
  w.headers(0x42, r.headers);
  w.bytesField(0x4a, r.body);
  if (r.stream) {
    w.buf[w.pos++] = 0x50;
    w.buf[w.pos++] = 1;
  }
  w.uintField(0x58, r.timeoutMs);
  for (const key in r.metadata) {
    const value = r.metadata[key];
    w.buf[w.pos++] = 0x62;
    w.varint(mapEntrySize(key, value));
    w.rawString(0x0a, key);
    w.rawString(0x12, value);
  }
  w.stringField(0x6a, r.sessionId);
  w.uintField(0x70, r.initialCredit);
  w.uintField(0x78, r.ttfbTimeoutMs);
  // Field 16: a two-byte tag.
  if (r.idleTimeoutMs !== 0) {
    w.buf[w.pos++] = 0x80;
    w.buf[w.pos++] = 0x01;
    w.varint(r.idleTimeoutMs);
  }
}

function writeFrame(w: Writer, f: TunnelFrame): void {
  w.uintField(0x08, f.tunnelId);
  w.uintField(0x10, f.seq);
  w.uintField(0x18, f.kind);
  w.uintField(0x20, f.status);
  w.headers(0x2a, f.headers);
  w.bytesField(0x32, f.data);
  w.stringField(0x3a, f.errorCode);
  w.stringField(0x42, f.errorMessage);
  w.uintField(0x48, f.upstreamUs);
}

/** uint32 fields hold 0..2^32-1 and enums here are never negative: anything else is the generated code's to encode. */
function isUint32(value: number): boolean {
  return value >>> 0 === value;
}

function requestEncodable(r: TunnelRequest): boolean {
  return isUint32(r.tunnelId) && isUint32(r.adapter) && isUint32(r.timeoutMs) && isUint32(r.initialCredit) && isUint32(r.ttfbTimeoutMs) && isUint32(r.idleTimeoutMs) && r.$unknown === undefined;
}

function frameEncodable(f: TunnelFrame): boolean {
  return isUint32(f.tunnelId) && isUint32(f.seq) && isUint32(f.kind) && isUint32(f.status) && isUint32(f.upstreamUs) && f.$unknown === undefined;
}

function generic(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function encodeEdgeMessage(message: EdgeMessage): Buffer {
  const msg = message.msg;
  if (message.$unknown === undefined) {
    if (msg.case === 'tunnelRequest' && requestEncodable(msg.value)) {
      const inner = requestBodySize(msg.value);
      const w = new Writer(delimitedSize(inner));
      w.buf[w.pos++] = 0x22;
      w.varint(inner);
      writeRequest(w, msg.value);
      return w.buf;
    }
    if (msg.case === 'tunnelRequestBatch' && msg.value.$unknown === undefined && msg.value.requests.every(requestEncodable)) {
      const requests = msg.value.requests;
      const sizes = new Array<number>(requests.length);
      let inner = 0;
      for (let i = 0; i < requests.length; i++) {
        sizes[i] = requestBodySize(requests[i]);
        inner += delimitedSize(sizes[i]);
      }
      const w = new Writer(delimitedSize(inner));
      w.buf[w.pos++] = 0x42;
      w.varint(inner);
      for (let i = 0; i < requests.length; i++) {
        w.buf[w.pos++] = 0x0a;
        w.varint(sizes[i]);
        writeRequest(w, requests[i]);
      }
      return w.buf;
    }
    if (msg.case === 'credit' && isUint32(msg.value.tunnelId) && isUint32(msg.value.bytes) && msg.value.$unknown === undefined) {
      const inner = uintFieldSize(msg.value.tunnelId) + uintFieldSize(msg.value.bytes);
      const w = new Writer(delimitedSize(inner));
      w.buf[w.pos++] = 0x32;
      w.varint(inner);
      w.uintField(0x08, msg.value.tunnelId);
      w.uintField(0x10, msg.value.bytes);
      return w.buf;
    }
    if (msg.case === 'cancel' && isUint32(msg.value.tunnelId) && msg.value.$unknown === undefined) {
      const inner = uintFieldSize(msg.value.tunnelId) + stringSize(msg.value.reason);
      const w = new Writer(delimitedSize(inner));
      w.buf[w.pos++] = 0x2a;
      w.varint(inner);
      w.uintField(0x08, msg.value.tunnelId);
      w.stringField(0x12, msg.value.reason);
      return w.buf;
    }
  }
  return generic(toBinary(EdgeMessageSchema, message));
}

export function encodeNodeMessage(message: NodeMessage): Buffer {
  const msg = message.msg;
  if (message.$unknown === undefined) {
    if (msg.case === 'frame' && frameEncodable(msg.value)) {
      const inner = frameBodySize(msg.value);
      const w = new Writer(delimitedSize(inner));
      w.buf[w.pos++] = 0x1a;
      w.varint(inner);
      writeFrame(w, msg.value);
      return w.buf;
    }
    if (msg.case === 'frameBatch' && msg.value.$unknown === undefined && msg.value.frames.every(frameEncodable)) {
      const frames = msg.value.frames;
      const sizes = new Array<number>(frames.length);
      let inner = 0;
      for (let i = 0; i < frames.length; i++) {
        sizes[i] = frameBodySize(frames[i]);
        inner += delimitedSize(sizes[i]);
      }
      const w = new Writer(delimitedSize(inner));
      w.buf[w.pos++] = 0x2a;
      w.varint(inner);
      for (let i = 0; i < frames.length; i++) {
        w.buf[w.pos++] = 0x0a;
        w.varint(sizes[i]);
        writeFrame(w, frames[i]);
      }
      return w.buf;
    }
  }
  return generic(toBinary(NodeMessageSchema, message));
}

// ---- reading ---------------------------------------------------------------

/** Thrown inside the fast decoder: the message goes to the generated code instead. */
class NotFastPath extends Error {}
const NOT_FAST = new NotFastPath();

const ASCII_MAX_LENGTH = 48;
/** One scratch array per length (fromCharCode.apply takes the whole array): no allocation per string. */
const ASCII_CODES: number[][] = Array.from({ length: ASCII_MAX_LENGTH + 1 }, (_, n) => new Array<number>(n).fill(0));

class Reader {
  readonly buf: Buffer;
  pos: number;

  constructor(buf: Buffer, pos: number) {
    this.buf = buf;
    this.pos = pos;
  }

  /** A varint's low 32 bits, unsigned (what protobuf-es keeps of a uint32 or, after `| 0`, of an int32). */
  varint(end: number): number {
    const buf = this.buf;
    let result = 0;
    let shift = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= end) throw NOT_FAST;
      const byte = buf[this.pos++];
      if (shift < 32) result |= (byte & 0x7f) << shift;
      if (byte < 0x80) return result >>> 0;
      shift += 7;
    }
    throw NOT_FAST;
  }

  /** The end of the length-delimited payload that starts here. */
  delimited(end: number): number {
    const length = this.varint(end);
    const stop = this.pos + length;
    if (stop > end) throw NOT_FAST;
    return stop;
  }

  string(end: number): string {
    const stop = this.delimited(end);
    const start = this.pos;
    this.pos = stop;
    const buf = this.buf;
    // Header names and values, ids, paths: short ASCII, cheaper built in JS than with a call into C++ each.
    if (stop - start <= ASCII_MAX_LENGTH) {
      const codes = ASCII_CODES[stop - start];
      for (let i = start; i < stop; i++) {
        const byte = buf[i];
        if (byte > 0x7f) return buf.toString('utf8', start, stop);
        codes[i - start] = byte;
      }
      return String.fromCharCode.apply(String, codes);
    }
    return buf.toString('utf8', start, stop);
  }

  bytes(end: number): Uint8Array {
    const stop = this.delimited(end);
    const value = this.buf.subarray(this.pos, stop);
    this.pos = stop;
    return value;
  }
}

const EMPTY = new Uint8Array(0);

function readHeader(r: Reader, end: number): Header {
  const header: Header = { $typeName: 'edge.v1.Header', name: '', value: '' };
  while (r.pos < end) {
    const tag = r.buf[r.pos++];
    if (tag === 0x0a) header.name = r.string(end);
    else if (tag === 0x12) header.value = r.string(end);
    else throw NOT_FAST;
  }
  return header;
}

function readRequest(r: Reader, end: number): TunnelRequest {
  const m: TunnelRequest = {
    $typeName: 'edge.v1.TunnelRequest',
    runId: '',
    tunnelId: 0,
    providerId: '',
    adapter: 0,
    target: '',
    method: '',
    path: '',
    headers: [],
    body: EMPTY,
    stream: false,
    timeoutMs: 0,
    metadata: {},
    sessionId: '',
    initialCredit: 0,
    ttfbTimeoutMs: 0,
    idleTimeoutMs: 0,
  };
  while (r.pos < end) {
    const tag = r.buf[r.pos++];
    switch (tag) {
      case 0x0a: m.runId = r.string(end); break;
      case 0x10: m.tunnelId = r.varint(end); break;
      case 0x1a: m.providerId = r.string(end); break;
      case 0x20: m.adapter = r.varint(end) | 0; break;
      case 0x2a: m.target = r.string(end); break;
      case 0x32: m.method = r.string(end); break;
      case 0x3a: m.path = r.string(end); break;
      case 0x42: m.headers.push(readHeader(r, r.delimited(end))); break;
      case 0x4a: m.body = r.bytes(end); break;
      case 0x50: m.stream = r.varint(end) !== 0; break;
      case 0x58: m.timeoutMs = r.varint(end); break;
      case 0x62: {
        // A map entry reads like a Header: key 1, value 2.
        const entry = readHeader(r, r.delimited(end));
        m.metadata[entry.name] = entry.value;
        break;
      }
      case 0x6a: m.sessionId = r.string(end); break;
      case 0x70: m.initialCredit = r.varint(end); break;
      case 0x78: m.ttfbTimeoutMs = r.varint(end); break;
      case 0x80:
        if (r.pos >= end || r.buf[r.pos++] !== 0x01) throw NOT_FAST;
        m.idleTimeoutMs = r.varint(end);
        break;
      default: throw NOT_FAST;
    }
  }
  return m;
}

function readFrame(r: Reader, end: number): TunnelFrame {
  const f: TunnelFrame = {
    $typeName: 'edge.v1.TunnelFrame',
    tunnelId: 0,
    seq: 0,
    kind: 0,
    status: 0,
    headers: [],
    data: EMPTY,
    errorCode: '',
    errorMessage: '',
    upstreamUs: 0,
  };
  while (r.pos < end) {
    const tag = r.buf[r.pos++];
    switch (tag) {
      case 0x08: f.tunnelId = r.varint(end); break;
      case 0x10: f.seq = r.varint(end); break;
      case 0x18: f.kind = r.varint(end) | 0; break;
      case 0x20: f.status = r.varint(end); break;
      case 0x2a: f.headers.push(readHeader(r, r.delimited(end))); break;
      case 0x32: f.data = r.bytes(end); break;
      case 0x3a: f.errorCode = r.string(end); break;
      case 0x42: f.errorMessage = r.string(end); break;
      case 0x48: f.upstreamUs = r.varint(end); break;
      default: throw NOT_FAST;
    }
  }
  return f;
}

function readCredit(r: Reader, end: number): FlowCredit {
  const c: FlowCredit = { $typeName: 'edge.v1.FlowCredit', tunnelId: 0, bytes: 0 };
  while (r.pos < end) {
    const tag = r.buf[r.pos++];
    if (tag === 0x08) c.tunnelId = r.varint(end);
    else if (tag === 0x10) c.bytes = r.varint(end);
    else throw NOT_FAST;
  }
  return c;
}

function readCancel(r: Reader, end: number): TunnelCancel {
  const c: TunnelCancel = { $typeName: 'edge.v1.TunnelCancel', tunnelId: 0, reason: '' };
  while (r.pos < end) {
    const tag = r.buf[r.pos++];
    if (tag === 0x08) c.tunnelId = r.varint(end);
    else if (tag === 0x12) c.reason = r.string(end);
    else throw NOT_FAST;
  }
  return c;
}

function readRequestBatch(r: Reader, end: number): TunnelRequestBatch {
  const batch: TunnelRequestBatch = { $typeName: 'edge.v1.TunnelRequestBatch', requests: [] };
  while (r.pos < end) {
    if (r.buf[r.pos++] !== 0x0a) throw NOT_FAST;
    batch.requests.push(readRequest(r, r.delimited(end)));
  }
  return batch;
}

function readBatch(r: Reader, end: number): FrameBatch {
  const batch: FrameBatch = { $typeName: 'edge.v1.FrameBatch', frames: [] };
  while (r.pos < end) {
    if (r.buf[r.pos++] !== 0x0a) throw NOT_FAST;
    batch.frames.push(readFrame(r, r.delimited(end)));
  }
  return batch;
}

/**
 * The fast path takes a message that is exactly one hot case (one tag, one
 * payload to the end). A repeated oneof field (last one wins) or anything
 * else goes to the generated decoder.
 */
function fastEdge(bytes: Buffer): EdgeMessage | undefined {
  if (bytes.length < 2) return undefined;
  const r = new Reader(bytes, 1);
  const tag = bytes[0];
  const end = bytes.length;
  if (tag !== 0x22 && tag !== 0x42 && tag !== 0x32 && tag !== 0x2a) return undefined;
  if (r.delimited(end) !== end) return undefined;
  if (tag === 0x22) return { $typeName: 'edge.v1.EdgeMessage', msg: { case: 'tunnelRequest', value: readRequest(r, end) } };
  if (tag === 0x42) return { $typeName: 'edge.v1.EdgeMessage', msg: { case: 'tunnelRequestBatch', value: readRequestBatch(r, end) } };
  if (tag === 0x32) return { $typeName: 'edge.v1.EdgeMessage', msg: { case: 'credit', value: readCredit(r, end) } };
  return { $typeName: 'edge.v1.EdgeMessage', msg: { case: 'cancel', value: readCancel(r, end) } };
}

function fastNode(bytes: Buffer): NodeMessage | undefined {
  if (bytes.length < 2) return undefined;
  const r = new Reader(bytes, 1);
  const tag = bytes[0];
  const end = bytes.length;
  if (tag !== 0x1a && tag !== 0x2a) return undefined;
  if (r.delimited(end) !== end) return undefined;
  if (tag === 0x1a) return { $typeName: 'edge.v1.NodeMessage', msg: { case: 'frame', value: readFrame(r, end) } };
  return { $typeName: 'edge.v1.NodeMessage', msg: { case: 'frameBatch', value: readBatch(r, end) } };
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function decodeEdgeMessage(bytes: Uint8Array): EdgeMessage {
  try {
    const fast = fastEdge(asBuffer(bytes));
    if (fast !== undefined) return fast;
  } catch (err) {
    if (err !== NOT_FAST) throw err;
  }
  return fromBinary(EdgeMessageSchema, bytes);
}

export function decodeNodeMessage(bytes: Uint8Array): NodeMessage {
  try {
    const fast = fastNode(asBuffer(bytes));
    if (fast !== undefined) return fast;
  } catch (err) {
    if (err !== NOT_FAST) throw err;
  }
  return fromBinary(NodeMessageSchema, bytes);
}
