// Prometheus metrics (prom-client), on a registry of the edge's own so two
// edges in one process (tests) never mix. Per-request work is O(1): the
// counters are plain numbers kept here and handed to prom-client at scrape
// time; the per-request histograms are HotHistograms (hot-histogram.ts), whose
// per-model children are cached here. Gauges that describe state (queues, in-flight,
// capacity, nodes) are read from the scheduler's status once per scrape.
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { LeanStats } from '../../contract/io-protocol.js';
import { nodeHopMs, type ExchangeView } from './exchange-observer.js';
import { HotHistogram, type HotSeries } from './hot-histogram.js';
import type { SchedulerStatus } from '../../contract/scheduler.js';
import { tenantLabel } from '../../shared/tenant-key.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
/** Status label for a client that left before any response status. */
export const CLIENT_CLOSED_STATUS = 499;

interface ModelHistograms {
  readonly total: HotSeries;
  readonly ttfb: HotSeries;
  readonly queue: HotSeries;
  readonly overhead: HotSeries;
  readonly nodeHop: HotSeries;
  readonly upstream: HotSeries;
}

/** One (model, provider, status) request count; reported to prom-client as deltas at scrape. */
class RequestCount {
  count = 0;
  reported = 0;
  constructor(readonly labels: { readonly model: string; readonly provider: string; readonly status: string }) {}
}

/** One client API key's requests by status and tokens by model; reported to prom-client as deltas at scrape. */
class KeyUsage {
  readonly requests = new Map<number, { count: number; reported: number }>();
  /** model -> [prompt, completion, reportedPrompt, reportedCompletion] */
  readonly tokens = new Map<string, number[]>();
}

/** What the scrape-time gauges read. */
export interface MetricsSource {
  status(): SchedulerStatus;
  connectedNodes(): number;
  openRequests(): number;
  workers(): number;
  /** Fill (0..1) of the fullest ring buffer this thread owns now (see ringFill). */
  ringOccupancy(): number;
  configVersion(): number;
  shuttingDown(): boolean;
  events(): { readonly subscribers: number; readonly published: number; readonly dropped: number };
  /** Fair queuing: configured API key names by tenant key; tenants not in it are counted as `other` (bounded label set). */
  tenantNames?(): ReadonlyMap<number, string>;
  /** The client listener's lean HTTP/1.1 connection (a data path's own metrics only). */
  lean?(): LeanStats;
  /** The node link's protocol counters (ProtocolStats: fencing, supersedes, heartbeat timeouts, ...); a data path's own metrics only. */
  protocol?(): Readonly<Record<string, number>>;
  /** Each TLS listener's served certificate (the main thread's metrics only). */
  certificates?(): ReadonlyMap<string, { readonly notAfterMs: number }>;
  /** What each API key with a rate limit has left of it now (the main thread's metrics only; null: no such limit). */
  keysLeft?(): readonly { readonly name: string; readonly requestsLeft: number | null; readonly tokensLeft: number | null }[];
}

/** The fill of the fullest of `rings` (0 for none). */
export function ringFill(rings: readonly { readonly used: number; readonly capacity: number }[]): number {
  let fill = 0;
  for (const r of rings) if (r.capacity > 0 && r.used / r.capacity > fill) fill = r.used / r.capacity;
  return fill;
}

export class EdgeMetrics {
  readonly registry = new Registry();
  readonly #requests = new Counter({ name: 'edge_requests_total', help: 'Proxied requests by model alias, provider and HTTP status (499: the client left first)', labelNames: ['model', 'provider', 'status'] as const, registers: [this.registry] });
  readonly #retries = new Counter({ name: 'edge_retries_total', help: 'Requests that failed before their first byte on one provider and went back to the queue (a requeue with no other candidate is refused: the failure is the answer, not counted), by reason and the provider that failed', labelNames: ['reason', 'provider'] as const, registers: [this.registry] });
  readonly #rejects = new Counter({ name: 'edge_rejects_total', help: 'Requests refused without reaching a provider, by reason (queue_full, queue_timeout, no_provider_available, too_many_concurrent_requests, shutting_down, ...: the error code the client got)', labelNames: ['reason'] as const, registers: [this.registry] });
  readonly #total = new HotHistogram({ name: 'edge_request_duration_seconds', help: 'Total latency: request in the edge to the last byte relayed', labelName: 'model', buckets: LATENCY_BUCKETS, registry: this.registry });
  readonly #ttfb = new HotHistogram({ name: 'edge_time_to_first_byte_seconds', help: 'Request in the edge to the first response body byte written to the client', labelName: 'model', buckets: LATENCY_BUCKETS, registry: this.registry });
  readonly #queue = new HotHistogram({ name: 'edge_queue_wait_seconds', help: 'Time queued for a provider slot', labelName: 'model', buckets: LATENCY_BUCKETS, registry: this.registry });
  readonly #overhead = new HotHistogram({ name: 'edge_gateway_overhead_seconds', help: 'Total latency minus queue wait minus provider time (TunnelRequest sent to END received, which includes the node hop)', labelName: 'model', buckets: OVERHEAD_BUCKETS, registry: this.registry });
  readonly #nodeHop = new HotHistogram({ name: 'edge_node_hop_seconds', help: 'Provider time (TunnelRequest sent to END received) minus the provider\'s own time as the node measured it: gRPC both ways, the agent\'s work and its wait for an upstream connection. Agents that do not measure it are left out', labelName: 'model', buckets: OVERHEAD_BUCKETS, registry: this.registry });
  readonly #upstream = new HotHistogram({ name: 'edge_upstream_duration_seconds', help: 'The provider\'s own time as the node measured it: upstream request start to its last byte', labelName: 'model', buckets: LATENCY_BUCKETS, registry: this.registry });
  readonly #leanRequests = new Counter({ name: 'edge_http_lean_requests_total', help: 'API requests read off the socket by the lean HTTP/1.1 connection (the rest are read by node:http)', registers: [this.registry] });
  readonly #leanHandovers = new Counter({ name: 'edge_http_lean_handovers_total', help: 'Client connections the lean HTTP/1.1 connection handed to node:http at a request it does not read (another route or method, a head split over reads, chunked bodies, ...)', registers: [this.registry] });
  #leanReported: LeanStats = { requests: 0, handedOver: 0, connections: 0 };
  readonly #stalledCuts = new Counter({ name: 'edge_client_stalled_cuts_total', help: 'Client connections closed because a response\'s bytes made no progress for limits.idle_timeout_ms: a client that stopped reading but kept its connection', registers: [this.registry] });
  readonly #tunnelBytes = new Counter({ name: 'edge_tunnel_bytes_total', help: 'Bytes relayed through tunnels: request bodies to nodes, response bodies to clients (counted when a request ends)', labelNames: ['direction'] as const, registers: [this.registry] });
  readonly #queueDepth = new Gauge({ name: 'edge_queue_depth', help: 'Requests waiting per model group', labelNames: ['model'] as const, registers: [this.registry] });
  readonly #bandDepth = new Gauge({ name: 'edge_queue_depth_band', help: 'Fair queuing: requests waiting per model group and priority band', labelNames: ['model', 'priority'] as const, registers: [this.registry] });
  readonly #tenantDepth = new Gauge({ name: 'edge_queue_depth_tenant', help: 'Fair queuing: requests waiting per model group and tenant (API key name; other = fairness ids)', labelNames: ['model', 'tenant'] as const, registers: [this.registry] });
  readonly #tenantDispatches = new Counter({ name: 'edge_tenant_dispatches_total', help: 'Fair queuing: grants per model group and tenant since fairness went on (their share of dispatches; starts again from 0 when fairness is turned on)', labelNames: ['model', 'tenant'] as const, registers: [this.registry] });
  readonly #maxQueue = new Gauge({ name: 'edge_queue_max', help: 'max_queue per model group', labelNames: ['model'] as const, registers: [this.registry] });
  readonly #inFlight = new Gauge({ name: 'edge_provider_in_flight', help: 'Live leases per provider', labelNames: ['provider', 'node'] as const, registers: [this.registry] });
  readonly #capacity = new Gauge({ name: 'edge_provider_capacity', help: 'Configured capacity per provider', labelNames: ['provider', 'node'] as const, registers: [this.registry] });
  readonly #providerUp = new Gauge({ name: 'edge_provider_available', help: '1 when the provider can take new requests (node connected, announced, enabled, capacity above 0, not draining, not ejected, not unhealthy by probe)', labelNames: ['provider', 'node'] as const, registers: [this.registry] });
  readonly #outlier = new Gauge({ name: 'edge_provider_outlier_state', help: 'Outlier state per provider: 0 healthy, 1 ejected, 2 half-open (passive outlier ejection)', labelNames: ['provider', 'node'] as const, registers: [this.registry] });
  readonly #overloadLimit = new Gauge({ name: 'edge_provider_overload_limit', help: 'Effective concurrency after 429/503 answers (AIMD); equals capacity when not overloaded', labelNames: ['provider', 'node'] as const, registers: [this.registry] });
  readonly #unhealthy = new Gauge({ name: 'edge_provider_probe_unhealthy', help: '1 while the node\'s active health probe of the provider fails (no new requests)', labelNames: ['provider', 'node'] as const, registers: [this.registry] });
  readonly #ejections = new Gauge({ name: 'edge_provider_ejections', help: 'Times the provider was ejected as an outlier since its last reset', labelNames: ['provider', 'node'] as const, registers: [this.registry] });
  readonly #nodes = new Gauge({ name: 'edge_nodes_connected', help: 'Node agents with a live session', registers: [this.registry] });
  readonly #open = new Gauge({ name: 'edge_open_requests', help: 'Client requests the edge holds (queued or relaying)', registers: [this.registry] });
  readonly #workers = new Gauge({ name: 'edge_workers', help: 'I/O worker threads (workers.count; 0 = data path on the main thread)', registers: [this.registry] });
  // Each thread reports the rings it owns (main: the scheduler's, a worker: its peer links); the merge keeps the fullest.
  readonly #ringOccupancy = new Gauge({ name: 'edge_worker_ring_occupancy_ratio', help: 'Fill of the fullest worker ring buffer at the scrape (0 while there are no worker threads)', registers: [this.registry], aggregator: 'max' });
  readonly #subscribers = new Gauge({ name: 'edge_event_subscribers', help: 'Admin event stream subscribers', registers: [this.registry] });
  readonly #published = new Counter({ name: 'edge_events_published_total', help: 'Events published on the bus while someone listened', registers: [this.registry] });
  readonly #dropped = new Counter({ name: 'edge_events_dropped_total', help: 'Events lost because a subscriber read too slowly', registers: [this.registry] });
  readonly #configVersion = new Gauge({ name: 'edge_config_version', help: 'Version of the running config snapshot (1 at start, +1 per applied change)', registers: [this.registry] });
  readonly #refreshes = new Counter({ name: 'edge_config_refreshes_total', help: 'Config refresh requests by mode and result', labelNames: ['mode', 'status'] as const, registers: [this.registry] });
  readonly #protocolEvents = new Counter({
    name: 'edge_node_protocol_events_total',
    help: 'What the node links did that an operator should see: fenced nodes, superseded sessions, heartbeat timeouts, refused registrations, protocol violations, frame batches (kind: the ProtocolStats field, snake_case)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly #certificateExpiry = new Gauge({
    name: 'edge_tls_certificate_expiry_timestamp_seconds',
    help: 'When the certificate each TLS listener serves expires (Unix time); a refresh or SIGHUP swaps in renewed files',
    labelNames: ['listener'] as const,
    registers: [this.registry],
  });
  readonly #shuttingDown = new Gauge({ name: 'edge_shutting_down', help: '1 while the edge drains before exit', registers: [this.registry] });

  readonly #tokens = new Counter({ name: 'edge_stream_tokens_total', help: 'Tokens reported in the usage of completed responses (the final SSE chunk, or the tail of a JSON body), by model alias and kind', labelNames: ['model', 'kind'] as const, registers: [this.registry] });
  // Per API key: the key names come from auth.api_keys (a bounded set), never from the client.
  readonly #keyRequests = new Counter({ name: 'edge_key_requests_total', help: 'Requests that reached the data path by client API key (auth.api_keys[].name) and HTTP status (499: the client left first); none while auth is off', labelNames: ['key', 'status'] as const, registers: [this.registry] });
  readonly #keyRequestsLeft = new Gauge({ name: 'edge_key_requests_left', help: 'What each client API key with a requests_per_minute has left of it now (its bucket: a minute\'s worth when idle)', labelNames: ['key'] as const, registers: [this.registry] });
  readonly #keyTokensLeft = new Gauge({ name: 'edge_key_tokens_left', help: 'What each client API key with a tokens_per_minute has left of it now (below 0: a debt it is refused until it has paid back)', labelNames: ['key'] as const, registers: [this.registry] });
  readonly #keyTokens = new Counter({ name: 'edge_key_tokens_total', help: 'Tokens reported in the usage of completed responses by client API key, model alias and kind', labelNames: ['key', 'model', 'kind'] as const, registers: [this.registry] });
  /** model -> [prompt, completion, reportedPrompt, reportedCompletion] */
  readonly #tokenCounts = new Map<string, number[]>();
  readonly #keyUsage = new Map<string, KeyUsage>();
  readonly #histograms = new Map<string, ModelHistograms>();
  /** model -> provider -> status -> count */
  readonly #counts = new Map<string, Map<string, Map<number, RequestCount>>>();
  readonly #rejectCounts = new Map<string, RequestCount>();
  #bytesToNode = 0;
  #bytesToClient = 0;
  #bytesReported = { toNode: 0, toClient: 0 };
  #eventsReported = { published: 0, dropped: 0 };
  /** What edge_tenant_dispatches_total has counted, by alias: the scheduler's count per tenant key, and the labels it used. */
  #dispatchesSeen = new Map<string, { readonly period: number; readonly counts: Map<number, number>; readonly labels: Set<string> }>();
  /** What edge_node_protocol_events_total has counted, by ProtocolStats field. */
  readonly #protocolReported = new Map<string, number>();

  readonly #mainCpu = new Counter({ name: 'edge_main_thread_cpu_seconds_total', help: 'CPU time of the main thread (the scheduler; with workers.count 0 the whole data path too)', registers: [this.registry] });
  /** What #mainCpu has counted: a counter takes increments, the thread's CPU time is a running total. */
  #mainCpuCounted = 0;

  readonly #source: MetricsSource;
  readonly #processMetrics: boolean;

  /** `processMetrics` false in I/O workers: process-wide numbers are reported once, by the main thread. */
  constructor(source: MetricsSource, processMetrics = true) {
    this.#source = source;
    this.#processMetrics = processMetrics;
    // Process metrics, including nodejs_eventloop_lag_p99_seconds.
    if (processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** Like scrape(), as prom-client JSON: the main thread merges its workers' with AggregatorRegistry.aggregate. */
  async scrapeJson(): Promise<unknown[]> {
    this.#syncCounters();
    this.#syncMainCpu();
    this.#syncGauges();
    return this.registry.getMetricsAsJSON() as Promise<unknown[]>;
  }

  /**
   * Only the named metrics, for a reader other than /metrics (the console's
   * series): collecting the default ones would reset what they summarise
   * between scrapes (prom-client's event-loop lag histogram), so /metrics
   * would see only the time since the last such read.
   */
  async partJson(names: readonly string[]): Promise<unknown[]> {
    this.#syncCounters();
    const out: unknown[] = [];
    for (const name of names) {
      const metric = this.registry.getSingleMetric(name);
      if (metric !== undefined) out.push(await metric.get());
    }
    return out;
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  // --- per request (O(1), no label lookups after the first of a model) --------

  /** An exchange ended; `now` is performance.now(). */
  exchangeFinished(exchange: ExchangeView, now: number): void {
    const model = exchange.info.model;
    const grant = exchange.grant;
    const status = exchange.status === 0 ? CLIENT_CLOSED_STATUS : exchange.status;
    this.#count(model, grant !== undefined ? grant.providerId : exchange.triedProviderId, status);
    this.#bytesToClient += exchange.bytesOut;
    this.#bytesToNode += exchange.bytesToNode;
    const usage = exchange.usage;
    if (usage !== undefined) this.#countTokens(model, usage.promptTokens, usage.completionTokens);
    if (exchange.keyName !== undefined) this.#countKey(exchange.keyName, model, status, usage);
    if (grant === undefined) return; // refused while queued: counted as a reject too
    const h = this.#histogramsOf(model);
    const queuedMs = grant.queuedMs + exchange.retryWaitMs;
    h.queue.observe(queuedMs / 1000);
    h.total.observe((now - exchange.startedAt) / 1000);
    if (exchange.firstByteAt > 0) h.ttfb.observe((exchange.firstByteAt - exchange.startedAt) / 1000);
    // Every answer that ended with END, a provider's error included: a slow failing provider must show as the provider's time.
    if (exchange.endAt > 0 && exchange.sentAt > 0) {
      const providerMs = exchange.endAt - exchange.sentAt;
      h.overhead.observe(Math.max(0, now - exchange.startedAt - queuedMs - providerMs) / 1000);
      const hopMs = nodeHopMs(exchange, true);
      if (hopMs >= 0) {
        h.nodeHop.observe(hopMs / 1000);
        h.upstream.observe(exchange.upstreamEndUs / 1e6);
      }
    }
  }

  /** A request whose worker exited under it (main thread, from the pool): counted as its run record says (provider, status, key). */
  requestLost(model: string, provider: string, status: number, key: string | undefined): void {
    this.#count(model, provider, status);
    // Its worker counted nothing for it: edge_key_requests_total must sum to edge_requests_total.
    if (key !== undefined) this.#countKey(key, model, status, undefined);
  }

  /** Rare (a failure before the first byte), so counted directly. */
  retried(reason: string, providerId: string): void {
    this.#retries.inc({ reason, provider: providerId });
  }

  /** A client connection closed because it stopped reading (its response's bytes made no progress). */
  stalledCut(): void {
    this.#stalledCuts.inc();
  }

  /** A request refused without reaching a provider. */
  rejected(reason: string): void {
    let count = this.#rejectCounts.get(reason);
    if (count === undefined) this.#rejectCounts.set(reason, (count = new RequestCount({ model: '', provider: '', status: reason })));
    count.count++;
  }

  refreshed(mode: string, status: string): void {
    this.#refreshes.labels(mode, status).inc();
  }

  // --- scrape ------------------------------------------------------------------

  #syncMainCpu(): void {
    if (!this.#processMetrics) return;
    const now = mainThreadCpuSeconds();
    if (now > this.#mainCpuCounted) this.#mainCpu.inc(now - this.#mainCpuCounted);
    this.#mainCpuCounted = Math.max(now, this.#mainCpuCounted);
  }

  /** The exposition text; state gauges and plain counters are brought up to date first. */
  async scrape(): Promise<string> {
    this.#syncCounters();
    this.#syncMainCpu();
    this.#syncGauges();
    return this.registry.metrics();
  }

  #count(model: string, provider: string, status: number): void {
    let byProvider = this.#counts.get(model);
    if (byProvider === undefined) this.#counts.set(model, (byProvider = new Map()));
    let byStatus = byProvider.get(provider);
    if (byStatus === undefined) byProvider.set(provider, (byStatus = new Map()));
    let count = byStatus.get(status);
    if (count === undefined) byStatus.set(status, (count = new RequestCount({ model, provider, status: String(status) })));
    count.count++;
  }

  #countTokens(model: string, prompt: number, completion: number): void {
    // A counter's increment must be finite: one bad value would make every later scrape throw.
    if (!Number.isFinite(prompt + completion) || prompt < 0 || completion < 0) return;
    let counts = this.#tokenCounts.get(model);
    if (counts === undefined) this.#tokenCounts.set(model, (counts = [0, 0, 0, 0]));
    counts[0] += prompt;
    counts[1] += completion;
  }

  #countKey(key: string, model: string, status: number, usage: ExchangeView['usage']): void {
    let counts = this.#keyUsage.get(key);
    if (counts === undefined) this.#keyUsage.set(key, (counts = new KeyUsage()));
    let byStatus = counts.requests.get(status);
    if (byStatus === undefined) counts.requests.set(status, (byStatus = { count: 0, reported: 0 }));
    byStatus.count++;
    if (usage === undefined || !Number.isFinite(usage.promptTokens + usage.completionTokens) || usage.promptTokens < 0 || usage.completionTokens < 0) return;
    let tokens = counts.tokens.get(model);
    if (tokens === undefined) counts.tokens.set(model, (tokens = [0, 0, 0, 0]));
    tokens[0] += usage.promptTokens;
    tokens[1] += usage.completionTokens;
  }

  #histogramsOf(model: string): ModelHistograms {
    let h = this.#histograms.get(model);
    if (h === undefined) {
      h = { total: this.#total.labels(model), ttfb: this.#ttfb.labels(model), queue: this.#queue.labels(model), overhead: this.#overhead.labels(model), nodeHop: this.#nodeHop.labels(model), upstream: this.#upstream.labels(model) };
      this.#histograms.set(model, h);
    }
    return h;
  }

  #syncCounters(): void {
    const lean = this.#source.lean?.();
    if (lean !== undefined) {
      if (lean.requests > this.#leanReported.requests) this.#leanRequests.inc(lean.requests - this.#leanReported.requests);
      if (lean.handedOver > this.#leanReported.handedOver) this.#leanHandovers.inc(lean.handedOver - this.#leanReported.handedOver);
      this.#leanReported = lean;
    }
    for (const byProvider of this.#counts.values()) {
      for (const byStatus of byProvider.values()) {
        for (const count of byStatus.values()) {
          if (count.count > count.reported) this.#requests.inc(count.labels, count.count - count.reported);
          count.reported = count.count;
        }
      }
    }
    for (const [reason, count] of this.#rejectCounts) {
      if (count.count > count.reported) this.#rejects.inc({ reason }, count.count - count.reported);
      count.reported = count.count;
    }
    for (const [model, c] of this.#tokenCounts) {
      if (c[0] > c[2]) this.#tokens.inc({ model, kind: 'prompt' }, c[0] - c[2]);
      if (c[1] > c[3]) this.#tokens.inc({ model, kind: 'completion' }, c[1] - c[3]);
      c[2] = c[0];
      c[3] = c[1];
    }
    for (const [key, usage] of this.#keyUsage) {
      for (const [status, c] of usage.requests) {
        if (c.count > c.reported) this.#keyRequests.inc({ key, status: String(status) }, c.count - c.reported);
        c.reported = c.count;
      }
      for (const [model, c] of usage.tokens) {
        if (c[0] > c[2]) this.#keyTokens.inc({ key, model, kind: 'prompt' }, c[0] - c[2]);
        if (c[1] > c[3]) this.#keyTokens.inc({ key, model, kind: 'completion' }, c[1] - c[3]);
        c[2] = c[0];
        c[3] = c[1];
      }
    }
    const bytes = this.#bytesReported;
    if (this.#bytesToNode > bytes.toNode) this.#tunnelBytes.inc({ direction: 'to_node' }, this.#bytesToNode - bytes.toNode);
    if (this.#bytesToClient > bytes.toClient) this.#tunnelBytes.inc({ direction: 'to_client' }, this.#bytesToClient - bytes.toClient);
    bytes.toNode = this.#bytesToNode;
    bytes.toClient = this.#bytesToClient;
    const protocol = this.#source.protocol?.();
    if (protocol !== undefined) {
      for (const [field, count] of Object.entries(protocol)) {
        const counted = this.#protocolReported.get(field) ?? 0;
        if (count > counted) this.#protocolEvents.inc({ kind: snakeCase(field) }, count - counted);
        this.#protocolReported.set(field, Math.max(count, counted));
      }
    }
    const events = this.#source.events();
    const seen = this.#eventsReported;
    if (events.published > seen.published) this.#published.inc(events.published - seen.published);
    if (events.dropped > seen.dropped) this.#dropped.inc(events.dropped - seen.dropped);
    seen.published = events.published;
    seen.dropped = events.dropped;
    this.#subscribers.set(events.subscribers);
  }

  #syncFairness(status: SchedulerStatus): void {
    this.#bandDepth.reset();
    this.#tenantDepth.reset();
    if (status.fairness === undefined) {
      this.#tenantDispatches.reset();
      this.#dispatchesSeen.clear();
      return;
    }
    const names = this.#source.tenantNames?.() ?? new Map<number, string>();
    const label = (tenant: number): string => (tenant === 0 || names.has(tenant) ? tenantLabel(tenant, names) : 'other');
    const seen = new Map<string, { period: number; counts: Map<number, number>; labels: Set<string> }>();
    for (const g of status.fairness.groups) {
      for (const band of g.bands) {
        this.#bandDepth.set({ model: g.alias, priority: String(band.priority) }, band.queued);
        for (const t of band.tenants) if (t.queued > 0) this.#tenantDepth.inc({ model: g.alias, tenant: label(t.tenant) }, t.queued);
      }
      // Counted as increments: the scheduler's table starts again from 0 when it fills (fair.ts). Set from it,
      // the counter would go down; compared with the last count across a restart, a tenant whose new count
      // passed its old one would lose that many: a new period's counts are all new.
      const before = this.#dispatchesSeen.get(g.alias);
      const counted = before !== undefined && before.period === g.dispatchPeriod ? before.counts : undefined;
      const now = { period: g.dispatchPeriod, counts: new Map<number, number>(), labels: before?.labels ?? new Set<string>() };
      for (const d of g.dispatches) {
        const last = counted?.get(d.tenant) ?? 0;
        const added = d.dispatched >= last ? d.dispatched - last : d.dispatched;
        const tenant = label(d.tenant);
        if (added > 0) this.#tenantDispatches.inc({ model: g.alias, tenant }, added);
        now.counts.set(d.tenant, d.dispatched);
        now.labels.add(tenant);
      }
      seen.set(g.alias, now);
    }
    // A group that left the config (or the fair groups) takes its series with it.
    for (const [alias, { labels }] of this.#dispatchesSeen) if (!seen.has(alias)) for (const tenant of labels) this.#tenantDispatches.remove({ model: alias, tenant });
    this.#dispatchesSeen = seen;
  }

  #syncGauges(): void {
    const keysLeft = this.#source.keysLeft?.();
    if (keysLeft !== undefined) {
      // Rebuilt each scrape, as the other state gauges: a key a refresh removed (or freed of its limit) leaves no series.
      this.#keyRequestsLeft.reset();
      this.#keyTokensLeft.reset();
      for (const k of keysLeft) {
        if (k.requestsLeft !== null) this.#keyRequestsLeft.set({ key: k.name }, k.requestsLeft);
        if (k.tokensLeft !== null) this.#keyTokensLeft.set({ key: k.name }, k.tokensLeft);
      }
    }
    const status = this.#source.status();
    // Reset first so providers and groups that left the config disappear.
    this.#queueDepth.reset();
    this.#maxQueue.reset();
    for (const g of status.groups) {
      this.#queueDepth.set({ model: g.alias }, g.queueDepth);
      this.#maxQueue.set({ model: g.alias }, g.maxQueue);
    }
    this.#syncFairness(status);
    this.#inFlight.reset();
    this.#capacity.reset();
    this.#providerUp.reset();
    this.#outlier.reset();
    this.#ejections.reset();
    this.#overloadLimit.reset();
    this.#unhealthy.reset();
    for (const p of status.providers) {
      const labels = { provider: p.id, node: p.nodeId };
      this.#inFlight.set(labels, p.inFlight);
      this.#capacity.set(labels, p.capacity);
      this.#providerUp.set(labels, p.connected && p.announced && p.enabled && p.capacity > 0 && !p.draining && p.unhealthy !== true && (p.outlier?.phase ?? 'healthy') !== 'ejected' ? 1 : 0);
      this.#overloadLimit.set(labels, p.overload?.limit ?? p.capacity);
      this.#unhealthy.set(labels, p.unhealthy === true ? 1 : 0);
      this.#outlier.set(labels, p.outlier?.phase === 'ejected' ? 1 : p.outlier?.phase === 'half_open' ? 2 : 0);
      this.#ejections.set(labels, p.outlier?.ejections ?? 0);
    }
    this.#nodes.set(this.#source.connectedNodes());
    this.#open.set(this.#source.openRequests());
    this.#workers.set(this.#source.workers());
    this.#ringOccupancy.set(this.#source.ringOccupancy());
    this.#configVersion.set(this.#source.configVersion());
    this.#shuttingDown.set(this.#source.shuttingDown() ? 1 : 0);
    const certificates = this.#source.certificates?.();
    if (certificates !== undefined) {
      this.#certificateExpiry.reset();
      for (const [listener, { notAfterMs }] of certificates) if (Number.isFinite(notAfterMs)) this.#certificateExpiry.set({ listener }, notAfterMs / 1000);
    }
  }
}

function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** CPU seconds (user + system) of the calling thread: process.threadCpuUsage where Node has it. */
export function mainThreadCpuSeconds(): number {
  const usage = (process as unknown as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage?.() ?? process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}
