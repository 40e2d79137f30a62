// The optional bootstrap listener (bootstrap.listen): a new GPU host with
// nothing but the agent's CLI fetches its agent package, its rendered agent
// config and their sha256 sums here. Three fixed routes, GET only:
//   /bootstrap/v1/agent.tgz
//   /bootstrap/v1/nodes/{id}/agent.yaml
//   /bootstrap/v1/nodes/{id}/SHA256SUMS
// No request ever names a file: the tarball is the one read at start, the
// node id is only looked up in the catalog, and a path with a dot segment,
// a backslash or an encoded slash is refused before routing (outside the
// node id's own segment, which may hold them), so there is nothing to
// traverse. The bearer token is compared in constant time (both
// sides hashed first, so their lengths leak nothing either), and checked
// before the node id, so a caller without it learns nothing of the catalog.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { bearerToken } from '../../shared/bearer.js';
import type { BootstrapConfig, EdgeConfig } from '../../shared/config-types.js';
import { listenError } from '../../shared/start-error.js';
import { LogThrottle } from '../../shared/log-throttle.js';
import { CONFIG_NAME, loadTarball, nodeOf, renderAgentConfig, sha256Hex, sumsFile, TARBALL_NAME, type AgentTarball } from './artifacts.js';

const PREFIX = '/bootstrap/v1/';
const NODE_ROUTE = /^nodes\/([^/]+)\/(agent\.yaml|SHA256SUMS)$/;

export interface BootstrapSource {
  /** The running snapshot: the catalog nodes and their tokens. */
  config(): EdgeConfig;
  /** host:port nodes dial; rendered into each agent config. */
  edgeAddress(): string;
}

/** At most one 'wrong or missing token' warning this often. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

export class BootstrapServer {
  readonly #tokenDigest: Buffer;
  readonly #tokenExpiresAt: number | undefined;
  readonly #tarball: AgentTarball;
  readonly #source: BootstrapSource;
  readonly #log: Logger;
  readonly #server: Server;

  private constructor(config: BootstrapConfig, tarball: AgentTarball, source: BootstrapSource, logger: Logger) {
    this.#tokenDigest = Buffer.from(sha256Hex(config.token), 'hex');
    this.#tokenExpiresAt = config.tokenExpiresAt;
    this.#tarball = tarball;
    this.#source = source;
    this.#log = logger;
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  /** Reads the tarball, then binds; resolves with the bound port. */
  static async start(config: BootstrapConfig, source: BootstrapSource, logger: Logger): Promise<{ server: BootstrapServer; port: number }> {
    const tarball = await loadTarball(config.artifactDir);
    const server = new BootstrapServer(config, tarball, source, logger);
    await new Promise<void>((resolve, reject) => {
      server.#server.once('error', (err) => reject(listenError('bootstrap.listen', config.host, config.port, err)));
      server.#server.listen(config.port, config.host, () => resolve());
    });
    const address = server.#server.address();
    const port = typeof address === 'object' && address !== null ? address.port : config.port;
    logger.info({ host: config.host, port, tarball: tarball.sourceName, sha256: tarball.sha256, tokenExpiresAt: config.tokenExpiresAt === undefined ? null : new Date(config.tokenExpiresAt).toISOString() }, 'bootstrap listener up');
    const expired = expiredTokenAdvice(config.tokenExpiresAt);
    if (expired !== undefined) logger.warn({ tokenExpiresAt: new Date(config.tokenExpiresAt as number).toISOString() }, expired);
    return { server, port };
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  readonly #refusalLog = new LogThrottle(REFUSAL_LOG_INTERVAL_MS);

  /**
   * The listener usually faces the network, and anyone can send it requests
   * without a token: one warning per REFUSAL_LOG_INTERVAL_MS at most (with
   * the count left out since), not one per request (2,000 requests wrote
   * 748 KB of log in half a second).
   */
  #refusedWithoutToken(peer: string | undefined, path: string): void {
    const leftOut = this.#refusalLog.take();
    if (leftOut !== undefined) this.#log.warn({ peer, path: path.slice(0, 200), refusedSinceLastLine: leftOut }, 'bootstrap request with a wrong or missing token');
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const rawPath = (req.url ?? '').split('?')[0];
    // The token first, whatever the method: without it nothing is told, not even which methods there are.
    if (!this.#authorized(req.headers.authorization)) {
      this.#refusedWithoutToken(req.socket.remoteAddress, rawPath);
      return send(res, 401, 'unauthorized', 'a valid bootstrap token is required (Authorization: Bearer ...)');
    }
    // Told only to a holder of the right token: anyone else learns nothing, not even that it expired.
    if (this.#tokenExpiresAt !== undefined && Date.now() >= this.#tokenExpiresAt) {
      this.#log.warn({ peer: req.socket.remoteAddress, expiredAt: new Date(this.#tokenExpiresAt).toISOString() }, 'bootstrap request with the expired token');
      return send(res, 401, 'token_expired', `the bootstrap token expired at ${new Date(this.#tokenExpiresAt).toISOString()}; the operator sets a new bootstrap.token (and token_expires_at) and restarts the edge`);
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      // A 405 names the methods the resource takes (RFC 9110 §15.5.6), as the client and admin listeners' do.
      res.setHeader('allow', 'GET, HEAD');
      return send(res, 405, 'method_not_allowed', 'only GET (or HEAD)');
    }
    if (!rawPath.startsWith(PREFIX)) return send(res, 404, 'not_found', 'no such bootstrap artifact');
    const route = rawPath.slice(PREFIX.length);
    const match = NODE_ROUTE.exec(route);
    // The node segment is only looked up in the catalog, never a file: a node id's own '/', '\\' or '.' (encoded) may be there.
    const checked = match === null ? rawPath : `${PREFIX}nodes/${match[1].replace(/%(2e|2f|5c)/gi, '_')}/${match[2]}`;
    if (unsafePath(checked)) return send(res, 404, 'not_found', 'no such bootstrap artifact');
    if (route === TARBALL_NAME) return sendBytes(res, 'application/gzip', this.#tarball.bytes, req.method === 'HEAD');
    if (match === null) return send(res, 404, 'not_found', 'no such bootstrap artifact');
    let nodeId: string;
    try {
      nodeId = decodeURIComponent(match[1]);
    } catch {
      return send(res, 404, 'not_found', 'no such bootstrap artifact');
    }
    const node = nodeOf(this.#source.config(), nodeId);
    if (node === undefined) return send(res, 404, 'node_not_found', `no node ${JSON.stringify(nodeId)} in the catalog`);
    const rendered = renderAgentConfig(node, this.#source.edgeAddress(), this.#source.config().tls?.nodes);
    this.#log.info({ node: node.id, artifact: match[2], peer: req.socket.remoteAddress }, 'bootstrap artifact served');
    if (match[2] === CONFIG_NAME) return sendBytes(res, 'application/yaml', Buffer.from(rendered), req.method === 'HEAD');
    const sums = sumsFile([
      [TARBALL_NAME, this.#tarball.sha256],
      [CONFIG_NAME, sha256Hex(rendered)],
    ]);
    sendBytes(res, 'text/plain; charset=utf-8', Buffer.from(sums), req.method === 'HEAD');
  }

  #authorized(header: string | undefined): boolean {
    const token = bearerToken(header);
    const given = Buffer.from(sha256Hex(token ?? ''), 'hex');
    // Hashed to equal lengths, so the compare takes the same time for every guess.
    return timingSafeEqual(given, this.#tokenDigest) && token !== undefined;
  }
}

/** Dot segments, backslashes, NULs and encoded separators or dots: nothing legitimate here uses them. */
function unsafePath(path: string): boolean {
  if (/[\\\0]/.test(path) || /%(2e|2f|5c|00)/i.test(path)) return true;
  return path.split('/').some((segment) => segment === '.' || segment === '..');
}

function send(res: ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify({ error: { code, message } }));
}

function sendBytes(res: ServerResponse, type: string, bytes: Buffer, headOnly: boolean): void {
  res.writeHead(200, { 'content-type': type, 'content-length': bytes.length, 'cache-control': 'no-store' });
  res.end(headOnly ? undefined : bytes);
}

/** What an operator must hear of a bootstrap token already past its expiry (at start, and from check-config before a restart); undefined when it is not. */
export function expiredTokenAdvice(tokenExpiresAt: number | undefined, now = Date.now()): string | undefined {
  if (tokenExpiresAt === undefined || now < tokenExpiresAt) return undefined;
  return `bootstrap.token_expires_at (${new Date(tokenExpiresAt).toISOString()}) is past: every bootstrap request will be refused (401 token_expired) until the token is replaced`;
}
