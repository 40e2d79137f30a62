// Executes one TunnelRequest against its provider and relays the response as
// ordered frames: HEADERS, DATA per body chunk as it arrives, then END; or a
// single ERROR. It is the upstream request's dispatch handler itself (undici's
// handler contract, which Http1Client keeps: no Readable, no promise, no
// per-request closure), and nothing is sent for the tunnel after its END or
// ERROR or a cancel. Every
// DATA payload stays within the smaller of coalesce_max_bytes and the edge's
// max_frame_bytes (big chunks are split), and the upstream request's
// timeouts are the request's own deadlines, never undici's defaults.
import { performance } from 'node:perf_hooks';
import type { Dispatcher } from 'undici';
import { Adapter, type NodeMessage, type TunnelRequest } from '../gen/edge/v1/tunnel_pb.js';
import { dataFrame, endFrame, errorFrame, headersFrame } from './frames.js';
import { DEFAULT_TUNNEL_OPTIONS, type TunnelOptions } from './config.js';
import { classifyUpstreamError, TunnelDeadlineError, upstreamErrorMessage, type TunnelErrorCode } from './tunnel-errors.js';
import { frameResponseHeaderPairs, frameResponseHeaders, upstreamRequestHeaders, type ResponseHeaders } from './upstream-headers.js';
import type { RawHeadHandler } from './http1-client.js';
import type { PooledHandler, PoolTicket, UpstreamClient, UpstreamPool } from './upstream-pool.js';
import type { Upstreams } from './upstreams.js';
import { CliRun, DEFAULT_SESSION } from './cli-run.js';
import { isEventStreamType } from '../shared/media-type.js';

/** Where a tunnel's frames go: the edge connection, or a recorder in tests. */
export interface FrameSink {
  /** Sends one message to the edge; false when the stream's buffer is full (pause until drained). */
  send(message: NodeMessage): boolean;
  /** Calls tunnel.resume() once the stream has drained. */
  resumeOnDrain(tunnel: TunnelExecutor): void;
  /** The tunnel is over (terminal frame sent, cancelled or aborted); forget it. `errorCode` is set when it ended in ERROR. */
  tunnelFinished(tunnel: TunnelExecutor, errorCode?: TunnelErrorCode, errorMessage?: string): void;
}

/** Abort reason for a cancelled tunnel; never reported to the edge. */
class TunnelCancelledError extends Error {
  readonly code = 'AGENT_TUNNEL_CANCELLED';
  constructor(reason: string) {
    super(`tunnel cancelled: ${reason}`);
    this.name = 'TunnelCancelledError';
  }
}

export class TunnelExecutor implements PooledHandler, RawHeadHandler {
  readonly tunnelId: number;
  readonly #request: TunnelRequest;
  readonly #sink: FrameSink;
  readonly #options: TunnelOptions;
  /** Largest DATA payload: coalesce_max_bytes, or the edge's max_frame_bytes when smaller. */
  readonly #maxData: number;
  #seq = 0;
  /** Terminal: END/ERROR sent or cancelled. Every later upstream callback is ignored. */
  #done = false;
  /** The upstream client's controller; undefined until the request is on a connected socket. */
  #controller: Dispatcher.DispatchController | undefined;
  #abortReason: Error | undefined;
  #deadline: NodeJS.Timeout | undefined;
  /** DATA bytes the edge still accepts (its per-tunnel window); Infinity when it set none. */
  #credit: number;
  /** Body bytes not yet framed: merging (coalescing) or waiting for credit. */
  #held: Buffer[] = [];
  #heldBytes = 0;
  /** The response is an event stream: a frame cut for size ends at an event's end where it can (see #frameCut). */
  #eventStream = false;
  #holdTimer: NodeJS.Timeout | undefined;
  #lastDataAt = -Infinity;
  /** Upstream ended while bytes were still held: END follows the last of them. */
  #endHeld = false;
  /** performance.now() when the upstream request started (onRequestStart), 0 before: the provider's time is measured from it. */
  #upstreamAt = 0;
  /** The provider's time to its last byte (µs), kept for an END that waits for held bytes. */
  #upstreamEndUs = 0;
  #pausedForCredit = false;
  #pausedForSink = false;
  /** The connection carrying the upstream request (set by the pool), handed back once the client is done with it. */
  pooledClient: UpstreamClient | undefined;
  #pool: UpstreamPool | undefined;
  /** Waiting for a connection: cancelling lets the pool drop the request at once. */
  #poolTicket: PoolTicket | undefined;

  /** Cancelled before a connection took it: the pool skips it. */
  get abandoned(): boolean {
    return this.#abortReason !== undefined && this.pooledClient === undefined;
  }

  /** `maxFrameBytes`: Registered.max_frame_bytes (0 = the edge did not say). */
  constructor(request: TunnelRequest, sink: FrameSink, options: TunnelOptions = DEFAULT_TUNNEL_OPTIONS, maxFrameBytes = 0) {
    this.tunnelId = request.tunnelId;
    this.#request = request;
    this.#sink = sink;
    this.#options = options;
    this.#maxData = maxFrameBytes > 0 ? Math.min(options.coalesceMaxBytes, maxFrameBytes) : options.coalesceMaxBytes;
    this.#credit = request.initialCredit > 0 ? request.initialCredit : Infinity;
  }

  get runId(): string {
    return this.#request.runId;
  }

  get providerId(): string {
    return this.#request.providerId;
  }

  /** The adapter the edge named (its enum name, for logs). */
  get adapter(): string {
    return Adapter[this.#request.adapter] ?? String(this.#request.adapter);
  }

  /** The request's session, normalised as the edge does ("default" when empty). */
  get sessionId(): string {
    return this.#request.sessionId === '' ? DEFAULT_SESSION : this.#request.sessionId;
  }

  /** The edge's request id (metadata.request_id), for logs on both sides; the run id when absent. */
  get requestId(): string {
    return this.#request.metadata.request_id ?? this.#request.runId;
  }

  /** Starts the upstream request; every outcome reaches the sink as frames. */
  start(upstreams: Upstreams): void {
    const request = this.#request;
    const upstream = upstreams.get(request.providerId);
    if (upstream === undefined) {
      this.#fail('unknown_provider', `provider ${JSON.stringify(request.providerId)} is not on this node`);
      return;
    }
    if (upstream.cli !== undefined) {
      // The node's own config decides what the provider is; the edge's adapter is a hint it checks below.
      if (request.timeoutMs > 0) this.#deadline = setTimeout(onTunnelDeadline, request.timeoutMs, this);
      new CliRun(upstream.cli, request, this).start();
      return;
    }
    if (upstream.pool === undefined || request.adapter === Adapter.CLI) {
      this.#fail('adapter_not_supported', `provider ${JSON.stringify(upstream.id)} (${upstream.type}) is not a cli provider with a command on this node`);
      return;
    }
    if (request.timeoutMs > 0) this.#deadline = setTimeout(onTunnelDeadline, request.timeoutMs, this);
    this.#pool = upstream.pool;
    this.#poolTicket = upstream.pool.dispatch(
      {
        method: request.method as Dispatcher.HttpMethod,
        path: upstream.pathPrefix + request.path,
        headers: upstreamRequestHeaders(request.headers, upstream.authorization),
        body: request.body.byteLength > 0 ? request.body : null,
        // The edge's deadlines (plus slack; 0 = none), never undici's 300 s defaults,
        // which would cut a slow provider whatever the edge allows.
        headersTimeout: request.ttfbTimeoutMs,
        bodyTimeout: request.idleTimeoutMs,
      },
      this,
    );
  }

  /** The edge cancelled it, or its connection is gone: abort upstream at once and send nothing more. */
  cancel(reason: string): void {
    if (this.#done) return;
    this.#finish();
    this.#abortUpstream(new TunnelCancelledError(reason));
  }

  /** Called by the sink when the stream drained after send() returned false. */
  resume(): void {
    this.#pausedForSink = false;
    this.#resumeUpstream();
  }

  /** FlowCredit from the edge: the client drained `bytes`; held bytes go out and a credit-paused upstream resumes. */
  addCredit(bytes: number): void {
    if (this.#done) return;
    this.#credit += bytes;
    if (this.#heldBytes > 0 || this.#endHeld) this.flushHeld();
    if (this.#heldBytes === 0 && this.#pausedForCredit) {
      this.#pausedForCredit = false;
      this.#resumeUpstream();
    }
  }

  /** Frames what is held, as far as credit allows, in payloads of at most the frame limit; sends END once everything is out. */
  flushHeld(): void {
    if (this.#holdTimer !== undefined) {
      clearTimeout(this.#holdTimer);
      this.#holdTimer = undefined;
    }
    this.#sendHeldWithinCredit();
    if (this.#done) return;
    if (this.#heldBytes > 0) {
      this.#pauseForCredit();
    } else if (this.#endHeld) {
      const message = endFrame(this.tunnelId, this.#seq++, this.#upstreamEndUs);
      this.#finish();
      this.#sink.send(message);
    }
  }

  /** The node ends the run on its own (an operator's restart_provider): ERROR to the edge, and the upstream stopped. */
  terminate(code: TunnelErrorCode, message: string): void {
    if (this.#done) return;
    this.#fail(code, message);
    this.#abortUpstream(new TunnelCancelledError(message));
  }

  /** The tunnel's timeout_ms passed: ERROR upstream_timeout, and stop the upstream. */
  expire(): void {
    this.#deadline = undefined;
    if (this.#done) return;
    const err = new TunnelDeadlineError(this.#request.timeoutMs);
    this.#fail('upstream_timeout', err.message);
    this.#abortUpstream(err);
  }

  // --- undici DispatchHandler -------------------------------------------------

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    this.#upstreamAt = performance.now();
    // Cancelled or expired while queued in the pool: never send it.
    if (this.#abortReason !== undefined) controller.abort(this.#abortReason);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: ResponseHeaders): void {
    // 1xx interim responses are hop-by-hop; only the final response is relayed.
    if (this.#done || statusCode < 200) return;
    const type = headers['content-type'];
    this.#eventStream = typeof type === 'string' && isEventStreamType(type);
    const message = headersFrame(this.tunnelId, this.#seq++, statusCode, frameResponseHeaders(headers), this.#upstreamUs());
    if (!this.#sink.send(message)) this.#pause(controller);
  }

  /** The agent's own HTTP/1.1 client hands the head over as pairs (no headers record in between). */
  onResponseStartRaw(controller: Dispatcher.DispatchController, statusCode: number, names: readonly string[], values: readonly string[]): void {
    if (this.#done || statusCode < 200) return;
    for (let i = 0; i < names.length; i++) if (names[i] === 'content-type') this.#eventStream = isEventStreamType(values[i]);
    const message = headersFrame(this.tunnelId, this.#seq++, statusCode, frameResponseHeaderPairs(names, values), this.#upstreamUs());
    if (!this.#sink.send(message)) this.#pause(controller);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#done) return;
    const delay = this.#options.coalesceDelayMs;
    const maxData = this.#maxData;
    const now = performance.now();
    // An idle stream's chunk goes out at once (time to first token must not grow).
    if (this.#heldBytes === 0 && chunk.length <= this.#credit && chunk.length <= maxData && (delay === 0 || now - this.#lastDataAt >= delay)) {
      this.#sendData(chunk);
      return;
    }
    this.#held.push(chunk);
    this.#heldBytes += chunk.length;
    if (delay === 0 || this.#credit === 0) {
      this.flushHeld();
      return;
    }
    // Full frames go at once, each exactly the limit (a big chunk is split); the rest waits out the delay for company.
    while (this.#heldBytes >= maxData && this.#credit > 0 && !this.#done) this.#sendData(this.#takeHeld(this.#frameCut(Math.min(maxData, this.#credit))));
    if (this.#done) return;
    if (this.#heldBytes === 0) {
      clearTimeout(this.#holdTimer);
      this.#holdTimer = undefined;
    } else if (this.#credit <= 0) {
      this.#pauseForCredit();
    } else if (this.#holdTimer === undefined) {
      this.#holdTimer = setTimeout(onHoldTimer, delay, this);
    }
  }

  onResponseEnd(): void {
    this.#releaseClient();
    if (this.#done) return;
    this.#upstreamEndUs = this.#upstreamUs();
    if (this.#heldBytes > 0) {
      this.#endHeld = true;
      this.flushHeld();
      return;
    }
    const message = endFrame(this.tunnelId, this.#seq++, this.#upstreamEndUs);
    this.#finish();
    this.#sink.send(message);
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    this.#releaseClient();
    if (this.#done) return;
    const code = classifyUpstreamError(err, this.#controller !== undefined);
    // seq > 0: HEADERS went out (the provider answered, then failed).
    this.#fail(code, upstreamErrorMessage(err, code, this.#seq > 0));
  }

  // --- internals --------------------------------------------------------------

  /** Microseconds since the upstream request started, at least 1 (0 tells the edge "not measured"). */
  #upstreamUs(): number {
    const at = this.#upstreamAt;
    return at === 0 ? 0 : Math.min(0xffffffff, Math.max(1, Math.round((performance.now() - at) * 1000)));
  }

  /** The client is done with the request (its last callback): the connection goes back to the pool, once. */
  #releaseClient(): void {
    const client = this.pooledClient;
    if (client === undefined) return;
    this.pooledClient = undefined;
    this.#pool?.done(client);
  }

  /**
   * How many held bytes the next frame takes, at most `limit`: all of them
   * when they fit; for an event stream cut for size, up to the last blank
   * line in its second half when there is one, so that the edge (which
   * writes whole events to its client) relays the frame as it is instead
   * of holding the cut event's start. Looks inside the chunk the limit
   * falls in only: never a scan of the whole hold.
   */
  #frameCut(limit: number): number {
    if (!this.#eventStream || limit >= this.#heldBytes) return limit;
    const held = this.#held;
    let start = 0;
    let i = 0;
    while (start + held[i].length < limit) start += held[i++].length;
    const chunk = held[i];
    const floor = Math.max(1, (limit >> 1) - start);
    for (let at = limit - start - 1; at >= floor; at--) {
      if (chunk[at] === 0x0a && chunk[at - 1] === 0x0a) return start + at + 1;
    }
    return limit;
  }

  /** Removes the first `bytes` held bytes (bytes ≤ heldBytes): a view when one chunk holds them, else one copy. */
  #takeHeld(bytes: number): Buffer {
    const held = this.#held;
    this.#heldBytes -= bytes;
    const first = held[0];
    if (first.length >= bytes) {
      if (first.length === bytes) held.shift();
      else held[0] = first.subarray(bytes);
      return first.length === bytes ? first : first.subarray(0, bytes);
    }
    const payload = Buffer.allocUnsafe(bytes);
    let at = 0;
    while (at < bytes) {
      const chunk = held[0];
      const take = Math.min(chunk.length, bytes - at);
      chunk.copy(payload, at, 0, take);
      at += take;
      if (take === chunk.length) held.shift();
      else held[0] = chunk.subarray(take);
    }
    return payload;
  }

  #sendHeldWithinCredit(): void {
    while (this.#heldBytes > 0 && this.#credit > 0 && !this.#done) {
      this.#sendData(this.#takeHeld(this.#frameCut(Math.min(this.#heldBytes, this.#credit, this.#maxData))));
    }
  }

  #sendData(payload: Buffer): void {
    this.#credit -= payload.length;
    this.#lastDataAt = performance.now();
    if (!this.#sink.send(dataFrame(this.tunnelId, this.#seq++, payload)) && !this.#pausedForSink) {
      this.#pausedForSink = true;
      this.#controller?.pause();
      this.#sink.resumeOnDrain(this);
    }
  }

  #pause(controller: Dispatcher.DispatchController): void {
    if (this.#pausedForSink) return;
    this.#pausedForSink = true;
    controller.pause();
    this.#sink.resumeOnDrain(this);
  }

  /** The window is spent: stop reading the provider's body so backpressure reaches its socket. */
  #pauseForCredit(): void {
    if (this.#pausedForCredit) return;
    this.#pausedForCredit = true;
    this.#controller?.pause();
  }

  #resumeUpstream(): void {
    if (!this.#done && !this.#pausedForCredit && !this.#pausedForSink) this.#controller?.resume();
  }

  #fail(code: TunnelErrorCode, message: string): void {
    // Bytes the provider sent before the failure are the client's: they go ahead of
    // the ERROR as far as credit allows (past it the client is behind; the error is due).
    this.#sendHeldWithinCredit();
    if (this.#done) return;
    const frame = errorFrame(this.tunnelId, this.#seq++, code, message);
    this.#finish(code, message);
    this.#sink.send(frame);
  }

  #finish(errorCode?: TunnelErrorCode, errorMessage?: string): void {
    this.#done = true;
    this.#held = [];
    this.#heldBytes = 0;
    if (this.#holdTimer !== undefined) {
      clearTimeout(this.#holdTimer);
      this.#holdTimer = undefined;
    }
    if (this.#deadline !== undefined) {
      clearTimeout(this.#deadline);
      this.#deadline = undefined;
    }
    this.#sink.tunnelFinished(this, errorCode, errorMessage);
  }

  /** Aborting destroys the upstream socket, so the provider sees the close and stops generating. */
  #abortUpstream(reason: Error): void {
    this.#abortReason = reason;
    this.#poolTicket?.cancel();
    this.#poolTicket = undefined;
    this.#controller?.abort(reason);
  }
}

function onHoldTimer(tunnel: TunnelExecutor): void {
  tunnel.flushHeld();
}

function onTunnelDeadline(tunnel: TunnelExecutor): void {
  tunnel.expire();
}
