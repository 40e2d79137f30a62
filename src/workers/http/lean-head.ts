// The strict reader of one HTTP/1.1 request head for the lean connection
// (lean-http1.ts). It accepts only the plain shape every API client sends
// for a proxied POST: `POST /v1/... HTTP/1.1`, CRLF line ends, token header
// names, values without control characters, each header once, a decimal
// Content-Length or none, and no Transfer-Encoding, Expect or Upgrade.
// Anything else, an incomplete head included, reads as undefined and the
// connection goes to node:http, whose parser (llhttp) and checks then
// answer it: this reader never has to be right about an unusual request,
// only about refusing it.

export interface LeanHead {
  /** The request target as sent (path and query). */
  readonly url: string;
  /** The path the route table knows it by. */
  readonly path: string;
  /** Lower-cased names, each once (a repeated header is not lean). */
  readonly headers: Record<string, string>;
  /** Names as sent, then values, as IncomingMessage.rawHeaders. */
  readonly rawHeaders: string[];
  readonly contentLength: number;
  /** `Connection: close`: the connection ends after this response. */
  readonly close: boolean;
  /** Bytes of the head, the blank line included: where the body starts. */
  readonly headBytes: number;
}

const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
const REQUEST_LINE_START = 'POST /';
const REQUEST_LINE_END = ' HTTP/1.1';
const CR = 0x0d;
const LF = 0x0a;
const COLON = 0x3a;
const SP = 0x20;
const HTAB = 0x09;

/** RFC 9110 token characters: 1 (upper-case letters 2, so a name needs lower-casing only when it has one). */
const TOKEN = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz") TOKEN[c.charCodeAt(0)] = 1;
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZ') TOKEN[c.charCodeAt(0)] = 2;
const CLOSE_TOKEN = /(?:^|,)[ \t]*close[ \t]*(?:,|$)/i;
const UPGRADE_TOKEN = /(?:^|,)[ \t]*upgrade[ \t]*(?:,|$)/i;
const DIGITS = /^\d{1,15}$/;

/**
 * The head at the start of `buffer`, when it is complete within
 * `maxHeaderBytes`, plain (see above) and for a path `routes` has;
 * otherwise undefined. One pass of charCodeAt over the head read as
 * Latin-1 (as llhttp hands header bytes to JavaScript), no regular
 * expression per line: this runs once per request.
 */
export function readLeanHead(buffer: Buffer, maxHeaderBytes: number, routes: readonly string[]): LeanHead | undefined {
  const end = buffer.indexOf(HEAD_END);
  if (end < 0 || end + 4 > maxHeaderBytes) return undefined;
  const text = buffer.toString('latin1', 0, end);
  if (!text.startsWith(REQUEST_LINE_START)) return undefined;
  // The request line: `POST /target HTTP/1.1`, the target visible ASCII.
  let at = 5;
  let code = 0;
  while (at < end && (code = text.charCodeAt(at)) > SP && code < 0x7f) at++;
  if (code !== SP || !text.startsWith(REQUEST_LINE_END, at)) return undefined;
  const url = text.slice(5, at);
  at += REQUEST_LINE_END.length;
  if (at !== end && (text.charCodeAt(at) !== CR || text.charCodeAt(at + 1) !== LF)) return undefined;
  at += 2;
  const query = url.indexOf('?');
  const path = routePath(query < 0 ? url : url.slice(0, query), routes);
  if (path === undefined) return undefined;

  const headers: Record<string, string> = {};
  const rawHeaders: string[] = [];
  let contentLength = 0;
  let close = false;
  while (at < end) {
    // name: token characters up to the colon (a space before it, or none, is not lean).
    const nameStart = at;
    let upper = false;
    while (at < end) {
      code = text.charCodeAt(at);
      const kind = code < 128 ? TOKEN[code] : 0;
      if (kind === 0) break;
      if (kind === 2) upper = true;
      at++;
    }
    if (at === nameStart || at >= end || code !== COLON) return undefined;
    const name = text.slice(nameStart, at);
    at++;
    // value: no control character but HTAB (so no bare CR or LF, no obs-fold), outer spaces and tabs trimmed.
    while (at < end && ((code = text.charCodeAt(at)) === SP || code === HTAB)) at++;
    const valueStart = at;
    let valueEnd = at;
    while (at < end) {
      code = text.charCodeAt(at);
      if (code === CR) break;
      if ((code < SP && code !== HTAB) || code === 0x7f) return undefined;
      at++;
      if (code !== SP && code !== HTAB) valueEnd = at;
    }
    if (at < end && text.charCodeAt(at + 1) !== LF) return undefined;
    at += 2;
    const value = text.slice(valueStart, valueEnd);
    const lower = knownName(upper ? name.toLowerCase() : name);
    // Also catches names Object.prototype has (constructor, __proto__): not lean either.
    if (headers[lower] !== undefined) return undefined;
    switch (lower) {
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
        return undefined;
      case 'content-length':
        if (!DIGITS.test(value)) return undefined;
        contentLength = Number(value);
        break;
      case 'connection':
        // The value nearly every client sends needs neither token scan.
        if (value === 'keep-alive') break;
        if (UPGRADE_TOKEN.test(value)) return undefined;
        close = asksToClose(value);
        break;
    }
    headers[lower] = value;
    rawHeaders.push(name, value);
  }
  // HTTP/1.1 without Host: node's path answers it (400 in the route's format).
  if (headers.host === undefined) return undefined;
  return { url, path, headers, rawHeaders, contentLength, close, headBytes: end + 4 };
}

/** A `Connection` value that names `close` (request or response). */
export function asksToClose(connectionValue: string): boolean {
  return CLOSE_TOKEN.test(connectionValue);
}

/** The route's own path string (`routes` are few): later lookups by it hit the interned string, not a fresh slice. */
function routePath(path: string, routes: readonly string[]): string | undefined {
  for (let i = 0; i < routes.length; i++) if (routes[i] === path) return routes[i];
  return undefined;
}

/**
 * Header names the SDKs and the edge's own features send, by length. A
 * header record keyed by these constants (interned strings) stays a fast
 * object with the same shape request after request; keyed by fresh slices,
 * every store and lookup went to V8's slow path (most of this reader's
 * time in the edge's profile).
 */
const KNOWN_NAMES: readonly (readonly string[])[] = (() => {
  const names = [
    'host', 'accept', 'accept-encoding', 'accept-language', 'authorization', 'connection', 'content-length', 'content-type',
    'user-agent', 'x-api-key', 'x-request-id', 'idempotency-key', 'traceparent', 'tracestate', 'sec-fetch-mode',
    'anthropic-version', 'anthropic-beta', 'anthropic-dangerous-direct-browser-access', 'openai-organization', 'openai-project',
    'x-stainless-lang', 'x-stainless-package-version', 'x-stainless-os', 'x-stainless-arch', 'x-stainless-runtime',
    'x-stainless-runtime-version', 'x-stainless-retry-count', 'x-stainless-timeout', 'x-stainless-helper-method', 'x-stainless-poll-helper',
    'x-edge-session', 'x-edge-node', 'x-edge-priority', 'x-edge-fairness-id', 'x-edge-queue-updates',
  ];
  const byLength: string[][] = [];
  for (const name of names) (byLength[name.length] ??= []).push(name);
  return byLength;
})();

/** The interned constant for a known lower-case name, else the name itself. */
function knownName(lower: string): string {
  const candidates = KNOWN_NAMES[lower.length];
  if (candidates !== undefined) for (let i = 0; i < candidates.length; i++) if (candidates[i] === lower) return candidates[i];
  return lower;
}
