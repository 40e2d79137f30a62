// The client-facing listener: the OpenAI API (chat, completions, embeddings,
// Responses) and Anthropic's Messages API. The API POSTs take the lean
// node:http path (fast-path.ts); everything else is served by fastify on the
// same server. Bodies arrive as raw bytes; they are inspected and rewritten
// by byte scan, never parsed into objects, checked for the route's required
// fields in that same scan, and handed to the data plane with the response.
// Errors are in the route's own format (api-routes.ts).
import { createServer as createHttpServer, type IncomingMessage, type RequestListener, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, type HookHandlerDoneFunction } from 'fastify';
import type { EdgeConfig } from '../../shared/config-types.js';
import type { LeanStats, StoredResponse } from '../../contract/io-protocol.js';
import { Errors, type GatewayErrorSpec } from '../../shared/errors.js';
import { ANTHROPIC_ERRORS, API_ROUTES, bodyMediaRefusal, errorFormatForPath, OPENAI_ERRORS, RESPONSES, type ApiRoute, type ErrorFormat } from './api-routes.js';
import { Api } from '../../shared/endpoints.js';
import { isResponseId } from '../../contract/stored-responses.js';
import type { DataPlane } from '../data-plane.js';
import { limitsOf } from '../../shared/config-hardening.js';
import { estimateInputTokens } from '../../contract/estimate.js';
import type { KeyPairMaterial } from '../../shared/tls-material.js';
import { ApiKeyState, ClientAuth } from './client-auth.js';
import { noteRequestHead, onClientError, type RefusalCounter } from './client-errors.js';
import { inspectBody, type InspectError, type InspectOk, type InspectResult } from './inspect.js';
import { defaultOffloadThreads, OffloadPool, type OffloadedInspection } from '../offload/offload-pool.js';
import { A2ASurface } from '../a2a/a2a-surface.js';
import { AGENT_PREFIX, CARD_PATH } from '../a2a/agent-card.js';
import { readBody, writeError, type BodyOwner } from './fast-path.js';
import { logRefusal, refusalId } from './refusal-id.js';
import { closeAfterAnswer } from './linger.js';
import { watchLastWrite } from './flush-watch.js';
import { listenError } from '../../shared/start-error.js';
import { LeanHttp1, timeoutSweepMs, type LeanOwner } from './lean-http1.js';
import { CorsPolicy } from './cors.js';

const kApiKey = Symbol('edge.apiKey');
type KeyedRequest = FastifyRequest & { [kApiKey]?: ApiKeyState };
/** Expect: 100-continue that checkContinue left for fastify's hooks to invite (#inviteUpload). */
const kInvite = Symbol('edge.invite');
type ExpectingRequest = IncomingMessage & { [kInvite]?: true };

export const PROXIED_ROUTES: readonly string[] = API_ROUTES.map((r) => r.path);
const STORED_RESPONSE_ROUTE = '/v1/responses/:id';
/** The routes the lean path serves (POST only). */
const LEAN_ROUTES: ReadonlyMap<string, ApiRoute> = new Map(API_ROUTES.map((r) => [r.path, r]));
/** Idle keep-alive connections close after this long (longer than the usual load balancer's 60 s). */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;
/** node:http's default time for a request's head. */
const HEADERS_TIMEOUT_MS = 60_000;
const HOST_REQUIRED = 'an HTTP/1.1 request must carry a Host header';
const INVALID_KEY = 'missing or invalid API key; send it as `Authorization: Bearer <key>` or `x-api-key: <key>`';

function sendError(logger: Logger, reply: FastifyReply, spec: GatewayErrorSpec, message?: string, format: ErrorFormat = OPENAI_ERRORS, param?: string): void {
  const id = refusalId();
  const status = format.status(spec);
  const request = reply.request;
  logRefusal(logger, id, request.method, request.url, status, spec.code, request.socket?.remoteAddress);
  reply.code(status).header('content-type', 'application/json').header('x-request-id', id).header('request-id', id).send(format.body(spec, message, param));
}

/** An answer the edge gives itself (the model list): with a request id, as every other answer has (the SDKs' `_request_id`). */
function sendJson(reply: FastifyReply, body: string): void {
  const id = refusalId();
  reply.header('content-type', 'application/json').header('x-request-id', id).header('request-id', id).send(body);
}

/** Anthropic clients send their key as `x-api-key`; it is taken as a Bearer token. */
function presentedKey(request: IncomingMessage): string | undefined {
  return presentedKeyOf(request.headers);
}

function presentedKeyOf(headers: Readonly<Record<string, string | string[] | undefined>>): string | undefined {
  const authorization = headers.authorization;
  if (typeof authorization === 'string') return authorization;
  const apiKey = headers['x-api-key'];
  return typeof apiKey === 'string' && apiKey.length > 0 ? `Bearer ${apiKey}` : undefined;
}

/** In every image part's data: a data: URL's `;base64,`, Anthropic's `"type":"base64"` source. */
const BASE64 = Buffer.from('base64');
/** A body with base64 this large, of a key with tokens_per_minute, is token-counted (its image parts as images) rather than taken for bytes / 4. */
const TOKEN_RATE_COUNTED_BYTES = 32 * 1024;

/** The API POST route #serveLean takes `request` for (the /v1/ proxy routes); undefined: fastify's. */
function leanRouteOf(request: IncomingMessage): ApiRoute | undefined {
  if (request.method !== 'POST') return undefined;
  let url = request.url ?? '';
  // An absolute-form target (`POST http://host/v1/chat/completions`), which a server must accept (RFC 9112
  // §3.2.2) and fastify's router routes by its path: routed by its path here too, not answered 404.
  if (url.charCodeAt(0) !== 0x2f) url = originForm(url);
  const query = url.indexOf('?');
  return LEAN_ROUTES.get(query < 0 ? url : url.slice(0, query));
}

/** The request announced a body (node:http has not read it yet when the handler runs). */
function hasBody(request: IncomingMessage): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** `identity` (any case, with optional spaces), the one content coding a request body may carry. */
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

const NO_LEAN: LeanStats = { requests: 0, handedOver: 0, connections: 0 };

/** #checkLean's answer when it already answered the request. */
const ANSWERED = Symbol('edge.answered');

export class ClientServer implements BodyOwner<ApiKeyState | undefined>, LeanOwner {
  readonly app: FastifyInstance;
  readonly #bodyLimit: number;
  /** close() began: every request still arriving is refused as during a drain (503 shutting_down, in its API's format). */
  #closing = false;
  readonly auth: ClientAuth;
  #modelsBody = '';
  /** The model list's `created` (epoch s): one answer for the list and each model, whichever worker answers, across refreshes. */
  readonly #modelsCreated: number;
  /** config `cors`: undefined while no origin is allowed (no browser page may read an answer). */
  #cors: CorsPolicy | undefined;
  #aliases: readonly string[] = [];
  /** Each alias's providers (config), to tell a stored response's provider that can never serve the alias. */
  #models: ReadonlyMap<string, ReadonlyMap<string, string>> = new Map();
  /** Each configured provider's node: a stored response stays on the node whose provider made it, whatever the id names later. */
  #providerNodes: ReadonlyMap<string, string> = new Map();
  #maxJsonDepth = 64;
  /** LeanOwner: limits.idle_timeout_ms, which also bounds how long a response's last bytes may wait for a client that stopped reading. */
  flushTimeoutMs = 0;
  /** limits.offload_bytes: bodies this large are inspected in the pool; 0 = never. */
  #offloadBytes = 0;
  /** Created on the first large body; its size fits workers.count (see defaultOffloadThreads). */
  #offloadPool: OffloadPool | undefined;
  /** scheduler.long_context_threshold_tokens. */
  #longThreshold = 0;
  readonly #offloadThreads: number;

  readonly #plane: DataPlane;
  /** The lean HTTP/1.1 connections (lean-http1.ts); undefined with listen.http.lean_http1 false. */
  #lean: LeanHttp1 | undefined;
  readonly #leanHttp1: boolean;
  /** The client listener when it speaks TLS (its certificate can be swapped). */
  #tlsServer: HttpsServer | undefined;
  /** limits.request_timeout_ms: fixed with the listener. */
  readonly #requestTimeoutMs: number;
  /** Agent Cards and the A2A JSON-RPC endpoints (src/workers/a2a/). */
  readonly a2a: A2ASurface;

  /** `modelsCreated`: the I/O workers' shared stamp (when their pool started); alone, this server's start. */
  constructor(config: EdgeConfig, plane: DataPlane, https?: KeyPairMaterial, modelsCreated = Math.floor(Date.now() / 1000)) {
    this.#plane = plane;
    this.#modelsCreated = modelsCreated;
    this.#leanHttp1 = config.http.leanHttp1 !== false;
    // maxHeaderSize makes Node refuse an oversized head; onClientError answers it as 431 in OpenAI's format.
    // Node's own missing-Host check answers with an empty body; ours (onRequest) in OpenAI's format.
    const { maxHeaderBytes: maxHeaderSize, requestTimeoutMs } = limitsOf(config);
    this.#requestTimeoutMs = requestTimeoutMs;
    const serverOptions: ServerOptions = {
      maxHeaderSize,
      requireHostHeader: false,
      // The whole request (head and body) within requestTimeoutMs, else 408 request_timeout (onClientError); the head within 60 s at most.
      // Node checks every connectionsCheckingInterval: a quarter of the timeout, so it fires at most 25 % late.
      requestTimeout: requestTimeoutMs,
      headersTimeout: requestTimeoutMs > 0 ? Math.min(HEADERS_TIMEOUT_MS, requestTimeoutMs) : HEADERS_TIMEOUT_MS,
      connectionsCheckingInterval: requestTimeoutMs > 0 ? timeoutSweepMs(requestTimeoutMs) : 30_000,
    };
    // Fastify's own limit is fixed at creation; the lean path keeps this first config's too.
    this.#bodyLimit = config.limits.bodyBytes;
    this.app = Fastify({
      logger: false,
      bodyLimit: config.limits.bodyBytes,
      // A stored response's id may be 256 characters (contract/stored-responses.ts); fastify's default (100) answered a longer one 414 in its own format.
      routerOptions: { maxParamLength: 256 },
      // The router's own refusals (a longer path parameter, a malformed URL) in the API's error format, not fastify's.
      frameworkErrors: (error, request, reply) => onRouterError(this, error, request, reply),
      // Off: fastify's own 503 body is in no API's format and names no request id; #refuseWhileDraining answers instead.
      return503OnClosing: false,
      // Our server: the API POSTs go the lean way, the rest to fastify's handler.
      serverFactory: (handler: RequestListener) => this.#createServer(handler, serverOptions, https),
      clientErrorHandler: (error: NodeJS.ErrnoException, socket: Socket) => onClientError(error, socket, this),
    }) as unknown as FastifyInstance;
    this.auth = new ClientAuth(config.auth);
    this.#offloadThreads = defaultOffloadThreads(config.workers.count);
    this.setConfig(config);
    // Before the body is read: an unauthenticated client never gets to send one.
    this.app.addHook('onRequest', (request, reply, done) => this.#checkRequest(request, reply, done));
    // After the key check, as the lean path orders them: during a drain every client request gets 503 shutting_down.
    this.app.addHook('onRequest', (request, reply, done) => this.#refuseWhileDraining(request, reply, done));
    this.app.removeAllContentTypeParsers();
    // Every content type is taken as raw bytes; the inspector decides if it is JSON.
    this.app.addContentTypeParser('*', { parseAs: 'buffer' }, passBuffer);
    this.app.setErrorHandler((error: FastifyError, request, reply) => onFrameworkError(this, error, request, reply));
    this.app.setNotFoundHandler((request, reply) => onNotFound(this, request, reply));
    this.app.get('/v1/models', (request, reply) => {
      if (request.headers['anthropic-version'] !== undefined) return this.#anthropicModels(request, reply);
      sendJson(reply, this.#modelsFor((request as KeyedRequest)[kApiKey]));
    });
    // client.models.retrieve(id): an alias may hold a slash (org/model), so the rest of the path is the id.
    this.app.get('/v1/models/*', (request, reply) => this.#model(request, reply));
    this.app.get('/healthz', (_request, reply) => {
      reply.send({ status: 'ok' });
    });
    // The API POSTs (API_ROUTES) never reach fastify: #serveLean takes them. Other methods on those paths get 405 (onNotFound).
    this.app.get(STORED_RESPONSE_ROUTE, (request, reply) => this.#storedResponse(request, reply));
    this.app.delete(STORED_RESPONSE_ROUTE, (request, reply) => this.#storedResponse(request, reply));
    // client.responses.cancel(id) and client.responses.inputItems.list(id): the same provider, or no one.
    this.app.post(`${STORED_RESPONSE_ROUTE}/cancel`, (request, reply) => this.#storedResponse(request, reply));
    this.app.get(`${STORED_RESPONSE_ROUTE}/input_items`, (request, reply) => this.#storedResponse(request, reply));
    this.a2a = new A2ASurface(config, plane, plane.workerIndex, https !== undefined, (request) => (request as KeyedRequest)[kApiKey]);
    this.a2a.register(this.app);
  }

  setConfig(config: EdgeConfig): void {
    this.auth.setConfig(config.auth);
    this.#cors = CorsPolicy.of(config.cors);
    // Undefined only while the constructor's first setConfig runs (the surface is made after it).
    this.a2a?.setConfig(config);
    const limits = limitsOf(config);
    this.#maxJsonDepth = limits.maxJsonDepth;
    this.#offloadBytes = limits.offloadBytes;
    this.#longThreshold = config.scheduler.longContextThresholdTokens;
    this.flushTimeoutMs = limits.idleTimeoutMs;
    this.#aliases = config.models.map((m) => m.alias);
    this.#models = new Map(config.models.map((m) => [m.alias, m.providers]));
    this.#providerNodes = new Map(config.nodes.flatMap((n) => n.providers.map((p) => [p.id, n.id] as const)));
    const created = this.#modelsCreated;
    this.#modelsBody = JSON.stringify({
      object: 'list',
      data: config.models.map((m) => ({ id: m.alias, object: 'model', created, owned_by: 'edge' })),
    });
  }

  /** `reusePort`: several workers listen on one port and the kernel spreads the connections (Node >= 22.12). */
  async listen(host: string, port: number, reusePort = false): Promise<number> {
    try {
      await this.app.listen(reusePort ? ({ host, port, reusePort: true } as { host: string; port: number }) : { host, port });
    } catch (err) {
      throw listenError('listen.http', host, port, err);
    }
    const address = this.app.server.address();
    return typeof address === 'object' && address ? address.port : port;
  }

  /** The offload pool, once a large body created it (tests, status). */
  get offload(): OffloadPool | undefined {
    return this.#offloadPool;
  }

  /** What the lean HTTP/1.1 connection did (tests, status); zeros when it is off. */
  get leanStats(): LeanStats {
    const lean = this.#lean;
    return lean === undefined ? NO_LEAN : { requests: lean.requests, handedOver: lean.handedOver, connections: lean.openConnections };
  }

  async close(): Promise<void> {
    this.#closing = true;
    if (this.#lean !== undefined) this.#lean.closing = true;
    await this.app.close();
    await this.#offloadPool?.close();
  }

  /** Serves `pair` to every TLS handshake from now on; open connections keep theirs. A no-op on plain HTTP. */
  setCertificate(pair: KeyPairMaterial): void {
    this.#tlsServer?.setSecureContext({ cert: Buffer.from(pair.cert), key: Buffer.from(pair.key) });
  }

  #createServer(fastifyHandler: RequestListener, options: ServerOptions, https: KeyPairMaterial | undefined): Server {
    const listener: RequestListener = (request, response) => {
      noteRequestHead(request, response);
      // node:http's own requests (the lean connection's are not here): the same deadline on a stuck last write.
      if (this.flushTimeoutMs > 0) watchLastWrite(response, this);
      if (this.#cors !== undefined && request.headers.origin !== undefined && this.#crossOrigin(this.#cors, request, response)) return;
      if (!this.#serveLean(request, response)) fastifyHandler(request, response);
    };
    // The handshake within the head's deadline: node's own (120 s) let a client that never sent its ClientHello hold a socket past it.
    const server = https === undefined ? createHttpServer(options, listener) : createHttpsServer({ cert: Buffer.from(https.cert), key: Buffer.from(https.key), handshakeTimeout: options.headersTimeout, ...options }, listener);
    if (https !== undefined) this.#tlsServer = server as HttpsServer;
    // Expect: 100-continue (curl sends it for bodies over 1 MB): node:http would invite every body at once.
    // One refused from its head (no valid key, over the body limit) gets its answer instead, and the connection closes.
    // Fastify's requests are invited once routed (#inviteUpload): no route, or no agent, reads the body of a 404 or 405.
    server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => {
      if (this.#refusesUpload(request)) closeAfterAnswer(response);
      else if (leanRouteOf(request) !== undefined) response.writeContinue();
      else (request as ExpectingRequest)[kInvite] = true;
      listener(request, response);
    });
    // Any other expectation: node:http's own 417 has an empty body (the SDKs show "417 status code (no body)"),
    // unlogged and uncounted; in the path's API format instead, answered from the head with the body unread.
    server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
      noteRequestHead(request, response);
      const path = originForm(request.url ?? '').split('?')[0];
      closeAfterAnswer(response);
      if (this.#cors !== undefined && request.headers.origin !== undefined) this.#cors.mark(response, request.headers.origin);
      this.#plane.refused(Errors.expectationFailed.code);
      const message = `the expectation ${JSON.stringify(request.headers.expect)} cannot be met; only 100-continue is`;
      writeError(this.logger, path, response, Errors.expectationFailed, errorFormatForPath(path), message, undefined, request.method);
    });
    // fastify's keep-alive and no socket timeout (the edge has its own deadlines for responses); the request timeout is in `options`.
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    server.setTimeout(0);
    // Plain HTTP/1.1 API POSTs are read off the socket (the TLS socket, on HTTPS) without node:http (lean-http1.ts), unless listen.http.lean_http1 is false.
    if (this.#leanHttp1) {
      this.#lean = LeanHttp1.install(server, this, {
        maxHeaderBytes: options.maxHeaderSize ?? 16 * 1024,
        bodyLimit: this.#bodyLimit,
        keepAliveMs: KEEP_ALIVE_TIMEOUT_MS,
        headersTimeoutMs: options.headersTimeout ?? HEADERS_TIMEOUT_MS,
        requestTimeoutMs: this.#requestTimeoutMs,
        routes: PROXIED_ROUTES,
      });
    }
    cutOnClose(server, https !== undefined, () => this.#closing);
    return server;
  }

  /** An API POST: served here without fastify (fast-path.ts has the lifecycle); false sends the request to fastify. */
  #serveLean(request: IncomingMessage, response: ServerResponse): boolean {
    const route = leanRouteOf(request);
    if (route === undefined) return false;
    const key = this.#checkLean(route, request, response, true);
    if (key === ANSWERED) return true;
    // Expect: 100-continue, not invited for a media type it would refuse (#refusesUpload): its 415 goes now, unread.
    if (request.headers.expect !== undefined && this.#refuseMedia(route, request, response)) return true;
    readBody(this, route, request, response, this.#bodyLimit, key);
    return true;
  }

  /** A request whose body would be refused whatever it holds: no valid key, a declared length over the limit, a media type no API route reads, or the edge draining or closing. */
  #refusesUpload(request: IncomingMessage): boolean {
    const length = Number(request.headers['content-length'] ?? 0);
    return this.#shutting || length > this.#bodyLimit || this.refusesHead(request.headers as Record<string, string>) || (leanRouteOf(request) !== undefined && bodyMediaRefusal(request.headers['content-type'], request.headers['content-encoding'], request.headers['transfer-encoding']) !== undefined);
  }

  /** 415 when the body's headers say it is no JSON the edge reads; false when they do not. */
  #refuseMedia(route: ApiRoute, request: IncomingMessage, response: ServerResponse): boolean {
    const refusal = bodyMediaRefusal(request.headers['content-type'], request.headers['content-encoding'], request.headers['transfer-encoding']);
    if (refusal === undefined) return false;
    if (request.headers['content-encoding'] !== undefined) response.setHeader('accept-encoding', 'identity');
    this.#refuse(route.path, response, Errors.unsupportedMediaType, route.errors, refusal);
    return true;
  }

  /** LeanOwner (and node:http's responses): a connection cut because its client stopped reading. */
  clientStalled(): void {
    this.#plane.clientStalled();
  }

  /** RefusalCounter: the CORS fields of a refusal written on the raw socket (a 408, a broken chunk) for a request from `origin`. */
  corsLines(origin: string): string {
    return this.#cors?.lines(origin) ?? '';
  }

  /** LeanOwner (RefusalCounter): a refusal answered before the data path, counted in edge_rejects_total. */
  refused(code: string): void {
    this.#plane.refused(code);
  }

  /** RefusalCounter: the thread's logger, where each refusal gets its debug line (refusal-id.ts). */
  get logger(): Logger {
    return this.#plane.logger;
  }

  /** LeanOwner: the key check of #checkLean, from the head alone. */
  refusesHead(headers: Readonly<Record<string, string>>): boolean {
    return this.auth.enabled && !(this.auth.authenticate(presentedKeyOf(headers)) instanceof ApiKeyState);
  }

  /** LeanOwner: an API POST read whole by the lean connection (its head is plain, its body within the limit). */
  serveLean(path: string, request: IncomingMessage, response: ServerResponse, body: Buffer): void {
    const route = LEAN_ROUTES.get(path) as ApiRoute;
    // A preflight is never lean (OPTIONS): only the mark for an allowed page.
    if (this.#cors !== undefined && request.headers.origin !== undefined) this.#cors.mark(response, request.headers.origin);
    const key = this.#checkLean(route, request, response, false);
    if (key !== ANSWERED) this.#proxy(route, request, response, body, key);
  }

  /**
   * What fastify's onRequest hooks check, in their order; the caller's key, or
   * ANSWERED when the request got its answer here. `bodyUnread`: a refusal
   * closes the connection, so that the body is never taken in.
   */
  #checkLean(route: ApiRoute, request: IncomingMessage, response: ServerResponse, bodyUnread: boolean): ApiKeyState | undefined | typeof ANSWERED {
    // Before the route's handler runs, errors take the path's format, as fastify's hooks answer them.
    const format = errorFormatForPath(route.path);
    if (request.headers.host === undefined && request.httpVersion === '1.1') {
      response.setHeader('connection', 'close');
      this.#refuse(route.path, response, Errors.badRequest, format, HOST_REQUIRED);
      return ANSWERED;
    }
    let key: ApiKeyState | undefined;
    if (this.auth.enabled) {
      const result = this.auth.authenticate(presentedKey(request));
      if (!(result instanceof ApiKeyState)) {
        response.setHeader('www-authenticate', 'Bearer');
        if (bodyUnread && hasBody(request)) closeAfterAnswer(response);
        this.#refuse(route.path, response, result, format, result === Errors.invalidApiKey ? INVALID_KEY : undefined);
        return ANSWERED;
      }
      key = result;
    }
    if (this.#shutting) {
      this.#plane.refused('shutting_down');
      writeDraining(this.logger, route.path, response, format);
      return ANSWERED;
    }
    return key;
  }

  /** BodyOwner: a lean request's whole body. */
  bodyRead(route: ApiRoute, request: IncomingMessage, response: ServerResponse, body: Buffer, key: ApiKeyState | undefined): void {
    // Its head passed before a drain began, and the body finished after: refused as a request arriving now
    // (admitted, it would be cut when the drain closes the connections).
    if (this.#shutting) {
      this.#plane.refused('shutting_down');
      writeDraining(this.logger, route.path, response, errorFormatForPath(route.path));
      return;
    }
    this.#proxy(route, request, response, body, key);
  }

  /** BodyOwner: over the limit (413), or the body stream broke (400); the connection closes after the answer, as fastify does. */
  bodyFailed(route: ApiRoute, response: ServerResponse, tooLarge: boolean): void {
    if (response.headersSent || response.destroyed) return;
    closeAfterAnswer(response);
    const format = errorFormatForPath(route.path);
    if (tooLarge) this.#refuse(route.path, response, Errors.bodyTooLarge, format);
    else this.#refuse(route.path, response, { ...Errors.invalidJson, status: 400, code: 'invalid_request' }, format, 'the request body could not be read');
  }

  /** An error answer through fastify's reply (fastify path) or on the raw response (lean path). */
  #error(reply: FastifyReply | undefined, response: ServerResponse, path: string, spec: GatewayErrorSpec, message: string | undefined, format: ErrorFormat, param?: string): void {
    this.#plane.refused(spec.code);
    if (reply !== undefined) sendError(this.logger, reply, spec, message, format, param);
    else writeError(this.logger, path, response, spec, format, message, param);
  }

  /**
   * A request with `Origin` while CORS is on: a preflight is answered here
   * (true), or refused in the path's format when its origin is not allowed;
   * any other request is marked for its page and goes on (false).
   */
  #crossOrigin(cors: CorsPolicy, request: IncomingMessage, response: ServerResponse): boolean {
    const origin = request.headers.origin as string;
    if (!CorsPolicy.isPreflight(request)) {
      cors.mark(response, origin);
      return false;
    }
    if (cors.answerPreflight(request, response)) return true;
    const path = originForm(request.url ?? '').split('?')[0];
    this.#plane.refused(Errors.originNotAllowed.code);
    writeError(this.logger, path, response, Errors.originNotAllowed, errorFormatForPath(path), `the origin ${JSON.stringify(origin)} may not call this API from a browser; the edge's cors.allowed_origins lists those that may`, undefined, 'OPTIONS');
    return true;
  }

  /**
   * A refusal before the data path (no run): counted in edge_rejects_total
   * under its code, so that 401s, 413s or bad bodies show in the metrics.
   */
  #refuse(path: string, response: ServerResponse, spec: GatewayErrorSpec, format: ErrorFormat, message?: string, param?: string): void {
    this.#plane.refused(spec.code);
    writeError(this.logger, path, response, spec, format, message, param);
  }

  #refuseReply(reply: FastifyReply, spec: GatewayErrorSpec, message: string | undefined, format: ErrorFormat): void {
    this.#plane.refused(spec.code);
    sendError(this.logger, reply, spec, message, format);
  }

  #header(reply: FastifyReply | undefined, response: ServerResponse, name: string, value: string): void {
    if (reply !== undefined) reply.header(name, value);
    else response.setHeader(name, value);
  }

  #proxy(route: ApiRoute, request: IncomingMessage, response: ServerResponse, body: Buffer, key: ApiKeyState | undefined): void {
    if (this.#refuseMedia(route, request, response)) return;
    if (body.length === 0) {
      this.#refuse(route.path, response, Errors.invalidJson, route.errors, 'request body is empty; send a JSON object');
      return;
    }
    // A body whose bytes / 4 reach the long-context class is counted too where its size says little of its
    // text: a batch (as long as its longest input), a body with base64 (an image is no prompt text). Text alone
    // keeps bytes / 4 below offload_bytes: tokenizing 200 KB costs ~4 ms of CPU. Such a body is counted whatever
    // offload_bytes says (0 only stops offloading for size): else an image would be refused context_length_exceeded.
    // So is a body with base64 of a key with tokens_per_minute, from a size on: bytes / 4 of an image would
    // reserve (and refuse on) tens of thousands of its tokens while the image costs the model at most ~1,600.
    const estimate = estimateInputTokens(body.length);
    const counted =
      (estimate >= this.#longThreshold && (route.batchInputs === true || body.includes(BASE64))) ||
      (key !== undefined && key.tokensPerMinute !== 0 && body.length >= TOKEN_RATE_COUNTED_BYTES && body.includes(BASE64));
    if (counted || (this.#offloadBytes > 0 && body.length >= this.#offloadBytes)) {
      this.#offloadPool ??= new OffloadPool(this.#offloadThreads);
      this.#offloadPool.inspect(body, this.#maxJsonDepth, true, route.batchInputs === true, this.#longThreshold).then(
        (done) => this.#afterOffload(route, request, response, key, done),
        () => this.#offloadFailed(route, response),
      );
      return;
    }
    this.#admit(route, request, response, key, body, inspectBody(body, this.#maxJsonDepth));
  }

  /** The pool's verdict on a large body: admitted as an inline one would be, unless the client or the edge left meanwhile. */
  #afterOffload(route: ApiRoute, request: IncomingMessage, response: ServerResponse, key: ApiKeyState | undefined, done: OffloadedInspection): void {
    if (this.#leftMeanwhile(route, request, response)) return;
    this.#admit(route, request, response, key, done.body, done.info);
  }

  /** For a request whose admission waited past its turn: the client left (true), or the edge began draining (answered, true). */
  #leftMeanwhile(route: ApiRoute, request: IncomingMessage, response: ServerResponse): boolean {
    const socket = request.socket;
    // The client left: its response already closed, so an exchange begun now would never end.
    if (response.headersSent || response.destroyed || socket === null || socket.destroyed) return true;
    if (this.#shutting) {
      // As the lean path answers a drain: 503 whatever the API, and the connection closes.
      this.#plane.refused('shutting_down');
      writeDraining(this.logger, route.path, response, route.errors);
      return true;
    }
    return false;
  }

  /** The pool itself failed (it closed under the task): the client hears it in its API's own format. */
  #offloadFailed(route: ApiRoute, response: ServerResponse): void {
    if (response.headersSent || response.destroyed) return;
    this.#refuse(route.path, response, Errors.internal, route.errors);
  }

  #admit(route: ApiRoute, request: IncomingMessage, response: ServerResponse, key: ApiKeyState | undefined, body: Buffer, info: InspectResult): void {
    if (!info.ok) {
      this.#refuse(route.path, response, specForInspectError(info), route.errors, info.kind === 'invalid_json' ? `request body is not valid JSON: ${info.message}` : undefined, info.param);
      return;
    }
    if (!this.#plane.hasModel(info.model)) {
      this.#refuse(route.path, response, Errors.modelNotFound, route.errors, `The model ${JSON.stringify(info.model)} does not exist`);
      return;
    }
    // Found in the same scan as `model`: a provider would refuse it anyway, after a queue slot.
    const problem = route.check(info.fields);
    if (problem !== undefined) {
      this.#refuse(route.path, response, problem.spec, route.errors, problem.message, problem.param);
      return;
    }
    if (route.api === Api.responses && info.previousResponseId !== undefined) {
      // The previous response lives on one provider: this request goes there or nowhere.
      const previous = info.previousResponseId;
      const found = this.#plane.useResponse(previous);
      const asking = found === undefined ? this.#plane.askForResponse(previous) : undefined;
      if (asking === undefined) this.#admitContinuing(route, request, response, key, body, info, previous, found, false);
      else void asking.then((late) => this.#admitContinuing(route, request, response, key, body, info, previous, late, true));
      return;
    }
    if (!this.#keyMayStart(key, info.model, route, undefined, response)) return;
    // The data plane releases the key's slot when the exchange ends (or, with workers, takes it first).
    this.#plane.begin(route, route.path, request, response, body, info, key, undefined);
  }

  /** #admit of a request whose previous_response_id is `previous`, stored where `found` says (undefined: unknown); `asked`: of the pool, in a later turn. */
  #admitContinuing(route: ApiRoute, request: IncomingMessage, response: ServerResponse, key: ApiKeyState | undefined, body: Buffer, info: InspectOk, previous: string, found: StoredResponse | undefined, asked: boolean): void {
    if (asked && this.#leftMeanwhile(route, request, response)) return;
    const stored = ownResponse(found, key);
    if (stored === undefined) {
      this.#refuse(route.path, response, Errors.previousResponseNotFound, route.errors, `Previous response with id ${JSON.stringify(previous)} not found: ${unknownResponseMessage(previous)}`, 'previous_response_id');
      return;
    }
    const moved = this.#movedAway(previous, stored);
    if (moved !== undefined) {
      // Until the config changes again: the SDKs retry a 409, and each retry would be refused the same.
      response.setHeader('x-should-retry', 'false');
      this.#refuse(route.path, response, Errors.responseProviderGone, route.errors, moved, 'previous_response_id');
      return;
    }
    const models = this.#models.get(info.model);
    if (models !== undefined && !models.has(stored.providerId)) {
      const serving = this.#aliasServing(stored, key);
      if (serving === undefined) {
        // No model to continue it with: as GET, a 409 only a config change lifts.
        response.setHeader('x-should-retry', 'false');
        this.#refuse(route.path, response, Errors.responseProviderGone, route.errors, unservedMessage(previous, stored, key), 'previous_response_id');
        return;
      }
      // Not "unavailable for now" (409, which the SDKs retry): no wait makes that provider serve this model.
      const message = `response ${JSON.stringify(previous)} is stored on provider ${JSON.stringify(stored.providerId)}, which does not serve model ${JSON.stringify(info.model)} (it was made with ${JSON.stringify(stored.alias)}); continue it with model ${JSON.stringify(serving)}, which that provider serves`;
      this.#refuse(route.path, response, Errors.previousResponseModelMismatch, route.errors, message, 'model');
      return;
    }
    if (!this.#keyMayStart(key, info.model, route, undefined, response)) return;
    // The data plane releases the key's slot when the exchange ends (or, with workers, takes it first).
    this.#plane.begin(route, route.path, request, response, body, info, key, stored.providerId);
  }

  /** The key (auth on) may use the model and has a free concurrency slot; otherwise the answer is sent (through `reply` on the fastify path, on `response` on the lean one). */
  #keyMayStart(key: ApiKeyState | undefined, model: string, route: ApiRoute, reply: FastifyReply | undefined, response: ServerResponse): boolean {
    if (key === undefined) return true;
    if (!key.mayUse(model)) {
      // The key will not gain the model by asking again: the openai SDK then gives up at once.
      this.#header(reply, response, 'x-should-retry', 'false');
      this.#error(reply, response, route.path, Errors.modelNotAllowed, `this API key may not use the model ${JSON.stringify(model)}`, route.errors);
      return false;
    }
    // The concurrency slot is the data plane's to take (DataPlane.begin), so a refusal is a run and counted.
    return true;
  }

  /**
   * GET / DELETE /v1/responses/{id} (and its /cancel and /input_items): the stored response lives on the
   * provider that made it; the request goes there (admitted like any other,
   * under the alias it was made with) or is refused, never sent elsewhere.
   */
  #storedResponse(request: FastifyRequest, reply: FastifyReply): void {
    const id = (request.params as { id?: string }).id ?? '';
    if (!isResponseId(id)) {
      this.#refuseReply(reply, Errors.responseNotFound, unknownResponseMessage(id), RESPONSES.errors);
      return;
    }
    const found = this.#plane.useResponse(id);
    const asking = found === undefined ? this.#plane.askForResponse(id) : undefined;
    if (asking === undefined) {
      this.#sendToStored(request, reply, id, found);
      return;
    }
    void asking.then((late) => {
      // Asked of the pool (I/O workers): a client that left meanwhile has nothing to be sent to.
      if (reply.sent || reply.raw.destroyed || request.raw.socket.destroyed) return;
      this.#sendToStored(request, reply, id, late);
    });
  }

  #sendToStored(request: FastifyRequest, reply: FastifyReply, id: string, found: StoredResponse | undefined): void {
    const key = (request as KeyedRequest)[kApiKey];
    const stored = ownResponse(found, key);
    if (stored === undefined) {
      this.#refuseReply(reply, Errors.responseNotFound, unknownResponseMessage(id), RESPONSES.errors);
      return;
    }
    if (this.#shutting) {
      reply.header('retry-after', '1').header('retry-after-ms', '1000');
      this.#refuseReply(reply, Errors.shuttingDown, undefined, RESPONSES.errors);
      return;
    }
    const moved = this.#movedAway(id, stored);
    if (moved !== undefined) {
      reply.header('x-should-retry', 'false');
      this.#refuseReply(reply, Errors.responseProviderGone, moved, RESPONSES.errors);
      return;
    }
    const alias = this.#aliasServing(stored, key);
    if (alias === undefined) {
      reply.header('x-should-retry', 'false');
      this.#refuseReply(reply, Errors.responseProviderGone, unservedMessage(id, stored, key), RESPONSES.errors);
      return;
    }
    if (!this.#keyMayStart(key, alias, RESPONSES, reply, reply.raw)) return;
    const info: InspectOk = { ok: true, model: alias, modelStart: -1, modelEnd: -1, stream: false, fields: 0 };
    reply.hijack();
    // request.url keeps the query (?stream=true, include[]=...) for the provider; in origin form only: an
    // absolute-form target (GET http://other-host/v1/responses/...) would name a host of the client's choosing.
    this.#plane.begin(RESPONSES, originForm(request.url), request.raw, reply.raw, Buffer.alloc(0), info, key, stored.providerId);
  }

  /** Why `id` cannot be reached any more because a refresh moved its provider's id to another node; undefined when it has not. */
  #movedAway(id: string, stored: StoredResponse): string | undefined {
    const nodeId = this.#providerNodes.get(stored.providerId);
    if (nodeId === undefined || nodeId === stored.nodeId) return undefined;
    return `response ${JSON.stringify(id)} is stored on provider ${JSON.stringify(stored.providerId)} of node ${JSON.stringify(stored.nodeId)}; that provider id now names one on node ${JSON.stringify(nodeId)}, which does not hold it, so it is never answered elsewhere`;
  }

  /**
   * The alias a stored response's GET / DELETE goes under: the one it was made with while that
   * still maps its provider, else another that does (a refresh renamed or split the alias; the
   * key's own first); undefined when none does.
   */
  #aliasServing(stored: StoredResponse, key: ApiKeyState | undefined): string | undefined {
    if (this.#models.get(stored.alias)?.has(stored.providerId) === true) return stored.alias;
    let other: string | undefined;
    for (const [alias, providers] of this.#models) {
      if (!providers.has(stored.providerId)) continue;
      if (key === undefined || key.mayUse(alias)) return alias;
      other ??= alias;
    }
    return other;
  }

  /** onRequest: Host present, and the API key when auth is on. */
  #checkRequest(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const format = formatOf(request);
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      reply.header('connection', 'close');
      this.#refuseReply(reply, Errors.badRequest, HOST_REQUIRED, format);
      return;
    }
    if (!this.auth.enabled || !needsApiKey(request)) {
      done();
      return;
    }
    const result = this.auth.authenticate(presentedKey(request.raw));
    if (result instanceof ApiKeyState) {
      (request as KeyedRequest)[kApiKey] = result;
      done();
      return;
    }
    reply.header('www-authenticate', 'Bearer');
    this.#refuseReply(reply, result, result === Errors.invalidApiKey ? INVALID_KEY : undefined, format);
  }

  /** A drain began, or close(): no new request is admitted. */
  get #shutting(): boolean {
    return this.#closing || this.#plane.shuttingDown;
  }

  /** onRequest, after the key check: during a drain every client request gets 503 shutting_down, in the format of the route asked. */
  #refuseWhileDraining(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    if (!this.#shutting) {
      // No route reads this body (an SDK's Files, Audio or Batches upload): answered from the head, as with
      // Expect. Read, a body over limits.body_bytes got 413 (or, cut mid-upload, a connection error the SDKs retry).
      if (request.is404 && hasBody(request.raw)) {
        closeAfterAnswer(reply.raw);
        onNotFound(this, request, reply);
        return;
      }
      if (request.headers.expect === undefined || !this.#inviteUpload(request, reply)) done();
      return;
    }
    this.#plane.refused('shutting_down');
    // In the path's API format: Anthropic's overloaded 529, a JSON-RPC error the A2A SDK raises.
    reply.header('retry-after', '1').header('retry-after-ms', '1000').header('connection', 'close');
    sendError(this.logger, reply, Errors.shuttingDown, undefined, formatOf(request));
  }

  /**
   * Expect: 100-continue, routed: a body nothing here reads (no route: 404 or 405; an A2A agent
   * this edge does not have, or one its headers say is no JSON) is answered from the head,
   * uninvited, and the connection closes; true when answered. Any other is invited now, unless
   * checkContinue already refused it.
   */
  #inviteUpload(request: FastifyRequest, reply: FastifyReply): boolean {
    if (request.is404) {
      closeAfterAnswer(reply.raw);
      onNotFound(this, request, reply);
      return true;
    }
    if (this.a2a.refusesUpload(request, reply)) return true;
    if ((request.raw as ExpectingRequest)[kInvite] === true) reply.raw.writeContinue();
    return false;
  }

  /** One model of the list; a model this key may not use is as unknown as one not configured. */
  #model(request: FastifyRequest, reply: FastifyReply): void {
    const id = (request.params as { '*': string })['*'];
    const key = (request as KeyedRequest)[kApiKey];
    const anthropic = request.headers['anthropic-version'] !== undefined;
    if (!this.#aliases.includes(id) || (key !== undefined && !key.mayUse(id))) {
      this.#refuseReply(reply, Errors.modelNotFound, `The model ${JSON.stringify(id)} does not exist`, anthropic ? ANTHROPIC_ERRORS : OPENAI_ERRORS);
      return;
    }
    const body = anthropic ? this.#anthropicModel(id) : { id, object: 'model', created: this.#modelsCreated, owned_by: 'edge' };
    sendJson(reply, JSON.stringify(body));
  }

  #anthropicModel(id: string): { type: 'model'; id: string; display_name: string; created_at: string } {
    return { type: 'model', id, display_name: id, created_at: new Date(this.#modelsCreated * 1000).toISOString() };
  }

  /**
   * GET /v1/models from an Anthropic client (it always sends
   * anthropic-version): its list shape, paged by `limit` (1-1000, default
   * 20) and `after_id` / `before_id`, which its SDK's auto-pager follows.
   */
  #anthropicModels(request: FastifyRequest, reply: FastifyReply): void {
    const query = request.query as Record<string, string | string[] | undefined>;
    const one = (name: string): string | undefined => {
      const value = query[name];
      return Array.isArray(value) ? value[0] : value;
    };
    const limitText = one('limit');
    const limit = limitText === undefined ? 20 : Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      this.#refuseReply(reply, Errors.invalidField, `limit must be an integer from 1 to 1000, got ${JSON.stringify(limitText)}`, ANTHROPIC_ERRORS);
      return;
    }
    const key = (request as KeyedRequest)[kApiKey];
    const ids = key === undefined || key.models === undefined ? this.#aliases : this.#aliases.filter((a) => key.mayUse(a));
    const afterId = one('after_id');
    const beforeId = one('before_id');
    let from = 0;
    let to = ids.length;
    if (afterId !== undefined) from = ids.indexOf(afterId) + 1;
    if (beforeId !== undefined) to = Math.max(0, ids.indexOf(beforeId));
    if ((afterId !== undefined && from === 0) || (beforeId !== undefined && !ids.includes(beforeId))) {
      this.#refuseReply(reply, Errors.invalidField, `no model ${JSON.stringify(afterId !== undefined && from === 0 ? afterId : beforeId)} to page from`, ANTHROPIC_ERRORS);
      return;
    }
    // before_id pages backwards: the `limit` models just before it.
    const page = beforeId !== undefined && afterId === undefined ? ids.slice(Math.max(from, to - limit), to) : ids.slice(from, Math.min(to, from + limit));
    const hasMore = beforeId !== undefined && afterId === undefined ? to - limit > from : from + limit < to;
    const data = page.map((id) => this.#anthropicModel(id));
    sendJson(reply, JSON.stringify({ data, has_more: hasMore, first_id: page[0] ?? null, last_id: page.at(-1) ?? null }));
  }

  #modelsFor(key: ApiKeyState | undefined): string {
    if (key === undefined || key.models === undefined) return this.#modelsBody;
    const created = this.#modelsCreated;
    const data = this.#aliases.filter((a) => key.mayUse(a)).map((id) => ({ id, object: 'model', created, owned_by: 'edge' }));
    return JSON.stringify({ object: 'list', data });
  }
}

/** Routes anyone may read: the health check and the Agent Cards (how a client learns how to authenticate). */
const PUBLIC_ROUTES: ReadonlySet<string> = new Set(['/healthz', CARD_PATH, `${AGENT_PREFIX}:agent${CARD_PATH}`]);

/**
 * Whether the request needs an API key, by the route it matched: the router
 * decodes the path (`/v1/%63hat/completions` is chat completions) and stops
 * at `?` and `#`, so the raw URL must not decide. A request that matched no
 * route keeps the path rule, so an unknown /v1/ path is 401 before 404.
 */
function needsApiKey(request: FastifyRequest): boolean {
  const route = request.routeOptions.url;
  if (route !== undefined) return !PUBLIC_ROUTES.has(route);
  const url = request.url;
  const query = url.indexOf('?');
  const path = query < 0 ? url : url.slice(0, query);
  return path.startsWith('/v1/') || (path.startsWith('/a2a/') && !path.endsWith(CARD_PATH));
}

function passBuffer(_request: FastifyRequest, body: Buffer, done: (err: Error | null, body?: Buffer) => void): void {
  done(null, body);
}

/**
 * The error format a refusal at the door takes: the path's, and Anthropic's for an Anthropic client
 * (it sends anthropic-version) on /v1/models or on a path no API here serves (its Files or Batches
 * call gets a 404 its SDK reads; an OpenAI route keeps OpenAI's format whoever asks).
 */
function formatOf(request: FastifyRequest): ErrorFormat {
  const path = request.url.split('?')[0];
  if (request.headers['anthropic-version'] !== undefined && (path.startsWith('/v1/models') || (path.startsWith('/v1/') && allowedMethods(path) === undefined))) return ANTHROPIC_ERRORS;
  return errorFormatForPath(path);
}

/** The methods a known path takes (a 405 names them); undefined for a path the edge does not serve. */
function allowedMethods(path: string): string | undefined {
  if (PROXIED_ROUTES.includes(path)) return 'POST';
  if (path === '/v1/models' || path === '/healthz' || path.startsWith('/v1/models/')) return 'GET, HEAD';
  if (STORED_RESPONSE_PATH.test(path)) return 'GET, HEAD, DELETE';
  if (STORED_RESPONSE_CANCEL_PATH.test(path)) return 'POST';
  if (STORED_RESPONSE_ITEMS_PATH.test(path)) return 'GET, HEAD';
  // An agent's JSON-RPC endpoint (its card has a route of its own): a browser's GET learns it takes POST.
  if (A2A_RPC_PATH.test(path)) return 'POST';
  // The Agent Cards (the edge's, an agent's) are read with GET: a POST there is the wrong method, not an unknown route.
  if (path === CARD_PATH || A2A_CARD_PATH.test(path)) return 'GET, HEAD';
  return undefined;
}

const A2A_RPC_PATH = /^\/a2a\/[^/]+\/?$/;
const A2A_CARD_PATH = /^\/a2a\/[^/]+\/\.well-known\/agent-card\.json$/;

const STORED_RESPONSE_PATH = /^\/v1\/responses\/[^/]+$/;
const STORED_RESPONSE_CANCEL_PATH = /^\/v1\/responses\/[^/]+\/cancel$/;
const STORED_RESPONSE_ITEMS_PATH = /^\/v1\/responses\/[^/]+\/input_items$/;

function onNotFound(counter: RefusalCounter, request: FastifyRequest, reply: FastifyReply): void {
  const path = request.url.split('?')[0];
  const format = formatOf(request);
  const allow = allowedMethods(path);
  if (allow !== undefined) {
    reply.header('allow', allow);
    counter.refused(Errors.methodNotAllowed.code);
    sendError(counter.logger, reply, Errors.methodNotAllowed, `${request.method} is not allowed on ${path}`, format);
    return;
  }
  counter.refused(Errors.routeNotFound.code);
  sendError(counter.logger, reply, Errors.routeNotFound, `unknown route: ${request.method} ${path}`, format);
}

function onRouterError(counter: RefusalCounter, error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const format = formatOf(request);
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    counter.refused('uri_too_long');
    sendError(counter.logger, reply, { ...Errors.badRequest, status: 414, code: 'uri_too_long' }, 'a path segment is longer than this edge takes (256 characters)', format);
    return;
  }
  counter.refused(Errors.badRequest.code);
  sendError(counter.logger, reply, Errors.badRequest, `the request URL is malformed (${error.code})`, format);
}

function onFrameworkError(counter: RefusalCounter, error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const format = formatOf(request);
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    // The rest of the body is never read: lingering, the answer reaches a client still uploading (not a reset).
    closeAfterAnswer(reply.raw);
    counter.refused(Errors.bodyTooLarge.code);
    sendError(counter.logger, reply, Errors.bodyTooLarge, undefined, format);
    return;
  }
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    counter.refused('invalid_request');
    sendError(counter.logger, reply, { ...Errors.invalidJson, status: error.statusCode, code: 'invalid_request' }, error.message, format);
    return;
  }
  counter.refused(Errors.internal.code);
  sendError(counter.logger, reply, Errors.internal, undefined, format);
}

/**
 * Every raw socket of the listener, for two cuts node:http does not make.
 * A connection that has not sent a byte (an SDK's spare connection, a
 * browser's preconnect) is idle to neither node:http nor the lean path, so
 * close() waited for it until its head timeout (60 s): once closing, it is
 * cut with the idle ones. On TLS, a connection still in its handshake is in
 * neither list, so closeAllConnections left it, and close() (the end of a
 * drain) waited for it: up to the 120 s handshake timeout. Every raw socket
 * is cut with the rest; per connection, not per request.
 */
function cutOnClose(server: Server, tls: boolean, closing: () => boolean): void {
  const raw = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    raw.add(socket);
    socket.once('close', () => raw.delete(socket));
  });
  // On TLS the raw socket has read the handshake: whether a request ever came is the TLS socket's (decrypted) count.
  const secure = new Set<Socket>();
  if (tls) {
    server.on('secureConnection', (socket: Socket) => {
      secure.add(socket);
      socket.once('close', () => secure.delete(socket));
    });
  }
  const closeIdle = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = () => {
    closeIdle();
    if (!closing()) return;
    for (const socket of tls ? secure : raw) if (socket.bytesRead === 0) socket.destroy();
  };
  if (!tls) return;
  const closeAll = server.closeAllConnections.bind(server);
  server.closeAllConnections = () => {
    closeAll();
    for (const socket of raw) socket.destroy();
  };
}

/** 503 shutting_down with Connection: close, so the client reconnects to another edge. */
function writeDraining(logger: Logger, path: string, response: ServerResponse, format: ErrorFormat): void {
  if (response.headersSent || response.destroyed) return;
  response.setHeader('retry-after', '1');
  response.setHeader('retry-after-ms', '1000');
  response.setHeader('connection', 'close');
  writeError(logger, path, response, Errors.shuttingDown, format);
}

/** A request target in origin form (`/path?query`): an absolute-form one loses its scheme and authority. */
function originForm(url: string): string {
  if (url.startsWith('/')) return url;
  const authority = url.indexOf('//');
  const path = url.indexOf('/', authority < 0 ? 0 : authority + 2);
  return path < 0 ? '/' : url.slice(path);
}

function unknownResponseMessage(id: string): string {
  return `this edge has no record of response ${JSON.stringify(id)} for this API key (made elsewhere or with another key, deleted, or expired from its memory)`;
}

/** A stored response whose provider no model (the key may use) maps now. */
function unservedMessage(id: string, stored: StoredResponse, key: ApiKeyState | undefined): string {
  return `response ${JSON.stringify(id)} is stored on provider ${JSON.stringify(stored.providerId)}, which no model in the config serves now${key === undefined ? '' : ' for this API key'}; it is never answered elsewhere`;
}

/**
 * A stored response is its key's own: the provider sees only the edge, so
 * without this any key allowed the model could read, delete or continue
 * another's. Another key's response is as unknown as a missing one, its
 * existence not told (as A2A tasks). With auth off every request may.
 */
function ownResponse(stored: StoredResponse | undefined, key: ApiKeyState | undefined): StoredResponse | undefined {
  return stored === undefined || key === undefined || stored.owner === key.name ? stored : undefined;
}
