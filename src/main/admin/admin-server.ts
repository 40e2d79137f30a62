// The operator's listener, separate from the client listener: admin API and
// Prometheus metrics. Bound to loopback unless configured otherwise (and
// then a bearer token is mandatory, see config.ts); with a token set,
// every route including /metrics needs it, except the console's page and
// static files (console-routes.ts); without one, only loopback names and
// the console's own origin are answered (local-caller.ts).
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { AdminConfig } from '../../shared/config-types.js';
import { onAdminClientError, onAdminRouterError, sendAdminError } from './admin-errors.js';
import { listenError } from '../../shared/start-error.js';
import { BearerAuth } from './auth.js';
import { checkLocalCaller } from './local-caller.js';
import { isPublicConsolePath, registerConsoleRoutes } from './console-routes.js';
import { registerEventsRoute, type SseStream } from './events-route.js';
import { registerNodeRoutes } from './node-routes.js';
import { registerProviderRoutes } from './provider-routes.js';
import type { AdminOps } from './ops.js';
import { registerRefreshRoute } from './refresh-route.js';
import { registerStatusRoutes } from './status-routes.js';
import { registerRunsRoutes } from './runs-routes.js';

/** Every admin body but a refresh's (commands, try-it prompts, runs queries): small. */
const ADMIN_BODY_LIMIT = 1024 * 1024;
/**
 * The whole request (head and body) within this, else 408 and the
 * connection closes: fastify's default is none, and a peer trickling a body
 * a byte a minute (no token needed: the 401 does not end the body) held its
 * connection, and a file descriptor the client listener shares, for ever.
 * Responses (the event stream) are not limited by it.
 */
const ADMIN_REQUEST_TIMEOUT_MS = 30_000;
/** The longest path parameter (decoded): every id the config takes (256 characters), and a label of up to 1024. */
const ADMIN_MAX_PARAM_LENGTH = 1024;
/** Connections at once on the admin listener: node closes any beyond them as soon as they open (its 'drop'). */
const ADMIN_MAX_CONNECTIONS = 1024;

export class AdminServer {
  readonly app: FastifyInstance;
  readonly #streams = new Set<SseStream>();

  constructor(config: AdminConfig, ops: AdminOps) {
    // Event streams never end by themselves: close() must not wait for them.
    this.app = Fastify({
      logger: false,
      bodyLimit: ADMIN_BODY_LIMIT,
      forceCloseConnections: true,
      requestTimeout: ADMIN_REQUEST_TIMEOUT_MS,
      // Node and provider ids may be 256 characters (config.ts): fastify's default (100) answered a longer one 414, so
      // such a node could not be drained or commanded, nor its provider reset.
      routerOptions: { maxParamLength: ADMIN_MAX_PARAM_LENGTH },
      // The router's and Node's parser's refusals in the admin format, not fastify's.
      frameworkErrors: onAdminRouterError,
      clientErrorHandler: onAdminClientError,
    });
    this.app.server.maxConnections = ADMIN_MAX_CONNECTIONS;
    if (config.token !== undefined) {
      const auth = new BearerAuth(config.token);
      // The console page and its files are public (they hold no data; the page asks for the token).
      this.app.addHook('onRequest', (request, reply, done) => (isPublicConsolePath(request.method, request.url) ? done() : auth.check(request, reply, done)));
    } else {
      // No token: loopback names and the console's own origin only (local-caller.ts says why).
      this.app.addHook('onRequest', checkLocalCaller);
    }
    // No admin answer is sniffed into something else: /admin/try relays a provider's content type, which a browser must not render as a page.
    this.app.addHook('onSend', (_request, reply, payload, done) => {
      reply.header('x-content-type-options', 'nosniff');
      done(null, payload);
    });
    // A JSON content type with no body (curl -H 'content-type: application/json' -X POST, clients that always send the
    // header) is a request without a body, as one without the header is: fastify's parser refused it with a 400, so a
    // drain, a reset or a refresh of the config file failed for a header. Any other body goes to fastify's own parser.
    const json = this.app.getDefaultJsonParser('error', 'error');
    this.app.removeContentTypeParser('application/json');
    this.app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body: string, done) => {
      if (body === '') done(null, undefined);
      else json(request, body, done);
    });
    this.app.setErrorHandler(onError);
    this.app.setNotFoundHandler((request, reply) => this.#notFound(request, reply));
    registerRefreshRoute(this.app, ops);
    registerStatusRoutes(this.app, ops);
    registerNodeRoutes(this.app, ops);
    registerRunsRoutes(this.app, ops);
    registerProviderRoutes(this.app, ops);
    registerEventsRoute(this.app, ops.events, this.#streams);
    registerConsoleRoutes(this.app, ops, config.token !== undefined);
  }

  async listen(host: string, port: number): Promise<number> {
    try {
      await this.app.listen({ host, port });
    } catch (err) {
      throw listenError('admin', host, port, err);
    }
    const address = this.app.server.address();
    return typeof address === 'object' && address ? address.port : port;
  }

  /** A route that exists under another method is 405 with its Allow, as the client listener answers: not "unknown". */
  #notFound(request: FastifyRequest, reply: FastifyReply): void {
    const path = request.url.split('?')[0];
    const allow = METHODS.filter((method) => this.app.findRoute({ method, url: path }) !== null);
    if (allow.length > 0) {
      reply.header('allow', allow.includes('GET') ? [...allow, 'HEAD'].join(', ') : allow.join(', '));
      sendAdminError(reply, 405, 'method_not_allowed', `${request.method} is not allowed on ${path}; it takes ${allow.join(', ')}`);
      return;
    }
    sendAdminError(reply, 404, 'not_found', `unknown admin route: ${request.method} ${path}`);
  }

  async close(): Promise<void> {
    for (const stream of [...this.#streams]) stream.end();
    await this.app.close();
  }
}

const METHODS = ['GET', 'POST', 'DELETE', 'PUT', 'PATCH'] as const;

function onError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  // fastify's body refusals in the admin's terms: their own codes (as the client API has them) and a message that says
  // what to send; its own were "Request body is too large" and "Unsupported Media Type", naming neither the limit nor the type.
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      sendAdminError(reply, 413, 'request_too_large', `the body is over ${request.routeOptions.bodyLimit} bytes, the most ${request.method} ${request.url.split('?')[0]} takes`);
      return;
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      sendAdminError(reply, 415, 'unsupported_media_type', `a body of type ${JSON.stringify(request.headers['content-type'] ?? '')} is not read here; send JSON (content-type: application/json)`);
      return;
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      sendAdminError(reply, 400, 'invalid_json', 'the body is not valid JSON; send a JSON object (content-type: application/json)');
      return;
  }
  const status = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
  sendAdminError(reply, status, status === 500 ? 'internal_error' : 'invalid_request', error.message);
}
