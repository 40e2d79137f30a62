// One keep-alive HTTP/1.1 connection to a provider (http, or https over
// node:tls), carrying one
// request at a time, with undici's dispatch-handler contract (the
// TunnelExecutor is the handler either way). It exists because undici's
// general machinery (its request object, llhttp in wasm, kQueue and the
// Readable-free but still layered callbacks) was most of the agent's CPU per
// request and per relayed token in the profiles of issue 17; a provider
// connection needs far less: write one head with the body, parse a status line,
// headers, and a content-length, chunked or until-close body.
//
// Reads use `onread` with ONE buffer shared by every connection: libuv reads
// one socket at a time and hands the bytes to its callback synchronously, so
// the buffer is free again when the callback returns; whatever outlives the
// callback (body pieces, a partial head) is copied out of it. No per-read
// allocation, no stream machinery, and no 64 KiB per idle connection.
//
// What undici did that this keeps: onRequestStart only once the socket is
// connected (a failure before it is a connect failure), 1xx responses
// skipped, HEAD/204/304 without a body, `connection: close` and HTTP/1.0
// honoured, the keep-alive hint (`keep-alive: timeout=N`) and a 4 s default
// idle life so a socket the server is about to close is not reused, headers
// and body timeouts (0 = none; the body timer waits while the handler has the
// socket paused), a 10 s connect timeout, and header values checked before
// anything is written. Trailers are read and dropped (the tunnel never relays
// them).
//
// https: the same client over a TLS socket (the system's trust store and
// NODE_EXTRA_CA_CERTS, as undici uses; SNI from the host name; ALPN
// http/1.1). It replaced undici's Client there too, which did not resend a
// request whose kept-alive connection the provider closed as it went out
// (see #onSocketGone): that race is no rarer over TLS.
import { connect, isIP, type OnReadOpts, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { performance } from 'node:perf_hooks';
import type { Dispatcher } from 'undici';
import { MAX_CONTENT_LENGTH_DIGITS, MAX_RESPONSE_HEAD_BYTES } from '../shared/wire-limits.js';

/** Codes this client puts on its errors; tunnel-errors.ts maps them to tunnel codes. */
export const UPSTREAM_CLOSED = 'AGENT_UPSTREAM_CLOSED';
export const UPSTREAM_HEADERS_TIMEOUT = 'AGENT_UPSTREAM_HEADERS_TIMEOUT';
export const UPSTREAM_BODY_TIMEOUT = 'AGENT_UPSTREAM_BODY_TIMEOUT';
export const UPSTREAM_CONNECT_TIMEOUT = 'AGENT_UPSTREAM_CONNECT_TIMEOUT';
/** The TLS handshake failed (a certificate not trusted, expired or for another name; a plain-http port): no working connection. */
export const UPSTREAM_TLS_FAILED = 'AGENT_UPSTREAM_TLS_FAILED';
export const UPSTREAM_BAD_RESPONSE = 'AGENT_UPSTREAM_BAD_RESPONSE';
export const UPSTREAM_BAD_REQUEST = 'AGENT_UPSTREAM_BAD_REQUEST';

export class UpstreamHttpError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'UpstreamHttpError';
  }
}

const READ_BUFFER = Buffer.allocUnsafeSlow(64 * 1024);

interface TlsOptions {
  readonly servername: string | undefined;
  readonly ca: string | Buffer | undefined;
}

/** A close with no answer: EOF, or a reset / broken pipe as the request was written. */
function staleClose(err: Error | undefined): boolean {
  if (err === undefined) return true;
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ECONNRESET' || code === 'EPIPE';
}
/** The edge refuses a larger head in a HEADERS frame. */
const MAX_HEAD_BYTES = MAX_RESPONSE_HEAD_BYTES;
/** The largest content-length the edge takes. */
const MAX_CONTENT_LENGTH = 10 ** MAX_CONTENT_LENGTH_DIGITS - 1;
const CONNECT_TIMEOUT_MS = 10_000;
/** Idle life of a kept-alive socket when the server gives no hint (undici's default). */
const DEFAULT_KEEP_ALIVE_MS = 4_000;
/** A reused socket closed this soon after the request's write, with no answer, is the server's idle close racing the reuse. */
const STALE_CLOSE_WINDOW_MS = 1_000;
/** Margin under the server's hinted keep-alive timeout, so the socket is not reused as the server closes it. */
const KEEP_ALIVE_MARGIN_MS = 1_000;
/** One write for the head and the body up to this size; above it, two writes corked into one writev. */
const SINGLE_WRITE_MAX = 64 * 1024;
const CRLF_CRLF = Buffer.from('\r\n\r\n', 'latin1');
const LF_BYTE = 0x0a;
/** A chunk's size must stay below this (16^12 bytes): far past any body, and exact in a double. */
const CHUNK_SIZE_LIMIT = 16 ** 12;
const CR_BYTE = 0x0d;

const BARE_LF = 'the response head ends a line with a bare LF (HTTP/1.1 needs CRLF)';
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const BAD_PATH = /[^\u0021-\u00ff]/;

// Body framing of the response in progress.
const BODY_NONE = 0;
const BODY_LENGTH = 1;
const BODY_CHUNKED = 2;
const BODY_CLOSE = 3;

// Chunked decoder states.
const CH_SIZE = 0;
const CH_EXT = 1;
const CH_SIZE_LF = 2;
const CH_DATA = 3;
const CH_DATA_CR = 4;
const CH_DATA_LF = 5;
const CH_TRAILER_START = 6;
const CH_TRAILER_LINE = 7;
const CH_END_LF = 8;

type ResponseHeaders = Record<string, string | string[]>;

/**
 * A handler that takes the head as parsed pairs (lower-case names, in the
 * order received, a repeated name once per value). Building undici's headers
 * record, a keyed store per header, was the client's costliest step in the
 * profiles of issue 17, and the tunnel only turns it back into a list. A
 * handler without it gets the record.
 */
export interface RawHeadHandler {
  onResponseStartRaw(controller: Dispatcher.DispatchController, statusCode: number, names: readonly string[], values: readonly string[]): void;
}

function takesRawHead(handler: Dispatcher.DispatchHandler): handler is Dispatcher.DispatchHandler & RawHeadHandler {
  return typeof (handler as Partial<RawHeadHandler>).onResponseStartRaw === 'function';
}

function headersRecord(names: readonly string[], values: readonly string[]): ResponseHeaders {
  const headers: ResponseHeaders = {};
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    const seen = headers[name];
    if (seen === undefined) headers[name] = values[i];
    else if (typeof seen === 'string') headers[name] = [seen, values[i]];
    else seen.push(values[i]);
  }
  return headers;
}

/** One request on the connection: undici's DispatchController for its handler. */
class Exchange implements Dispatcher.DispatchController {
  readonly client: Http1Client;
  readonly options: Dispatcher.DispatchOptions;
  readonly handler: Dispatcher.DispatchHandler;
  /** The request written to the socket (onRequestStart ran): a socket failure from now on is a reset, not a connect failure. */
  started = false;
  done = false;
  /** Written to a kept-alive socket that had served a response before. */
  onReusedSocket = false;
  /** A byte of the response arrived (the provider answered, however it ends). */
  answered = false;
  /** Sent again once on a fresh socket: the reused one closed before any answer. */
  resent = false;
  /** performance.now() of the first write: a close long after it is no idle race. */
  writtenAt = 0;
  /** Its bytes went to the socket: aborting now must close the connection. */
  written = false;
  #aborted = false;
  #paused = false;
  #reason: Error | null = null;

  constructor(client: Http1Client, options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
    this.client = client;
    this.options = options;
    this.handler = handler;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get reason(): Error | null {
    return this.#reason;
  }

  abort(reason: Error): void {
    if (this.done || this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.client.abortExchange(this, reason);
  }

  pause(): void {
    if (this.done || this.#paused) return;
    this.#paused = true;
    this.client.pauseExchange(this);
  }

  resume(): void {
    if (this.done || !this.#paused) return;
    this.#paused = false;
    this.client.resumeExchange(this);
  }
}

export class Http1Client {
  readonly #host: string;
  readonly #port: number;
  /** `host: <host[:port]>\r\nconnection: keep-alive\r\n`, the same for every request. */
  readonly #fixedHead: string;
  /** https: the TLS options of every connection; undefined for plain http. */
  readonly #tls: TlsOptions | undefined;
  #socket: Socket | undefined;
  #connected = false;
  /** https: the TCP connection is up, the handshake not yet done (a failure now is the TLS handshake's). */
  #handshaking = false;
  #exchange: Exchange | undefined;
  #destroyed = false;
  /** performance.now() after which an idle kept-alive socket is not reused. */
  #idleUntil = 0;
  #connectTimer: NodeJS.Timeout | undefined;
  /**
   * One timer per connection watches the headers and body deadlines. It is
   * not cleared when a response ends: the next request mostly finds it armed
   * for a moment no later than its own deadline and sets no timer. (Set and
   * cleared per response, the body timer's list was created and destroyed
   * with each one: the costliest timer of the agent's closed-loop profile.)
   * When it fires it checks the deadlines, fails what is overdue and re-arms
   * for what is left; with nothing left it lapses.
   */
  #watch: NodeJS.Timeout | undefined;
  /** performance.now() at which the watch fires. */
  #watchAt = Infinity;
  /** performance.now() by which the response head is due; Infinity = none awaited. */
  #headersDue = Infinity;
  /** The body's idle timeout while one is read; 0 = none. */
  #bodyTimeout = 0;
  #lastBodyAt = 0;

  // Response parsing state (one response at a time).
  /** Head bytes carried over from earlier reads (copied out of the shared buffer). */
  #headPart: Buffer | undefined;
  /** End of the bytes of the read being parsed. */
  #readEnd = 0;
  /** This read's bytes from #readCopyBase on, copied out of the shared buffer once (or the stash itself). */
  #readCopy: Buffer | undefined;
  #readCopyBase = 0;
  /** Bytes read in the same read as a pause, held until the handler resumes (copied). */
  #stash: Buffer | undefined;
  /**
   * The socket ended (or closed cleanly) while bytes read before it were
   * still stashed: a TLS socket hands over what it decrypted while paused,
   * then its end. Acted on once the stash is parsed, so the bytes count
   * first (a close-delimited body is whole; a framed one may be complete).
   */
  #endPending = false;
  #inBody = false;
  #bodyMode = BODY_NONE;
  /** Body bytes left (BODY_LENGTH) or bytes left of the current chunk (chunked). */
  #remaining = 0;
  #chunkState = CH_SIZE;
  #chunkSize = 0;
  #chunkDigits = 0;
  /** The connection closes after this response (connection: close, HTTP/1.0, until-close body). */
  #closeAfter = false;
  #keepAliveMs = DEFAULT_KEEP_ALIVE_MS;
  /** The socket served a whole response and was kept: the next request on it is a reuse. */
  #socketReused = false;

  readonly #onRead = (nread: number, buffer: Buffer): boolean => {
    const exchange = this.#exchange;
    if (exchange !== undefined) exchange.answered = true;
    // Bytes are stashed (read during a pause, not yet handed on): these come after them. Only a TLS socket
    // reads while paused, or between a resume and the stash's turn.
    const held = this.#stash;
    if (held !== undefined) {
      this.#stash = Buffer.concat([held, buffer.subarray(0, nread)]);
      return true;
    }
    this.#parse(buffer, 0, nread, false);
    return true;
  };

  /** `ca`: trust these certificates instead of the system's (tests; an https origin only). */
  constructor(origin: string, ca?: string | Buffer) {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`Http1Client speaks http and https, not ${url.protocol}`);
    const secure = url.protocol === 'https:';
    this.#host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.#port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
    // SNI carries a host name only, never an address.
    this.#tls = secure ? { servername: isIP(this.#host) === 0 ? this.#host : undefined, ca } : undefined;
    this.#fixedHead = `host: ${url.host}\r\nconnection: keep-alive\r\n`;
  }

  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): void {
    if (this.#destroyed) {
      handler.onResponseError?.(new Exchange(this, options, handler), new UpstreamHttpError(UPSTREAM_CLOSED, 'upstream client destroyed'));
      return;
    }
    if (this.#exchange !== undefined) throw new Error('Http1Client carries one request at a time');
    const exchange = new Exchange(this, options, handler);
    this.#exchange = exchange;
    if (this.#socket !== undefined && this.#connected && (performance.now() > this.#idleUntil || this.#socket.destroyed)) {
      // The server may be closing it now (or has): a fresh socket, not a reset mid-request.
      this.#dropSocket();
    }
    if (this.#socket === undefined) this.#connect();
    else if (this.#connected) this.#send(exchange);
    // else: still connecting; #onConnect sends it.
  }

  /** Closes the connection; a request in flight fails. */
  destroy(): Promise<void> {
    this.#destroyed = true;
    this.#stopWatch();
    const socket = this.#socket;
    const exchange = this.#exchange;
    if (exchange !== undefined) this.#fail(exchange, new UpstreamHttpError(UPSTREAM_CLOSED, 'upstream client destroyed'));
    if (socket === undefined || socket.destroyed) {
      this.#dropSocket();
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      socket.once('close', () => resolve());
      this.#dropSocket();
    });
  }

  // --- Exchange controller calls -----------------------------------------------

  abortExchange(exchange: Exchange, reason: Error): void {
    if (exchange !== this.#exchange) return;
    // Written: the socket goes, so the provider sees the close and stops
    // generating. Not written yet (cancelled while connecting or queued: the
    // executor aborts in onRequestStart): a connected socket stays good,
    // idle, for the next request.
    if (exchange.written) this.#dropSocket();
    else if (this.#connected && !this.#socketReused) {
      // A socket made for this request starts its idle life now; a reused one keeps the deadline its last response set.
      this.#idleUntil = performance.now() + this.#keepAliveMs;
      this.#socketReused = true;
    }
    this.#fail(exchange, reason);
  }

  pauseExchange(exchange: Exchange): void {
    if (exchange === this.#exchange) this.#socket?.pause();
  }

  resumeExchange(exchange: Exchange): void {
    if (exchange !== this.#exchange) return;
    this.#lastBodyAt = performance.now();
    this.#socket?.resume();
    // Bytes read before the pause go first; after the caller's stack unwinds, so the handler is not re-entered from resume().
    if (this.#stash !== undefined) queueMicrotask(() => this.#unstash(exchange));
  }

  #unstash(exchange: Exchange): void {
    const stash = this.#stash;
    if (stash === undefined || exchange !== this.#exchange || exchange.paused) return;
    this.#stash = undefined;
    this.#parse(stash, 0, stash.length, true);
    // Paused again within it: the rest was stashed again, and the end waits for that too.
    if (this.#endPending && this.#stash === undefined) {
      this.#endPending = false;
      const socket = this.#socket;
      if (socket !== undefined) this.#onEnd(socket);
    }
  }

  // --- connection ------------------------------------------------------------------

  #connect(): void {
    this.#connected = false;
    this.#socketReused = false;
    const tls = this.#tls;
    let socket: Socket;
    if (tls === undefined) {
      socket = connect({
        host: this.#host,
        port: this.#port,
        noDelay: true,
        keepAlive: true,
        keepAliveInitialDelay: 60_000,
        onread: { buffer: READ_BUFFER, callback: this.#onRead },
      });
      socket.once('connect', () => this.#onConnect(socket));
    } else {
      // The decrypted bytes come through the same shared buffer. Connected means the handshake is done
      // (a certificate refused is a failure before the request starts, as with undici).
      // node:tls honours `onread` (tls.connect's documentation), though @types/node leaves it out of ConnectionOptions.
      const options: ConnectionOptions & { onread: OnReadOpts } = { host: this.#host, port: this.#port, servername: tls.servername, ca: tls.ca, ALPNProtocols: ['http/1.1'], onread: { buffer: READ_BUFFER, callback: this.#onRead } };
      socket = tlsConnect(options);
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 60_000);
      socket.once('connect', () => {
        if (socket === this.#socket) this.#handshaking = true;
      });
      socket.once('secureConnect', () => this.#onConnect(socket));
    }
    this.#socket = socket;
    this.#connectTimer = setTimeout(onConnectTimeout, CONNECT_TIMEOUT_MS, this, socket);
    socket.on('end', () => this.#onEnd(socket));
    socket.on('error', (err: Error) => this.#onSocketGone(socket, err));
    socket.once('close', () => this.#onSocketGone(socket, undefined));
  }

  connectTimedOut(socket: Socket): void {
    if (socket !== this.#socket || this.#connected) return;
    this.#connectTimer = undefined;
    this.#onSocketGone(socket, new UpstreamHttpError(UPSTREAM_CONNECT_TIMEOUT, `connect to ${this.#host}:${this.#port} timed out after ${CONNECT_TIMEOUT_MS} ms`));
  }

  #onConnect(socket: Socket): void {
    if (socket !== this.#socket) return;
    clearTimeout(this.#connectTimer);
    this.#connectTimer = undefined;
    this.#connected = true;
    this.#handshaking = false;
    const exchange = this.#exchange;
    if (exchange !== undefined) this.#send(exchange);
  }

  /** The server half-closed: an until-close body is complete; anything else in flight was cut short. */
  #onEnd(socket: Socket): void {
    if (socket !== this.#socket) return;
    if (this.#stash !== undefined) {
      this.#endPending = true;
      return;
    }
    const exchange = this.#exchange;
    if (exchange !== undefined && this.#inBody && this.#bodyMode === BODY_CLOSE) {
      this.#complete(exchange);
      return;
    }
    this.#onSocketGone(socket, undefined);
  }

  #onSocketGone(socket: Socket, err: Error | undefined): void {
    if (socket !== this.#socket) return;
    if (err === undefined && this.#stash !== undefined) {
      // A clean close after bytes still stashed: those come first (#unstash acts on the close after them).
      this.#endPending = true;
      return;
    }
    const wasConnected = this.#connected;
    const handshaking = this.#handshaking;
    this.#dropSocket();
    const exchange = this.#exchange;
    if (exchange === undefined) return;
    if (
      exchange.started &&
      exchange.onReusedSocket &&
      !exchange.answered &&
      !exchange.resent &&
      !exchange.aborted &&
      staleClose(err) &&
      performance.now() - exchange.writtenAt <= STALE_CLOSE_WINDOW_MS
    ) {
      // The provider closed a kept-alive connection right as this request
      // went out, before a byte of answer: its idle timeout racing our reuse
      // (the close was on its way before our bytes arrived). Sent again once
      // on a fresh connection rather than failed as a reset that would count
      // toward the provider's ejection. Only within STALE_CLOSE_WINDOW_MS of
      // the write: a later close may follow a request the provider took and
      // worked on (a crash mid-generation), which must not run twice. (Go
      // retries no written POST; its idle-close race it avoids by reading
      // the close before reuse, which a pooled socket here cannot always.)
      exchange.resent = true;
      this.#connect();
      return;
    }
    if (exchange.resent && !wasConnected) {
      // The resend found no provider (refused, unreachable, timed out): the
      // request failed as the reset it began with, which the edge retries
      // elsewhere and counts against the provider, not as a connect failure
      // of a request already started.
      err = new UpstreamHttpError(UPSTREAM_CLOSED, `the provider closed the connection, then took no new one (${err?.message ?? 'closed'})`);
    }
    if (handshaking && !exchange.started && err !== undefined && !(err instanceof UpstreamHttpError)) {
      // A certificate refused or a server that speaks no TLS: the request was never sent, and every one sent
      // to this provider fails alike, so it is a connect failure (tried elsewhere, counted against the
      // provider), not a bare OpenSSL error the edge would relay to the client as the provider's own.
      err = new UpstreamHttpError(UPSTREAM_TLS_FAILED, `the TLS handshake with the provider failed (${err.message.trim()})`);
    }
    if (err === undefined) {
      err = new UpstreamHttpError(UPSTREAM_CLOSED, exchange.started ? 'the provider closed the connection before the response was complete' : 'the provider closed the connection');
    }
    this.#fail(exchange, err);
  }

  /** Forgets the socket (destroying it) and the parse state; the next request connects afresh. */
  #dropSocket(): void {
    const socket = this.#socket;
    this.#socket = undefined;
    this.#connected = false;
    this.#handshaking = false;
    if (this.#connectTimer !== undefined) {
      clearTimeout(this.#connectTimer);
      this.#connectTimer = undefined;
    }
    this.#resetParse();
    socket?.destroy();
  }

  // --- request ---------------------------------------------------------------------

  #send(exchange: Exchange): void {
    const options = exchange.options;
    const head = this.#head(options);
    if (typeof head !== 'string') {
      this.#fail(exchange, head);
      return;
    }
    exchange.onReusedSocket = this.#socketReused;
    if (!exchange.started) {
      exchange.started = true;
      exchange.writtenAt = performance.now();
      exchange.handler.onRequestStart?.(exchange, {});
      if (exchange !== this.#exchange || exchange.done) return; // aborted in onRequestStart
    }
    const socket = this.#socket as Socket;
    const body = options.body as Uint8Array | null | undefined;
    exchange.written = true;
    if (body === null || body === undefined || body.length === 0) {
      socket.write(head, 'latin1');
    } else if (body.length <= SINGLE_WRITE_MAX) {
      const out = Buffer.allocUnsafe(head.length + body.length);
      out.write(head, 0, 'latin1');
      out.set(body, head.length);
      socket.write(out);
    } else {
      socket.cork();
      socket.write(head, 'latin1');
      socket.write(body);
      socket.uncork();
    }
    const headersTimeout = options.headersTimeout ?? 0;
    // A resend keeps the first write's deadline: the provider's time to answer is not doubled.
    if (headersTimeout > 0 && !exchange.resent) {
      const now = performance.now();
      this.#headersDue = now + headersTimeout;
      this.#watchUntil(this.#headersDue, now);
    }
  }

  /** Makes sure the watch fires by `due`: an earlier one stays, a later one is moved. */
  #watchUntil(due: number, now: number): void {
    if (this.#watch !== undefined) {
      if (this.#watchAt <= due) return;
      clearTimeout(this.#watch);
    }
    this.#watchAt = due;
    // Unref'd: during a request the socket keeps the process alive; an idle watch must not.
    this.#watch = setTimeout(onWatch, Math.max(1, due - now), this).unref();
  }

  /** Stops watching deadlines for good (the client is destroyed). */
  #stopWatch(): void {
    if (this.#watch === undefined) return;
    clearTimeout(this.#watch);
    this.#watch = undefined;
    this.#watchAt = Infinity;
  }

  /** The request head, or the error that refuses it (a value that would break the framing). */
  #head(options: Dispatcher.DispatchOptions): string | UpstreamHttpError {
    const method = options.method;
    const path = options.path;
    if (!TOKEN.test(method)) return new UpstreamHttpError(UPSTREAM_BAD_REQUEST, `invalid request method ${JSON.stringify(method)}`);
    if (path.length === 0 || BAD_PATH.test(path)) return new UpstreamHttpError(UPSTREAM_BAD_REQUEST, `invalid request path ${JSON.stringify(path)}`);
    let head = `${method} ${path} HTTP/1.1\r\n${this.#fixedHead}`;
    const headers = options.headers as readonly string[] | null | undefined;
    if (headers !== null && headers !== undefined) {
      for (let i = 0; i + 1 < headers.length; i += 2) {
        const name = headers[i];
        const value = headers[i + 1];
        if (!TOKEN.test(name)) return new UpstreamHttpError(UPSTREAM_BAD_REQUEST, `invalid request header name ${JSON.stringify(name)}`);
        if (BAD_VALUE.test(value)) return new UpstreamHttpError(UPSTREAM_BAD_REQUEST, `invalid value for request header ${name}`);
        head += `${name}: ${value}\r\n`;
      }
    }
    const body = options.body as Uint8Array | null | undefined;
    const length = body === null || body === undefined ? 0 : body.length;
    // undici sends a length for a body, and 0 for the methods that expect one.
    if (length > 0 || method === 'POST' || method === 'PUT' || method === 'PATCH') head += `content-length: ${length}\r\n`;
    return head + '\r\n';
  }

  watchFired(): void {
    this.#watch = undefined;
    this.#watchAt = Infinity;
    const exchange = this.#exchange;
    if (exchange === undefined || exchange.done) return;
    const now = performance.now();
    if (now >= this.#headersDue) {
      this.#dropSocket();
      this.#fail(exchange, new UpstreamHttpError(UPSTREAM_HEADERS_TIMEOUT, `no response headers within ${exchange.options.headersTimeout} ms`));
      return;
    }
    let due = this.#headersDue;
    const timeout = this.#bodyTimeout;
    if (timeout > 0) {
      if (exchange.paused) {
        // Paused by the handler (backpressure downstream): the silence is ours, not the provider's.
        due = Math.min(due, now + timeout);
      } else if (now - this.#lastBodyAt >= timeout) {
        this.#dropSocket();
        this.#fail(exchange, new UpstreamHttpError(UPSTREAM_BODY_TIMEOUT, `the response body was silent for ${timeout} ms`));
        return;
      } else {
        due = Math.min(due, this.#lastBodyAt + timeout);
      }
    }
    if (due !== Infinity) this.#watchUntil(due, now);
  }

  // --- response --------------------------------------------------------------------

  /** `owned`: `data` is this client's own copy (a stash), not the shared read buffer. */
  #parse(data: Buffer, start: number, end: number, owned: boolean): void {
    this.#readEnd = end;
    this.#readCopy = owned ? data : undefined;
    this.#readCopyBase = 0;
    this.#parseRead(data, start, end);
    // The handler keeps its own views; an idle connection must not pin the read's copy (or the pool slab under it).
    this.#readCopy = undefined;
  }

  #parseRead(data: Buffer, start: number, end: number): void {
    const exchange = this.#exchange;
    if (exchange === undefined || !exchange.started) {
      // Bytes with no request to answer them: the connection is out of step.
      this.#dropSocket();
      return;
    }
    while (start < end) {
      if (exchange !== this.#exchange || exchange.done) {
        // The response completed with bytes after it (no pipelining here) or the handler aborted.
        if (exchange === this.#exchange || this.#exchange === undefined) this.#dropSocket();
        return;
      }
      if (exchange.paused) {
        // Paused by the handler mid-read: nothing more reaches it until it resumes. A plain socket reads no
        // more meanwhile, but a TLS socket still hands over what it had decrypted (pieces of up to 16 KiB):
        // those join the stash, in order.
        const copy = this.#readCopy;
        const piece = copy !== undefined && start >= this.#readCopyBase ? copy.subarray(start - this.#readCopyBase, end - this.#readCopyBase) : Buffer.from(data.subarray(start, end));
        const held = this.#stash;
        this.#stash = held === undefined ? piece : Buffer.concat([held, piece]);
        return;
      }
      if (!this.#inBody) {
        const next = this.#parseHead(exchange, data, start, end);
        if (next < 0) return;
        start = next;
        continue;
      }
      start = this.#parseBody(exchange, data, start, end);
    }
  }

  /** Consumes head bytes; returns where the body starts, or -1 when more bytes are needed or the response failed. */
  #parseHead(exchange: Exchange, data: Buffer, start: number, end: number): number {
    let buf: Buffer;
    let from: number;
    let carried = 0;
    if (this.#headPart === undefined) {
      buf = data;
      from = start;
    } else {
      carried = this.#headPart.length;
      buf = Buffer.concat([this.#headPart, data.subarray(start, end)]);
      from = 0;
      end = buf.length;
    }
    const at = buf.indexOf(CRLF_CRLF, Math.max(from, from + carried - 3));
    if (at === -1 || at + 4 > end) {
      if (end - from > MAX_HEAD_BYTES) {
        this.#badResponse(exchange, `response head over ${MAX_HEAD_BYTES} bytes`);
        return -1;
      }
      // Lines ended by a bare LF: its CRLF CRLF never comes, and waiting would hold the slot until the
      // headers timeout and then blame the provider's slowness. Refused at once, as undici does.
      for (let lf = buf.indexOf(LF_BYTE, from); lf !== -1 && lf < end; lf = buf.indexOf(LF_BYTE, lf + 1)) {
        if (lf === from || buf[lf - 1] !== CR_BYTE) {
          this.#badResponse(exchange, BARE_LF);
          return -1;
        }
      }
      this.#headPart = Buffer.from(buf.subarray(from, end));
      return -1;
    }
    // Measured once the head's end is found too: a head completed by a later read was never checked.
    if (at - from > MAX_HEAD_BYTES) {
      this.#badResponse(exchange, `response head over ${MAX_HEAD_BYTES} bytes`);
      return -1;
    }
    this.#headPart = undefined;
    const bodyStart = at + 4;
    this.#onHead(exchange, buf.toString('latin1', from, at));
    // Where the bytes after the head start in `data` (the match may straddle the carried part).
    return carried === 0 ? bodyStart : start + (bodyStart - carried);
  }

  /** Handles one response head: an interim one is skipped; a final one starts the body, or ends the exchange (no body, or invalid). */
  #onHead(exchange: Exchange, head: string): void {
    const firstEnd = head.indexOf('\r\n');
    const statusLine = firstEnd === -1 ? head : head.slice(0, firstEnd);
    if (statusLine.length < 12 || !statusLine.startsWith('HTTP/1.') || statusLine.charCodeAt(8) !== 32) {
      this.#badResponse(exchange, `malformed status line ${JSON.stringify(statusLine.slice(0, 64))}`);
      return;
    }
    // A status line ended by a bare LF, its head's later lines by CRLF: read as one line, the headers after the LF
    // would vanish into the reason phrase (the body then read until close). Refused, as a head all in bare LFs is.
    if (BAD_VALUE.test(statusLine)) {
      this.#badResponse(exchange, statusLine.includes('\n') ? BARE_LF : `malformed status line ${JSON.stringify(statusLine.slice(0, 64))}`);
      return;
    }
    const minor = statusLine.charCodeAt(7) - 48;
    const status = Number(statusLine.slice(9, 12));
    if (!Number.isInteger(status) || status < 100 || status > 999 || (statusLine.length > 12 && statusLine.charCodeAt(12) !== 32)) {
      this.#badResponse(exchange, `malformed status line ${JSON.stringify(statusLine.slice(0, 64))}`);
      return;
    }
    const names: string[] = [];
    const values: string[] = [];
    let contentLength = -1;
    let chunked = false;
    let transferEncoding = false;
    let connectionClose = minor === 0;
    let keepAliveHint = -1;
    let lineStart = firstEnd === -1 ? head.length : firstEnd + 2;
    while (lineStart < head.length) {
      let lineEnd = head.indexOf('\r\n', lineStart);
      if (lineEnd === -1) lineEnd = head.length;
      const first = head.charCodeAt(lineStart);
      if ((first === 0x20 || first === 0x09) && names.length > 0) {
        // obs-fold (RFC 9112 5.2): a line that continues the previous value; a recipient replaces the fold with a space.
        // Not for a field that frames the message (read above as its first line): such a fold is refused as malformed.
        if (FRAMING_FIELDS.has(names[names.length - 1])) {
          this.#badResponse(exchange, `a folded ${names[names.length - 1]} header`);
          return;
        }
        const more = trimOws(head.slice(lineStart, lineEnd));
        // As for a value on one line: relayed, the edge's frame guard would refuse the head and count it against the node.
        if (BAD_VALUE.test(more)) {
          this.#badResponse(exchange, `invalid value for response header ${names[names.length - 1]}`);
          return;
        }
        const last = values.length - 1;
        values[last] = `${values[last]} ${more}`;
        lineStart = lineEnd + 2;
        continue;
      }
      const colon = head.indexOf(':', lineStart);
      if (colon === -1 || colon > lineEnd || colon === lineStart) {
        this.#badResponse(exchange, 'malformed response header line');
        return;
      }
      const name = head.slice(lineStart, colon).toLowerCase();
      if (!TOKEN.test(name)) {
        this.#badResponse(exchange, `malformed response header name ${JSON.stringify(name.slice(0, 64))}`);
        return;
      }
      // Spaces and tabs only: String.trim would also take a value's last byte 0xA0 (the end of UTF-8 à or Р).
      const value = trimOws(head.slice(colon + 1, lineEnd));
      // A control byte or bare LF in a value: relayed, the edge's frame guard refuses the head and counts it against the node.
      if (BAD_VALUE.test(value)) {
        this.#badResponse(exchange, `invalid value for response header ${name}`);
        return;
      }
      names.push(name);
      values.push(value);
      switch (name) {
        case 'content-length': {
          const n = /^\d+$/.test(value) ? Number(value) : NaN;
          // Past MAX_CONTENT_LENGTH_DIGITS the edge refuses the length (as the node's protocol violation): no body is that long.
          if (!Number.isSafeInteger(n) || n > MAX_CONTENT_LENGTH || (contentLength !== -1 && contentLength !== n)) {
            this.#badResponse(exchange, `invalid content-length ${JSON.stringify(value.slice(0, 64))}`);
            return;
          }
          // Leading zeros (`0042`) relayed as the plain number: with them the edge could count more than 15 digits.
          if (value.length > 1 && value.charCodeAt(0) === 0x30) values[values.length - 1] = String(n);
          // The same length again (RFC 9112 6.3 lets a recipient take it as one): relayed once, since the edge
          // refuses a head with two (and counts it against the node).
          if (contentLength !== -1) {
            names.pop();
            values.pop();
          }
          contentLength = n;
          break;
        }
        case 'transfer-encoding':
          transferEncoding = true;
          chunked = /(?:^|,)\s*chunked\s*$/i.test(value);
          // A coding other than chunked (`gzip, chunked`) is one this client does not undo, and the edge drops
          // transfer-encoding as hop-by-hop: relayed, the client would get compressed bytes labelled as none.
          if (/(?:^|,)\s*(?!chunked\s*(?:,|$))[^,\s]/i.test(value)) {
            this.#badResponse(exchange, `transfer-encoding ${JSON.stringify(value.slice(0, 64))}: a transfer coding other than chunked, which the agent did not ask for (it sends no TE)`);
            return;
          }
          break;
        case 'connection': {
          const v = value.toLowerCase();
          if (v.includes('close')) connectionClose = true;
          else if (minor === 0 && v.includes('keep-alive')) connectionClose = false;
          break;
        }
        case 'keep-alive': {
          const m = /timeout\s*=\s*(\d+)/i.exec(value);
          if (m !== null) keepAliveHint = Number(m[1]) * 1000;
          break;
        }
      }
      lineStart = lineEnd + 2;
    }
    if (status < 200) {
      if (status === 101) {
        this.#badResponse(exchange, 'the provider switched protocols (101), which a tunnel cannot carry');
        return;
      }
      return; // interim: the final head follows
    }
    // Measured again as the edge measures the HEADERS frame (`name: value` CRLF each): a head written
    // `name:value` is up to a byte a header smaller on the wire, and a frame over the limit is the node's
    // protocol violation. Only a head that close to the limit is summed.
    if (head.length + names.length > MAX_HEAD_BYTES) {
      let frameBytes = 0;
      for (let i = 0; i < names.length; i++) frameBytes += names[i].length + values[i].length + 4;
      if (frameBytes > MAX_HEAD_BYTES) {
        this.#badResponse(exchange, `response head over ${MAX_HEAD_BYTES} bytes`);
        return;
      }
    }
    this.#headersDue = Infinity;
    const method = exchange.options.method;
    if (method === 'HEAD' || status === 204 || status === 304) {
      this.#bodyMode = BODY_NONE;
    } else if (transferEncoding) {
      this.#bodyMode = chunked ? BODY_CHUNKED : BODY_CLOSE;
      // A length beside transfer-encoding is ignored, and the connection is not trusted after it;
      // nor is it passed on (RFC 9112 6.3): the edge would hold the body to a length it does not have.
      if (contentLength !== -1) {
        connectionClose = true;
        dropHeader(names, values, 'content-length');
      }
    } else if (contentLength !== -1) {
      this.#bodyMode = BODY_LENGTH;
      this.#remaining = contentLength;
    } else {
      this.#bodyMode = BODY_CLOSE;
    }
    if (this.#bodyMode === BODY_CLOSE) connectionClose = true;
    this.#closeAfter = connectionClose;
    this.#keepAliveMs = keepAliveHint >= 0 ? keepAliveHint - KEEP_ALIVE_MARGIN_MS : DEFAULT_KEEP_ALIVE_MS;
    this.#chunkState = CH_SIZE;
    this.#chunkSize = 0;
    this.#chunkDigits = 0;
    this.#inBody = true;
    const handler = exchange.handler;
    if (takesRawHead(handler)) handler.onResponseStartRaw(exchange, status, names, values);
    else handler.onResponseStart?.(exchange, status, headersRecord(names, values), statusLine.length > 13 ? statusLine.slice(13) : '');
    if (exchange !== this.#exchange || exchange.done) return;
    const bodyTimeout = exchange.options.bodyTimeout ?? 0;
    if (bodyTimeout > 0 && this.#bodyMode !== BODY_NONE) {
      const now = performance.now();
      this.#bodyTimeout = bodyTimeout;
      this.#lastBodyAt = now;
      this.#watchUntil(now + bodyTimeout, now);
    }
    if (this.#bodyMode === BODY_NONE || (this.#bodyMode === BODY_LENGTH && this.#remaining === 0)) {
      this.#complete(exchange);
    }
  }

  /** Consumes body bytes from `start`; returns the first byte not consumed (end, or where the response ended). */
  #parseBody(exchange: Exchange, data: Buffer, start: number, end: number): number {
    if (this.#bodyTimeout > 0) this.#lastBodyAt = performance.now();
    switch (this.#bodyMode) {
      case BODY_LENGTH: {
        const take = Math.min(this.#remaining, end - start);
        this.#remaining -= take;
        this.#deliver(exchange, data, start, start + take);
        if (this.#remaining === 0 && exchange === this.#exchange && !exchange.done) this.#complete(exchange);
        return start + take;
      }
      case BODY_CLOSE:
        this.#deliver(exchange, data, start, end);
        return end;
      default:
        return this.#parseChunked(exchange, data, start, end);
    }
  }

  #parseChunked(exchange: Exchange, data: Buffer, at: number, end: number): number {
    while (at < end) {
      switch (this.#chunkState) {
        case CH_SIZE: {
          const c = data[at];
          const digit = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
          if (digit >= 0) {
            this.#chunkDigits++;
            this.#chunkSize = this.#chunkSize * 16 + digit;
            // The size's value is bounded, not its digits: leading zeros (`0000000000000010`, a fixed-width size) are valid.
            if (this.#chunkSize >= CHUNK_SIZE_LIMIT) return this.#chunkError(exchange, 'chunk size too large');
            at++;
            break;
          }
          if (this.#chunkDigits === 0) return this.#chunkError(exchange, 'malformed chunk size');
          if (c === 13) this.#chunkState = CH_SIZE_LF;
          else if (c === 59 || c === 32 || c === 9) this.#chunkState = CH_EXT;
          else return this.#chunkError(exchange, 'malformed chunk size');
          at++;
          break;
        }
        case CH_EXT: {
          const c = data[at++];
          if (c === 13) this.#chunkState = CH_SIZE_LF;
          // A bare LF would leave the size line open: the next chunk's bytes read as extension and the CRLF after
          // them as the line's end, so the wrong bytes relayed as data and a hang for the rest.
          else if (c === 10) return this.#chunkError(exchange, 'a chunk extension ends with a bare LF (HTTP/1.1 needs CRLF)');
          break;
        }
        case CH_SIZE_LF:
          if (data[at++] !== 10) return this.#chunkError(exchange, 'malformed chunk size line');
          this.#remaining = this.#chunkSize;
          this.#chunkSize = 0;
          this.#chunkDigits = 0;
          this.#chunkState = this.#remaining === 0 ? CH_TRAILER_START : CH_DATA;
          break;
        case CH_DATA: {
          const take = Math.min(this.#remaining, end - at);
          this.#remaining -= take;
          this.#deliver(exchange, data, at, at + take);
          at += take;
          if (exchange !== this.#exchange || exchange.done || exchange.paused) return at;
          if (this.#remaining === 0) this.#chunkState = CH_DATA_CR;
          break;
        }
        case CH_DATA_CR:
          if (data[at++] !== 13) return this.#chunkError(exchange, 'chunk data not followed by CRLF');
          this.#chunkState = CH_DATA_LF;
          break;
        case CH_DATA_LF:
          if (data[at++] !== 10) return this.#chunkError(exchange, 'chunk data not followed by CRLF');
          this.#chunkState = CH_SIZE;
          break;
        case CH_TRAILER_START: {
          const c = data[at++];
          // A bare LF here would be read as a trailer line's first byte, leaving the body open until the body timeout.
          if (c === 10) return this.#chunkError(exchange, 'the chunked body ends with a bare LF (HTTP/1.1 needs CRLF)');
          this.#chunkState = c === 13 ? CH_END_LF : CH_TRAILER_LINE;
          break;
        }
        case CH_TRAILER_LINE:
          if (data[at++] === 10) this.#chunkState = CH_TRAILER_START;
          break;
        case CH_END_LF:
          if (data[at++] !== 10) return this.#chunkError(exchange, 'malformed end of chunked body');
          this.#complete(exchange);
          return at;
      }
    }
    return at;
  }

  #chunkError(exchange: Exchange, message: string): number {
    this.#badResponse(exchange, message);
    return Number.MAX_SAFE_INTEGER;
  }

  /**
   * Hands body bytes to the handler as a view of one copy per read: the
   * first piece of a read copies the rest of the read out of the shared
   * buffer, and every later piece of it (a burst of chunks) is a view of that
   * copy, not its own allocation and copy.
   */
  #deliver(exchange: Exchange, data: Buffer, from: number, to: number): void {
    if (to <= from) return;
    let copy = this.#readCopy;
    if (copy === undefined) {
      copy = Buffer.allocUnsafe(this.#readEnd - from);
      data.copy(copy, 0, from, this.#readEnd);
      this.#readCopy = copy;
      this.#readCopyBase = from;
    }
    const at = from - this.#readCopyBase;
    const chunk = at === 0 && to - from === copy.length ? copy : copy.subarray(at, to - this.#readCopyBase);
    exchange.handler.onResponseData?.(exchange, chunk);
  }

  #complete(exchange: Exchange): void {
    exchange.done = true;
    this.#exchange = undefined;
    this.#endDeadlines();
    // Read before the reset clears them: the response said this connection ends with it, or the provider already closed it
    // (its end came while the last bytes were stashed: the socket is gone, and 'close' will not fire again to say so).
    const closeAfter = this.#closeAfter || this.#endPending;
    this.#resetParse();
    // Answered before its body was all written (an early 413): the server stopped reading, so the connection is out of step.
    if (closeAfter || this.#keepAliveMs <= 0 || (this.#socket !== undefined && (this.#socket.writableLength > 0 || this.#socket.destroyed))) {
      this.#dropSocket();
    } else {
      this.#socketReused = true;
      this.#idleUntil = performance.now() + this.#keepAliveMs;
      // Paused by the handler at the end: the socket reads again for the next request.
      if (exchange.paused) this.#socket?.resume();
    }
    exchange.handler.onResponseEnd?.(exchange, {});
  }

  #badResponse(exchange: Exchange, message: string): void {
    this.#dropSocket();
    this.#fail(exchange, new UpstreamHttpError(UPSTREAM_BAD_RESPONSE, `invalid response from the provider: ${message}`));
  }

  /** Ends the exchange with onResponseError, once. */
  #fail(exchange: Exchange, err: Error): void {
    if (exchange.done) return;
    exchange.done = true;
    if (this.#exchange === exchange) {
      this.#exchange = undefined;
      this.#endDeadlines();
      this.#resetParse();
      if (this.#socket !== undefined && exchange.paused) this.#socket.resume();
    }
    exchange.handler.onResponseError?.(exchange, err);
  }

  /** The exchange is over: no deadline applies; the watch stays armed for the next one (see #watch). */
  #endDeadlines(): void {
    this.#headersDue = Infinity;
    this.#bodyTimeout = 0;
  }

  #resetParse(): void {
    this.#headPart = undefined;
    this.#stash = undefined;
    this.#endPending = false;
    this.#inBody = false;
    this.#bodyMode = BODY_NONE;
    this.#remaining = 0;
    this.#closeAfter = false;
  }
}

function onConnectTimeout(client: Http1Client, socket: Socket): void {
  client.connectTimedOut(socket);
}

function onWatch(client: Http1Client): void {
  client.watchFired();
}

/** Fields read for the message's framing as soon as their line is: never taken folded. */
const FRAMING_FIELDS: ReadonlySet<string> = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);

/** A header value without its optional whitespace (RFC 9110 5.5: spaces and tabs), nothing else. */
function trimOws(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text.charCodeAt(start) === 0x20 || text.charCodeAt(start) === 0x09)) start++;
  while (end > start && (text.charCodeAt(end - 1) === 0x20 || text.charCodeAt(end - 1) === 0x09)) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/** Removes every `name` pair (names lower-case) in place. */
function dropHeader(names: string[], values: string[], name: string): void {
  for (let i = names.length - 1; i >= 0; i--) {
    if (names[i] !== name) continue;
    names.splice(i, 1);
    values.splice(i, 1);
  }
}
