// The request id of an answer given before the data path (a 401, a bad body,
// an unknown route, a drain's 503, the model list): no run exists to name it, yet the SDKs
// surface x-request-id (openai) and request-id (Anthropic) in every error, and
// a user quoting one to an operator should quote something. Unique per
// process: a random prefix per thread and a counter, no per-request entropy.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';

const PREFIX = `req-${randomBytes(5).toString('hex')}-`;
let next = 0;

/** A fresh id for one refusal. */
export function refusalId(): string {
  return PREFIX + (next++).toString(36);
}

/** The two headers that carry it, for a raw head. */
export function refusalIdLines(id: string): string {
  return `x-request-id: ${id}\r\nrequest-id: ${id}\r\n`;
}

/**
 * The refusal's debug line, so that the id a user quotes leads somewhere: no
 * run records it. Never the key, the body or the headers; the path without
 * its query. Nothing is built unless debug is on.
 */
export function logRefusal(logger: Logger, id: string, method: string | undefined, url: string | undefined, status: number, code: string, remote: string | undefined): void {
  if (!logger.isLevelEnabled('debug')) return;
  const query = url === undefined ? -1 : url.indexOf('?');
  logger.debug({ requestId: id, method, path: query < 0 ? url : url?.slice(0, query), status, code, remote }, 'request refused');
}
