// The admin API's error body: {"error":{"code","message"}} (plus details
// where a caller can act on them). Distinct from the client catalogue in
// src/shared/errors.ts: operators, not OpenAI clients, read these.
import type { FastifyReply } from 'fastify';

/**
 * Whether every query parameter is one `path` takes, each given once; if not, a 400 `invalid_request` is sent.
 * A typo or an unsupported parameter would otherwise be answered as if it were absent, looking right.
 */
export function knownParameters(reply: FastifyReply, path: string, query: Record<string, string | string[] | undefined>, takes: readonly string[]): query is Record<string, string | undefined> {
  for (const name of Object.keys(query)) {
    if (!takes.includes(name)) {
      sendAdminError(reply, 400, 'invalid_request', `unknown parameter ${JSON.stringify(name)}; ${path} takes ${takes.join(', ')}`);
      return false;
    }
    if (typeof query[name] !== 'string') {
      sendAdminError(reply, 400, 'invalid_request', `${name} is given more than once; give it once`);
      return false;
    }
  }
  return true;
}

export function sendAdminError(reply: FastifyReply, status: number, code: string, message: string, details?: Record<string, unknown>): void {
  reply.code(status).header('content-type', 'application/json').send(JSON.stringify({ error: { code, message, ...details } }));
}
