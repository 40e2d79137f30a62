// Which session a request belongs to: the `x-edge-session` header, else the
// body's top-level `session_id`, else its `metadata.session_id`. The body is
// only parsed when its bytes mention `session_id` (a native search), so a
// request without a session costs one indexOf. No session is "" here; the
// node gets it normalised ("default"). A named session also gets a 32-bit
// key for the scheduler's node affinity (fixed-size records carry it; two
// sessions that collide only share a node preference).
import type { IncomingMessage } from 'node:http';

export const DEFAULT_SESSION = 'default';
export const SESSION_HEADER = 'x-edge-session';
/** Printable ASCII, up to 256 characters: it names a directory and shows in logs. */
const SESSION_ID = /^[\x20-\x7e]{1,256}$/;
const NEEDLE = Buffer.from('"session_id"');

/** undefined: the request names a session that is not valid (400). */
export function sessionIdOf(request: IncomingMessage, body: Buffer): string | undefined {
  const header = request.headers[SESSION_HEADER];
  if (typeof header === 'string') return header === '' || SESSION_ID.test(header) ? header : undefined;
  if (body.indexOf(NEEDLE) < 0) return '';
  let parsed: { session_id?: unknown; metadata?: { session_id?: unknown } | null };
  try {
    parsed = JSON.parse(body.toString('utf8')) as typeof parsed;
  } catch {
    return '';
  }
  const value = parsed.session_id ?? parsed.metadata?.session_id;
  if (value === undefined || value === null || value === '') return '';
  return typeof value === 'string' && SESSION_ID.test(value) ? value : undefined;
}

/** FNV-1a of the id; 0 is kept for "no session". */
export function sessionKeyOf(sessionId: string): number {
  if (sessionId === '') return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < sessionId.length; i++) {
    hash ^= sessionId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0 || 1;
}
