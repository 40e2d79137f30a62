// Request body inspection and `model` rewrite, on raw bytes.
//
// The edge must validate the client's JSON, read the top-level `model` (the
// alias to route on) and `stream`, and replace only the `model` value with
// the provider's served name, every other byte untouched. JSON.parse +
// JSON.stringify would cost ~25 ms on a 2 MB body and reformat it; this is
// one pass over the bytes: native indexOf skips string contents, a word-wise
// check finds raw control bytes in them, and the only allocations are the
// results.
//
// Verdicts match JSON.parse on the UTF-8 decoded text, with these deliberate
// differences, all stricter, all reported as invalid_json:
// - ill-formed UTF-8 anywhere (JSON.parse would see U+FFFD and accept);
// - a duplicated top-level "model" member: JSON.parse keeps the last one, but
//   a provider that keeps the first would then run the model the client
//   named instead of the one the edge routed to;
// - a duplicated top-level "previous_response_id" for the same reason: the
//   edge pins the request to the provider of the one it read, and a provider
//   reading the other would continue another response (or none).
// A UTF-8 byte order mark is rejected, as JSON.parse does.
// Bodies nested deeper than maxDepth are rejected as too_deep.

import { findControlByte, findStringStop, forgetWords } from '../body/control-bytes.js';
import { bytesEqualAscii, decodeJsonString } from '../body/json-string.js';
import { firstInvalidUtf8 } from '../body/utf8.js';

export interface InspectOk {
  readonly ok: true;
  /** Decoded top-level `model` (the alias the client asked for). */
  readonly model: string;
  /** Byte offset of the value's opening quote. */
  readonly modelStart: number;
  /** Byte offset just past the value's closing quote. */
  readonly modelEnd: number;
  /** Top-level `stream` when it is `true`; false when absent or not boolean. */
  readonly stream: boolean;
  /** Exact prompt tokens, set only by the offload pool (large bodies); else the scheduler estimates from bytes. */
  readonly inputTokens?: number;
  /** Which other top-level members each route requires were seen, and their shape (FIELD_* bits); see api-routes.ts. */
  readonly fields: number;
  /** Top-level `previous_response_id` when it is a string (Responses API affinity). */
  readonly previousResponseId?: string;
}

// Top-level members the routes require (checked by api-routes.ts against these bits).
export const FIELD_MESSAGES = 1;
export const FIELD_MESSAGES_ARRAY = 2;
export const FIELD_PROMPT = 4;
export const FIELD_INPUT = 8;
export const FIELD_MAX_TOKENS = 16;
export const FIELD_MAX_TOKENS_INTEGER = 32;
export const FIELD_PREVIOUS_RESPONSE_ID = 64;
export const FIELD_PREVIOUS_RESPONSE_ID_STRING = 128;
/** A top-level `session_id` or `metadata` member, of any value: only then is a session looked for in the body (session-id.ts). */
export const FIELD_SESSION = 256;
/** A top-level `conversation` (Responses: the context comes from a stored conversation). */
export const FIELD_CONVERSATION = 512;
/** Top-level `store` is `false` (every one of them, were it repeated): a Response the provider keeps no state for. */
export const FIELD_NOT_STORED = 1024;

export interface InspectError {
  readonly ok: false;
  readonly kind: 'invalid_json' | 'not_object' | 'too_deep' | 'missing_model' | 'model_not_string' | 'empty_model';
  readonly message: string;
  /** Byte offset the problem was found at. */
  readonly offset: number;
  /** The member to blame (the API error's `param`), where one is: a duplicated top-level member. */
  readonly param?: string;
}

export type InspectResult = InspectOk | InspectError;

export const DEFAULT_MAX_DEPTH = 64;

// Parser states: what the next token may be.
const EXPECT_VALUE = 0;
const EXPECT_VALUE_OR_CLOSE = 1; // just after '['
const EXPECT_KEY = 2; // after ',' in an object
const EXPECT_KEY_OR_CLOSE = 3; // just after '{'
const AFTER_VALUE = 4;

// Container kinds on the depth stack.
const IN_OBJECT = 1;
const IN_ARRAY = 2;

// Which top-level member the value being read belongs to.
const MEMBER_OTHER = 0;
const MEMBER_MODEL = 1;
const MEMBER_STREAM = 2;
const MEMBER_MESSAGES = 3;
const MEMBER_PROMPT = 4;
const MEMBER_INPUT = 5;
const MEMBER_MAX_TOKENS = 6;
const MEMBER_PREVIOUS_RESPONSE_ID = 7;
const MEMBER_SESSION = 8; // `session_id` or `metadata`
const MEMBER_CONVERSATION = 9;
const MEMBER_STORE = 10;

// What the top-level `store` members said: none, all `false`, or something else.
const STORE_UNSEEN = 0;
const STORE_FALSE = 1;
const STORE_OTHER = 2;

// String scanning tiers (see scanString): bytes probed one by one, then
// bytes checked word-wise for '"', '\' and controls, then native search.
const PROBE_BYTES = 16;
const WORD_SCAN_BYTES = 256;

// Scanner state shared by the helpers below (one body at a time per thread).
let stack = new Uint8Array(DEFAULT_MAX_DEPTH + 1);
let nextQuote = -1;
let nextBackslash = -1;
let stringHasEscape = false;
let errorOffset = 0;
let errorWhat = '';

/** Validates `body` as JSON and locates its top-level `model` and `stream`. */
export function inspectBody(body: Uint8Array, maxDepth: number = DEFAULT_MAX_DEPTH): InspectResult {
  if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new RangeError(`maxDepth must be a positive integer, got ${maxDepth}`);
  if (stack.length <= maxDepth) stack = new Uint8Array(maxDepth + 1);
  const buf = asBuffer(body);
  nextQuote = -1;
  nextBackslash = -1;
  try {
    return scan(buf, maxDepth);
  } finally {
    forgetWords();
  }
}

/**
 * The body with its top-level `model` value replaced by `servedModel`
 * (JSON-encoded), every other byte copied unchanged, in one allocation.
 */
export function rewriteModel(body: Uint8Array, info: InspectOk, servedModel: string): Buffer {
  const { modelStart, modelEnd } = info;
  if (modelStart < 0 || modelEnd > body.length || modelStart >= modelEnd || body[modelStart] !== 0x22 || body[modelEnd - 1] !== 0x22) {
    throw new RangeError('rewriteModel: info does not describe a string value in this body');
  }
  const buf = asBuffer(body);
  const encoded = JSON.stringify(servedModel);
  const encodedLength = Buffer.byteLength(encoded, 'utf8');
  const out = Buffer.allocUnsafe(modelStart + encodedLength + (buf.length - modelEnd));
  buf.copy(out, 0, 0, modelStart);
  out.write(encoded, modelStart, encodedLength, 'utf8');
  buf.copy(out, modelStart + encodedLength, modelEnd);
  return out;
}

function scan(buf: Buffer, maxDepth: number): InspectResult {
  const n = buf.length;
  let i = 0;
  let depth = 0;
  let state = EXPECT_VALUE;
  let member = MEMBER_OTHER;
  let topIsObject = false;
  let topStart = -1;
  let modelCount = 0;
  let modelStart = -1;
  let modelEnd = -1;
  let modelEscaped = false;
  let modelNotStringAt = -1;
  let duplicateModelAt = -1;
  let previousCount = 0;
  let duplicatePreviousAt = -1;
  let stream = false;
  let fields = 0;
  let previousStart = -1;
  let previousEnd = -1;
  let previousEscaped = false;
  let store = STORE_UNSEEN;

  for (;;) {
    let c = 0;
    while (i < n) {
      c = buf[i];
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    if (i >= n) {
      if (state === AFTER_VALUE && depth === 0) break;
      return fail(buf, invalid(n, topStart < 0 ? 'empty body' : 'unexpected end of input'));
    }

    if (state === AFTER_VALUE) {
      if (depth === 0) return fail(buf, invalid(i, `unexpected ${describeByte(c)} after the JSON value`));
      const kind = stack[depth];
      if (c === 0x2c /* , */) {
        state = kind === IN_OBJECT ? EXPECT_KEY : EXPECT_VALUE;
        i++;
      } else if ((c === 0x7d /* } */ && kind === IN_OBJECT) || (c === 0x5d /* ] */ && kind === IN_ARRAY)) {
        depth--;
        i++;
      } else {
        return fail(buf, invalid(i, `expected ',' or '${kind === IN_OBJECT ? '}' : ']'}', found ${describeByte(c)}`));
      }
      continue;
    }

    if (state === EXPECT_KEY || state === EXPECT_KEY_OR_CLOSE) {
      if (c === 0x7d && state === EXPECT_KEY_OR_CLOSE) {
        depth--;
        i++;
        state = AFTER_VALUE;
        continue;
      }
      if (c !== 0x22) return fail(buf, invalid(i, `expected a string key, found ${describeByte(c)}`));
      const keyStart = i + 1;
      i = scanString(buf, keyStart);
      if (i < 0) return fail(buf, errorOffset);
      if (depth === 1) {
        member = classifyKey(buf, keyStart, i - 1, stringHasEscape);
        if (member === MEMBER_MODEL && ++modelCount === 2) duplicateModelAt = keyStart - 1;
        else if (member === MEMBER_PREVIOUS_RESPONSE_ID && ++previousCount === 2) duplicatePreviousAt = keyStart - 1;
      }
      while (i < n) {
        c = buf[i];
        if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
        else break;
      }
      if (i >= n) return fail(buf, invalid(n, 'unexpected end of input'));
      if (c !== 0x3a /* : */) return fail(buf, invalid(i, `expected ':' after an object key, found ${describeByte(c)}`));
      i++;
      state = EXPECT_VALUE;
      continue;
    }

    // EXPECT_VALUE or EXPECT_VALUE_OR_CLOSE
    if (c === 0x5d && state === EXPECT_VALUE_OR_CLOSE) {
      depth--;
      i++;
      state = AFTER_VALUE;
      continue;
    }
    const valueStart = i;
    if (depth === 0) {
      topStart = i;
      topIsObject = c === 0x7b;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (depth === 1 && member !== MEMBER_OTHER) {
        if (member === MEMBER_MODEL) modelNotStringAt = valueStart;
        else if (member === MEMBER_STREAM) stream = false;
        else if (member === MEMBER_STORE) store = STORE_OTHER;
        else fields = (fields & ~MEMBER_FIELDS[member]) | fieldBits(member, c, false);
      }
      member = MEMBER_OTHER;
      if (++depth > maxDepth) {
        return fail(buf, i, 'too_deep', `JSON nesting deeper than ${maxDepth} levels at byte ${i}`);
      }
      stack[depth] = c === 0x7b ? IN_OBJECT : IN_ARRAY;
      state = c === 0x7b ? EXPECT_KEY_OR_CLOSE : EXPECT_VALUE_OR_CLOSE;
      i++;
      continue;
    }
    if (c === 0x22) {
      i = scanString(buf, i + 1);
      if (i < 0) return fail(buf, errorOffset);
    } else if (c === 0x74 /* t */) {
      i = scanLiteral(buf, i, 'true');
    } else if (c === 0x66 /* f */) {
      i = scanLiteral(buf, i, 'false');
    } else if (c === 0x6e /* n */) {
      i = scanLiteral(buf, i, 'null');
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      i = scanNumber(buf, i);
    } else if (i === 0 && c === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) {
      return fail(buf, invalid(0, 'a byte order mark (U+FEFF) is not allowed before the JSON value'));
    } else {
      return fail(buf, invalid(i, `expected a JSON value, found ${describeByte(c)}`));
    }
    if (i < 0) return fail(buf, errorOffset);
    if (depth === 1 && member !== MEMBER_OTHER) {
      if (member === MEMBER_MODEL) {
        if (c === 0x22) {
          modelStart = valueStart;
          modelEnd = i;
          modelEscaped = stringHasEscape;
        } else modelNotStringAt = valueStart;
      } else if (member === MEMBER_STREAM) {
        stream = c === 0x74;
      } else if (member === MEMBER_STORE) {
        // Repeated, parsers disagree on which one counts: not stored only when none says otherwise.
        store = c === 0x66 && store !== STORE_OTHER ? STORE_FALSE : STORE_OTHER;
      } else {
        if (member === MEMBER_PREVIOUS_RESPONSE_ID && c === 0x22) {
          previousStart = valueStart;
          previousEnd = i;
          previousEscaped = stringHasEscape;
        }
        fields = (fields & ~MEMBER_FIELDS[member]) | fieldBits(member, c, c !== 0x22 && isIntegerToken(buf, valueStart, i));
      }
      member = MEMBER_OTHER;
    }
    state = AFTER_VALUE;
  }

  // Well-formed JSON from here; what remains are the gateway's own rules.
  const utf8Error = firstInvalidUtf8(buf);
  if (utf8Error >= 0) return utf8Failure(utf8Error);
  if (!topIsObject) return error('not_object', topStart, `the request body must be a JSON object (found ${describeByte(buf[topStart])} at byte ${topStart})`);
  if (duplicateModelAt >= 0) {
    return error('invalid_json', duplicateModelAt, `duplicate top-level "model" member at byte ${duplicateModelAt}`, 'model');
  }
  if (duplicatePreviousAt >= 0) {
    return error('invalid_json', duplicatePreviousAt, `duplicate top-level "previous_response_id" member at byte ${duplicatePreviousAt}`, 'previous_response_id');
  }
  if (modelCount === 0) return error('missing_model', topStart, 'the request body has no top-level "model"');
  if (modelNotStringAt >= 0) return error('model_not_string', modelNotStringAt, `"model" must be a string (byte ${modelNotStringAt})`);
  if (modelEnd - modelStart === 2) return error('empty_model', modelStart, `"model" must not be empty (byte ${modelStart})`);
  const model = modelEscaped ? decodeJsonString(buf, modelStart + 1, modelEnd - 1) : buf.toString('utf8', modelStart + 1, modelEnd - 1);
  if (store === STORE_FALSE) fields |= FIELD_NOT_STORED;
  if (previousStart < 0) return { ok: true, model, modelStart, modelEnd, stream, fields };
  const previousResponseId = previousEscaped ? decodeJsonString(buf, previousStart + 1, previousEnd - 1) : buf.toString('utf8', previousStart + 1, previousEnd - 1);
  return { ok: true, model, modelStart, modelEnd, stream, fields, previousResponseId };
}

/**
 * Scans a string whose contents start at p (just past the opening quote).
 * Returns the index past the closing quote, or -1 with errorOffset/errorWhat
 * set. Sets stringHasEscape.
 *
 * A native indexOf costs ~40 ns a call, worth ~40 bytes of a JS byte loop
 * and ~60 of a word loop, so: short runs (keys, short values) are probed byte
 * by byte; runs between dense escapes (code, text with newlines) are scanned
 * word-wise; only a run longer than WORD_SCAN_BYTES goes to cached native
 * indexOf for the quote and backslash plus the word-wise control check.
 */
function scanString(buf: Buffer, p: number): number {
  const n = buf.length;
  const open = p - 1;
  stringHasEscape = false;
  for (;;) {
    let j = p;
    let c = 0;
    const probeEnd = p + PROBE_BYTES < n ? p + PROBE_BYTES : n;
    for (; j < probeEnd; j++) {
      c = buf[j];
      if (c === 0x22 || c === 0x5c || c < 0x20) break;
    }
    if (j === probeEnd) {
      if (j >= n) return invalidAt(open, 'unterminated string');
      const wordEnd = j + WORD_SCAN_BYTES < n ? j + WORD_SCAN_BYTES : n;
      const found = findStringStop(buf, j, wordEnd);
      if (found >= 0) j = found;
      else {
        j = wordEnd;
        if (j >= n) return invalidAt(open, 'unterminated string');
        // A long plain run: cached native searches, each re-run only once
        // the scan has passed the byte it found.
        if (nextQuote < j) {
          nextQuote = buf.indexOf(0x22, j);
          if (nextQuote < 0) nextQuote = n;
        }
        if (nextQuote >= n) return invalidAt(open, 'unterminated string');
        if (nextBackslash < j) {
          nextBackslash = buf.indexOf(0x5c, j);
          if (nextBackslash < 0) nextBackslash = n;
        }
        const stop = nextBackslash < nextQuote ? nextBackslash : nextQuote;
        const ctl = findControlByte(buf, j, stop);
        j = ctl >= 0 ? ctl : stop;
      }
      c = buf[j];
    }
    if (c === 0x22) return j + 1;
    if (c !== 0x5c) return invalidAt(j, `unescaped control character (${describeByte(c)}) in a string`);
    stringHasEscape = true;
    const e = j + 1;
    if (e >= n) return invalidAt(open, 'unterminated string');
    c = buf[e];
    if (c === 0x75 /* u */) {
      for (let k = 1; k <= 4; k++) {
        if (e + k >= n) return invalidAt(open, 'unterminated string');
        const h = buf[e + k];
        if (!((h >= 0x30 && h <= 0x39) || (h >= 0x41 && h <= 0x46) || (h >= 0x61 && h <= 0x66))) {
          return invalidAt(e + k, `invalid \\u escape: ${describeByte(h)} is not a hex digit`);
        }
      }
      p = e + 5;
    } else if (c === 0x22 || c === 0x5c || c === 0x2f || c === 0x62 || c === 0x66 || c === 0x6e || c === 0x72 || c === 0x74) {
      p = e + 1;
    } else {
      return invalidAt(e, `invalid escape sequence: backslash followed by ${describeByte(c)}`);
    }
  }
}

/** RFC 8259 number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
function scanNumber(buf: Buffer, i: number): number {
  const n = buf.length;
  const start = i;
  if (buf[i] === 0x2d) i++;
  if (i >= n) return invalidAt(n, 'unexpected end of input in a number');
  let c = buf[i];
  if (c === 0x30) {
    i++;
    if (i < n && buf[i] >= 0x30 && buf[i] <= 0x39) return invalidAt(start, 'number with a leading zero');
  } else if (c >= 0x31 && c <= 0x39) {
    i++;
    while (i < n && (c = buf[i]) >= 0x30 && c <= 0x39) i++;
  } else {
    return invalidAt(i, `expected a digit, found ${describeByte(c)}`);
  }
  if (i < n && buf[i] === 0x2e /* . */) {
    i++;
    const digits = i;
    while (i < n && (c = buf[i]) >= 0x30 && c <= 0x39) i++;
    if (i === digits) return invalidAt(i, i < n ? `expected a digit after '.', found ${describeByte(buf[i])}` : 'unexpected end of input in a number');
  }
  if (i < n && (buf[i] === 0x65 || buf[i] === 0x45) /* e E */) {
    i++;
    if (i < n && (buf[i] === 0x2b || buf[i] === 0x2d)) i++;
    const digits = i;
    while (i < n && (c = buf[i]) >= 0x30 && c <= 0x39) i++;
    if (i === digits) return invalidAt(i, i < n ? `expected a digit in the exponent, found ${describeByte(buf[i])}` : 'unexpected end of input in a number');
  }
  return i;
}

function scanLiteral(buf: Buffer, i: number, word: string): number {
  for (let k = 0; k < word.length; k++) {
    if (i + k >= buf.length) return invalidAt(buf.length, `unexpected end of input in '${word}'`);
    if (buf[i + k] !== word.charCodeAt(k)) return invalidAt(i + k, `invalid literal (expected '${word}')`);
  }
  return i + word.length;
}

function classifyKey(buf: Buffer, start: number, end: number, escaped: boolean): number {
  if (!escaped) {
    // By length first: most keys are none of these and cost one compare.
    switch (end - start) {
      case 5: return bytesEqualAscii(buf, start, end, 'model') ? MEMBER_MODEL : bytesEqualAscii(buf, start, end, 'input') ? MEMBER_INPUT : bytesEqualAscii(buf, start, end, 'store') ? MEMBER_STORE : MEMBER_OTHER;
      case 6: return bytesEqualAscii(buf, start, end, 'stream') ? MEMBER_STREAM : bytesEqualAscii(buf, start, end, 'prompt') ? MEMBER_PROMPT : MEMBER_OTHER;
      case 8: return bytesEqualAscii(buf, start, end, 'messages') ? MEMBER_MESSAGES : bytesEqualAscii(buf, start, end, 'metadata') ? MEMBER_SESSION : MEMBER_OTHER;
      case 10: return bytesEqualAscii(buf, start, end, 'max_tokens') ? MEMBER_MAX_TOKENS : bytesEqualAscii(buf, start, end, 'session_id') ? MEMBER_SESSION : MEMBER_OTHER;
      case 12: return bytesEqualAscii(buf, start, end, 'conversation') ? MEMBER_CONVERSATION : MEMBER_OTHER;
      case 20: return bytesEqualAscii(buf, start, end, 'previous_response_id') ? MEMBER_PREVIOUS_RESPONSE_ID : MEMBER_OTHER;
      default: return MEMBER_OTHER;
    }
  }
  // An escaped key such as "mo\u0064el" is still "model" to every parser.
  return MEMBER_OF_KEY.get(decodeJsonString(buf, start, end)) ?? MEMBER_OTHER;
}

const MEMBER_OF_KEY: ReadonlyMap<string, number> = new Map([
  ['model', MEMBER_MODEL],
  ['stream', MEMBER_STREAM],
  ['messages', MEMBER_MESSAGES],
  ['prompt', MEMBER_PROMPT],
  ['input', MEMBER_INPUT],
  ['max_tokens', MEMBER_MAX_TOKENS],
  ['previous_response_id', MEMBER_PREVIOUS_RESPONSE_ID],
  ['session_id', MEMBER_SESSION],
  ['metadata', MEMBER_SESSION],
  ['conversation', MEMBER_CONVERSATION],
  ['store', MEMBER_STORE],
]);

/**
 * The FIELD_* bits each member sets, cleared before a repeated member sets
 * its own: like JSON.parse (and Python's json, Go's encoding/json), the last
 * occurrence is the member's value, so `"messages":[…],"messages":"hi"` has
 * no array to send. Session members keep theirs: any one means look.
 */
const MEMBER_FIELDS: readonly number[] = [
  0, // MEMBER_OTHER
  0, // MEMBER_MODEL
  0, // MEMBER_STREAM
  FIELD_MESSAGES | FIELD_MESSAGES_ARRAY,
  FIELD_PROMPT,
  FIELD_INPUT,
  FIELD_MAX_TOKENS | FIELD_MAX_TOKENS_INTEGER,
  FIELD_PREVIOUS_RESPONSE_ID | FIELD_PREVIOUS_RESPONSE_ID_STRING,
  0, // MEMBER_SESSION
  FIELD_CONVERSATION,
  0, // MEMBER_STORE
];

/** FIELD_* bits for a tracked member whose value starts with byte `c`. */
function fieldBits(member: number, c: number, integer: boolean): number {
  switch (member) {
    case MEMBER_MESSAGES: return c === 0x5b ? FIELD_MESSAGES | FIELD_MESSAGES_ARRAY : FIELD_MESSAGES;
    case MEMBER_PROMPT: return FIELD_PROMPT;
    case MEMBER_INPUT: return FIELD_INPUT;
    case MEMBER_MAX_TOKENS: return integer ? FIELD_MAX_TOKENS | FIELD_MAX_TOKENS_INTEGER : FIELD_MAX_TOKENS;
    // null is "no previous response", as the SDK's types (string | null) and OpenAI read it.
    case MEMBER_PREVIOUS_RESPONSE_ID: return c === 0x22 ? FIELD_PREVIOUS_RESPONSE_ID | FIELD_PREVIOUS_RESPONSE_ID_STRING : c === 0x6e ? 0 : FIELD_PREVIOUS_RESPONSE_ID;
    case MEMBER_CONVERSATION: return c === 0x6e ? 0 : FIELD_CONVERSATION;
    case MEMBER_SESSION: return FIELD_SESSION;
    default: return 0;
  }
}

/** A JSON number token with neither fraction nor exponent. */
function isIntegerToken(buf: Buffer, start: number, end: number): boolean {
  let i = start;
  if (buf[i] === 0x2d) i++;
  if (i >= end) return false;
  for (; i < end; i++) if (buf[i] < 0x30 || buf[i] > 0x39) return false;
  return true;
}

// --- errors -----------------------------------------------------------------

/** Records an invalid_json reason; returns the offset for fail(). */
function invalid(offset: number, what: string): number {
  errorOffset = offset;
  errorWhat = what;
  return offset;
}

/** invalid() for helpers that signal failure by returning -1. */
function invalidAt(offset: number, what: string): number {
  invalid(offset, what);
  return -1;
}

/**
 * Fails with the recorded reason, unless ill-formed UTF-8 comes earlier in
 * the body: the first problem a reader would hit is the one reported.
 */
function fail(buf: Buffer, offset: number, kind: InspectError['kind'] = 'invalid_json', message?: string): InspectError {
  const utf8Error = firstInvalidUtf8(buf);
  if (utf8Error >= 0 && utf8Error < offset) return utf8Failure(utf8Error);
  if (message !== undefined) return error(kind, offset, message);
  return error('invalid_json', errorOffset, `invalid JSON at byte ${errorOffset}: ${errorWhat}`);
}

function utf8Failure(offset: number): InspectError {
  return error('invalid_json', offset, `invalid JSON at byte ${offset}: ill-formed UTF-8`);
}

function error(kind: InspectError['kind'], offset: number, message: string, param?: string): InspectError {
  return param === undefined ? { ok: false, kind, message, offset } : { ok: false, kind, message, offset, param };
}

function describeByte(c: number): string {
  if (c >= 0x21 && c < 0x7f) return `'${String.fromCharCode(c)}'`;
  return `byte 0x${c.toString(16).padStart(2, '0').toUpperCase()}`;
}

function asBuffer(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}
