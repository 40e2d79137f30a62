// The request id of an answer given before the data path (a 401, a bad body,
// an unknown route, a drain's 503, the model list): no run exists to name it, yet the SDKs
// surface x-request-id (openai) and request-id (Anthropic) in every error, and
// a user quoting one to an operator should quote something. Unique per
// process: a random prefix per thread and a counter, no per-request entropy.
import { randomBytes } from 'node:crypto';

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
