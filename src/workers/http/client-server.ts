// The client-facing listener (fastify): the OpenAI API (chat, completions,
// embeddings, Responses) and Anthropic's Messages API. Bodies arrive as raw
// bytes; they are inspected and rewritten by byte scan, never parsed into
// objects, checked for the route's required fields in that same scan, and
// handed to the data plane with the hijacked response. Errors are in the
// route's own format (api-routes.ts).
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { EdgeConfig } from '../../shared/config-types.js';
import { Errors, type GatewayErrorSpec } from '../../shared/errors.js';
import { API_ROUTES, errorFormatForPath, isJsonContentType, OPENAI_ERRORS, RESPONSES, type ApiRoute, type ErrorFormat } from './api-routes.js';
import { isResponseId } from './response-affinity.js';
import type { DataPlane } from '../data-plane.js';
import { limitsOf } from '../../shared/config-hardening.js';
import type { HttpsMaterial } from '../tls.js';
import { ApiKeyState, ClientAuth } from './client-auth.js';
import { onClientError } from './client-errors.js';
import { inspectBody, type InspectError, type InspectOk, type InspectResult } from './inspect.js';
import { defaultOffloadThreads, OffloadPool, type OffloadedInspection } from '../offload/offload-pool.js';
import { A2ASurface } from '../a2a/a2a-surface.js';

const kApiKey = Symbol('edge.apiKey');
type KeyedRequest = FastifyRequest & { [kApiKey]?: ApiKeyState };

export const PROXIED_ROUTES: readonly string[] = API_ROUTES.map((r) => r.path);
const STORED_RESPONSE_ROUTE = '/v1/responses/:id';

function sendError(reply: FastifyReply, spec: GatewayErrorSpec, message?: string, format: ErrorFormat = OPENAI_ERRORS, param?: string): void {
  reply.code(format.status(spec)).header('content-type', 'application/json').send(format.body(spec, message, param));
}

/** Anthropic clients send their key as `x-api-key`; it is taken as a Bearer token. */
function presentedKey(request: FastifyRequest): string | undefined {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) return authorization;
  const apiKey = request.headers['x-api-key'];
  return typeof apiKey === 'string' && apiKey.length > 0 ? `Bearer ${apiKey}` : undefined;
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
  #modelsBody = '';
  #aliases: readonly string[] = [];
  #maxJsonDepth = 64;
  /** limits.offload_bytes: bodies this large are inspected in the pool; 0 = never. */
  #offloadBytes = 0;
  /** Created on the first large body; its size fits workers.count (see defaultOffloadThreads). */
  #offloadPool: OffloadPool | undefined;
  readonly #offloadThreads: number;

  readonly #plane: DataPlane;
  /** Agent Cards and the A2A JSON-RPC endpoints (src/workers/a2a/). */
  readonly a2a: A2ASurface;

  constructor(config: EdgeConfig, plane: DataPlane, https?: HttpsMaterial) {
    this.#plane = plane;
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
    this.#offloadThreads = defaultOffloadThreads(config.workers.count);
    this.setConfig(config);
    // Before the body is read: an unauthenticated client never gets to send one.
    this.app.addHook('onRequest', (request, reply, done) => this.#checkRequest(request, reply, done));
    this.app.removeAllContentTypeParsers();
    // Every content type is taken as raw bytes; the inspector decides if it is JSON.
    this.app.addContentTypeParser('*', { parseAs: 'buffer' }, passBuffer);
    this.app.setErrorHandler(onFrameworkError);
    this.app.setNotFoundHandler(onNotFound);
    this.app.get('/v1/models', (request, reply) => {
      reply.header('content-type', 'application/json').send(this.#modelsFor((request as KeyedRequest)[kApiKey]));
    });
    this.app.get('/healthz', (_request, reply) => {
      reply.send({ status: 'ok' });
    });
    for (const route of API_ROUTES) this.app.post(route.path, (request, reply) => this.#proxy(route, request, reply));
    this.app.get(STORED_RESPONSE_ROUTE, (request, reply) => this.#storedResponse(request, reply));
    this.app.delete(STORED_RESPONSE_ROUTE, (request, reply) => this.#storedResponse(request, reply));
    this.a2a = new A2ASurface(config, plane, plane.workerIndex, https !== undefined, (request) => (request as KeyedRequest)[kApiKey]);
    this.a2a.register(this.app);
  }

  setConfig(config: EdgeConfig): void {
    this.auth.setConfig(config.auth);
    // Undefined only while the constructor's first setConfig runs (the surface is made after it).
    this.a2a?.setConfig(config);
    const limits = limitsOf(config);
    this.#maxJsonDepth = limits.maxJsonDepth;
    this.#offloadBytes = limits.offloadBytes;
    this.#aliases = config.models.map((m) => m.alias);
    const created = Math.floor(Date.now() / 1000);
    this.#modelsBody = JSON.stringify({
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
    return this.#offloadPool;
  }

  async close(): Promise<void> {
    await this.app.close();
    await this.#offloadPool?.close();
  }

  #proxy(route: ApiRoute, request: FastifyRequest, reply: FastifyReply): void {
    const contentType = request.headers['content-type'];
    if (!isJsonContentType(contentType)) {
      sendError(reply, Errors.unsupportedMediaType, `content-type ${JSON.stringify(contentType)} is not JSON; send the body as application/json`, route.errors);
      return;
    }
    const body = request.body;
    if (!Buffer.isBuffer(body) || body.length === 0) {
      sendError(reply, Errors.invalidJson, 'request body is empty; send a JSON object', route.errors);
      return;
    }
    if (this.#offloadBytes > 0 && body.length >= this.#offloadBytes) {
      this.#offloadPool ??= new OffloadPool(this.#offloadThreads);
      this.#offloadPool.inspect(body, this.#maxJsonDepth).then(
        (done) => this.#afterOffload(route, request, reply, done),
        () => this.#offloadFailed(reply),
      );
      return;
    }
    this.#admit(route, request, reply, body, inspectBody(body, this.#maxJsonDepth));
  }

  /** The pool's verdict on a large body: admitted as an inline one would be, unless the client or the edge left meanwhile. */
  #afterOffload(route: ApiRoute, request: FastifyRequest, reply: FastifyReply, done: OffloadedInspection): void {
    const socket = request.raw.socket;
    // The client left: its response already closed, so an exchange begun now would never end.
    if (reply.sent || reply.raw.destroyed || socket === null || socket.destroyed) return;
    if (this.#plane.shuttingDown) {
      reply.header('retry-after', '1');
      sendError(reply, Errors.shuttingDown, undefined, route.errors);
      return;
    }
    this.#admit(route, request, reply, done.body, done.info);
  }

  #offloadFailed(reply: FastifyReply): void {
    if (!reply.sent && !reply.raw.destroyed) sendError(reply, Errors.internal);
  }

  #admit(route: ApiRoute, request: FastifyRequest, reply: FastifyReply, body: Buffer, info: InspectResult): void {
    if (!info.ok) {
      sendError(reply, specForInspectError(info), info.kind === 'invalid_json' ? `request body is not valid JSON: ${info.message}` : undefined, route.errors);
      return;
    }
    if (!this.#plane.hasModel(info.model)) {
      this.#plane.refused('model_not_found');
      sendError(reply, Errors.modelNotFound, `The model ${JSON.stringify(info.model)} does not exist`, route.errors);
      return;
    }
    // Found in the same scan as `model`: a provider would refuse it anyway, after a queue slot.
    const problem = route.check(info.fields);
    if (problem !== undefined) {
      sendError(reply, problem.spec, problem.message, route.errors, problem.param);
      return;
    }
    let pinned: string | undefined;
    if (route === RESPONSES && info.previousResponseId !== undefined) {
      // The previous response lives on one provider: this request goes there or nowhere.
      const stored = this.#plane.responses.lookup(info.previousResponseId);
      if (stored === undefined) {
        sendError(reply, Errors.responseNotFound, unknownResponseMessage(info.previousResponseId), route.errors, 'previous_response_id');
        return;
      }
      pinned = stored.providerId;
    }
    const key = (request as KeyedRequest)[kApiKey];
    if (!this.#keyMayStart(key, info.model, route, reply)) return;
    reply.hijack();
    // The data plane releases the key's slot when the exchange ends (or, with workers, takes it first).
    this.#plane.begin(route, route.path, request.raw, reply.raw, body, info, key, pinned);
  }

  /** The key (auth on) may use the model and has a free concurrency slot; otherwise the reply is sent. */
  #keyMayStart(key: ApiKeyState | undefined, model: string, route: ApiRoute, reply: FastifyReply): boolean {
    if (key === undefined) return true;
    if (!key.mayUse(model)) {
      sendError(reply, Errors.modelNotAllowed, `this API key may not use the model ${JSON.stringify(model)}`, route.errors);
      return false;
    }
    // With I/O workers the slot is taken on the main thread at admission (DataPlane.sharedKeyLimits).
    if (!this.#plane.sharedKeyLimits && !key.tryAcquire()) {
      reply.header('retry-after', '1');
      sendError(reply, Errors.tooManyConcurrent, `this API key already has ${key.inFlight} requests open (its limit); retry when one finishes`, route.errors);
      return false;
    }
    return true;
  }

  /**
   * GET / DELETE /v1/responses/{id}: the stored response lives on the
   * provider that made it; the request goes there (admitted like any other,
   * under the alias it was made with) or is refused, never sent elsewhere.
   */
  #storedResponse(request: FastifyRequest, reply: FastifyReply): void {
    const id = (request.params as { id?: string }).id ?? '';
    const stored = isResponseId(id) ? this.#plane.responses.lookup(id) : undefined;
    if (stored === undefined) {
      sendError(reply, Errors.responseNotFound, unknownResponseMessage(id), RESPONSES.errors);
      return;
    }
    if (this.#plane.shuttingDown) {
      reply.header('retry-after', '1');
      sendError(reply, Errors.shuttingDown, undefined, RESPONSES.errors);
      return;
    }
    const key = (request as KeyedRequest)[kApiKey];
    if (!this.#keyMayStart(key, stored.alias, RESPONSES, reply)) return;
    const info: InspectOk = { ok: true, model: stored.alias, modelStart: -1, modelEnd: -1, stream: false, fields: 0 };
    reply.hijack();
    // request.url keeps the query (?stream=true, include[]=...) for the provider.
    this.#plane.begin(RESPONSES, request.url, request.raw, reply.raw, Buffer.alloc(0), info, key, stored.providerId);
  }

  /** onRequest: Host present, and the API key when auth is on. */
  #checkRequest(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const format = errorFormatForPath(request.url);
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      reply.header('connection', 'close');
      sendError(reply, Errors.badRequest, 'an HTTP/1.1 request must carry a Host header', format);
      return;
    }
    if (!this.auth.enabled || !needsApiKey(request.url)) {
      done();
      return;
    }
    const result = this.auth.authenticate(presentedKey(request));
    if (result instanceof ApiKeyState) {
      (request as KeyedRequest)[kApiKey] = result;
      done();
      return;
    }
    reply.header('www-authenticate', 'Bearer');
    sendError(reply, result, result === Errors.invalidApiKey ? 'missing or invalid API key; send it as `Authorization: Bearer <key>` or `x-api-key: <key>`' : undefined, format);
  }

  #modelsFor(key: ApiKeyState | undefined): string {
    if (key === undefined || key.models === undefined) return this.#modelsBody;
    const created = Math.floor(Date.now() / 1000);
    const data = this.#aliases.filter((a) => key.mayUse(a)).map((id) => ({ id, object: 'model', created, owned_by: 'edge' }));
    return JSON.stringify({ object: 'list', data });
  }
}

/** The OpenAI API and the A2A endpoints take API keys; Agent Cards are public (they say how to authenticate). */
function needsApiKey(url: string): boolean {
  return url.startsWith('/v1/') || (url.startsWith('/a2a/') && !url.includes('/.well-known/'));
}

function passBuffer(_request: FastifyRequest, body: Buffer, done: (err: Error | null, body?: Buffer) => void): void {
  done(null, body);
}

function onNotFound(request: FastifyRequest, reply: FastifyReply): void {
  const path = request.url.split('?')[0];
  const format = errorFormatForPath(path);
  const allow = PROXIED_ROUTES.includes(path) ? 'POST' : path === '/v1/models' || path === '/healthz' ? 'GET, HEAD' : /^\/v1\/responses\/[^/]+$/.test(path) ? 'GET, HEAD, DELETE' : undefined;
  if (allow !== undefined) {
    reply.header('allow', allow);
    sendError(reply, Errors.methodNotAllowed, `${request.method} is not allowed on ${path}`, format);
    return;
  }
  sendError(reply, Errors.routeNotFound, `unknown route: ${request.method} ${path}`, format);
}

function onFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const format = errorFormatForPath(request.url);
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    sendError(reply, Errors.bodyTooLarge, undefined, format);
    return;
  }
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    sendError(reply, { ...Errors.invalidJson, status: error.statusCode, code: 'invalid_request' }, error.message, format);
    return;
  }
  sendError(reply, Errors.internal, undefined, format);
}

function unknownResponseMessage(id: string): string {
  return `this edge has no record of response ${JSON.stringify(id)} (made elsewhere, deleted, or expired from its memory); only the provider that made it could answer`;
}
