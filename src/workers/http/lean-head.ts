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
/** RFC 9110 token characters. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Control characters other than HTAB, which no field value may hold. */
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;
/** Visible ASCII: an origin-form target without spaces or controls. */
const TARGET = /^\/[!-~]*$/;
const DIGITS = /^\d{1,15}$/;
const CLOSE_TOKEN = /(?:^|,)[ \t]*close[ \t]*(?:,|$)/i;
const UPGRADE_TOKEN = /(?:^|,)[ \t]*upgrade[ \t]*(?:,|$)/i;

/**
 * The head at the start of `buffer`, when it is complete within
 * `maxHeaderBytes`, plain (see above) and for a path `routes` has;
 * otherwise undefined.
 */
export function readLeanHead(buffer: Buffer, maxHeaderBytes: number, routes: ReadonlyMap<string, unknown>): LeanHead | undefined {
  const end = buffer.indexOf(HEAD_END);
  if (end < 0 || end + 4 > maxHeaderBytes) return undefined;
  // Bytes as Latin-1, as llhttp hands header values to JavaScript.
  const text = buffer.toString('latin1', 0, end);
  if (!text.startsWith(REQUEST_LINE_START)) return undefined;
  let lineEnd = text.indexOf('\r\n');
  if (lineEnd < 0) lineEnd = text.length;
  const requestLine = text.slice(0, lineEnd);
  if (!requestLine.endsWith(REQUEST_LINE_END)) return undefined;
  const url = requestLine.slice(5, requestLine.length - REQUEST_LINE_END.length);
  if (!TARGET.test(url)) return undefined;
  const query = url.indexOf('?');
  const path = query < 0 ? url : url.slice(0, query);
  if (!routes.has(path)) return undefined;

  const headers: Record<string, string> = {};
  const rawHeaders: string[] = [];
  let contentLength = 0;
  let close = false;
  let at = lineEnd + 2;
  while (at < text.length) {
    let next = text.indexOf('\r\n', at);
    if (next < 0) next = text.length;
    const line = text.slice(at, next);
    at = next + 2;
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon);
    // A bare CR or LF, an obs-fold or a space before the colon all fail here or in CONTROL below.
    if (!TOKEN.test(name)) return undefined;
    const value = trimOws(line, colon + 1);
    if (CONTROL.test(value)) return undefined;
    const lower = name.toLowerCase();
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
        if (UPGRADE_TOKEN.test(value)) return undefined;
        close = CLOSE_TOKEN.test(value);
        break;
    }
    headers[lower] = value;
    rawHeaders.push(name, value);
  }
  // HTTP/1.1 without Host: node's path answers it (400 in the route's format).
  if (headers.host === undefined) return undefined;
  return { url, path, headers, rawHeaders, contentLength, close, headBytes: end + 4 };
}

/** The field value without its leading and trailing spaces and tabs. */
function trimOws(line: string, from: number): string {
  let start = from;
  let end = line.length;
  while (start < end && (line.charCodeAt(start) === 0x20 || line.charCodeAt(start) === 0x09)) start++;
  while (end > start && (line.charCodeAt(end - 1) === 0x20 || line.charCodeAt(end - 1) === 0x09)) end--;
  return line.slice(start, end);
}
