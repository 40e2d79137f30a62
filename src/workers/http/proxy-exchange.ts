// One client request on its way through the edge: admission, the tunnel to
// the chosen provider, and the relay of the provider's frames back to the
// client socket as they arrive. It is the tunnel's consumer; its lease is
// released exactly once (the scheduler enforces it; we call release on
// every terminal path and let the scheduler say which call counted).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Header } from '../../gen/edge/v1/tunnel_pb.js';
import { errorBody, Errors, specForNodeErrorCode, type GatewayErrorSpec } from '../../shared/errors.js';
import type { Grant, ReleaseReason } from '../../main/scheduler/types.js';
import type { NodeSession } from '../grpc/node-session.js';
import type { TunnelConsumer } from '../tunnel/tunnel-consumer.js';
import { isHopByHop } from '../tunnel/hop-by-hop.js';
import type { InspectOk } from './inspect.js';
import type { DataPlane } from '../data-plane.js';

export const kExchange = Symbol('edge.exchange');

type ExchangeState = 'admitting' | 'dispatched' | 'streaming' | 'done';

const SSE_ERROR_PREFIX = 'data: ';
const SSE_ERROR_SUFFIX = '\n\n';

export class ProxyExchange implements TunnelConsumer {
  state: ExchangeState = 'admitting';
  leaseId = 0;
  tunnelId = 0;
  session: NodeSession | undefined;
  grant: Grant | undefined;
  timeout: NodeJS.Timeout | undefined;
  private isEventStream = false;

  constructor(
    readonly plane: DataPlane,
    readonly requestId: number,
    readonly runId: string,
    readonly path: string,
    readonly request: IncomingMessage,
    readonly response: ServerResponse,
    readonly body: Buffer,
    readonly info: InspectOk,
  ) {}

  // --- tunnel frames -------------------------------------------------------

  onHeaders(status: number, headers: readonly Header[]): void {
    if (this.state !== 'dispatched') return;
    this.state = 'streaming';
    const grant = this.grant as Grant;
    const flat: string[] = [];
    for (let i = 0; i < headers.length; i++) {
      const name = headers[i].name.toLowerCase();
      if (isHopByHop(name)) continue;
      if (name === 'content-type' && headers[i].value.startsWith('text/event-stream')) this.isEventStream = true;
      flat.push(name, headers[i].value);
    }
    flat.push(
      'x-edge-run-id', this.runId,
      'x-edge-node', grant.nodeId,
      'x-edge-provider', grant.providerId,
      'x-edge-queue-ms', String(Math.round(grant.queuedMs)),
    );
    this.response.writeHead(status, flat);
  }

  onData(bytes: Uint8Array): void {
    if (this.state !== 'streaming') return;
    this.response.write(bytes);
  }

  onEnd(): void {
    if (this.state === 'done') return;
    if (this.state === 'dispatched') {
      // END without HEADERS: the node broke the frame contract.
      this.fail(Errors.protocolError, 'tunnel ended before response headers', 'error');
      return;
    }
    this.finish('end');
    this.response.end();
  }

  onError(code: string, message: string): void {
    if (this.state === 'done' || this.state === 'admitting') return;
    this.fail(specForNodeErrorCode(code), message || undefined, code === 'node_disconnected' ? 'fenced' : 'error');
  }

  // --- edge-side events ----------------------------------------------------

  /** The client went away before we finished: free everything at once. */
  onClientClosed(): void {
    switch (this.state) {
      case 'admitting':
        this.state = 'done';
        this.plane.cancelAdmission(this);
        return;
      case 'dispatched':
      case 'streaming':
        this.session?.cancelTunnel(this.tunnelId, 'client closed');
        this.finish('client_closed');
        return;
      default:
    }
  }

  onTimeout(): void {
    this.timeout = undefined;
    if (this.state !== 'dispatched' && this.state !== 'streaming') return;
    this.session?.cancelTunnel(this.tunnelId, 'timeout');
    this.fail(Errors.gatewayTimeout, undefined, 'timeout');
  }

  /** Admission refused or a failure before any tunnel was opened. */
  reject(spec: GatewayErrorSpec, retryAfterSec: number, message?: string): void {
    if (this.state === 'done') return;
    this.state = 'done';
    this.plane.forget(this);
    this.writeError(spec, message, retryAfterSec);
  }

  /** Ends with an error at whatever point the exchange is, releasing the lease. */
  fail(spec: GatewayErrorSpec, message: string | undefined, reason: ReleaseReason): void {
    const wasStreaming = this.state === 'streaming';
    this.finish(reason);
    if (!wasStreaming) {
      this.writeError(spec, message, 0);
    } else if (this.isEventStream) {
      // Mid-stream: headers are gone, so tell SSE clients in-band (the
      // OpenAI SDK raises on an `error` event payload), then end cleanly.
      this.response.end(SSE_ERROR_PREFIX + errorBody(spec, message) + SSE_ERROR_SUFFIX);
    } else {
      // A truncated JSON body must not look complete: cut the connection.
      this.response.destroy();
    }
  }

  private finish(reason: ReleaseReason): void {
    if (this.state === 'done') return;
    const hadLease = this.state === 'dispatched' || this.state === 'streaming';
    this.state = 'done';
    if (this.timeout) clearTimeout(this.timeout);
    this.timeout = undefined;
    this.plane.forget(this);
    if (hadLease) this.plane.releaseLease(this.leaseId, reason);
  }

  private writeError(spec: GatewayErrorSpec, message: string | undefined, retryAfterSec: number): void {
    const res = this.response;
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-edge-run-id': this.runId };
    if (retryAfterSec > 0) headers['retry-after'] = String(retryAfterSec);
    if (this.grant) {
      headers['x-edge-node'] = this.grant.nodeId;
      headers['x-edge-provider'] = this.grant.providerId;
      headers['x-edge-queue-ms'] = String(Math.round(this.grant.queuedMs));
    }
    res.writeHead(spec.status, headers);
    res.end(errorBody(spec, message));
  }
}

/** 'close' listener on the ServerResponse (`this`); shared, not allocated per request. */
export function onResponseClose(this: ServerResponse & { [kExchange]?: ProxyExchange }): void {
  const exchange = this[kExchange];
  if (exchange && !this.writableFinished) exchange.onClientClosed();
}

export function onExchangeTimeout(exchange: ProxyExchange): void {
  exchange.onTimeout();
}
