// The data path's side of the scheduler hand-off: it turns admissions into
// scheduler calls and the scheduler's decisions (grant / reject) into
// tunnels or error replies. With workers.count 0 it runs on the main thread
// and calls the SchedulerDriver directly.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { EdgeConfig } from '../shared/config-types.js';
import { Errors, type GatewayErrorSpec } from '../shared/errors.js';
import type { DecisionHandler, SchedulerDriver } from '../main/scheduler-driver.js';
import { estimateInputTokens } from '../main/scheduler/estimate.js';
import type { Grant, RejectCode, ReleaseReason } from '../main/scheduler/types.js';
import type { NodeGateway } from './grpc/node-gateway.js';
import { kExchange, onExchangeTimeout, onResponseClose, ProxyExchange } from './http/proxy-exchange.js';
import type { InspectOk } from './http/inspect.js';
import { rewriteModel } from './http/inspect.js';
import { isForwardedUpstream } from './tunnel/hop-by-hop.js';

const REJECT_SPECS: Record<RejectCode, GatewayErrorSpec> = {
  model_not_found: Errors.modelNotFound,
  node_not_found: Errors.nodeNotFound,
  queue_full: Errors.queueFull,
  queue_timeout: Errors.queueTimeout,
  no_provider_available: Errors.noProviderAvailable,
};

export class DataPlane implements DecisionHandler {
  private readonly pending = new Map<number, ProxyExchange>();
  private nextRequestId = 1;
  private readonly runIdPrefix = `run-${Date.now().toString(36)}-`;
  private config: EdgeConfig;
  private aliases: ReadonlySet<string>;

  constructor(
    config: EdgeConfig,
    private readonly driver: SchedulerDriver,
    private readonly nodes: NodeGateway,
    readonly logger: Logger,
  ) {
    this.config = config;
    this.aliases = new Set(config.models.map((m) => m.alias));
    driver.setHandler(this);
  }

  setConfig(config: EdgeConfig): void {
    this.config = config;
    this.aliases = new Set(config.models.map((m) => m.alias));
  }

  get openExchanges(): number {
    return this.pending.size;
  }

  hasModel(alias: string): boolean {
    return this.aliases.has(alias);
  }

  /** Starts a proxied request whose body already passed inspection. */
  begin(path: string, request: IncomingMessage, response: ServerResponse, body: Buffer, info: InspectOk): void {
    const requestId = this.nextRequestId++;
    const exchange = new ProxyExchange(this, requestId, this.runIdPrefix + requestId.toString(36), path, request, response, body, info);
    (response as ServerResponse & { [kExchange]?: ProxyExchange })[kExchange] = exchange;
    response.on('close', onResponseClose);
    this.pending.set(requestId, exchange);
    const direct = request.headers['x-edge-node'];
    this.driver.admit({
      requestId,
      alias: info.model,
      estimatedTokens: estimateInputTokens(body.length),
      directNodeId: typeof direct === 'string' && direct.length > 0 ? direct : undefined,
    });
  }

  // --- DecisionHandler -------------------------------------------------------

  onGrant(grant: Grant): void {
    const exchange = this.pending.get(grant.requestId);
    if (!exchange || exchange.state !== 'admitting') {
      // The client left between the decision and its delivery.
      this.driver.release(grant.leaseId, 'client_closed');
      return;
    }
    // Pre-send fence: the lease must belong to the node's current connection.
    if (!this.driver.confirm(grant.leaseId)) return; // re-admitted; its next decision follows
    const session = this.nodes.session(grant.nodeId);
    if (!session || session.generation !== grant.generation) {
      this.driver.release(grant.leaseId, 'send_failed');
      exchange.reject(Errors.nodeDisconnected, 0);
      return;
    }
    exchange.grant = grant;
    exchange.leaseId = grant.leaseId;
    exchange.session = session;
    exchange.state = 'dispatched';
    let body: Uint8Array;
    try {
      body = rewriteModel(exchange.body, exchange.info, grant.servedModel);
    } catch (err) {
      exchange.fail(Errors.internal, `could not build the provider request: ${(err as Error).message}`, 'body_build_failed');
      return;
    }
    try {
      exchange.tunnelId = session.openTunnel(exchange, {
        runId: exchange.runId,
        providerId: grant.providerId,
        target: grant.servedModel,
        method: exchange.request.method ?? 'POST',
        path: exchange.path,
        headers: forwardedHeaders(exchange.request.rawHeaders),
        body,
        stream: exchange.info.stream,
        timeoutMs: this.config.limits.tunnelTimeoutMs,
      });
    } catch (err) {
      exchange.fail(Errors.nodeDisconnected, `could not send to node ${grant.nodeId}: ${(err as Error).message}`, 'send_failed');
      return;
    }
    exchange.timeout = setTimeout(onExchangeTimeout, this.config.limits.tunnelTimeoutMs, exchange);
  }

  onReject(requestId: number, code: RejectCode, retryAfterSec: number): void {
    const exchange = this.pending.get(requestId);
    if (!exchange) return;
    exchange.reject(REJECT_SPECS[code], retryAfterSec, rejectMessage(code, exchange.info.model));
  }

  // --- called by exchanges ---------------------------------------------------

  cancelAdmission(exchange: ProxyExchange): void {
    this.pending.delete(exchange.requestId);
    this.driver.cancel(exchange.requestId);
  }

  releaseLease(leaseId: number, reason: ReleaseReason): void {
    this.driver.release(leaseId, reason);
  }

  forget(exchange: ProxyExchange): void {
    this.pending.delete(exchange.requestId);
  }
}

function rejectMessage(code: RejectCode, alias: string): string {
  const name = JSON.stringify(alias);
  switch (code) {
    case 'model_not_found': return `The model ${name} does not exist`;
    case 'node_not_found': return `the node named in x-edge-node serves no provider for model ${name}`;
    case 'queue_full': return `too many requests are waiting for model ${name}; retry later`;
    case 'queue_timeout': return `no provider slot for model ${name} became free in time; retry later`;
    case 'no_provider_available': return `no provider for model ${name} is connected; retry later`;
  }
}

/** Client headers to pass to the provider: end-to-end ones only, never credentials. */
function forwardedHeaders(raw: readonly string[]): { name: string; value: string }[] {
  const out: { name: string; value: string }[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (isForwardedUpstream(name)) out.push({ name, value: raw[i + 1] });
  }
  return out;
}
