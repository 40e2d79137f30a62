// Executes one TunnelRequest against its provider and relays the response as
// ordered frames: HEADERS, DATA per body chunk as it arrives, then END; or a
// single ERROR. It is the undici dispatch handler itself (the lowest-overhead
// API that streams: no Readable, no promise, no per-request closure), and
// nothing is sent for the tunnel after its END or ERROR or a cancel.
import type { Dispatcher } from 'undici';
import { Adapter, type NodeMessage, type TunnelRequest } from '../gen/edge/v1/tunnel_pb.js';
import { dataFrame, endFrame, errorFrame, headersFrame } from './frames.js';
import { classifyUpstreamError, TunnelDeadlineError, type TunnelErrorCode } from './tunnel-errors.js';
import { frameResponseHeaders, upstreamRequestHeaders, type ResponseHeaders } from './upstream-headers.js';
import type { Upstreams } from './upstreams.js';

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

export class TunnelExecutor implements Dispatcher.DispatchHandler {
  readonly tunnelId: number;
  readonly #request: TunnelRequest;
  readonly #sink: FrameSink;
  #seq = 0;
  /** Terminal: END/ERROR sent or cancelled. Every later upstream callback is ignored. */
  #done = false;
  /** undici's controller; undefined until the request is on a connected socket. */
  #controller: Dispatcher.DispatchController | undefined;
  #abortReason: Error | undefined;
  #deadline: NodeJS.Timeout | undefined;

  constructor(request: TunnelRequest, sink: FrameSink) {
    this.tunnelId = request.tunnelId;
    this.#request = request;
    this.#sink = sink;
  }

  get runId(): string {
    return this.#request.runId;
  }

  get providerId(): string {
    return this.#request.providerId;
  }

  /** Starts the upstream request; every outcome reaches the sink as frames. */
  start(upstreams: Upstreams): void {
    const request = this.#request;
    const upstream = upstreams.get(request.providerId);
    if (upstream === undefined) {
      this.#fail('unknown_provider', `provider ${JSON.stringify(request.providerId)} is not on this node`);
      return;
    }
    if (upstream.pool === undefined || request.adapter === Adapter.CLI) {
      this.#fail('adapter_not_supported', `provider ${JSON.stringify(upstream.id)} (${upstream.type}): this agent does not run the cli adapter yet`);
      return;
    }
    if (request.timeoutMs > 0) this.#deadline = setTimeout(onTunnelDeadline, request.timeoutMs, this);
    upstream.pool.dispatch(
      {
        method: request.method as Dispatcher.HttpMethod,
        path: upstream.pathPrefix + request.path,
        headers: upstreamRequestHeaders(request.headers, upstream.authorization),
        body: request.body.byteLength > 0 ? request.body : null,
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
    if (!this.#done) this.#controller?.resume();
  }

  /**
   * Flow-control hook for FlowCredit / initial_credit. Not enforced yet: the
   * window is unlimited and credit is ignored. When it is: DATA spends
   * credit, a tunnel at zero pauses its upstream, and credit resumes it.
   */
  addCredit(_bytes: number): void {}

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
    // Cancelled or expired while queued in the pool: never send it.
    if (this.#abortReason !== undefined) controller.abort(this.#abortReason);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: ResponseHeaders): void {
    // 1xx interim responses are hop-by-hop; only the final response is relayed.
    if (this.#done || statusCode < 200) return;
    const message = headersFrame(this.tunnelId, this.#seq++, statusCode, frameResponseHeaders(headers));
    if (!this.#sink.send(message)) this.#pause(controller);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#done) return;
    if (!this.#sink.send(dataFrame(this.tunnelId, this.#seq++, chunk))) this.#pause(controller);
  }

  onResponseEnd(): void {
    if (this.#done) return;
    const message = endFrame(this.tunnelId, this.#seq++);
    this.#finish();
    this.#sink.send(message);
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.#done) return;
    this.#fail(classifyUpstreamError(err, this.#controller !== undefined), err.message);
  }

  // --- internals --------------------------------------------------------------

  #pause(controller: Dispatcher.DispatchController): void {
    controller.pause();
    this.#sink.resumeOnDrain(this);
  }

  #fail(code: TunnelErrorCode, message: string): void {
    const frame = errorFrame(this.tunnelId, this.#seq++, code, message);
    this.#finish(code, message);
    this.#sink.send(frame);
  }

  #finish(errorCode?: TunnelErrorCode, errorMessage?: string): void {
    this.#done = true;
    if (this.#deadline !== undefined) {
      clearTimeout(this.#deadline);
      this.#deadline = undefined;
    }
    this.#sink.tunnelFinished(this, errorCode, errorMessage);
  }

  /** Aborting destroys the upstream socket, so the provider sees the close and stops generating. */
  #abortUpstream(reason: Error): void {
    this.#abortReason = reason;
    this.#controller?.abort(reason);
  }
}

function onTunnelDeadline(tunnel: TunnelExecutor): void {
  tunnel.expire();
}
