// The data path's side of the scheduler hand-off: it turns admissions into
// scheduler calls and the scheduler's decisions (grant / reject) into
// tunnels or error replies. With workers.count 0 it runs on the main thread
// and its SchedulerPort is the SchedulerDriver (direct calls); in an I/O
// worker the port is a RemoteScheduler (records over SAB rings) and a grant
// may name a node whose session lives in another worker (PeerLinks).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { DEFAULT_MAX_OVERLOAD_REQUEUES, type EdgeConfig } from '../shared/config-types.js';
import { Errors, specForNodeErrorCode, type GatewayErrorSpec } from '../shared/errors.js';
import { ID_STRIDE, isKeyRefusal, type AdmissionRejectCode, type DecisionHandler, type KeyRefusalCode, type SchedulerPort } from '../contract/scheduler-port.js';
import { estimateInputTokens } from '../contract/estimate.js';
import type { Grant, KeyLevels, RejectCode, ReleaseReason } from '../contract/scheduler.js';
import type { NodeGateway } from './grpc/node-gateway.js';
import { isProviderFailure, kExchange, nodeErrorReason, onResponseClose, ProxyExchange, type DispatchWatcher, type ExchangeOwner } from './http/proxy-exchange.js';
import { ExchangeDeadlines, type DeadlineLimits } from './http/exchange-deadlines.js';
import { limitsOf } from '../shared/config-hardening.js';
import type { AdmitRequest } from '../contract/scheduler.js';
import { DRAIN_FLAG, GRACE_OVER, type PlaneInspection, type StoredResponse } from '../contract/io-protocol.js';
import type { InspectOk } from './http/inspect.js';
import { COUNT_TOKENS, RESPONSES_INPUT_TOKENS, type ApiRoute } from './http/api-routes.js';
import { storedResponseIdOf } from './http/response-affinity.js';
import { isResponseId, StoredResponses } from '../contract/stored-responses.js';
import { rewriteModel } from './http/inspect.js';
import { connectionNominated, isForwardedUpstream } from './tunnel/hop-by-hop.js';
import type { ApiKeyState } from './http/client-auth.js';
import { retryAfterSecOf } from '../shared/request-rate.js';
import { localKeyLevels } from './http/rate-limit-headers.js';
import { NO_OBSERVER, type ExchangeObserver } from './observe/exchange-observer.js';
import type { TunnelHost } from './tunnel/tunnel-host.js';
import { Adapter } from '../gen/edge/v1/tunnel_pb.js';
import type { ProviderType } from '../shared/config-types.js';
import { DEFAULT_SESSION, ownHeaderValue, sessionIdOf, sessionKeyOf } from './http/session-id.js';
import { requestFairnessOf } from './http/fairness-headers.js';
import { QUEUE_UPDATE_INTERVAL_MS, wantsQueueUpdates } from './http/queue-updates.js';

/** Tunnels to nodes whose session lives in another worker. */
export interface PeerRouter {
  /** A handle on node `nodeId` (generation) held by worker `worker`. */
  nodeHost(worker: number, nodeId: string, generation: number, leaseId: number): TunnelHost;
}

/** Where this data plane sits: its worker index (request ids carry it), its peers and the shared flags. */
export interface PlanePlacement {
  /** -1 = the main thread (workers.count 0). */
  readonly workerIndex: number;
  readonly peers: PeerRouter | undefined;
  /** The flags shared with the scheduler thread (io-protocol's DRAIN_FLAG); absent in tests that build a plane alone. */
  readonly flags?: Int32Array;
}

/** What a requeue's retry says: why, and where it failed (taken before the exchange moves on). */
function retryOf(reason: string, providerId: string, exchange: ProxyExchange): RequeueFallback['retry'] {
  return { reason, providerId, nodeId: exchange.grant?.nodeId ?? null };
}

/** What to do when a requeue is refused: fail with the tunnel's error, or 503 node_overloaded. */
interface RequeueFallback {
  readonly code: string;
  readonly message: string;
  /** undefined: the request never reached a node (STALE). */
  readonly grant: Grant | undefined;
  readonly session: TunnelHost | undefined;
  readonly tunnelId: number;
  /** The exchange's retryWaitMs before the failed attempt was added to it: restored when no retry followed. */
  readonly retryWaitMs?: number;
  /** The retry as the metrics and the run record tell it, once the scheduler took the requeue (a refused one was no retry). */
  readonly retry: { readonly reason: string; readonly providerId: string; readonly nodeId: string | null };
  /** Told already (confirmRetry). */
  told: boolean;
}
const OVERLOADED = 'node_overloaded';
/** The provider answered 429/503: the request went back to the queue at its place. */
const PROVIDER_OVERLOADED = 'provider_overloaded';
/** The grant named a stream that was gone; retried once anywhere. */
const STALE = 'stale_stream';

const REJECT_SPECS: Record<RejectCode, GatewayErrorSpec> = {
  model_not_found: Errors.modelNotFound,
  node_not_found: Errors.nodeNotFound,
  queue_full: Errors.queueFull,
  queue_timeout: Errors.queueTimeout,
  no_provider_available: Errors.noProviderAvailable,
  api_not_served: Errors.apiNotServed,
  pinned_provider_gone: Errors.responseProviderGone,
  shed: Errors.shed,
  displaced: Errors.displaced,
  context_length_exceeded: Errors.contextLengthExceeded,
};

/** The node refused the tunnel as it leaves: its retry waits like an arrival (see retryBeforeFirstByte). */
const NODE_LEAVING = 'node_leaving';
/** The node's stream closed under the tunnel: its retry waits like an arrival too. */
const NODE_DISCONNECTED = 'node_disconnected';

/**
 * ERROR codes that arrive before any response byte and mean "this provider
 * or node could not take it": the request is retried once elsewhere. An
 * upstream timeout or a provider's own error status is not retried.
 */
const RETRY_BEFORE_FIRST_BYTE: ReadonlySet<string> = new Set([
  'upstream_connect_failed',
  'upstream_reset',
  'node_disconnected',
  'node_leaving',
  // The node does not (or no longer) serve that provider: another may.
  'unknown_provider',
  'adapter_not_supported',
]);

/**
 * Of those, the ones that say a cli command never started. A cli run's other
 * failures may come after its command ran (a node that dropped mid-run
 * killed it): its side effects happened, so it is not run again.
 */
const CLI_RETRY_BEFORE_FIRST_BYTE: ReadonlySet<string> = new Set(['node_leaving', 'unknown_provider', 'adapter_not_supported']);

/** How much later than the edge's tunnel deadline the node gives up on its own. */
const NODE_DEADLINE_SLACK_MS = 1_000;

export class DataPlane implements DecisionHandler, ExchangeOwner {
  readonly #pending = new Map<number, ProxyExchange>();
  /** requestId -> the API key whose concurrency slot the request holds (auth on only). */
  readonly #keyOf = new Map<number, ApiKeyState>();
  /**
   * The port counts each key's open requests across workers (I/O workers:
   * every key, limited or not, so that a limit a refresh adds counts the open
   * ones). False: ClientServer took the slot on this key's own ClientAuth.
   */
  readonly sharedKeyLimits: boolean;
  /** requestId -> what to do if its requeue is refused. */
  readonly #fallbacks = new Map<number, RequeueFallback>();
  #nextSeq = 1;
  readonly #idBase: number;
  readonly #idStride: number;
  readonly #workerIndex: number;
  readonly #peers: PeerRouter | undefined;
  readonly #runIdPrefix = `run-${Date.now().toString(36)}-`;
  #config: EdgeConfig;
  /** The configured node ids (x-edge-node must name one). */
  #nodeIds: ReadonlySet<string>;
  #aliases: ReadonlySet<string>;
  /** Providers serving an alias with max_queue 0: their lease releases are published at once (see releaseLease). */
  #publishNow: ReadonlySet<string>;
  /** provider id -> the adapter its node runs it with (TunnelRequest.adapter). */
  #adapters: ReadonlyMap<string, Adapter>;
  #deadlineLimits: DeadlineLimits;
  #maxTunnelsPerNode: number;
  #tunnelLimitLoggedAt = -Infinity;
  #tunnelLimitRefusals = 0;
  #observer: ExchangeObserver = NO_OBSERVER;
  /** Set when this thread drains (beginShutdown). */
  #shuttingDown = false;
  readonly #flags: Int32Array | undefined;
  /** abortAll ran: this thread's drain grace is over (the flag says so too, where there is one). */
  #aborting = false;
  /** Queued requests onGrant ended because the grace was over (before this thread's own abortAll): the drain's `aborted` counts them. */
  #endedByGrace = 0;
  /** Requests that reached the data plane (inspection: which worker served what). */
  begunTotal = 0;

  readonly #driver: SchedulerPort;
  readonly #nodes: NodeGateway;

  constructor(
    config: EdgeConfig,
    driver: SchedulerPort,
    nodes: NodeGateway,
    readonly logger: Logger,
    placement: PlanePlacement = { workerIndex: -1, peers: undefined },
  ) {
    this.#driver = driver;
    this.#nodes = nodes;
    this.#flags = placement.flags;
    this.#config = config;
    this.#aliases = new Set(config.models.map((m) => m.alias));
    this.#nodeIds = new Set(config.nodes.map((n) => n.id));
    this.#publishNow = noQueueProviders(config);
    this.#adapters = adaptersOf(config);
    ({ deadlineLimits: this.#deadlineLimits, maxTunnelsPerNode: this.#maxTunnelsPerNode } = hardeningOf(config));
    this.responses = new StoredResponses(config.limits.storedResponses);
    this.#workerIndex = placement.workerIndex;
    this.#peers = placement.peers;
    this.#idBase = placement.workerIndex < 0 ? 0 : placement.workerIndex;
    this.#idStride = placement.workerIndex < 0 ? 1 : ID_STRIDE;
    this.sharedKeyLimits = driver.countsKeys;
    driver.setHandler(this);
  }

  setConfig(config: EdgeConfig): void {
    this.#config = config;
    this.#aliases = new Set(config.models.map((m) => m.alias));
    this.#nodeIds = new Set(config.nodes.map((n) => n.id));
    this.#publishNow = noQueueProviders(config);
    this.#adapters = adaptersOf(config);
    ({ deadlineLimits: this.#deadlineLimits, maxTunnelsPerNode: this.#maxTunnelsPerNode } = hardeningOf(config));
  }

  /** This data path's worker index (-1: the main thread); A2A task ids carry it. */
  get workerIndex(): number {
    return this.#workerIndex;
  }

  /** limits.max_tunnels_per_node of the live config (0 = none); PeerLinks fence with it too. */
  get tunnelLimit(): number {
    return this.#maxTunnelsPerNode;
  }

  get openExchanges(): number {
    return this.#pending.size;
  }

  get endedByGrace(): number {
    return this.#endedByGrace;
  }

  /** Per open tunnel: bytes buffered in the edge for the client vs its window, and their high-water marks (status, tests). */
  tunnelBuffers(): PlaneInspection['tunnelBuffers'] {
    const out: PlaneInspection['tunnelBuffers'] = [];
    for (const exchange of this.#pending.values()) {
      const w = exchange.window;
      if (w) out.push({ runId: exchange.runId, buffered: w.buffered, outstanding: w.outstanding, window: w.size, highWaterBuffered: w.highWaterBuffered, highWaterOutstanding: w.highWaterOutstanding });
    }
    return out;
  }

  hasModel(alias: string): boolean {
    return this.#aliases.has(alias);
  }

  /** Which provider made each stored Response (Responses API state lives there); sized at start (limits.stored_responses). */
  readonly responses: StoredResponses;
  /** With I/O workers: tells the other workers what this one learnt, or used (`expiresAt` set) (set by the worker). */
  onAffinity: ((responseId: string, stored: StoredResponse | null, expiresAt?: number) => void) | undefined;

  /**
   * Where a stored response lives, for a request that names it. The use makes it the most recently
   * used in every worker, not only here: each worker's LRU would otherwise push out first a response
   * used only on other workers' connections, and a follow-up landing there be refused.
   */
  useResponse(responseId: string): StoredResponse | undefined {
    const entry = this.responses.lookup(responseId);
    if (entry !== undefined) this.onAffinity?.(responseId, entry, entry.expiresAt);
    return entry;
  }

  /** With I/O workers: asks the pool's copy where a response this worker has not heard of is stored; it lands here by applyAffinity first (set by the worker). */
  askPool: ((responseId: string) => Promise<void>) | undefined;

  /**
   * For a request about to be refused for want of a response useResponse does not know: with I/O
   * workers, the worker that relayed it tells the others through the pool, and a client that read it
   * and sent its follow-up at once, on a connection another worker owns, can be here before that
   * message is. The pool read it before the client had a byte of the response, so it is asked.
   * Undefined when there is no pool to ask (the caller refuses in this turn).
   */
  askForResponse(responseId: string): Promise<StoredResponse | undefined> | undefined {
    const ask = this.askPool;
    if (ask === undefined || !isResponseId(responseId)) return undefined;
    return ask(responseId).then(
      () => this.useResponse(responseId),
      () => undefined,
    );
  }

  /**
   * Starts a proxied request whose body already passed inspection. `path`
   * is what the provider is asked for (the route's, or /v1/responses/{id});
   * `pinnedProviderId`: only that provider may serve it; `watcher`: told
   * when a provider takes it (the A2A surface's tasks).
   */
  begin(
    route: ApiRoute,
    path: string,
    request: IncomingMessage,
    response: ServerResponse,
    body: Buffer,
    info: InspectOk,
    apiKey?: ApiKeyState,
    pinnedProviderId?: string,
    watcher?: DispatchWatcher,
  ): void {
    const requestId = this.#nextSeq++ * this.#idStride + this.#idBase;
    this.begunTotal++;
    let limitedKey: ApiKeyState | undefined;
    let refusedKey: ApiKeyState | undefined;
    if (apiKey !== undefined) {
      if (!this.sharedKeyLimits) {
        // The key's slot is taken here, so that a refusal is a run and counted like any other (with
        // workers the main thread takes it at admission and the refusal comes back through onReject).
        if (apiKey.tryAcquire()) this.#keyOf.set(requestId, apiKey);
        else refusedKey = apiKey;
      } else {
        // Shared limits: main counts every key's open requests (and refuses above a max_concurrent), so that a
        // limit a refresh adds counts the requests already open, as ClientAuth's local count does at workers.count 0.
        limitedKey = apiKey;
        this.#keyOf.set(requestId, apiKey);
        // Counted here too (never refused on): ClientAuth keeps a revoked key's object while it has requests
        // open, so a key given back by a later refresh is this object, updated, and #releaseKey sees its new limit.
        apiKey.inFlight++;
      }
    }
    const exchange = new ProxyExchange(this, requestId, this.#runIdPrefix + requestId.toString(36), path, request, response, body, info, route, pinnedProviderId);
    exchange.dispatchWatcher = watcher;
    this.#stampStart(exchange);
    (response as ServerResponse & { [kExchange]?: ProxyExchange })[kExchange] = exchange;
    response.on('close', onResponseClose);
    this.#pending.set(requestId, exchange);
    const sessionId = sessionIdOf(request, body, info.fields);
    exchange.sessionId = sessionId ?? '';
    if (apiKey !== undefined) {
      exchange.nodeSession = apiKey.sessionScope + (sessionId || DEFAULT_SESSION);
      exchange.keyName = apiKey.name;
      if (apiKey.requestsPerMinute !== 0 || apiKey.tokensPerMinute !== 0) exchange.limitedKey = apiKey;
    }
    exchange.fairness = requestFairnessOf(request.headers, apiKey);
    if (this.#observer !== NO_OBSERVER) this.#observeQueued(exchange);
    if (sessionId === undefined) {
      exchange.reject(Errors.invalidSession, 0);
      return;
    }
    if (refusedKey !== undefined) {
      if (exchange.limitedKey !== undefined) exchange.keyLevels = localKeyLevels(refusedKey, performance.now());
      exchange.reject(Errors.tooManyConcurrent, 1, keyLimitMessage(refusedKey));
      return;
    }
    // A node the config does not name is refused here: the scheduler would refuse it too, but with
    // I/O workers every name sent there is interned for good on both threads, and the client picks it.
    const direct = request.headers['x-edge-node'];
    if (typeof direct === 'string' && direct.length > 0 && !this.#nodeIds.has(direct)) {
      exchange.reject(Errors.nodeNotFound, 0, `no node ${JSON.stringify(direct.length > 128 ? `${direct.slice(0, 128)}…` : direct)} in the config`);
      return;
    }
    // The key's rates are taken last, with its slot, where main takes them with I/O workers: a request this
    // worker refused (concurrency, session, node) spends none of the minute. The slot goes back with the refusal.
    if (apiKey !== undefined && !this.sharedKeyLimits && (apiKey.requestsPerMinute !== 0 || apiKey.tokensPerMinute !== 0) && overKeyRates(exchange, apiKey)) return;
    this.#driver.admit(admitRequestOf(exchange), limitedKey);
    this.#startQueueUpdates(exchange);
  }

  /**
   * x-edge-queue-updates: asks where it waits now (answered right after its admission) and every second after.
   * Also after a requeue (a provider's 429/503, a failure before the first byte): it waits in its queue again.
   */
  #startQueueUpdates(exchange: ProxyExchange): void {
    const driver = this.#driver;
    if (driver.queryQueuePosition === undefined || exchange.state !== 'admitting' || exchange.queueUpdates !== undefined) return;
    if (!wantsQueueUpdates(exchange.request, exchange.info.stream && exchange.route.streams === true)) return;
    driver.queryQueuePosition(exchange.requestId);
    exchange.queueUpdates = setInterval(askQueuePosition, QUEUE_UPDATE_INTERVAL_MS, driver, exchange);
  }

  onQueuePosition(requestId: number, position: number, etaMs: number | undefined): void {
    const exchange = this.#pending.get(requestId);
    // 0: granted or refused in between; that decision speaks for itself.
    if (exchange === undefined || exchange.state !== 'admitting' || position === 0) return;
    exchange.sendQueuePosition(position, etaMs);
  }

  // --- DecisionHandler -------------------------------------------------------

  onGrant(grant: Grant, nodeWorker: number): void {
    const exchange = this.#pending.get(grant.requestId);
    if (!exchange || exchange.state !== 'admitting') {
      // The client left between the decision and its delivery.
      this.#driver.release(grant.leaseId, 'client_closed');
      return;
    }
    if (this.#graceOver) {
      // The edge's drain grace ran out: this request ends as abortAll ends a queued one, without reaching the node.
      this.#driver.release(grant.leaseId, 'shutting_down');
      this.#endedByGrace++;
      exchange.reject(Errors.shuttingDown, 1, 'the edge is shutting down; retry on another instance');
      return;
    }
    if (exchange.queueUpdates !== undefined) {
      clearInterval(exchange.queueUpdates);
      exchange.queueUpdates = undefined;
      exchange.sendQueueDone(grant.queuedMs + exchange.retryWaitMs);
    }
    if (this.#fallbacks.size > 0) this.#confirmRetry(exchange);
    // What its key has left as it is granted, for its x-ratelimit-* headers: main measured it with I/O workers.
    if (exchange.limitedKey !== undefined) exchange.keyLevels = this.sharedKeyLimits ? grant.keyLevels : localKeyLevels(exchange.limitedKey, performance.now());
    let session: TunnelHost;
    if (nodeWorker < 0 || nodeWorker === this.#workerIndex || this.#peers === undefined) {
      // Pre-send fence where the session lives: the lease must belong to the node's current connection.
      const local = this.#nodes.session(grant.nodeId);
      if (!local || local.generation !== grant.generation) {
        this.#driver.reportStale(grant.requestId, grant.leaseId); // re-admitted, or failed: onStaleChecked
        return;
      }
      if (!this.#driver.confirmSent(grant.leaseId)) return; // re-admitted; its next decision follows
      if (this.#maxTunnelsPerNode > 0 && local.openTunnels >= this.#maxTunnelsPerNode) {
        this.#refuseOverloaded(exchange, grant, local.openTunnels);
        return;
      }
      session = local;
    } else {
      // The node's worker fences (generation, tunnel limit) and answers with frames or a refusal.
      session = this.#peers.nodeHost(nodeWorker, grant.nodeId, grant.generation, grant.leaseId);
    }
    exchange.grant = grant;
    exchange.leaseId = grant.leaseId;
    exchange.session = session;
    exchange.state = 'dispatched';
    exchange.attempts++;
    const adapter = this.#adapters.get(grant.providerId) ?? Adapter.UNSPECIFIED;
    exchange.adapter = adapter === Adapter.CLI ? 'cli' : 'http';
    exchange.useWindow(this.#config.limits.tunnelWindowBytes);
    let body: Uint8Array;
    try {
      // A body-less request (GET / DELETE of a stored response) has no `model` to rewrite.
      body = exchange.info.modelStart < 0 ? exchange.body : rewriteModel(exchange.body, exchange.info, grant.servedModel);
    } catch (err) {
      exchange.fail(Errors.internal, `could not build the provider request: ${(err as Error).message}`, 'body_build_failed');
      return;
    }
    try {
      exchange.tunnelId = session.openTunnel(exchange, {
        runId: exchange.runId,
        providerId: grant.providerId,
        adapter,
        sessionId: exchange.nodeSession !== '' ? exchange.nodeSession : exchange.sessionId === '' ? DEFAULT_SESSION : exchange.sessionId,
        target: grant.servedModel,
        method: exchange.request.method ?? 'POST',
        path: exchange.path,
        headers: forwardedHeaders(exchange.request.rawHeaders),
        body,
        stream: exchange.info.stream,
        // The edge's own deadline decides; the node's is a backstop for an edge that vanished.
        timeoutMs: this.#config.limits.tunnelTimeoutMs + NODE_DEADLINE_SLACK_MS,
        // So are these: without them the agent's HTTP client would apply defaults of its own (undici's 300 s).
        ttfbTimeoutMs: withSlack(this.#deadlineLimits.ttfbTimeoutMs),
        idleTimeoutMs: withSlack(this.#deadlineLimits.idleTimeoutMs),
        initialCredit: this.#config.limits.tunnelWindowBytes,
        metadata: { request_id: exchange.requestTag },
      });
      exchange.sentAt = performance.now();
      exchange.lastSentBytes = body.byteLength;
      exchange.bytesToNode += body.byteLength;
    } catch (err) {
      exchange.fail(Errors.nodeDisconnected, `could not send to node ${grant.nodeId}: ${(err as Error).message}`, 'send_failed');
      return;
    }
    // Total deadline from the first dispatch; time to first byte per attempt.
    if (exchange.deadlines === undefined) exchange.deadlines = new ExchangeDeadlines(this.#deadlineLimits, undefined, exchange.info.stream && exchange.route.streams === true);
    else exchange.deadlines.redispatched();
    exchange.deadlines.arm(exchange, false);
    if (this.#observer !== NO_OBSERVER) this.#observe(exchange, undefined);
    exchange.dispatchWatcher?.dispatched();
  }

  onReject(requestId: number, code: AdmissionRejectCode, retryAfterSec: number, retryAfterMs?: number, keyLevels?: KeyLevels): void {
    const exchange = this.#pending.get(requestId);
    if (!exchange) {
      this.#fallbacks.delete(requestId);
      return;
    }
    // Rejected from the queue a requeue put it back in: that requeue happened.
    if (this.#fallbacks.size > 0) {
      this.#confirmRetry(exchange);
      this.#fallbacks.delete(requestId);
    }
    if (isKeyRefusal(code)) {
      this.#keyLimited(exchange, code, retryAfterSec, keyLevels);
      return;
    }
    // context_length_exceeded names the field that holds the route's prompt (the catalogue's is chat's `messages`).
    const param = code === 'context_length_exceeded' ? exchange.route.promptParam : undefined;
    const spec = param === undefined ? REJECT_SPECS[code] : { ...REJECT_SPECS[code], param };
    exchange.reject(spec, retryAfterSec, rejectMessage(code, exchange.info.model, exchange, this.#config.scheduler.longContextThresholdTokens), retryAfterMs);
  }

  onStaleChecked(requestId: number, leaseId: number, current: boolean): void {
    if (!current) return; // re-admitted: its next decision follows
    // The scheduler still holds the lease, but no stream of that connection was
    // where the grant pointed: the stream (a lane of it, or the whole connection)
    // closed and the scheduler has not heard yet. Once more, anywhere; then fail.
    const exchange = this.#pending.get(requestId);
    if (exchange !== undefined && exchange.state === 'admitting' && !exchange.retried) {
      exchange.retried = true;
      this.#fallbacks.set(requestId, { code: STALE, message: '', grant: undefined, session: undefined, tunnelId: 0, retry: retryOf(STALE, '', exchange), told: false });
      exchange.retriedAt(performance.now());
      this.#driver.requeue(leaseId, admitRequestOf(exchange), '');
      return;
    }
    this.#releaseAndPublish(leaseId);
    if (exchange !== undefined && exchange.state === 'admitting') exchange.reject(Errors.nodeDisconnected, 0);
  }

  onRequeueAccepted(requestId: number): void {
    if (this.#fallbacks.size === 0) return;
    const exchange = this.#pending.get(requestId);
    if (exchange !== undefined) this.#confirmRetry(exchange);
  }

  onRequeueRefused(requestId: number): void {
    const fallback = this.#fallbacks.get(requestId);
    this.#fallbacks.delete(requestId);
    const exchange = this.#pending.get(requestId);
    if (exchange === undefined || exchange.state !== 'admitting') return;
    if (fallback === undefined) {
      // Every requeue leaves a fallback first; should one be missing, the client still gets an answer.
      exchange.reject(Errors.noProviderAvailable, 1);
      return;
    }
    if (fallback.code === OVERLOADED) {
      exchange.reject(Errors.nodeOverloaded, 1);
      return;
    }
    if (fallback.code === PROVIDER_OVERLOADED) {
      exchange.reject(Errors.providerOverloaded, 1);
      return;
    }
    if (fallback.grant === undefined) {
      // STALE: it never reached a node.
      exchange.reject(Errors.nodeDisconnected, 0);
      return;
    }
    // No other candidate, so no retry: the attempt was its provider's time, not a wait for one (counted, the restored
    // grant's wait would count twice and the queue wait exceed the run's total).
    exchange.retryWaitMs = fallback.retryWaitMs ?? exchange.retryWaitMs;
    // No other candidate: back as it was, failed with the tunnel's own error (its lease is already released).
    exchange.state = 'dispatched';
    exchange.grant = fallback.grant;
    exchange.session = fallback.session;
    exchange.tunnelId = fallback.tunnelId;
    // The same outcome as a failure with no retry asked for (onError): an upstream reset is the provider's failure either way.
    exchange.fail(specForNodeErrorCode(fallback.code), fallback.message || undefined, nodeErrorReason(fallback.code, exchange.adapter));
  }

  /**
   * The node's worker refused a tunnel this worker asked for: its session
   * there is gone or of another generation (`stale`: the scheduler re-admits
   * or fails it), or at its tunnel limit.
   */
  tunnelRefused(exchange: ProxyExchange, code: 'stale' | 'overloaded', open: number): void {
    const grant = exchange.grant;
    if (exchange.state !== 'dispatched' || grant === undefined) return;
    // The node's worker refused it: that body never reached the node.
    exchange.bytesToNode -= exchange.lastSentBytes;
    this.#undispatch(exchange);
    if (code === 'stale') this.#driver.reportStale(exchange.requestId, grant.leaseId);
    else this.#refuseOverloaded(exchange, grant, open);
  }

  /** Back to waiting for a decision: no tunnel, no timer. */
  #undispatch(exchange: ProxyExchange): void {
    if (exchange.timeout !== undefined) clearTimeout(exchange.timeout);
    exchange.timeout = undefined;
    exchange.state = 'admitting';
    // The total deadline spans the wait in the queue too (ProxyExchange.onTimeout takes it out of there).
    exchange.deadlines?.armTotal(exchange);
    // The run record keeps naming this provider until another dispatch: the request's metrics do too.
    if (exchange.grant !== undefined) {
      exchange.triedProviderId = exchange.grant.providerId;
      exchange.triedNodeId = exchange.grant.nodeId;
    }
    exchange.grant = undefined;
    exchange.session = undefined;
    exchange.tunnelId = 0;
  }

  /** Cancels the run if this thread holds it; false when it is not here (or already done). */
  cancelRun(runId: string): boolean {
    if (!runId.startsWith(this.#runIdPrefix)) return false;
    const exchange = this.#pending.get(Number.parseInt(runId.slice(this.#runIdPrefix.length), 36));
    return exchange !== undefined && exchange.runId === runId && exchange.cancel();
  }

  // --- called by exchanges ---------------------------------------------------

  cancelAdmission(exchange: ProxyExchange): void {
    this.#pending.delete(exchange.requestId);
    if (this.#fallbacks.size > 0) {
      this.#confirmRetry(exchange);
      this.#fallbacks.delete(exchange.requestId);
    }
    if (this.#keyOf.size > 0) this.#releaseKey(exchange);
    this.#driver.cancel(exchange.requestId);
  }

  /**
   * The tunnel failed before any response byte reached the client: re-queue
   * the request once for another provider. True when it was (its next
   * decision follows); false when the caller should fail it as usual.
   */
  retryBeforeFirstByte(exchange: ProxyExchange, code: string, message: string): boolean {
    const grant = exchange.grant;
    if (exchange.retried || exchange.state !== 'dispatched' || grant === undefined || !(exchange.adapter === 'cli' ? CLI_RETRY_BEFORE_FIRST_BYTE : RETRY_BEFORE_FIRST_BYTE).has(code)) return false;
    exchange.retried = true;
    this.#fallbacks.set(exchange.requestId, { code, message, grant, session: exchange.session, tunnelId: exchange.tunnelId, retryWaitMs: exchange.retryWaitMs, retry: retryOf(code, grant.providerId, exchange), told: false });
    // Admitting again before the call: the new grant may be delivered from inside it.
    this.#undispatch(exchange);
    exchange.retriedAt(performance.now());
    this.logger.info({ runId: exchange.runId, node: grant.nodeId, provider: grant.providerId, code }, 'failed before the first byte; asking the scheduler for another provider');
    // A node that leaves (a restart) comes back, as does one whose stream closed (an agent killed: its lanes close one
    // by one, and the first frees slots the queue hands to the others still open): the retry waits like an arrival,
    // for any provider, that one included, rather than failing when no other is up right now.
    const node = code === NODE_LEAVING ? 'leaving' : code === NODE_DISCONNECTED ? 'lost' : undefined;
    if (node !== undefined) this.#driver.requeue(grant.leaseId, admitRequestOf(exchange), '', false, undefined, node);
    else this.#driver.requeue(grant.leaseId, admitRequestOf(exchange), grant.providerId, isProviderFailure(code));
    this.#startQueueUpdates(exchange);
    return true;
  }

  /**
   * The provider answered 429/503 before any byte reached the client: busy,
   * not broken. Its tunnel is cancelled and the request goes back to the
   * queue at its old place (the scheduler lowers the provider's limit and
   * holds it for its Retry-After), up to resilience.overload.max_requeues
   * times; false when the caller should relay the answer instead.
   */
  overloadedBeforeFirstByte(exchange: ProxyExchange, retryAfterMs: number | undefined): boolean {
    const grant = exchange.grant;
    const limit = this.#config.resilience?.overload.maxRequeues ?? DEFAULT_MAX_OVERLOAD_REQUEUES;
    if (exchange.state !== 'dispatched' || grant === undefined || exchange.overloadRequeues >= limit) return false;
    exchange.overloadRequeues++;
    exchange.session?.cancelTunnel(exchange.tunnelId, 'provider overloaded; the request went back to the queue');
    this.#fallbacks.set(exchange.requestId, { code: PROVIDER_OVERLOADED, message: '', grant: undefined, session: undefined, tunnelId: 0, retry: retryOf(PROVIDER_OVERLOADED, grant.providerId, exchange), told: false });
    this.#undispatch(exchange);
    this.logger.info({ runId: exchange.runId, node: grant.nodeId, provider: grant.providerId, retryAfterMs }, 'provider overloaded before the first byte; back in the queue');
    this.#driver.requeue(grant.leaseId, admitRequestOf(exchange), grant.providerId, false, { retryAfterMs });
    // It may wait out the provider's Retry-After (up to a minute): a client that asked is told where it waits.
    this.#startQueueUpdates(exchange);
    return true;
  }

  /** The granted node is at limits.max_tunnels_per_node: retry elsewhere once, else 503 node_overloaded. */
  #refuseOverloaded(exchange: ProxyExchange, grant: Grant, open: number): void {
    // Under load this happens per request: one line per TUNNEL_LIMIT_LOG_MS, with how many it stands for.
    this.#tunnelLimitRefusals++;
    const now = performance.now();
    if (now - this.#tunnelLimitLoggedAt >= TUNNEL_LIMIT_LOG_MS) {
      this.logger.warn({ node: grant.nodeId, open, limit: this.#maxTunnelsPerNode, refusals: this.#tunnelLimitRefusals }, 'node at its tunnel limit; request not sent there (refusals: since the last such line)');
      this.#tunnelLimitLoggedAt = now;
      this.#tunnelLimitRefusals = 0;
    }
    if (!exchange.retried) {
      exchange.retried = true;
      // Refused at its first grant (before exchange.grant was set): the record and the metrics name this provider alike.
      exchange.triedProviderId = grant.providerId;
      exchange.triedNodeId = grant.nodeId;
      this.#fallbacks.set(exchange.requestId, { code: OVERLOADED, message: '', grant, session: undefined, tunnelId: 0, retry: { reason: OVERLOADED, providerId: grant.providerId, nodeId: grant.nodeId }, told: false });
      exchange.retriedAt(performance.now());
      this.#driver.requeue(grant.leaseId, admitRequestOf(exchange), grant.providerId);
      this.#startQueueUpdates(exchange);
      return;
    }
    this.#releaseAndPublish(grant.leaseId);
    exchange.reject(Errors.nodeOverloaded, 1);
  }

  rememberResponse(exchange: ProxyExchange, responseId: string): void {
    const grant = exchange.grant;
    if (grant === undefined) return;
    const stored: StoredResponse = { alias: exchange.info.model, providerId: grant.providerId, nodeId: grant.nodeId, owner: exchange.keyName };
    this.responses.remember(responseId, stored);
    this.onAffinity?.(responseId, stored);
  }

  /** What another worker learnt about a stored response (null: deleted); `used`: it used one it knew (reorders, never adds). */
  applyAffinity(responseId: string, stored: StoredResponse | null, expiresAt?: number, used = false): void {
    if (stored === null) this.responses.forget(responseId);
    else if (used) this.responses.touch(responseId);
    else this.responses.remember(responseId, stored, expiresAt);
  }

  releaseLease(leaseId: number, providerId: string, reason: ReleaseReason, usedTokens = 0, retryAfterMs?: number): void {
    this.#driver.release(leaseId, reason, usedTokens, retryAfterMs);
    // The response's last byte follows; the client may send its next request at once, and with
    // no queue to wait in, a slot still held on the main thread would refuse it (queue_full).
    // By provider, not by this request's alias: the slot is the provider's, and the next
    // request may be for another alias it serves, one without a queue.
    if (this.#publishNow.size > 0 && this.#publishNow.has(providerId)) this.#driver.publish();
  }

  /** A lease given back on a path that answers the client at once (a 503 of its own): published now, rare as these are. */
  #releaseAndPublish(leaseId: number): void {
    this.#driver.release(leaseId, 'send_failed');
    this.#driver.publish();
  }

  /**
   * The client has the provider's whole answer (at its last body byte, or
   * at END): what the answer changed is in place before the client can act
   * on it. A deleted response is gone from its provider: forget where it was.
   */
  answerRelayed(exchange: ProxyExchange): void {
    if (exchange.request.method !== 'DELETE' || exchange.status < 200 || exchange.status >= 300) return;
    // Decoded: the lookup that sent it here read the id decoded, and so did the provider that deleted it.
    const id = storedResponseIdOf(exchange.path);
    if (id !== undefined) {
      this.responses.forget(id);
      this.onAffinity?.(id, null);
    }
  }

  /** Called once per exchange, when it is over (see ExchangeObserver). */
  exchangeFinished(exchange: ProxyExchange, outcome: string): void {
    if (this.#observer !== NO_OBSERVER) this.#observe(exchange, outcome);
  }

  firstByte(exchange: ProxyExchange): void {
    if (this.#observer === NO_OBSERVER) return;
    try {
      this.#observer.exchangeFirstByte(exchange);
    } catch (err) {
      this.logger.error({ err, runId: exchange.runId }, 'exchange observer failed');
    }
  }

  #observeQueued(exchange: ProxyExchange): void {
    try {
      this.#observer.exchangeQueued(exchange);
    } catch (err) {
      this.logger.error({ err, runId: exchange.runId }, 'exchange observer failed');
    }
  }

  /**
   * The scheduler took the exchange's requeue (it said so, or a grant, a later
   * rejection or the client leaving the queue came first): only now is it a retry, in
   * edge_retries_total and as run.requeued. A refused requeue (no other
   * candidate: onRequeueRefused) fails with the first error and is neither.
   */
  #confirmRetry(exchange: ProxyExchange): void {
    const fallback = this.#fallbacks.get(exchange.requestId);
    if (fallback === undefined || fallback.told) return;
    fallback.told = true;
    const { reason, providerId, nodeId } = fallback.retry;
    try {
      this.#observer.exchangeRetried(exchange, reason, providerId, nodeId);
    } catch (err) {
      this.logger.error({ err, runId: exchange.runId }, 'exchange observer failed');
    }
  }

  /** Observability must never break a request: a throwing observer is logged, not propagated. */
  #observe(exchange: ProxyExchange, outcome: string | undefined): void {
    try {
      if (outcome === undefined) this.#observer.exchangeStarted(exchange);
      else this.#observer.exchangeFinished(exchange, outcome);
    } catch (err) {
      this.logger.error({ err, runId: exchange.runId }, 'exchange observer failed');
    }
  }

  // --- operations (admin, metrics, drain) -------------------------------------

  /** Set once by the edge; the default observer does nothing. */
  setObserver(observer: ExchangeObserver): void {
    this.#observer = observer;
  }

  /** A request refused before it became an exchange (counted, not admitted). */
  refused(code: string): void {
    this.#observer.requestRefused(code);
  }

  /** A client connection cut because it stopped reading (edge_client_stalled_cuts_total). */
  clientStalled(): void {
    this.#observer.clientStalled();
  }

  /**
   * The edge drains: new requests get 503 shutting_down. True from the
   * moment the scheduler thread sets the shared flag, before this thread's
   * own drain call reaches it.
   */
  get shuttingDown(): boolean {
    return this.#shuttingDown || (this.#flags !== undefined && Atomics.load(this.#flags, DRAIN_FLAG) !== 0);
  }

  /** Some thread's drain grace ran out (this one's, or another's: see GRACE_OVER): nothing more is sent to a node. */
  get #graceOver(): boolean {
    return this.#aborting || (this.#flags !== undefined && Atomics.load(this.#flags, DRAIN_FLAG) === GRACE_OVER);
  }

  /** Drain started: open responses that have not sent headers yet will close their connection. */
  beginShutdown(): void {
    this.#shuttingDown = true;
    for (const exchange of this.#pending.values()) {
      if (!exchange.response.headersSent) exchange.response.shouldKeepAlive = false;
    }
  }

  /** The drain grace is over: every open exchange ends now with 503 shutting_down (or an in-band error). */
  abortAll(): void {
    // Told to every thread before the first release below pumps the queue: a grant it causes for a request that
    // waits on another thread, whose grace is not over yet, is refused there (onGrant) instead of sent.
    this.#aborting = true;
    if (this.#flags !== undefined) Atomics.store(this.#flags, DRAIN_FLAG, GRACE_OVER);
    const open = [...this.#pending.values()];
    // Queued requests leave first: releasing a dispatched lease pumps the
    // queue, which must not send new work to a node just to cancel it.
    for (const exchange of open) {
      if (exchange.state !== 'admitting') continue;
      this.#driver.cancel(exchange.requestId);
      exchange.reject(Errors.shuttingDown, 1, 'the edge is shutting down; retry on another instance');
    }
    for (const exchange of open) {
      if (exchange.state !== 'admitting' && exchange.state !== 'done') {
        exchange.session?.cancelTunnel(exchange.tunnelId, 'edge shutting down');
        exchange.fail(Errors.shuttingDown, 'the edge shut down before this response finished', 'shutting_down');
      }
    }
  }

  #stampStart(exchange: ProxyExchange): void {
    exchange.startedAt = exchange.attemptFrom = performance.now();
    exchange.requestTag = requestTagOf(exchange.request, exchange.runId);
  }

  forget(exchange: ProxyExchange): void {
    this.#pending.delete(exchange.requestId);
    if (exchange.queueUpdates !== undefined) {
      clearInterval(exchange.queueUpdates);
      exchange.queueUpdates = undefined;
    }
    if (this.#fallbacks.size > 0) {
      this.#confirmRetry(exchange);
      this.#fallbacks.delete(exchange.requestId);
    }
    this.releaseKeyOf(exchange);
  }

  releaseKeyOf(exchange: ProxyExchange): void {
    if (this.#keyOf.size > 0) this.#releaseKey(exchange);
  }

  /** The exchange ended: its API key's concurrency slot is free again, and its tokens charged (exactly once). */
  #releaseKey(exchange: ProxyExchange): void {
    const requestId = exchange.requestId;
    const key = this.#keyOf.get(requestId);
    if (key === undefined) return;
    this.#keyOf.delete(requestId);
    if (this.sharedKeyLimits) this.#driver.releaseKey(requestId, key.maxConcurrent !== Infinity || key.tokensPerMinute !== 0, usedTokensOf(exchange));
    else if (exchange.keyTokens !== 0) {
      const used = usedTokensOf(exchange);
      key.settleTokens(exchange.keyTokens, used < 0 ? exchange.keyTokens : used, performance.now());
    }
    key.release();
  }

  /** Shared key limits: the key was at its limit or over its rate, nothing was admitted or taken. Same reply as with workers.count 0. */
  #keyLimited(exchange: ProxyExchange, code: KeyRefusalCode, retryAfterSec: number, levels: KeyLevels | undefined): void {
    // Always there: the admit carried the key, and only forget() (which also ends `pending`) clears it.
    const key = this.#keyOf.get(exchange.requestId) as ApiKeyState;
    this.#keyOf.delete(exchange.requestId);
    key.release();
    if (exchange.limitedKey !== undefined) exchange.keyLevels = levels;
    if (code === 'too_many_concurrent_requests') exchange.reject(Errors.tooManyConcurrent, retryAfterSec, keyLimitMessage(key));
    else if (code === 'rate_limit_exceeded') exchange.reject(Errors.keyRateLimited, retryAfterSec, keyRateMessage(key, retryAfterSec * 1000));
    else exchange.reject(Errors.keyRateLimited, retryAfterSec, keyTokensMessage(key.tokensPerMinute, retryAfterSec * 1000));
  }
}

/**
 * workers.count 0: reserves the request's estimated tokens of its key's tokens_per_minute, then takes a
 * token of its requests_per_minute; refused for either (answered here, true), it takes neither.
 */
function overKeyRates(exchange: ProxyExchange, key: ApiKeyState): boolean {
  const now = performance.now();
  const reserve = key.tokensPerMinute === 0 ? 0 : Math.max(1, estimatedTokensOf(exchange));
  const tokenWaitMs = reserve === 0 ? 0 : key.reserveTokens(now, reserve);
  if (tokenWaitMs > 0) {
    exchange.keyLevels = localKeyLevels(key, now);
    exchange.reject(Errors.keyRateLimited, retryAfterSecOf(tokenWaitMs), keyTokensMessage(key.tokensPerMinute, tokenWaitMs));
    return true;
  }
  const rateWaitMs = key.takeRate(now);
  if (rateWaitMs > 0) {
    key.settleTokens(reserve, 0, now);
    exchange.keyLevels = localKeyLevels(key, now);
    exchange.reject(Errors.keyRateLimited, retryAfterSecOf(rateWaitMs), keyRateMessage(key, rateWaitMs));
    return true;
  }
  exchange.keyTokens = reserve;
  return false;
}

/**
 * What a request cost its key's tokens_per_minute: the prompt and completion its provider reported; -1 when it
 * reached a provider that reported none (a stream without usage, one cut short: its reservation stands); 0 when
 * it reached none (refused by the queue, closed while waiting).
 */
function usedTokensOf(exchange: ProxyExchange): number {
  // A count (count_tokens, input_tokens) generates nothing and reports no usage: kept, its reservation would
  // charge the prompt it only asked about (a client that counts before each turn would spend its minute twice).
  if (exchange.route === COUNT_TOKENS || exchange.route === RESPONSES_INPUT_TOKENS) return 0;
  const usage = exchange.usage;
  if (usage !== undefined) return usage.promptTokens + usage.completionTokens;
  return exchange.grant === undefined ? 0 : -1;
}

function keyLimitMessage(key: ApiKeyState): string {
  // The limit, not the count: after a refresh lowered it, more than this may still be open.
  const limit = key.maxConcurrent;
  return `this API key is at its limit of ${limit} concurrent request${limit === 1 ? '' : 's'}; retry when one finishes`;
}

/** The refusal of a key over its tokens_per_minute. */
function keyTokensMessage(perMinute: number, waitMs: number): string {
  return `this API key is at its limit of ${perMinute} token${perMinute === 1 ? '' : 's'} per minute; retry in ${retryAfterSecOf(waitMs)} s`;
}

function keyRateMessage(key: ApiKeyState, waitMs: number): string {
  const rate = key.requestsPerMinute;
  return `this API key is at its limit of ${rate} request${rate === 1 ? '' : 's'} per minute; retry in ${retryAfterSecOf(waitMs)} s`;
}

/** At most one "node at its tunnel limit" line this often (ms). */
const TUNNEL_LIMIT_LOG_MS = 10_000;

/** A client's x-request-id is carried to the node only when it is a short printable token. */
const REQUEST_TAG = /^[\x21-\x7e]{1,128}$/;

/** The client's `x-request-id` when it is a valid tag (kept in the run's record), else the run id. */
export function requestTagOf(request: IncomingMessage, runId: string): string {
  const tag = request.headers['x-request-id'];
  return typeof tag === 'string' && REQUEST_TAG.test(tag) ? ownHeaderValue(tag) : runId;
}

function hardeningOf(config: EdgeConfig): { deadlineLimits: DeadlineLimits; maxTunnelsPerNode: number } {
  const limits = limitsOf(config);
  return {
    deadlineLimits: { tunnelTimeoutMs: config.limits.tunnelTimeoutMs, ttfbTimeoutMs: limits.ttfbTimeoutMs, idleTimeoutMs: limits.idleTimeoutMs, sseKeepaliveMs: limits.sseKeepaliveMs },
    maxTunnelsPerNode: limits.maxTunnelsPerNode,
  };
}

function admitRequestOf(exchange: ProxyExchange): AdmitRequest {
  const direct = exchange.request.headers['x-edge-node'];
  return {
    requestId: exchange.requestId,
    alias: exchange.info.model,
    estimatedTokens: estimatedTokensOf(exchange),
    directNodeId: typeof direct === 'string' && direct.length > 0 ? direct : undefined,
    // No named session: no node affinity, with or without a key.
    sessionKey: exchange.sessionId === '' ? 0 : sessionKeyOf(exchange.nodeSession !== '' ? exchange.nodeSession : exchange.sessionId),
    api: exchange.route.api,
    pinnedProviderId: exchange.pinnedProviderId,
    priority: exchange.fairness.priority,
    tenantKey: exchange.fairness.tenantKey,
    weight: exchange.fairness.weight,
  };
}

const ADAPTER_OF_TYPE: Record<ProviderType, Adapter> = {
  ollama: Adapter.OLLAMA,
  vllm: Adapter.VLLM,
  openai_compat: Adapter.OPENAI_COMPAT,
  cli: Adapter.CLI,
};

function adaptersOf(config: EdgeConfig): Map<string, Adapter> {
  const out = new Map<string, Adapter>();
  for (const node of config.nodes) for (const provider of node.providers) out.set(provider.id, ADAPTER_OF_TYPE[provider.type]);
  return out;
}

/** Why none may serve: the scheduler's candidates leave out all of these alike (the admin status says which). */
const NONE_AVAILABLE = 'none is connected, or each is drained, disabled, unhealthy or ejected';

function rejectMessage(code: RejectCode, alias: string, exchange: ProxyExchange, longThreshold: number): string {
  const name = JSON.stringify(alias);
  switch (code) {
    case 'model_not_found': return `The model ${name} does not exist`;
    case 'node_not_found':
      return exchange.pinnedProviderId === undefined
        ? `the node named in x-edge-node serves no provider for model ${name} on ${exchange.route.path}`
        : `the node named in x-edge-node does not run provider ${JSON.stringify(exchange.pinnedProviderId)}, which holds the stored response this request needs`;
    case 'queue_full': return `too many requests are waiting for model ${name}; retry later`;
    case 'queue_timeout': return `no provider slot for model ${name} became free in time; retry later`;
    case 'no_provider_available': {
      // A long-context request has fewer candidates (some provider declares a window that covers it, or it is refused at once).
      const tokens = estimatedTokensOf(exchange);
      // x-edge-node narrowed the candidates to that node's: the others of the model may be serving.
      const node = admitRequestOf(exchange).directNodeId;
      const where = node === undefined ? '' : ` on the node named in x-edge-node (${JSON.stringify(node)})`;
      if (tokens >= longThreshold) return `no provider for model ${name}${where} with a context window for about ${tokens} input tokens (estimated) is available: ${NONE_AVAILABLE}; retry later`;
      return `no provider for model ${name}${where} is available: ${NONE_AVAILABLE}; retry later`;
    }
    case 'context_length_exceeded':
      if (exchange.pinnedProviderId !== undefined) {
        return `this request's prompt is about ${estimatedTokensOf(exchange)} tokens (estimated), and the provider ${JSON.stringify(exchange.pinnedProviderId)} that stored its previous response declares no context window (providers[].max_context_tokens) that large; the request is not sent elsewhere, as no other provider has that response. Send a shorter prompt`;
      }
      if (admitRequestOf(exchange).directNodeId !== undefined) {
        return `this request's prompt is about ${estimatedTokensOf(exchange)} tokens (estimated), and no provider of model ${name} on the node named in x-edge-node that serves ${exchange.route.path} declares a context window (providers[].max_context_tokens) that large. Send a shorter prompt, or name another node`;
      }
      return `this request's prompt is about ${estimatedTokensOf(exchange)} tokens (estimated), and no provider of model ${name} takes that many: none declares a context window (providers[].max_context_tokens) that large; requests of ${longThreshold} tokens or more (scheduler.long_context_threshold_tokens) go only to providers that do. Send a shorter prompt`;
    case 'api_not_served': return `no provider of model ${name} serves ${exchange.route.path}; its providers' endpoints do not include it`;
    case 'pinned_provider_gone': return `the provider ${JSON.stringify(exchange.pinnedProviderId)} that stored this response is not serving model ${name} now; the request is not sent elsewhere, as no other provider has that response`;
    case 'shed': return `model ${name} is saturated and this request is sheddable (priority below 0); it was not queued`;
    case 'displaced': return `a request of a higher priority took this request's place in the full queue for model ${name}; retry later`;
  }
}

function estimatedTokensOf(exchange: ProxyExchange): number {
  return exchange.info.inputTokens ?? estimateInputTokens(exchange.body.length);
}

/** A deadline of the edge as the node's backstop: later by the slack, 0 (none) kept. */
function withSlack(ms: number): number {
  return ms > 0 ? ms + NODE_DEADLINE_SLACK_MS : 0;
}

/**
 * Client headers to pass to the provider: end-to-end ones only, never
 * credentials, and none the client named in `Connection` (RFC 9110 7.6.1:
 * those belong to its connection with us, like `connection` itself).
 */
function forwardedHeaders(raw: readonly string[]): { name: string; value: string }[] {
  const nominated = connectionNominated(raw);
  const out: { name: string; value: string }[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (nominated !== undefined && nominated.has(name)) continue;
    // $typeName: the node message is built as a plain literal (edge-messages.ts), not by create().
    if (isForwardedUpstream(name)) out.push({ $typeName: 'edge.v1.Header', name, value: raw[i + 1] } as { name: string; value: string });
  }
  return out;
}

/** Providers serving an alias with max_queue 0: their lease releases are published at once (see releaseLease). */
function noQueueProviders(config: EdgeConfig): Set<string> {
  const ids = new Set<string>();
  for (const model of config.models) if (model.maxQueue === 0) for (const id of model.providers.keys()) ids.add(id);
  return ids;
}

/** setInterval callback of x-edge-queue-updates (no closure per request). */
function askQueuePosition(driver: SchedulerPort, exchange: ProxyExchange): void {
  if (exchange.state !== 'admitting') {
    clearInterval(exchange.queueUpdates);
    exchange.queueUpdates = undefined;
    return;
  }
  driver.queryQueuePosition?.(exchange.requestId);
}
