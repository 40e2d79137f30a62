// The admin API's error body: {"error":{"code","message"}} (plus details
// where a caller can act on them). Distinct from the client catalogue in
// src/shared/errors.ts: operators, not OpenAI clients, read these.
import type { FastifyReply } from 'fastify';

export function sendAdminError(reply: FastifyReply, status: number, code: string, message: string, details?: Record<string, unknown>): void {
  reply.code(status).header('content-type', 'application/json').send(JSON.stringify({ error: { code, message, ...details } }));
}
