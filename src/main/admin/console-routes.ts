// The operator console on the admin listener: the page and its assets
// (GET /console, /console/<file>; GET / redirects there), the chart data
// (GET /admin/series) and the try-it proxy (POST /admin/try).
//
// The page and its assets are public: they hold no data, and the operator
// types the admin token into the page's login form; every data route the
// page then calls needs the token as usual. The assets are what
// `npm run build` put in dist/console (TypeScript compiled by tsc, plus the
// HTML and CSS copied next to it); nothing comes from a CDN.
//
// Try-it: the console lives on the admin port, the OpenAI API on the client
// port, so a browser call from one to the other would be cross-origin. We
// proxy instead of opening CORS on the client listener: POST /admin/try
// forwards the body to the client listener's own /v1/chat/completions over
// loopback, so the request takes exactly the path every client request
// takes (client auth, key limits, admission queue, retries, metrics, run
// events) and streams the answer back unchanged. A client API key, when
// auth is on, travels in `x-edge-client-key` (the Authorization header
// carries the admin token here).
import { readFile } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Agent, request as undiciRequest } from 'undici';
import { sendAdminError } from './admin-errors.js';
import type { AdminOps } from './ops.js';
import { SERIES_INTERVAL_MS } from './series.js';

/** dist/src/main/admin/ → dist/console/ */
const ASSETS = new URL('../../../console/', import.meta.url);
const ASSET_NAME = /^[a-z][a-z0-9-]*\.(js|css|html)$/;
const TYPES: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', html: 'text/html; charset=utf-8' };

/** Strict: the page talks to its own origin only and runs only its own files. */
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

/**
 * Whether the page must ask for a token, said in the page itself: probing
 * the API with none to find out was a 401 in every operator's devtools.
 * The file says "token"; an admin listener without one serves "none".
 */
const AUTH_META = '<meta name="edge-admin-auth" content="token">';

/** Paths the bearer check lets through: the page and its static files (GET/HEAD only). */
export function isPublicConsolePath(method: string, url: string): boolean {
  if (method !== 'GET' && method !== 'HEAD') return false;
  const path = url.split('?')[0];
  return path === '/' || path === '/console' || path === '/console/' || (path.startsWith('/console/') && ASSET_NAME.test(path.slice('/console/'.length)));
}

/** Client listener headers worth showing the operator (run id, node, timings). */
const FORWARDED_RESPONSE_HEADERS = ['content-type', 'retry-after', 'x-edge-run-id', 'x-edge-node', 'x-edge-provider', 'x-edge-queue-ms', 'x-edge-overhead-ms', 'x-edge-hop-ms', 'x-edge-upstream-ms'];

export function registerConsoleRoutes(app: FastifyInstance, ops: AdminOps, tokenRequired: boolean): void {
  const cache = new Map<string, Buffer>();
  const asset = async (name: string, reply: FastifyReply): Promise<void> => {
    let body = cache.get(name);
    if (body === undefined) {
      try {
        body = await readFile(new URL(name, ASSETS));
      } catch {
        sendAdminError(reply, name === 'index.html' ? 503 : 404, 'console_not_built', `console asset ${name} is missing: run \`npm run build\``);
        return;
      }
      if (name === 'index.html' && !tokenRequired) body = Buffer.from(body.toString('utf8').replace(AUTH_META, AUTH_META.replace('"token"', '"none"')));
      cache.set(name, body);
    }
    reply.headers(SECURITY_HEADERS).header('content-type', TYPES[name.slice(name.lastIndexOf('.') + 1)]).send(body);
  };

  app.get('/', (_request, reply) => {
    reply.redirect('/console', 302);
  });
  app.get('/console', (_request, reply) => asset('index.html', reply));
  app.get('/console/', (_request, reply) => asset('index.html', reply));
  app.get('/console/:file', (request: FastifyRequest<{ Params: { file: string } }>, reply) => {
    const file = request.params.file;
    if (!ASSET_NAME.test(file)) {
      sendAdminError(reply, 404, 'not_found', 'no such console asset');
      return;
    }
    return asset(file, reply);
  });

  app.get('/admin/series', (_request, reply) => {
    // `now` on the clock the points' `t` were taken by: the page places them against it, not against the browser's.
    reply.send({ intervalMs: SERIES_INTERVAL_MS, now: Date.now(), points: ops.seriesPoints() });
  });

  // The client listener may serve HTTPS with a certificate for its public
  // name; this connection goes to our own listener, so it is not verified.
  const loopback = new Agent({ connect: { rejectUnauthorized: false } });
  app.addHook('onClose', async () => loopback.close());

  // The body's bytes go to the client listener as they came: parsed and written again, a duplicated `model` would
  // pass with its last value, and integers past 2^53 or 1e400 would change (the contract: only `model` is rewritten).
  app.register(async (scope) => {
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request: FastifyRequest, body: Buffer, done: (err: Error | null, body?: Buffer) => void) => done(null, body));
    scope.post('/admin/try', (request, reply) => tryIt(request, reply));
  });

  const tryIt = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const body = request.body;
    if (!Buffer.isBuffer(body) || body.length === 0) {
      sendAdminError(reply, 400, 'invalid_request', 'send a chat completion request body: {"model","messages",…}');
      return;
    }
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    const key = request.headers['x-edge-client-key'];
    if (typeof key === 'string' && key !== '') headers.authorization = `Bearer ${key}`;
    // The browser leaving (Stop, a closed tab) ends the request wherever it is: queued, or streaming.
    const abort = new AbortController();
    reply.raw.once('close', () => abort.abort());
    let upstream: Awaited<ReturnType<typeof undiciRequest>>;
    try {
      upstream = await undiciRequest(`${ops.url}/v1/chat/completions`, { method: 'POST', headers, body, dispatcher: loopback, signal: abort.signal });
    } catch (err) {
      if (abort.signal.aborted) return reply;
      // A drain closed the client listener: say so, as its own refusal during the drain does (503, Retry-After).
      if (ops.shuttingDown) sendAdminError(reply.header('retry-after', '1'), 503, 'shutting_down', 'the edge is shutting down; retry on another instance');
      else sendAdminError(reply, 502, 'client_listener_unreachable', `the client listener did not answer: ${(err as Error).message}`);
      return reply;
    }
    reply.code(upstream.statusCode);
    for (const name of FORWARDED_RESPONSE_HEADERS) {
      const value = upstream.headers[name];
      if (typeof value === 'string') reply.header(name, value);
    }
    reply.header('cache-control', 'no-cache').header('x-accel-buffering', 'no');
    return reply.send(upstream.body);
  };
}
