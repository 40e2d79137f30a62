// The client-facing OpenAI-compatible listener (fastify). Bodies arrive as
// raw bytes; they are inspected and rewritten by byte scan, never parsed
// into objects, and handed to the data plane with the hijacked response.
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { EdgeConfig } from '../../shared/config-types.js';
import { errorBody, Errors, type GatewayErrorSpec } from '../../shared/errors.js';
import type { DataPlane } from '../data-plane.js';
import { limitsOf } from '../../shared/config-hardening.js';
import type { HttpsMaterial } from '../tls.js';
import { ApiKeyState, ClientAuth } from './client-auth.js';
import { onClientError } from './client-errors.js';
import { inspectBody, type InspectError, type InspectResult } from './inspect.js';
import { defaultOffloadThreads, OffloadPool, type OffloadedInspection } from '../offload/offload-pool.js';

const kApiKey = Symbol('edge.apiKey');
type KeyedRequest = FastifyRequest & { [kApiKey]?: ApiKeyState };

export const PROXIED_ROUTES = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings'] as const;

function sendError(reply: FastifyReply, spec: GatewayErrorSpec, message?: string): void {
  reply.code(spec.status).header('content-type', 'application/json').send(errorBody(spec, message));
}

function specForInspectError(error: InspectError): GatewayErrorSpec {
  switch (error.kind) {
    case 'missing_model': return Errors.missingModel;
    case 'model_not_string':
    case 'empty_model': return Errors.modelNotString;
    case 'too_deep': return Errors.tooDeep;
    case 'not_object': return Errors.notObject;
    default: return Errors.invalidJson;
  }
}

export class ClientServer {
  readonly app: FastifyInstance;
  readonly auth: ClientAuth;
  private modelsBody = '';
  private aliases: readonly string[] = [];
  private maxJsonDepth = 64;
  /** limits.offload_bytes: bodies this large are inspected in the pool; 0 = never. */
  private offloadBytes = 0;
  /** Created on the first large body; its size fits workers.count (see defaultOffloadThreads). */
  private offloadPool: OffloadPool | undefined;
  private readonly offloadThreads: number;

  constructor(
    config: EdgeConfig,
    private readonly plane: DataPlane,
    https?: HttpsMaterial,
  ) {
    // maxHeaderSize makes Node refuse an oversized head; onClientError answers it as 431 in OpenAI's format.
    // Node's own missing-Host check answers with an empty body; ours (onRequest) in OpenAI's format.
    const maxHeaderSize = limitsOf(config).maxHeaderBytes;
    const serverOptions = { maxHeaderSize, requireHostHeader: false };
    this.app = Fastify({
      logger: false,
      bodyLimit: config.limits.bodyBytes,
      keepAliveTimeout: 72_000,
      return503OnClosing: true,
      http: serverOptions,
      ...(https === undefined ? {} : { https: { ...https, ...serverOptions } }),
      clientErrorHandler: onClientError,
    }) as unknown as FastifyInstance;
    this.auth = new ClientAuth(config.auth);
    this.offloadThreads = defaultOffloadThreads(config.workers.count);
    this.setConfig(config);
    // Before the body is read: an unauthenticated client never gets to send one.
    this.app.addHook('onRequest', (request, reply, done) => this.checkRequest(request, reply, done));
    this.app.removeAllContentTypeParsers();
    // Every content type is taken as raw bytes; the inspector decides if it is JSON.
    this.app.addContentTypeParser('*', { parseAs: 'buffer' }, passBuffer);
    this.app.setErrorHandler(onFrameworkError);
    this.app.setNotFoundHandler(onNotFound);
    this.app.get('/v1/models', (request, reply) => {
      reply.header('content-type', 'application/json').send(this.modelsFor((request as KeyedRequest)[kApiKey]));
    });
    this.app.get('/healthz', (_request, reply) => {
      reply.send({ status: 'ok' });
    });
    for (const route of PROXIED_ROUTES) this.app.post(route, (request, reply) => this.proxy(route, request, reply));
  }

  setConfig(config: EdgeConfig): void {
    this.auth.setConfig(config.auth);
    const limits = limitsOf(config);
    this.maxJsonDepth = limits.maxJsonDepth;
    this.offloadBytes = limits.offloadBytes;
    this.aliases = config.models.map((m) => m.alias);
    const created = Math.floor(Date.now() / 1000);
    this.modelsBody = JSON.stringify({
      object: 'list',
      data: config.models.map((m) => ({ id: m.alias, object: 'model', created, owned_by: 'edge' })),
    });
  }

  /** `reusePort`: several workers listen on one port and the kernel spreads the connections (Node >= 22.12). */
  async listen(host: string, port: number, reusePort = false): Promise<number> {
    await this.app.listen(reusePort ? ({ host, port, reusePort: true } as { host: string; port: number }) : { host, port });
    const address = this.app.server.address();
    return typeof address === 'object' && address ? address.port : port;
  }

  /** The offload pool, once a large body created it (tests, status). */
  get offload(): OffloadPool | undefined {
    return this.offloadPool;
  }

  async close(): Promise<void> {
    await this.app.close();
    await this.offloadPool?.close();
  }

  private proxy(route: string, request: FastifyRequest, reply: FastifyReply): void {
    const body = request.body;
    if (!Buffer.isBuffer(body) || body.length === 0) {
      sendError(reply, Errors.invalidJson, 'request body is empty; send a JSON object');
      return;
    }
    if (this.offloadBytes > 0 && body.length >= this.offloadBytes) {
      this.offloadPool ??= new OffloadPool(this.offloadThreads);
      this.offloadPool.inspect(body, this.maxJsonDepth).then(
        (done) => this.afterOffload(route, request, reply, done),
        () => this.offloadFailed(reply),
      );
      return;
    }
    this.admit(route, request, reply, body, inspectBody(body, this.maxJsonDepth));
  }

  /** The pool's verdict on a large body: admitted as an inline one would be, unless the client or the edge left meanwhile. */
  private afterOffload(route: string, request: FastifyRequest, reply: FastifyReply, done: OffloadedInspection): void {
    const socket = request.raw.socket;
    // The client left: its response already closed, so an exchange begun now would never end.
    if (reply.sent || reply.raw.destroyed || socket === null || socket.destroyed) return;
    if (this.plane.shuttingDown) {
      reply.header('retry-after', '1');
      sendError(reply, Errors.shuttingDown);
      return;
    }
    this.admit(route, request, reply, done.body, done.info);
  }

  private offloadFailed(reply: FastifyReply): void {
    if (!reply.sent && !reply.raw.destroyed) sendError(reply, Errors.internal);
  }

  private admit(route: string, request: FastifyRequest, reply: FastifyReply, body: Buffer, info: InspectResult): void {
    if (!info.ok) {
      sendError(reply, specForInspectError(info), info.kind === 'invalid_json' ? `request body is not valid JSON: ${info.message}` : undefined);
      return;
    }
    if (!this.plane.hasModel(info.model)) {
      this.plane.refused('model_not_found');
      sendError(reply, Errors.modelNotFound, `The model ${JSON.stringify(info.model)} does not exist`);
      return;
    }
    const key = (request as KeyedRequest)[kApiKey];
    if (key !== undefined) {
      if (!key.mayUse(info.model)) {
        sendError(reply, Errors.modelNotAllowed, `this API key may not use the model ${JSON.stringify(info.model)}`);
        return;
      }
      // With I/O workers the slot is taken on the main thread at admission (DataPlane.sharedKeyLimits).
      if (!this.plane.sharedKeyLimits && !key.tryAcquire()) {
        reply.header('retry-after', '1');
        sendError(reply, Errors.tooManyConcurrent, `this API key already has ${key.inFlight} requests open (its limit); retry when one finishes`);
        return;
      }
    }
    reply.hijack();
    // The data plane releases the key's slot when the exchange ends (or, with workers, takes it first).
    this.plane.begin(route, request.raw, reply.raw, body, info, key);
  }

  /** onRequest: Host present, and the API key when auth is on. */
  private checkRequest(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      reply.header('connection', 'close');
      sendError(reply, Errors.badRequest, 'an HTTP/1.1 request must carry a Host header');
      return;
    }
    if (!this.auth.enabled || !request.url.startsWith('/v1/')) {
      done();
      return;
    }
    const result = this.auth.authenticate(request.headers.authorization);
    if (result instanceof ApiKeyState) {
      (request as KeyedRequest)[kApiKey] = result;
      done();
      return;
    }
    reply.header('www-authenticate', 'Bearer');
    sendError(reply, result);
  }

  private modelsFor(key: ApiKeyState | undefined): string {
    if (key === undefined || key.models === undefined) return this.modelsBody;
    const created = Math.floor(Date.now() / 1000);
    const data = this.aliases.filter((a) => key.mayUse(a)).map((id) => ({ id, object: 'model', created, owned_by: 'edge' }));
    return JSON.stringify({ object: 'list', data });
  }
}

function passBuffer(_request: FastifyRequest, body: Buffer, done: (err: Error | null, body?: Buffer) => void): void {
  done(null, body);
}

function onNotFound(request: FastifyRequest, reply: FastifyReply): void {
  const path = request.url.split('?')[0];
  if ((PROXIED_ROUTES as readonly string[]).includes(path) || path === '/v1/models' || path === '/healthz') {
    reply.header('allow', path === '/v1/models' || path === '/healthz' ? 'GET, HEAD' : 'POST');
    sendError(reply, Errors.methodNotAllowed, `${request.method} is not allowed on ${path}`);
    return;
  }
  sendError(reply, Errors.routeNotFound, `unknown route: ${request.method} ${request.url.split('?')[0]}`);
}

function onFrameworkError(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    sendError(reply, Errors.bodyTooLarge);
    return;
  }
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    sendError(reply, { ...Errors.invalidJson, status: error.statusCode, code: 'invalid_request' }, error.message);
    return;
  }
  sendError(reply, Errors.internal);
}
