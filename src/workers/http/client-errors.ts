// Requests Node's HTTP parser refuses before fastify sees them (oversized
// head, malformed request line or headers, header timeout): answered on the
// raw socket in OpenAI's error format (in the path's, once the head was
// read), then the connection is closed, since the parser cannot resync on a
// broken stream.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { Errors, type GatewayErrorSpec } from '../../shared/errors.js';
import { errorFormatForPath, OPENAI_ERRORS, type ErrorFormat } from './api-routes.js';
import { logRefusal, refusalId, refusalIdLines } from './refusal-id.js';

const REASONS: Readonly<Record<number, string>> = { 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' };

function specFor(code: string | undefined): GatewayErrorSpec {
  if (code === 'HPE_HEADER_OVERFLOW') return Errors.headersTooLarge;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return { ...Errors.badRequest, status: 408, code: 'request_timeout', message: 'the request was not received in time' };
  return Errors.badRequest;
}

/** Where these refusals are counted (edge_rejects_total, under their error code) and logged (debug). */
export interface RefusalCounter {
  refused(code: string): void;
  readonly logger: Logger;
  /** The CORS fields (head lines) an answer to a request from `origin` carries: '' when no page of it may read it (workers/http/cors.ts). */
  corsLines?(origin: string): string;
}

/** The response to the request node:http handed over last on each socket (whose body it may still be reading: `response.req`). */
const readingOn = new WeakMap<Duplex, ServerResponse>();

/** Sockets whose refusal waits for the answers of earlier requests (a parse error may be reported again meanwhile). */
const waitingOn = new WeakSet<Duplex>();

/** node:http's response being written on a socket (`_httpMessage`): later pipelined ones wait behind it. */
type AnsweringSocket = Duplex & { _httpMessage?: ServerResponse | null };

/** node:http read `request`'s head: a refusal while its body comes (408, a bad chunk) answers in its path's format. */
export function noteRequestHead(request: IncomingMessage, response: ServerResponse): void {
  // The response alone (it holds its request): no object allocated per request.
  readingOn.set(request.socket, response);
}

/** fastify `clientErrorHandler`. */
export function onClientError(err: NodeJS.ErrnoException, socket: Duplex, counter: RefusalCounter): void {
  if (err.code === 'ECONNRESET') return;
  // Bytes pipelined past a request that asked to close: dropped unserved, as the lean connection drops them. The
  // requests before it still get their answers, in order, and node:http ends the connection after the last; a 400
  // and a cut now would go out in place of (or amid) an earlier request's answer and lose the answers still due.
  if (err.code === 'HPE_CLOSED_CONNECTION') return;
  // A complete request is an earlier one of the connection: the refused one never got past its head.
  const noted = readingOn.get(socket);
  const refused = noted === undefined || noted.req.complete ? undefined : noted;
  // Already answered from its head (413, 401, 417: its body unread, the close lingering): the client stopped
  // its upload and closed, as clients do once refused. That refusal was counted and logged; another here would
  // count (in edge_rejects_total) and log a 400 that no client gets.
  if (refused?.headersSent === true) {
    // After the answer's last bytes (a lingering socket's own destroySoon ends the same way), never before.
    if (socket instanceof Socket) socket.destroySoon();
    else socket.destroy();
    return;
  }
  // Earlier pipelined requests still being answered get their answers first, in order, as on the lean connection:
  // written now, the refusal would go out in place of (or amid) one of them, and the cut would lose the rest.
  if (waitingOn.has(socket) || afterEarlierAnswers(socket as AnsweringSocket, refused, () => onClientError(err, socket, counter))) return;
  const request = refused?.req;
  answerAndClose(socket, counter, err.code, request === undefined ? OPENAI_ERRORS : errorFormatForPath((request.url ?? '').split('?')[0]), request?.method, request?.url, request?.headers.origin);
}

/** True (and `then` runs once they are all written) while a response before `own` is still going out on `socket`. */
function afterEarlierAnswers(socket: AnsweringSocket, own: ServerResponse | undefined, then: () => void): boolean {
  const running = socket._httpMessage;
  if (running === undefined || running === null || running === own || running.writableFinished) return false;
  waitingOn.add(socket);
  // node:http's own 'finish' listener, added first, has put the next pipelined response on the socket by now.
  running.once('finish', () => {
    waitingOn.delete(socket);
    then();
  });
  return true;
}

/**
 * The lean connection's request (its head read: `path` known) was not all
 * received within limits.request_timeout_ms: 408, as node:http answers its
 * own, in the path's API format (node:http's cannot know the path).
 */
export function refuseSlowRequest(socket: Duplex, path: string, counter: RefusalCounter, origin: string | undefined): void {
  answerAndClose(socket, counter, 'ERR_HTTP_REQUEST_TIMEOUT', errorFormatForPath(path), 'POST', path, origin);
}

/**
 * `method`, `url` and `origin`: the refused request's, once its head was read (for the log; an allowed
 * page's upload cut by a 408 or a broken chunk reads its answer, as every other refusal's).
 */
function answerAndClose(socket: Duplex, counter: RefusalCounter, errorCode: string | undefined, format: ErrorFormat, method?: string, url?: string, origin?: string): void {
  if (socket.destroyed) return;
  const spec = specFor(errorCode);
  counter.refused(spec.code);
  const body = format.body(spec, spec === Errors.badRequest ? `the request is malformed (${errorCode ?? 'parse error'})` : undefined);
  const status = format.status(spec);
  const id = refusalId();
  logRefusal(counter.logger, id, method, url, status, spec.code, (socket as Partial<Socket>).remoteAddress);
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${refusalIdLines(id)}${origin === undefined ? '' : (counter.corsLines?.(origin) ?? '')}Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
