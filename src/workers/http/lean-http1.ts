// The lean HTTP/1.1 connection: the client listener's sockets are read here
// first, and a plain API POST (lean-head.ts) is answered without node:http's
// IncomingMessage, ServerResponse, llhttp callbacks and stream machinery.
// Profiles put node:http's server side at ~40 µs of CPU per request on the
// bench host (half of a minimal node:http server's cost; docs/perf), on a path
// whose only job is to carry bytes.
//
// Anything the strict head reader does not take (another method or route, a
// head split over reads, chunked bodies, Expect, Upgrade, a repeated header,
// a body over the limit, HTTP/1.0) hands the connection, with every
// byte not yet consumed, to node:http's own connection listener for the rest
// of its life: node:http's parser, limits and answers stay the authority for
// every unusual request, and fastify serves everything but the API POSTs.
//
// One request at a time per connection: bytes that arrive while a response
// is running (pipelining) wait, and the socket pauses when they pile up.
// Request lifecycle on a lean connection:
//   1. a whole plain head for a lean route, and its Content-Length body;
//   2. owner.serveLean(path, request, response, body) (ClientServer: the same
//      checks and answers as the node:http lean path);
//   3. the response ends: the next buffered request, or the socket ends
//      (Connection: close asked, draining, or the edge closing).
import { EventEmitter } from 'node:events';
import { STATUS_CODES, validateHeaderName, validateHeaderValue, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import { asksToClose, readLeanHead, type LeanHead } from './lean-head.js';
import { refuseSlowRequest, type RefusalCounter } from './client-errors.js';

/** `refused`: counts the 408 a connection answers itself. */
export interface LeanOwner extends RefusalCounter {
  /** A lean request with its whole body; the owner answers through `response`. */
  serveLean(path: string, request: IncomingMessage, response: ServerResponse, body: Buffer): void;
  /**
   * A head whose body is still to come: true when the owner will refuse it
   * whatever the body (no valid key), so that the connection goes to
   * node:http, which answers from the head and never waits for the body.
   */
  refusesHead(headers: Readonly<Record<string, string>>): boolean;
  /**
   * How long a response's last bytes may make no progress (a client that
   * stopped reading) before the connection is cut; 0 = never. Read only
   * when an end could not be written whole at once.
   */
  readonly flushTimeoutMs: number;
  /** A connection was cut for it (counted: edge_client_stalled_cuts_total). */
  clientStalled(): void;
}

export interface LeanOptions {
  readonly maxHeaderBytes: number;
  readonly bodyLimit: number;
  readonly keepAliveMs: number;
  /**
   * node:http's headersTimeout: a connection that has not sent its first request's head this long after it
   * opened is closed, as node:http closes it (keepAliveMs covers the wait between requests only).
   */
  readonly headersTimeoutMs: number;
  /** A request whose head came but whose body is not all here this long after is answered 408 and closed; 0 = never. */
  readonly requestTimeoutMs: number;
  /** The paths served here (POST only). */
  readonly routes: readonly string[];
}

type ConnectionListener = (this: Server, socket: Socket) => void;

/** How often timeouts of `ms` are checked: a quarter of it (at most 25 % late), between 100 ms and 30 s. */
export function timeoutSweepMs(ms: number): number {
  return Math.max(100, Math.min(30_000, Math.floor(ms / 4)));
}

/** Bytes a pipelining client may send ahead of the running response before its socket pauses. */
const PIPELINE_BYTES = 64 * 1024;
const kConnection = Symbol('edge.leanConnection');
type LeanSocket = Socket & { [kConnection]?: LeanConnection };

/** What the API handlers read of a request (IncomingMessage's names). */
export class LeanRequest {
  readonly method = 'POST';
  readonly httpVersion = '1.1';
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor = 1;
  readonly complete = true;
  constructor(
    readonly url: string,
    readonly headers: Record<string, string>,
    readonly rawHeaders: string[],
    readonly socket: Socket,
  ) {}

  /** The data path takes requests by IncomingMessage's type; it reads only the members above. */
  asIncoming(): IncomingMessage {
    return this as unknown as IncomingMessage;
  }
}

let dateSecond = -1;
let dateLine = '';
/** `Date: ...\r\n`, rebuilt once a second as node:http does. */
function currentDateLine(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateLine = `Date: ${new Date(now).toUTCString()}\r\n`;
  }
  return dateLine;
}

/** Statuses whose responses have no body (RFC 9110 §6.4.1). */
function bodiless(status: number): boolean {
  return status === 204 || status === 304 || (status >= 100 && status < 200);
}

/**
 * A ServerResponse as far as the data path uses one: statusCode, setHeader,
 * writeHead (pairs or a record), write with a flush callback, end, destroy,
 * headersSent, destroyed, writableFinished, writableLength, chunkedEncoding,
 * shouldKeepAlive, socket, and 'finish' and 'close'. Writes made in one
 * turn leave as one socket write; a response ended with its whole body and
 * nothing written before is framed by Content-Length, any other chunked.
 */
export class LeanResponse extends EventEmitter {
  statusCode = 200;
  headersSent = false;
  destroyed = false;
  writableEnded = false;
  writableFinished = false;
  shouldKeepAlive = true;
  chunkedEncoding = false;
  readonly socket: Socket;
  readonly #connection: LeanConnection;
  /** Header pairs (name, value) from setHeader and writeHead, in order. */
  #fields: string[] = [];
  /** A head serialized by its writer (writeHeadLines): "name: value\r\n" each, after #fields. */
  #lines = '';
  #linesHaveLength = false;
  #linesHaveDate = false;
  /** The head went into the pending bytes (its framing is decided). */
  #headWritten = false;
  #keepAlive = true;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #callbacks: (() => void)[] = [];
  /** The flush callbacks that rode on the last write. */
  #lastCallbacks: readonly (() => void)[] = NO_CALLBACKS;
  #flushQueued = false;
  #closeEmitted = false;

  constructor(connection: LeanConnection, socket: Socket) {
    super();
    this.#connection = connection;
    this.socket = socket;
  }

  asServerResponse(): ServerResponse {
    return this as unknown as ServerResponse;
  }

  /** setHeader (or writeHead) has put fields in: writeHeadLines is not for this response. */
  get hasFields(): boolean {
    return this.#fields.length > 0;
  }

  get writableLength(): number {
    return this.socket.writableLength + this.#pendingBytes;
  }

  setHeader(name: string, value: string | number | readonly string[]): this {
    if (this.headersSent) throw new Error('Cannot set headers after they are sent to the client');
    validateHeaderName(name);
    const lower = name.toLowerCase();
    const fields = this.#fields;
    for (let i = fields.length - 2; i >= 0; i -= 2) if (fields[i].toLowerCase() === lower) fields.splice(i, 2);
    if (Array.isArray(value)) for (const one of value) this.#field(name, String(one));
    else this.#field(name, String(value));
    return this;
  }

  /** The first value setHeader gave `name` (case-insensitive), as node:http's for a single value. */
  getHeader(name: string): string | undefined {
    const lower = name.toLowerCase();
    const fields = this.#fields;
    for (let i = 0; i < fields.length; i += 2) if (fields[i].toLowerCase() === lower) return fields[i + 1];
    return undefined;
  }

  writeHead(status: number, headers?: OutgoingHttpHeaders | readonly string[]): this {
    if (this.headersSent) throw new Error('Cannot write headers after they are sent to the client');
    if (!Number.isInteger(status) || status < 100 || status > 999) throw new RangeError(`Invalid status code: ${status}`);
    if (headers !== undefined) {
      if (Array.isArray(headers)) {
        const pairs = headers as readonly string[];
        if (this.#fields.length > 0) this.#dropNamed(pairs);
        for (let i = 0; i + 1 < pairs.length; i += 2) {
          const name = String(pairs[i]);
          validateHeaderName(name);
          this.#field(name, String(pairs[i + 1]));
        }
      } else {
        for (const [name, value] of Object.entries(headers as OutgoingHttpHeaders)) if (value !== undefined) this.setHeader(name, value);
      }
    }
    this.statusCode = status;
    this.headersSent = true;
    return this;
  }

  /**
   * writeHead for a head its caller serialized and checked: `lines` is
   * "name: value\r\n" for each header, every name a lower-case token, no
   * value with a control byte, no Connection or Transfer-Encoding;
   * `hasLength` / `hasDate`: it holds content-length / date. The tunnel
   * exchange's relayed heads are that (the frame guard checked the node's
   * headers, the x-edge-* ones are the edge's own), and per response this
   * skips node:http's two checks per header and a field list walked twice.
   * Only while hasFields is false (setHeader's fields would need merging:
   * writeHead does that).
   */
  writeHeadLines(status: number, lines: string, hasLength: boolean, hasDate: boolean): void {
    if (this.#fields.length > 0) throw new Error('writeHeadLines after setHeader: use writeHead');
    if (this.headersSent) throw new Error('Cannot write headers after they are sent to the client');
    this.#lines = lines;
    this.#linesHaveLength = hasLength;
    this.#linesHaveDate = hasDate;
    this.statusCode = status;
    this.headersSent = true;
  }

  write(chunk: string | Uint8Array, callback?: () => void): boolean {
    if (this.writableEnded || this.destroyed) return false;
    this.headersSent = true;
    if (!this.#headWritten) this.#writeHead(-1);
    if (bodiless(this.statusCode)) {
      // A 204/304 has no body (node:http drops one too): bytes after its head would be read as the next response.
      if (callback !== undefined) queueMicrotask(callback);
      return true;
    }
    this.#append(chunk);
    if (callback !== undefined) this.#callbacks.push(callback);
    if (!this.#flushQueued) {
      this.#flushQueued = true;
      process.nextTick(flushQueued, this);
    }
    return true;
  }

  end(chunk?: string | Uint8Array): this {
    if (this.writableEnded || this.destroyed) return this;
    this.writableEnded = true;
    this.headersSent = true;
    const body = chunk === undefined ? undefined : typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    // Nothing written before: the whole body is known, framed by Content-Length.
    if (!this.#headWritten) this.#writeHead(body?.length ?? 0);
    if (body !== undefined && !bodiless(this.statusCode)) this.#append(body);
    if (this.chunkedEncoding) this.#push(LAST_CHUNK);
    this.flush(true);
    return this;
  }

  /** The head set by writeHead, into the pending bytes now (sent with the next write, or by destroy() before its cut). */
  flushHeaders(): void {
    if (this.destroyed || this.writableEnded || !this.headersSent || this.#headWritten) return;
    this.#writeHead(-1);
  }

  destroy(): this {
    if (this.destroyed) return this;
    // What was written goes out before the cut (the kernel takes it now, unless the client stopped
    // reading): a head and body that arrived in the same turn as the cut were lost, an empty reply.
    if (this.#pendingBytes > 0) {
      const pending = this.#pending;
      this.socket.write(pending.length === 1 ? pending[0] : Buffer.concat(pending, this.#pendingBytes));
      pending.length = 0;
      this.#pendingBytes = 0;
    }
    this.destroyed = true;
    this.socket.destroy();
    return this;
  }

  /** The pending bytes as one socket write at the end of this turn, with whatever else the turn writes. */
  flushSoon(): void {
    if (this.#flushQueued || this.#pendingBytes === 0) return;
    this.#flushQueued = true;
    process.nextTick(flushQueued, this);
  }

  /** The pending bytes as one socket write; `last`: the response is complete with it. */
  flush(last = false): void {
    this.#flushQueued = false;
    if (this.destroyed || (this.#pendingBytes === 0 && !last)) return;
    const pending = this.#pending;
    // Buffer.concat copies now, so the array is free for the next writes.
    const data = pending.length === 1 ? pending[0] : Buffer.concat(pending, this.#pendingBytes);
    pending.length = 0;
    this.#pendingBytes = 0;
    const callbacks = this.#callbacks;
    if (callbacks.length > 0) this.#callbacks = [];
    if (last) {
      // The connection's one callback (no closure per response) calls lastWritten on its running response: this one.
      this.#lastCallbacks = callbacks;
      this.socket.write(data, this.#connection.onLastWrite);
      // Not all taken by the kernel: the client is slow, or has stopped reading; a deadline on the rest.
      if (this.socket.writableLength > 0) this.#connection.awaitFlush();
      return;
    }
    if (callbacks.length === 0) this.socket.write(data);
    else if (callbacks.length === 1) this.socket.write(data, callbacks[0]);
    else this.socket.write(data, () => runAll(callbacks));
  }

  /** The response's last write left (or failed: the socket's 'close' then tells the rest). */
  lastWritten(err: Error | null | undefined): void {
    runAll(this.#lastCallbacks);
    if (err) return;
    this.writableFinished = true;
    this.emit('finish');
    this.#emitClose();
    this.#connection.responseDone(this.#keepAlive);
  }

  /** The socket closed: a response not yet flushed whole was cut (the client left, or destroy()). */
  socketClosed(): void {
    this.destroyed = true;
    this.#emitClose();
  }

  #emitClose(): void {
    if (this.#closeEmitted) return;
    this.#closeEmitted = true;
    this.emit('close');
  }

  #field(name: string, value: string): void {
    validateHeaderValue(name, value);
    this.#fields.push(name, value);
  }

  /** writeHead's pairs replace what setHeader set under their names (repeats among the pairs themselves are kept). */
  #dropNamed(pairs: readonly string[]): void {
    const fields = this.#fields;
    for (let i = fields.length - 2; i >= 0; i -= 2) {
      const lower = fields[i].toLowerCase();
      for (let j = 0; j < pairs.length; j += 2) {
        if (String(pairs[j]).toLowerCase() === lower) {
          fields.splice(i, 2);
          break;
        }
      }
    }
  }

  /** Serializes the head into the pending bytes. `length` ≥ 0: the whole body's size, known now. */
  #writeHead(length: number): void {
    this.#headWritten = true;
    const status = this.statusCode;
    const fields = this.#fields;
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n${this.#lines}`;
    let hasLength = this.#linesHaveLength;
    let hasDate = this.#linesHaveDate;
    let connection: string | undefined;
    for (let i = 0; i < fields.length; i += 2) {
      const name = fields[i];
      const lower = name.toLowerCase();
      // Framing is this response's to decide.
      if (lower === 'transfer-encoding') continue;
      if (lower === 'content-length') hasLength = true;
      else if (lower === 'date') hasDate = true;
      else if (lower === 'connection') {
        connection = fields[i + 1];
        continue;
      }
      head += `${name}: ${fields[i + 1]}\r\n`;
    }
    if (!hasDate) head += currentDateLine();
    this.#keepAlive = this.shouldKeepAlive && this.#connection.keepAlive && (connection === undefined || !asksToClose(connection));
    head += this.#keepAlive ? this.#connection.keepAliveLines : 'Connection: close\r\n';
    if (!hasLength && !bodiless(status)) {
      if (length >= 0) head += `Content-Length: ${length}\r\n`;
      else {
        head += 'Transfer-Encoding: chunked\r\n';
        this.chunkedEncoding = true;
      }
    }
    this.#push(Buffer.from(`${head}\r\n`, 'latin1'));
  }

  #append(chunk: string | Uint8Array): void {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (bytes.length === 0) return;
    if (!this.chunkedEncoding) {
      this.#push(bytes);
      return;
    }
    this.#push(Buffer.from(`${bytes.length.toString(16)}\r\n`, 'latin1'));
    this.#push(bytes);
    this.#push(CRLF);
  }

  #push(bytes: Buffer): void {
    this.#pending.push(bytes);
    this.#pendingBytes += bytes.length;
  }
}

const NO_CALLBACKS: readonly (() => void)[] = [];
const CRLF = Buffer.from('\r\n', 'latin1');
const LAST_CHUNK = Buffer.from('0\r\n\r\n', 'latin1');

function flushQueued(response: LeanResponse): void {
  response.flush();
}

function runAll(callbacks: readonly (() => void)[]): void {
  for (let i = 0; i < callbacks.length; i++) callbacks[i]();
}

/** One client connection while it is lean. */
class LeanConnection {
  /** Bytes read and not yet consumed (a head, or the next pipelined request). */
  buffer: Buffer | undefined;
  /** A head whose body is still arriving, with the body's pieces so far. */
  head: LeanHead | undefined;
  bodyChunks: Buffer[] = [];
  bodyBytes = 0;
  response: LeanResponse | undefined;
  paused = false;
  /** The write callback of every response's last write on this connection: one per connection, not one per response. */
  readonly onLastWrite = (err?: Error | null): void => {
    if (this.flushWatched) {
      this.flushWatched = false;
      this.socket.setTimeout(0);
    }
    this.response?.lastWritten(err);
  };
  /** A socket timeout watches the last write of the running response (awaitFlush). */
  flushWatched = false;

  /**
   * The response's last bytes wait in the socket's buffer: if none of them
   * leaves for flushTimeoutMs (node's socket timeout counts any progress),
   * the connection is cut (onSocketTimeout). Else a client that stopped
   * reading would hold its socket and those bytes for as long as it
   * keeps the connection open.
   */
  awaitFlush(): void {
    const ms = this.server.owner.flushTimeoutMs;
    if (ms <= 0 || this.flushWatched) return;
    this.flushWatched = true;
    this.socket.setTimeout(ms);
  }

  constructor(
    readonly server: LeanHttp1,
    readonly socket: LeanSocket,
  ) {}

  get keepAlive(): boolean {
    return !this.server.closing;
  }

  get keepAliveLines(): string {
    return this.server.keepAliveLines;
  }

  /** Responses finished on it. */
  served = 0;
  /** Its last response went out with `Connection: close`: nothing more is served on it. */
  finished = false;
  /** When it last began waiting for a request (performance.now()): the keep-alive sweep closes it keepAliveMs later. */
  waitingSince = performance.now();
  /** When the running request's head was read (performance.now()): its body must all come within requestTimeoutMs. */
  headAt = 0;

  /**
   * Between requests, as node:http counts idle: after a response, with
   * nothing of the next request read. A connection still waiting for its
   * first request is not idle (node:http's closeIdleConnections spares it too).
   */
  get idle(): boolean {
    return this.served > 0 && this.response === undefined && this.head === undefined && this.buffer === undefined;
  }

  take(chunk: Buffer): void {
    // Past a `Connection: close` answer: whatever else the client sends is read and dropped, never served (as llhttp refuses it).
    if (this.finished) return;
    if (this.head !== undefined) {
      this.bodyChunks.push(chunk);
      this.bodyBytes += chunk.length;
      this.#continue();
      return;
    }
    this.buffer = this.buffer === undefined ? chunk : Buffer.concat([this.buffer, chunk]);
    if (this.response !== undefined) {
      // Pipelined: waits for the running response.
      if (this.buffer.length > PIPELINE_BYTES && !this.paused) {
        this.paused = true;
        this.socket.pause();
      }
      return;
    }
    this.#continue();
  }

  /** Reads the next request from what is buffered, if it is whole; hands the connection over at the first one that is not lean. */
  #continue(): void {
    let head = this.head;
    if (head === undefined) {
      const buffer = this.buffer;
      if (buffer === undefined) return;
      const options = this.server.options;
      head = readLeanHead(buffer, options.maxHeaderBytes, options.routes);
      if (head === undefined || head.contentLength > options.bodyLimit || (buffer.length - head.headBytes < head.contentLength && this.server.owner.refusesHead(head.headers))) {
        this.server.handOver(this);
        return;
      }
      this.buffer = undefined;
      this.head = head;
      this.headAt = performance.now();
      if (buffer.length > head.headBytes) {
        this.bodyChunks.push(buffer.subarray(head.headBytes));
        this.bodyBytes = buffer.length - head.headBytes;
      }
    }
    if (this.bodyBytes < head.contentLength) return;
    const chunks = this.bodyChunks;
    const whole = chunks.length === 0 ? Buffer.alloc(0) : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, this.bodyBytes);
    const body = whole.length === head.contentLength ? whole : whole.subarray(0, head.contentLength);
    if (whole.length > head.contentLength) this.buffer = whole.subarray(head.contentLength);
    this.head = undefined;
    // Concatenated (a copy) or taken as the one chunk above: the array is free.
    chunks.length = 0;
    this.bodyBytes = 0;
    const socket = this.socket;
    const request = new LeanRequest(head.url, head.headers, head.rawHeaders, socket);
    const response = new LeanResponse(this, socket);
    if (head.close) response.shouldKeepAlive = false;
    this.response = response;
    this.server.requests++;
    this.server.owner.serveLean(head.path, request.asIncoming(), response.asServerResponse(), body);
  }

  /** The running response went out whole. */
  responseDone(keepAlive: boolean): void {
    this.response = undefined;
    this.served++;
    this.waitingSince = performance.now();
    const socket = this.socket;
    if (!keepAlive || this.server.closing) {
      this.finished = true;
      this.buffer = undefined;
      socket.end();
      // A connection paused for pipelined bytes must still read the client's FIN, or it stays open until the sweep.
      if (this.paused) {
        this.paused = false;
        socket.resume();
      }
      return;
    }
    if (this.paused) {
      this.paused = false;
      socket.resume();
    }
    if (this.buffer !== undefined) this.#continue();
  }

  closed(): void {
    this.response?.socketClosed();
    this.response = undefined;
  }
}

function onSocketData(this: LeanSocket, chunk: Buffer): void {
  this[kConnection]?.take(chunk);
}

function onSocketClose(this: LeanSocket): void {
  const connection = this[kConnection];
  if (connection === undefined) return;
  this[kConnection] = undefined;
  connection.server.forget(connection);
  connection.closed();
}

function onSocketEnd(this: LeanSocket): void {
  // The client ended its side: so does the edge, as node:http does (no half-open HTTP);
  // a response still running is cut by the 'close' that follows, and its exchange cancelled.
  this.end();
}

/** Armed only while a response's last write waits (awaitFlush): it made no progress for flushTimeoutMs. */
function onSocketTimeout(this: LeanSocket): void {
  const connection = this[kConnection];
  if (connection?.flushWatched !== true) return;
  connection.server.owner.clientStalled();
  this.destroy();
}

function onSocketError(): void {
  // 'close' follows and tells the running response; a reset client is no error of ours.
}

/** Closes connections that have waited for a request longer than the keep-alive timeout. */
function sweepIdle(lean: LeanHttp1): void {
  lean.sweep(performance.now());
}

/**
 * Takes the server's connections first (in place of node:http's connection
 * listener, which it calls for every connection it hands over).
 */
export class LeanHttp1 {
  readonly owner: LeanOwner;
  readonly options: LeanOptions;
  readonly keepAliveLines: string;
  /** The edge is closing: responses say Connection: close and connections end after them. */
  closing = false;
  /** Requests read and served here, and connections handed to node:http, since start. */
  requests = 0;
  handedOver = 0;
  readonly #server: Server;
  readonly #nodeListener: ConnectionListener;
  readonly #connections = new Set<LeanConnection>();
  #sweeper: NodeJS.Timeout | undefined;
  readonly #sweepMs: number;

  private constructor(server: Server, nodeListener: ConnectionListener, owner: LeanOwner, options: LeanOptions) {
    this.#server = server;
    this.#nodeListener = nodeListener;
    this.owner = owner;
    this.options = options;
    const timeout = options.requestTimeoutMs;
    this.#sweepMs = Math.min(Math.max(1_000, options.keepAliveMs / 8), timeout > 0 ? timeoutSweepMs(timeout) : Infinity, timeoutSweepMs(options.headersTimeoutMs));
    this.keepAliveLines = `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(options.keepAliveMs / 1000)}\r\n`;
  }

  /**
   * Installs the lean connection on a plain-HTTP node:http server; undefined
   * (the server untouched) when its connection listener is not node:http's
   * alone. The server's closeIdleConnections and closeAllConnections cover
   * the lean connections too, so drains and fastify's close see them all.
   */
  static install(server: Server, owner: LeanOwner, options: LeanOptions): LeanHttp1 | undefined {
    // node:https hands node:http's listener the TLS socket once the handshake is done: the lean connection takes it there.
    const event = server instanceof TlsServer ? 'secureConnection' : 'connection';
    const listeners = server.listeners(event);
    if (listeners.length !== 1) return undefined;
    const nodeListener = listeners[0] as ConnectionListener;
    const lean = new LeanHttp1(server, nodeListener, owner, options);
    server.removeListener(event, nodeListener);
    server.on(event, (socket: Socket) => lean.adopt(socket));
    const closeIdle = server.closeIdleConnections.bind(server);
    const closeAll = server.closeAllConnections.bind(server);
    server.closeIdleConnections = () => {
      closeIdle();
      lean.closeIdle();
    };
    server.closeAllConnections = () => {
      closeAll();
      lean.closeAll();
    };
    return lean;
  }

  get openConnections(): number {
    return this.#connections.size;
  }

  adopt(socket: LeanSocket): void {
    const connection = new LeanConnection(this, socket);
    socket[kConnection] = connection;
    this.#connections.add(connection);
    socket.setNoDelay(true);
    socket.on('data', onSocketData);
    socket.on('close', onSocketClose);
    socket.on('end', onSocketEnd);
    socket.on('error', onSocketError);
    socket.on('timeout', onSocketTimeout);
    // One sweep for all connections, not a socket timeout each: a socket timeout is re-armed on every read and write.
    this.#sweeper ??= setInterval(sweepIdle, this.#sweepMs, this).unref();
  }

  /**
   * Connections waiting for their next request since before now -
   * keepAliveMs, or for their first since before now - headersTimeoutMs,
   * are closed, as node:http's keepAliveTimeout and headersTimeout close
   * them (a client that connects and sends nothing, or a head a byte at a
   * time, must not outstay what request_timeout_ms sets); one whose body has not all come within
   * requestTimeoutMs of its head is answered 408, as node:http's
   * requestTimeout answers.
   */
  sweep(now: number): void {
    const limit = now - this.options.keepAliveMs;
    const firstLimit = now - this.options.headersTimeoutMs;
    const timeout = this.options.requestTimeoutMs;
    const headLimit = now - timeout;
    for (const connection of this.#connections) {
      if (connection.response !== undefined) continue;
      if (connection.head === undefined) {
        if (connection.waitingSince < (connection.served === 0 ? firstLimit : limit)) connection.socket.destroy();
      } else if (timeout > 0 && connection.headAt < headLimit) {
        connection.finished = true;
        refuseSlowRequest(connection.socket, connection.head.path, this.owner, connection.head.headers.origin);
      }
    }
    if (this.#connections.size === 0 && this.#sweeper !== undefined) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }

  /** The rest of the connection goes to node:http, with the bytes not yet consumed. */
  handOver(connection: LeanConnection): void {
    const socket = connection.socket;
    socket[kConnection] = undefined;
    this.#connections.delete(connection);
    this.handedOver++;
    socket.removeListener('data', onSocketData);
    socket.removeListener('close', onSocketClose);
    socket.removeListener('end', onSocketEnd);
    socket.removeListener('error', onSocketError);
    const rest = connection.buffer;
    connection.buffer = undefined;
    if (rest !== undefined) socket.unshift(rest);
    if (connection.paused) socket.resume();
    this.#nodeListener.call(this.#server, socket);
  }

  forget(connection: LeanConnection): void {
    this.#connections.delete(connection);
  }

  closeIdle(): void {
    for (const connection of this.#connections) if (connection.idle) connection.socket.destroy();
  }

  closeAll(): void {
    for (const connection of this.#connections) connection.socket.destroy();
  }
}
