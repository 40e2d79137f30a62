// The admin API's error body: {"error":{"code","message"}} (plus details
// where a caller can act on them). Distinct from the client catalogue in
// src/shared/errors.ts: operators, not OpenAI clients, read these.
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Whether every query parameter is one `path` takes, each given once; if not, a 400 `invalid_request` is sent.
 * A typo or an unsupported parameter would otherwise be answered as if it were absent, looking right.
 */
export function knownParameters(reply: FastifyReply, path: string, query: Record<string, string | string[] | undefined>, takes: readonly string[]): query is Record<string, string | undefined> {
  for (const name of Object.keys(query)) {
    if (!takes.includes(name)) {
      sendAdminError(reply, 400, 'invalid_request', `unknown parameter ${JSON.stringify(name)}; ${path} takes ${takes.length === 0 ? 'no parameters' : takes.join(', ')}`);
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

/** fastify `frameworkErrors`: the router's own refusals (a malformed URL, a path segment past maxParamLength) in the admin format. */
export function onAdminRouterError(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') sendAdminError(reply, 414, 'uri_too_long', 'a path segment is longer than any id or label this edge takes');
  else sendAdminError(reply, 400, 'invalid_request', `the request URL is malformed (${error.code})`);
}

/**
 * fastify `clientErrorHandler`: what Node's HTTP parser refuses before fastify sees it (an oversized head, a
 * malformed request, the 30 s request timeout), answered on the raw socket in the admin format (fastify's default
 * body is its own), then the connection closes: the parser cannot resync on a broken stream.
 */
export function onAdminClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'headers_too_large', 'the request head is larger than this listener takes']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'request_timeout', 'the request was not received whole in time']
        : [400, 'Bad Request', 'invalid_request', `the request is malformed (${err.code ?? 'parse error'})`];
  const body = JSON.stringify({ error: { code, message } });
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}
