// CORS on the client listener (config `cors`, docs/operations.md): a page on
// an allowed origin may call the API with the official SDKs in the browser.
// The edge is the one authority: every answer to an allowed origin, the
// edge's own errors included, is marked readable by that page, and the
// providers' own Access-Control-* headers never reach the client
// (tunnel/hop-by-hop.ts), so what a browser may do does not depend on which
// provider answered. Off (no policy) unless origins are configured; then a
// request without `Origin` (a server's) costs one header lookup.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CorsConfig } from '../../shared/config-types.js';

/** The methods the client listener serves (stored responses are deleted). */
const ALLOWED_METHODS = 'GET, POST, DELETE';
/** A preflight's Access-Control-Request-Headers: field names, comma-separated. */
const HEADER_NAMES = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;
/** A preflight's answer varies with these request headers (and a plain answer's with Origin). */
const PREFLIGHT_VARY = 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers';

export class CorsPolicy {
  readonly #any: boolean;
  readonly #origins: ReadonlySet<string>;
  readonly #maxAge: string;

  private constructor(config: CorsConfig) {
    this.#any = config.allowedOrigins.includes('*');
    this.#origins = new Set(config.allowedOrigins);
    this.#maxAge = String(config.maxAgeS);
  }

  /** The policy of `config`; undefined when no origin is allowed (CORS off). */
  static of(config: CorsConfig | undefined): CorsPolicy | undefined {
    return config === undefined || config.allowedOrigins.length === 0 ? undefined : new CorsPolicy(config);
  }

  /** Access-Control-Allow-Origin for a request from `origin`; undefined when that origin is not allowed. */
  allowOrigin(origin: string): string | undefined {
    if (this.#any) return '*';
    if (this.#origins.has(origin)) return origin;
    // Browsers send the scheme and host lower-case; a hand-made request may not.
    const lower = origin.toLowerCase();
    return this.#origins.has(lower) ? origin : undefined;
  }

  /**
   * Marks the answer to a request from `origin` as readable by its page,
   * before anything writes its head: node:http and the lean response merge
   * these fields into every head (a relayed one, an error, fastify's).
   */
  mark(response: ServerResponse, origin: string): void {
    const allowed = this.allowOrigin(origin);
    if (allowed === undefined) return;
    response.setHeader('access-control-allow-origin', allowed);
    // Without credentials (the SDKs send the key as a header, no cookies) `*` exposes every header: request ids, retry hints, x-edge-*.
    response.setHeader('access-control-expose-headers', '*');
    if (allowed !== '*') response.setHeader('vary', 'Origin');
  }

  /** mark's fields as head lines, for an answer written on the raw socket (client-errors.ts); '' when `origin` is not allowed. */
  lines(origin: string): string {
    const allowed = this.allowOrigin(origin);
    if (allowed === undefined) return '';
    // `allowed` is `*` or the request's own Origin equal to a configured one (no CR or LF: the parser took it as a field value).
    return `Access-Control-Allow-Origin: ${allowed}\r\nAccess-Control-Expose-Headers: *\r\n${allowed === '*' ? '' : 'Vary: Origin\r\n'}`;
  }

  /** A CORS preflight, of a request the caller saw carry Origin: OPTIONS with Access-Control-Request-Method. */
  static isPreflight(request: IncomingMessage): boolean {
    return request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined;
  }

  /**
   * Answers a preflight from an allowed origin (204, no body; no key needed:
   * browsers send none on a preflight). False when the origin is not allowed:
   * the caller refuses it in the route's format.
   */
  answerPreflight(request: IncomingMessage, response: ServerResponse): boolean {
    const allowed = this.allowOrigin(request.headers.origin as string);
    if (allowed === undefined) return false;
    const headers: string[] = [
      'access-control-allow-origin', allowed,
      'access-control-allow-methods', ALLOWED_METHODS,
      'access-control-max-age', this.#maxAge,
      'vary', PREFLIGHT_VARY,
    ];
    // Any header the page's SDK sends (authorization, x-api-key, anthropic-version, x-stainless-*): the key check is the gate, not this list.
    const asked = request.headers['access-control-request-headers'];
    if (typeof asked === 'string' && HEADER_NAMES.test(asked.trim())) headers.push('access-control-allow-headers', asked.trim());
    // Chromium's Private Network Access: a public page calling an edge on a private address asks this too;
    // the listed origin is the operator's consent.
    if (request.headers['access-control-request-private-network'] === 'true') headers.push('access-control-allow-private-network', 'true');
    // No Content-Length: a 204 must not carry one (RFC 9110 §8.6), and node:http frames it as bodiless.
    response.writeHead(204, headers);
    response.end();
    return true;
  }
}
