// Which session a request belongs to: the `x-edge-session` header, else the
// body's top-level `session_id`, else its `metadata.session_id`. The body is
// only parsed when the inspector's one pass saw a top-level `session_id` or
// `metadata` member (FIELD_SESSION), so a request without one costs a bit
// test, whatever its size (a search of the bytes cost ~0.2 µs per 2 KB, and
// missed an escaped key JSON.parse reads). No session is "" here; the
// node gets it normalised ("default"). A named session also gets a 53-bit
// key for the scheduler's node affinity (fixed-size records carry it, not
// the id: sessionKeyOf).
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { FIELD_SESSION } from './inspect.js';

export const DEFAULT_SESSION = 'default';
export const SESSION_HEADER = 'x-edge-session';
/** Printable ASCII, up to 256 characters: it names a directory and shows in logs. */
const SESSION_ID = /^[\x20-\x7e]{1,256}$/;

/** undefined: the request names a session that is not valid (400): a bad header, or a body value that is not a string. */
export function sessionIdOf(request: IncomingMessage, body: Buffer, fields: number): string | undefined {
  const header = request.headers[SESSION_HEADER];
  if (typeof header === 'string') {
    if (header === '') return header;
    if (!SESSION_ID.test(header)) return undefined;
    return DIGEST_SHAPED.test(header) ? digestSessionId(header) : ownHeaderValue(header);
  }
  if ((fields & FIELD_SESSION) === 0) return '';
  let parsed: { session_id?: unknown; metadata?: { session_id?: unknown } | null };
  try {
    parsed = JSON.parse(body.toString('utf8')) as typeof parsed;
  } catch {
    return '';
  }
  const value = parsed.session_id ?? parsed.metadata?.session_id;
  if (value === undefined || value === null || value === '') return '';
  if (typeof value !== 'string') return undefined;
  // The body's value is the client's API field (OpenAI's metadata allows 512 characters of any script):
  // one that cannot name a session as it is names it by its digest, the same for every turn.
  // An id shaped like a digest is digested too: no client can name another's digested session.
  return SESSION_ID.test(value) && !DIGEST_SHAPED.test(value) ? value : digestSessionId(value);
}

const DIGEST_SHAPED = /^h-[0-9a-f]{32}$/;

/**
 * A header value kept past its request (the session id, the request tag: the
 * run records' interned names and finished runs, the run wire's names), as a
 * string of its own: the lean reader (lean-head.ts) cuts values out of the
 * head's text, and V8 keeps such a substring as a slice that holds the whole
 * head, up to limits.max_header_bytes, for as long as the value lives.
 */
export function ownHeaderValue(value: string): string {
  return Buffer.from(value, 'latin1').toString('latin1');
}

/** `h-` and 32 hex digits of the value's SHA-256. */
function digestSessionId(value: string): string {
  return `h-${createHash('sha256').update(value).digest('hex').slice(0, 32)}`;
}

/**
 * The id's scheduler key: the top 53 bits of its 64-bit FNV-1a (a safe
 * integer, so one number in the scheduler's map); 0 is kept for "no session".
 * The scheduler knows a session only by this key, so two ids sharing it share
 * a node: at 32 bits, among the 100,000 sessions it remembers, some pairs
 * would (one moving the other, unannounced); at 53, a chance of about one in
 * 10^6 over all of them.
 */
export function sessionKeyOf(sessionId: string): number {
  if (sessionId === '') return 0;
  // 64-bit FNV-1a in 16-bit limbs (small integers throughout; the prime is 2^40 + 0x1b3); ids are ASCII.
  let v0 = 0x2325;
  let v1 = 0x8422;
  let v2 = 0x9ce4;
  let v3 = 0xcbf2;
  for (let i = 0; i < sessionId.length; i++) {
    v0 ^= sessionId.charCodeAt(i);
    const t0 = v0 * 0x1b3;
    const t1 = v1 * 0x1b3 + (t0 >>> 16);
    const t2 = v2 * 0x1b3 + (v0 << 8) + (t1 >>> 16);
    v3 = (v3 * 0x1b3 + (v1 << 8) + (t2 >>> 16)) & 0xffff;
    v2 = t2 & 0xffff;
    v1 = t1 & 0xffff;
    v0 = t0 & 0xffff;
  }
  return (v3 * 0x10000 + v2) * 0x200000 + v1 * 32 + (v0 >>> 11) || 1;
}
