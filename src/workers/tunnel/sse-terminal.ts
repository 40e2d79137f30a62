// Whether the last event the relay wrote ends the API's answer: `data: [DONE]`
// (chat, completions), `message_stop` (Messages), `response.completed`,
// `.failed` or `.incomplete` (Responses), or the provider's own error event
// (Messages, Responses). A failure after it (the provider's socket reset
// before the body's end, a deadline, the node gone) must not
// append an error event: the client already has its whole answer, and the
// SDKs would raise that error over it. Each check reads a few bytes around
// the last event of a chunk that ends at an event's end, so it runs per
// relayed chunk; only Responses looks back for the event's start (and
// Messages, for a chunk that names message_stop at all).

import { errorObjectMessage } from './provider-error.js';
import { lastEventEnd } from './sse-events.js';

const LF = 10;
const CR = 13;
const DONE = Buffer.from('[DONE]');
const MESSAGE_STOP = Buffer.from('message_stop');
const EVENT_FIELD = Buffer.from('event:');
/** How far into an event its name is: `event: response.incomplete\n` or `data: {"type":"response.incomplete"`. */
const EVENT_HEAD_BYTES = 64;

/** Index past the last byte that is not a line end (0 when there is none). */
function contentEnd(out: Uint8Array): number {
  let end = out.length;
  while (end > 0 && (out[end - 1] === LF || out[end - 1] === CR)) end--;
  return end;
}

function asBuffer(out: Uint8Array): Buffer {
  return Buffer.isBuffer(out) ? out : Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/** The last event is `data: [DONE]` (optionally without the space), alone on its line. */
export function endsWithDone(out: Uint8Array): boolean {
  const end = contentEnd(out);
  let i = end - DONE.length;
  if (i < 5) return false;
  for (let k = 0; k < DONE.length; k++) if (out[i + k] !== DONE[k]) return false;
  if (out[i - 1] === 0x20) i--;
  // "data:" at the start of its line.
  return out[i - 5] === 0x64 && out[i - 4] === 0x61 && out[i - 3] === 0x74 && out[i - 2] === 0x61 && out[i - 1] === 0x3a && (i === 5 || out[i - 6] === LF || out[i - 6] === CR);
}

/** How far from a chunk's end holdsDone looks for [DONE]. */
const DONE_TAIL_BYTES = 4096;

/**
 * `out` holds a `data: [DONE]` event, last or not: a provider may write an
 * event after it (a usage chunk, a comment) that reaches the edge in the
 * same chunk, and the client already has the end of its answer.
 */
export function holdsDone(out: Uint8Array): boolean {
  if (endsWithDone(out)) return true;
  const buffer = asBuffer(out);
  // Only its last DONE_TAIL_BYTES: what follows [DONE] is a usage chunk or a comment, and a coalesced
  // frame of many deltas is not searched whole for each one. One native search rules out most chunks.
  const from = Math.max(0, buffer.length - DONE_TAIL_BYTES);
  const tail = buffer.subarray(from);
  for (let at = tail.lastIndexOf(DONE); at >= 0; at = at === 0 ? -1 : tail.lastIndexOf(DONE, at - 1)) {
    const after = tail[at + DONE.length];
    if ((after === LF || after === CR) && endsWithDone(buffer.subarray(0, from + at + DONE.length))) return true;
  }
  return false;
}

/**
 * The last event is Anthropic's `message_stop`: a short event whose name is
 * in its last few dozen bytes (`{"type":"message_stop"}`); in a content
 * delta those letters could only come quoted inside a string, escaped.
 */
export function endsWithMessageStop(out: Uint8Array): boolean {
  const end = contentEnd(out);
  if (end < MESSAGE_STOP.length) return false;
  const buffer = asBuffer(out);
  // Run on every chunk relayed: one native search rules out the chunks that hold no such name (every delta).
  if (buffer.lastIndexOf(MESSAGE_STOP, end - MESSAGE_STOP.length) < 0) return false;
  // Named by its `event:` line, however long its data: a gateway in front of the model may add fields
  // (Bedrock's invocation metrics), which push that line out of the tail read below.
  if (eventHead(buffer, lastEventEnd(buffer.subarray(0, end)), end, MESSAGE_STOP_NAMES) === NAMED) return true;
  const at = buffer.indexOf(MESSAGE_STOP, Math.max(0, end - 32));
  if (at < 0 || at >= end || buffer.indexOf(MESSAGE_STOP, at + 1) >= 0) return false;
  const after = buffer[at + MESSAGE_STOP.length];
  // `event: message_stop` (its own line).
  if (buffer[at - 1] === 0x20 || buffer[at - 1] === 0x3a) return after === LF || after === CR;
  // `"type":"message_stop"`: the value of `type`, not a text delta's words.
  return isTypeValue(buffer, at, MESSAGE_STOP.length);
}

const ERROR_NAME = Buffer.from('error');
const ERROR_NAMES = [ERROR_NAME];

/**
 * The last event is Anthropic's `event: error` (the space optional): the provider's own in-band
 * failure, which ends its stream as message_stop would (no error of the
 * edge's goes after it).
 */
export function endsWithErrorEvent(out: Uint8Array): boolean {
  const end = contentEnd(out);
  if (end < EVENT_FIELD.length + ERROR_NAME.length) return false;
  const buffer = asBuffer(out);
  // Per chunk relayed: one native search rules out the chunks that hold no such name (every
  // delta but the rare one whose text says it); `event:error` without the space is as valid.
  if (buffer.lastIndexOf(ERROR_NAME, end - ERROR_NAME.length) < 0) return false;
  return eventHead(buffer, lastEventEnd(buffer.subarray(0, end)), end, ERROR_NAMES) === NAMED;
}

/**
 * The name at `at` is the value of `"type"` (`"type": "<name>"`), not words
 * inside another string value (`"text":"<name>"`, or quoted in one: `\"`).
 */
function isTypeValue(buffer: Buffer, at: number, length: number): boolean {
  if (buffer[at - 1] !== 0x22 || buffer[at + length] !== 0x22) return false;
  let i = at - 2;
  while (i >= 0 && buffer[i] === 0x20) i--;
  if (buffer[i] !== 0x3a) return false;
  i--;
  while (i >= 0 && buffer[i] === 0x20) i--;
  return i >= 5 && buffer.toString('latin1', i - 5, i + 1) === '"type"';
}

/** The bytes at `at` (before `end`) are `prefix`. */
function startsWith(buffer: Buffer, at: number, end: number, prefix: Buffer): boolean {
  return at + prefix.length <= end && buffer.compare(prefix, 0, prefix.length, at, at + prefix.length) === 0;
}

/** The line at `start` is `event: <name>` (the space optional), ended before `end`. */
function startsWithEventName(buffer: Buffer, start: number, end: number, name: Buffer): boolean {
  if (!startsWith(buffer, start, end, EVENT_FIELD)) return false;
  let at = start + EVENT_FIELD.length;
  if (buffer[at] === 0x20) at++;
  if (at + name.length >= end || buffer.compare(name, 0, name.length, at, at + name.length) !== 0) return false;
  const after = buffer[at + name.length];
  return after === LF || after === CR;
}

const DATA_FIELD = Buffer.from('data:');

/** Index of `name` starting in [from, to - name.length], or -1: a search that never reads past `to`. */
function indexWithin(buffer: Buffer, name: Buffer, from: number, to: number): number {
  const first = name[0];
  for (let at = from; at + name.length <= to; at++) {
    if (buffer[at] === first && buffer.compare(name, 0, name.length, at, at + name.length) === 0) return at;
  }
  return -1;
}

/** Index past the line that starts at `line` and its line end (LF, CRLF or CR). */
function nextLine(buffer: Buffer, line: number, end: number): number {
  let at = line;
  while (at < end && buffer[at] !== LF && buffer[at] !== CR) at++;
  if (buffer[at] === CR && buffer[at + 1] === LF) at++;
  return at + 1;
}

/** eventHead's answer when the event is named by its `event:` line. */
const NAMED = -1;
const MESSAGE_STOP_NAMES = [MESSAGE_STOP];

/**
 * Walks the field lines of the event at `start` up to its first data line:
 * an `id:` or `retry:` field or a comment may come before its `event:` line
 * (sse-starlette writes `id:` first). NAMED when one is `event: <name>` for
 * a name in `names`; else where the data line starts (`end`: none). Never
 * reads into the data, which may be a whole response.
 */
function eventHead(buffer: Buffer, start: number, end: number, names: readonly Buffer[]): number {
  for (let line = start; line < end; line = nextLine(buffer, line, end)) {
    if (startsWith(buffer, line, end, DATA_FIELD)) return line;
    for (const name of names) if (startsWithEventName(buffer, line, end, name)) return NAMED;
  }
  return end;
}

/** The names that end a Responses stream, as its `event:` line and its `"type"` both carry them: its terminal events and `error`. */
const RESPONSE_ENDS = [Buffer.from('response.completed'), Buffer.from('response.failed'), Buffer.from('response.incomplete'), ERROR_NAME];

/**
 * The last event ends a Responses stream, however long its body (the whole
 * response): a terminal event, or the provider's own `error` event (its
 * in-band failure, which may be all it sends: no error of the edge's goes
 * after it). Named by its `event:` line (eventHead), or else by the
 * `"type"` value at the head of its data line. Nothing past that head is read.
 */
export function endsWithResponseEnd(out: Uint8Array): boolean {
  const end = contentEnd(out);
  if (end === 0) return false;
  const buffer = asBuffer(out);
  // The last event starts past the blank line before it, however its lines end (LF, CRLF, CR).
  const data = eventHead(buffer, lastEventEnd(buffer.subarray(0, end)), end, RESPONSE_ENDS);
  if (data === NAMED) return true;
  // No event line names it: the name must be the `"type"` value, not a delta's text that happens to come first.
  const headEnd = Math.min(end, data + EVENT_HEAD_BYTES);
  for (const name of RESPONSE_ENDS) {
    for (let at = indexWithin(buffer, name, data, headEnd); at >= 0; at = indexWithin(buffer, name, at + 1, headEnd)) {
      if (isTypeValue(buffer, at, name.length)) return true;
    }
  }
  return false;
}

const PING = Buffer.from('ping');
const PING_NAMES = [PING];
/** Longest event taken for a trailer: a ping, a keepalive comment or `data: [DONE]` is a few dozen bytes. */
const TRAILER_BYTES = 256;

/**
 * `out` (ending at an event's end) without the events after its last that
 * end nothing and say nothing: pings, comment-only events, `data: [DONE]`;
 * undefined when its last event is none of those. A provider's terminal
 * event with a ping or [DONE] behind it in the same read (or the node's
 * batched frame) still ends the answer: judged by its last event alone, the
 * whole stream looked cut and got the edge's error after it.
 */
export function beforeTrailers(out: Uint8Array): Uint8Array | undefined {
  const buffer = asBuffer(out);
  let end = contentEnd(buffer);
  let cut: number | undefined;
  while (end > 0) {
    // Trailers are short: a last event past TRAILER_BYTES (or one that began before `out`) is not one.
    const from = Math.max(0, end - TRAILER_BYTES);
    const start = from + lastEventEnd(buffer.subarray(from, end), from >= 1 ? buffer[from - 1] : -1, from >= 2 ? buffer[from - 2] : -1);
    if (start === from && from > 0) break;
    if (!isTrailer(buffer, start, end)) break;
    cut = start;
    end = contentEnd(buffer.subarray(0, start));
  }
  return cut === undefined ? undefined : buffer.subarray(0, cut);
}

/** The event in [start, end) is a ping (`event: ping`), comments only, or `data: [DONE]`. */
function isTrailer(buffer: Buffer, start: number, end: number): boolean {
  if (eventHead(buffer, start, end, PING_NAMES) === NAMED) return true;
  if (endsWithDone(buffer.subarray(start, end))) return true;
  for (let line = start; line < end; line = nextLine(buffer, line, end)) if (buffer[line] !== 0x3a) return false;
  return true;
}

const RESPONSE_FAILED = 'response.failed';
/** What a run that ended in an error event with no message of its own says it ended with. */
const UNNAMED_ERROR = 'the provider ended its stream with an error event';

/**
 * What an in-band error says of the provider: `overloaded` (Anthropic's
 * `overloaded_error`, a `rate_limit_error`, a `rate_limit_exceeded` code),
 * `failed` (`api_error`, `server_error`: its fault, as a 5xx), or `request`
 * (anything else: the request's, or unsaid).
 */
export type InBandErrorKind = 'overloaded' | 'failed' | 'request';

export interface InBandError {
  readonly message: string;
  readonly kind: InBandErrorKind;
}

/**
 * The provider's own in-band error, when the last event of a stream it
 * ended (trailers aside) is one: chat's and completions' `data:
 * {"error":{...}}`, Messages' and Responses' `error` event, or Responses'
 * `response.failed`. Its message (clipped, as a provider error body's is)
 * and kind, else undefined. Read once, at the stream's end, from its tail
 * (StreamTail): one native search rules out the streams whose tail never says "error".
 */
export function lastEventError(tail: Buffer): InBandError | undefined {
  if (tail.lastIndexOf(ERROR_NAME) < 0) return undefined;
  const body = beforeTrailers(tail) ?? tail;
  const end = contentEnd(body);
  if (end === 0) return undefined;
  // An event cut at the tail's start does not parse: no error is read from it.
  const start = lastEventEnd(body.subarray(0, end));
  let name = '';
  let data = '';
  for (const line of body.toString('utf8', start, end).split(/\r\n|\r|\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const value = line.charCodeAt(colon + 1) === 0x20 ? line.slice(colon + 2) : line.slice(colon + 1);
    const field = line.slice(0, colon);
    if (field === 'event') name = value;
    else if (field === 'data') data = data === '' ? value : `${data}\n${value}`;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object') return undefined;
  const record = parsed as { type?: unknown; error?: unknown; response?: unknown };
  const type = name !== '' ? name : record.type;
  if (type === RESPONSE_FAILED) {
    const response = record.response;
    if (response === null || typeof response !== 'object') return { message: UNNAMED_ERROR, kind: 'request' };
    return { message: errorObjectMessage(response) ?? UNNAMED_ERROR, kind: kindOf((response as { error?: unknown }).error) };
  }
  // Messages' error event holds `error: {type}`; Responses' names its `code` at the top.
  if (type === 'error') return { message: errorObjectMessage(record) ?? UNNAMED_ERROR, kind: record.error === undefined ? kindOf(record) : kindOf(record.error) };
  // Chat and completions name no event: a chunk with an `error` object is the failure the SDKs raise.
  if (name === '' && record.error !== undefined && record.error !== null) return { message: errorObjectMessage(record) ?? UNNAMED_ERROR, kind: kindOf(record.error) };
  return undefined;
}

const OVERLOADED = new Set(['overloaded_error', 'rate_limit_error', 'rate_limit_exceeded']);
const FAILED = new Set(['api_error', 'server_error']);

function kindOf(error: unknown): InBandErrorKind {
  if (error === null || typeof error !== 'object') return 'request';
  const { type, code } = error as { type?: unknown; code?: unknown };
  if ((typeof type === 'string' && OVERLOADED.has(type)) || (typeof code === 'string' && OVERLOADED.has(code))) return 'overloaded';
  if ((typeof type === 'string' && FAILED.has(type)) || (typeof code === 'string' && FAILED.has(code))) return 'failed';
  return 'request';
}
