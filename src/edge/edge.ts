// Composes one edge process: the scheduler (main thread), the node gateway
// (gRPC listener), the data plane, the client listener and, for operators,
// the admin listener (admin API, /metrics), the event bus, config refresh
// and graceful drain. With workers.count 0 the data path runs here; with
// workers.count N it runs in N I/O worker threads (WorkerPool) and this
// thread keeps the scheduler, config and operations only.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Logger } from 'pino';
import type { EdgeConfig } from '../shared/config-types.js';
import { errorBody, Errors } from '../shared/errors.js';
import { createLogger } from '../shared/logger.js';
import { DataPlane } from '../workers/data-plane.js';
import { drainListener } from '../workers/drain.js';
import { NodeGateway } from '../workers/grpc/node-gateway.js';
import { ClientServer } from '../workers/http/client-server.js';
import type { PlaneInspection, WorkerEvent } from '../contract/io-protocol.js';
import { inspectPlane } from '../workers/plane-inspection.js';
import { AggregatorRegistry } from 'prom-client';
import { AdminServer } from '../main/admin/admin-server.js';
import type { AdminOps, NodeDrainOutcome } from '../main/admin/ops.js';
import { buildEdgeStatus, livenessOf, type EdgeStatus, type SessionView } from '../main/admin/status.js';
import { EdgeSeries, type SeriesPoint } from '../main/admin/series.js';
import { DEFAULT_ADMIN_PORT, DEFAULT_DRAIN_GRACE_MS } from '../main/config.js';
import { EdgeObserver } from '../workers/observe/edge-observer.js';
import { EventBus } from '../main/events/event-bus.js';
import { EdgeMetrics } from '../workers/observe/metrics.js';
import { ConfigRefresher, type RefreshRequest, type RefreshResult, type RefreshTarget } from '../main/refresh/refresher.js';
import { retireLanes } from '../workers/grpc/retire.js';
import { SchedulerDriver } from '../main/scheduler-driver.js';
import { WorkerPool } from '../main/worker-pool.js';
import type { SchedulerStatus } from '../contract/scheduler.js';
import { clientHttpsMaterial, nodeServerCredentials } from '../workers/tls.js';

export interface ShutdownReport {
  /** True when every open request finished within the grace period. */
  readonly drained: boolean;
  /** Requests still open when the grace ran out (ended with 503 shutting_down or an in-band error). */
  readonly aborted: number;
  readonly waitedMs: number;
}

/** The data path's state, gathered from every thread that runs it (tests, status). */
export interface EdgeInspection {
  /** One entry per I/O worker; one entry (worker -1) for the main thread when workers.count is 0. */
  readonly planes: readonly PlaneInspection[];
  readonly openExchanges: number;
  readonly tunnelBuffers: PlaneInspection['tunnelBuffers'];
  readonly sessions: PlaneInspection['sessions'];
  /** Summed over threads. */
  readonly protocolStats: Record<string, number>;
  readonly crossTunnels: number;
}

export interface RunningEdge {
  readonly httpPort: number;
  readonly grpcPort: number;
  /** Undefined unless started with `admin: true`. */
  readonly adminPort: number | undefined;
  readonly adminUrl: string | undefined;
  readonly driver: SchedulerDriver;
  /** The data path on the main thread; undefined with I/O workers (use inspect()). */
  readonly nodes: NodeGateway | undefined;
  readonly plane: DataPlane | undefined;
  /** I/O worker threads running the data path; 0 = the main thread does. */
  readonly workers: number;
  readonly url: string;
  readonly events: EventBus;
  readonly metrics: EdgeMetrics;
  /** The running config snapshot (replaced whole by a refresh, never mutated). */
  readonly config: EdgeConfig;
  readonly configVersion: number;
  /** Swaps the live config snapshot in one synchronous step; no validation, no node notices (refresh() does both). */
  setConfig(config: EdgeConfig): void;
  /** Config refresh (evaluate / apply), as the admin API and SIGHUP run it. */
  refresh(request: RefreshRequest): Promise<RefreshResult>;
  status(): Promise<EdgeStatus>;
  /** The data path's state in every thread (by postMessage from I/O workers). */
  inspect(): Promise<EdgeInspection>;
  setNodeDraining(nodeId: string, draining: boolean): NodeDrainOutcome;
  /** Graceful drain: no new connections or requests, open ones run up to graceMs, then everything closes. */
  shutdown(graceMs?: number): Promise<ShutdownReport>;
  /** Closes at once (open streams are left to the listeners' own close). */
  close(): Promise<void>;
}

export interface EdgeOptions {
  readonly logger?: Logger;
  /** Start the admin listener (admin API, /metrics) on config.admin. The CLI does; embedded edges opt in. */
  readonly admin?: boolean;
  /** Where the config came from: a refresh without an inline config (and SIGHUP) reads it again. */
  readonly configFile?: string;
}

/** workers.count 0: no worker planes to ask. */
const NO_INSPECTION: readonly PlaneInspection[] = [];

class Edge implements RunningEdge, RefreshTarget, AdminOps {
  httpPort = 0;
  grpcPort = 0;
  adminPort: number | undefined;
  readonly startedAt = Date.now();
  readonly events = new EventBus();
  readonly metrics: EdgeMetrics;
  readonly driver: SchedulerDriver;
  readonly nodes: NodeGateway | undefined;
  readonly plane: DataPlane | undefined;
  readonly client: ClientServer | undefined;
  readonly pool: WorkerPool | undefined;
  /** Worker mode: the node sessions as workers reported them (status). */
  readonly #sessions = new Map<string, SessionView>();
  #shuttingDown = false;
  readonly admin: AdminServer | undefined;
  /** The console's 15-minute charts; kept only when the admin listener runs. */
  readonly series: EdgeSeries | undefined;
  readonly refresher: ConfigRefresher;
  readonly #https: boolean;
  #config: EdgeConfig;
  #shutdown: Promise<ShutdownReport> | undefined;
  #closing: Promise<void> | undefined;

  constructor(
    config: EdgeConfig,
    readonly logger: Logger,
    options: EdgeOptions,
  ) {
    this.#config = config;
    this.driver = new SchedulerDriver(config);
    const https = clientHttpsMaterial(config.tls);
    this.#https = https !== undefined;
    if (config.workers.count > 0) {
      this.pool = new WorkerPool(config.workers.count, this.driver, logger, (event) => this.#workerEvent(event));
      this.events.onActiveChange = (active) => this.pool?.setEventsActive(active);
    } else {
      this.nodes = new NodeGateway(config, this.driver, logger);
      this.plane = new DataPlane(config, this.driver, this.nodes, logger);
      this.client = new ClientServer(config, this.plane, https);
    }
    this.metrics = new EdgeMetrics({
      status: () => this.driver.status(),
      connectedNodes: () => this.connectedNodeIds().length,
      openRequests: () => this.plane?.openExchanges ?? 0,
      workers: () => this.#config.workers.count,
      configVersion: () => this.refresher.configVersion,
      shuttingDown: () => this.shuttingDown,
      events: () => ({ subscribers: this.events.subscribers.size, published: this.events.publishedTotal, dropped: this.events.droppedTotal }),
    });
    const observer = new EdgeObserver(this.events, this.metrics, logger);
    this.plane?.setObserver(observer);
    this.nodes?.setObserver(observer);
    this.refresher = new ConfigRefresher(this, options.configFile, { refreshed: (result, origin) => this.#refreshed(result, origin) });
    // Registered before listen; during a drain every client request gets 503 shutting_down.
    this.client?.app.addHook('onRequest', this.refuseWhileDraining);
    this.admin = options.admin === true && config.admin !== undefined ? new AdminServer(config.admin, this) : undefined;
    this.series = this.admin === undefined ? undefined : new EdgeSeries({ metricsParts: () => this.#metricsParts(), groups: () => this.driver.status().groups });
  }

  get workers(): number {
    return this.pool?.count ?? 0;
  }

  async listen(): Promise<void> {
    const config = this.#config;
    if (this.pool !== undefined) {
      try {
        const ports = await this.pool.start(config, this.logger.level);
        this.httpPort = ports.httpPort;
        this.grpcPort = ports.grpcPort;
        if (this.admin) this.adminPort = await this.admin.listen(config.admin?.host ?? '127.0.0.1', config.admin?.port ?? DEFAULT_ADMIN_PORT);
        this.series?.start();
      } catch (err) {
        await this.pool.close();
        this.driver.close();
        throw err;
      }
      return;
    }
    if (this.nodes === undefined || this.client === undefined) return;
    this.grpcPort = await this.nodes.listen(config.grpc.host, config.grpc.port, nodeServerCredentials(config.tls));
    try {
      this.httpPort = await this.client.listen(config.http.host, config.http.port);
      if (this.admin) this.adminPort = await this.admin.listen(config.admin?.host ?? '127.0.0.1', config.admin?.port ?? DEFAULT_ADMIN_PORT);
      this.series?.start();
    } catch (err) {
      await this.client.close();
      await this.nodes.close();
      throw err;
    }
  }

  get url(): string {
    return `${this.#https ? 'https' : 'http'}://${this.#config.http.host}:${this.httpPort}`;
  }

  get adminUrl(): string | undefined {
    return this.adminPort === undefined ? undefined : `http://${this.#config.admin?.host ?? '127.0.0.1'}:${this.adminPort}`;
  }

  get config(): EdgeConfig {
    return this.#config;
  }

  get configVersion(): number {
    return this.refresher.configVersion;
  }

  get shuttingDown(): boolean {
    return this.plane?.shuttingDown ?? this.#shuttingDown;
  }

  get openRequests(): number {
    return this.plane?.openExchanges ?? 0;
  }

  get metricsContentType(): string {
    return this.metrics.contentType;
  }

  // --- config ---------------------------------------------------------------

  setConfig(next: EdgeConfig): void {
    // One synchronous step, so no request sees a mix of snapshots. The
    // scheduler goes last: its pump may grant queued requests at once, and
    // those grants must find the data path already on the new snapshot.
    // With workers the snapshot reaches them by message, a moment later:
    // each worker swaps it in one step, so its requests see old or new.
    this.#config = next;
    this.nodes?.setConfig(next);
    this.plane?.setConfig(next);
    this.client?.setConfig(next);
    if (this.pool !== undefined) void this.pool.callAll({ type: 'setConfig', config: next }).catch((err: Error) => this.logger.error({ err }, 'config snapshot did not reach every worker'));
    this.driver.setConfig(next);
  }

  refresh(request: RefreshRequest): Promise<RefreshResult> {
    return this.refresher.refresh(request);
  }

  connectedNodeIds(): string[] {
    const ids: string[] = [];
    if (this.nodes === undefined) {
      for (const n of this.driver.status().nodes) if (n.connected) ids.push(n.id);
      return ids;
    }
    for (const nodeId of this.nodes.nodeIds()) ids.push(nodeId);
    return ids;
  }

  notifyNode(nodeId: string, changedPaths: readonly string[], configVersion: number): boolean {
    if (this.pool !== undefined) {
      const place = this.pool.placeOf(nodeId);
      if (place === undefined) return false;
      void this.pool.call(place.worker, { type: 'notifyNode', nodeId, changedPaths, configVersion }).catch(() => undefined);
      return true;
    }
    const session = this.nodes?.session(nodeId);
    if (session === undefined) return false;
    session.sendConfigRefresh(changedPaths, configVersion);
    return true;
  }

  retireNode(nodeId: string, reason: string): void {
    const graceMs = this.#config.drain?.graceMs ?? DEFAULT_DRAIN_GRACE_MS;
    if (this.pool !== undefined) {
      const place = this.pool.placeOf(nodeId);
      if (place === undefined) return;
      this.driver.setDraining(nodeId, true);
      this.events.publish({ type: 'node.draining', node: nodeId, by: 'config' });
      this.logger.info({ node: nodeId, generation: place.generation, reason, graceMs }, 'retiring node session: no new requests, closed once idle');
      // Every worker holding a stream of the node retires its streams; see retireLanes for the order.
      const holdAnchor = place.lanes.some((worker) => worker !== place.worker);
      for (const worker of new Set([place.worker, ...place.lanes])) void this.pool.call(worker, { type: 'retireNode', nodeId, graceMs, reason, holdAnchor }).catch(() => undefined);
      return;
    }
    const lanes = this.nodes?.lanes(nodeId) ?? [];
    if (lanes.length === 0) return;
    this.driver.setDraining(nodeId, true);
    this.events.publish({ type: 'node.draining', node: nodeId, by: 'config' });
    this.logger.info({ node: nodeId, generation: lanes[0].generation, reason, lanes: lanes.length, graceMs }, 'retiring node session: no new requests, closed once idle');
    retireLanes(lanes, graceMs, reason);
  }

  #refreshed(result: RefreshResult, origin: string): void {
    this.metrics.refreshed(result.mode, result.status);
    const paths = result.changes.map((c) => c.path);
    if (result.status === 'applied') {
      this.events.publish({ type: 'config.applied', configVersion: result.configVersion, changedPaths: paths });
      this.logger.info({ origin, configVersion: result.configVersion, changed: paths, notified: result.notified.map((n) => n.node), retired: result.retired }, 'config applied');
    } else if (result.rejection !== null && result.mode === 'apply') {
      this.logger.warn({ origin, rejection: result.rejection, reasons: result.reasons }, 'config refresh rejected; the running config stays');
    } else {
      this.logger.info({ origin, mode: result.mode, status: result.status, rejection: result.rejection, changed: paths }, 'config refresh');
    }
  }

  // --- admin ----------------------------------------------------------------

  async status(): Promise<EdgeStatus> {
    const rejectsPerMinute = (alias: string, total: number): number => this.series?.rejectsPerMinute(alias, total) ?? 0;
    if (this.pool === undefined) {
      const sessions = this.nodes === undefined ? [] : [...this.nodes.sessions()].map((s) => ({ nodeId: s.nodeId, generation: s.generation, lastSeenMs: s.lastSeenAtMs }));
      return buildEdgeStatus(this, this.openRequests, [], { liveness: livenessOf(sessions), rejectsPerMinute });
    }
    const planes = await this.#planes();
    let open = 0;
    const rings = this.pool.ringUsage();
    for (const p of planes) {
      open += p.openExchanges;
      rings.push(...p.rings);
    }
    return buildEdgeStatus(this, open, rings, { liveness: livenessOf(planes.flatMap((p) => p.sessions)), rejectsPerMinute });
  }

  seriesPoints(): readonly SeriesPoint[] {
    return this.series?.points ?? [];
  }

  async #metricsParts(): Promise<unknown[][]> {
    const own = await this.metrics.scrapeJson();
    if (this.pool === undefined) return [own];
    return [own, ...(await this.pool.callAll<unknown[]>({ type: 'metrics' }))];
  }

  async inspect(): Promise<EdgeInspection> {
    const planes = this.plane !== undefined && this.nodes !== undefined ? [inspectPlane(-1, this.plane, this.nodes, undefined)] : await this.#planes();
    const protocolStats: Record<string, number> = {};
    let crossTunnels = 0;
    for (const p of planes) {
      crossTunnels += p.crossTunnelsOut;
      for (const [k, v] of Object.entries(p.protocolStats)) protocolStats[k] = (protocolStats[k] ?? 0) + v;
    }
    return {
      planes,
      openExchanges: planes.reduce((sum, p) => sum + p.openExchanges, 0),
      tunnelBuffers: planes.flatMap((p) => p.tunnelBuffers),
      sessions: planes.flatMap((p) => p.sessions),
      protocolStats,
      crossTunnels,
    };
  }

  #planes(): Promise<readonly PlaneInspection[]> {
    return this.pool === undefined ? Promise.resolve(NO_INSPECTION) : this.pool.callAll<PlaneInspection>({ type: 'inspect' });
  }

  scheduler(): SchedulerStatus {
    return this.driver.status();
  }

  session(nodeId: string): SessionView | undefined {
    if (this.nodes === undefined) return this.#sessions.get(nodeId);
    const lanes = this.nodes.lanes(nodeId);
    const anchor = lanes.find((lane) => lane.joinGeneration === 0) ?? lanes[0];
    if (anchor === undefined) return undefined;
    let openTunnels = 0;
    for (const lane of lanes) openTunnels += lane.openTunnels;
    return { generation: anchor.generation, connectedAtMs: anchor.connectedAtMs, agentVersion: anchor.agentVersion, remoteAddress: anchor.remoteAddress, openTunnels };
  }

  async scrapeMetrics(): Promise<string> {
    if (this.pool === undefined) return this.metrics.scrape();
    const parts = [await this.metrics.scrapeJson(), ...(await this.pool.callAll<unknown[]>({ type: 'metrics' }))];
    return AggregatorRegistry.aggregate(parts as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
  }

  /** A worker's event: node sessions update the status view; the rest go on the bus. */
  #workerEvent(message: WorkerEvent): void {
    const info = message.session;
    if (info !== undefined) {
      const known = this.#sessions.get(info.nodeId);
      if (!message.gone) this.#sessions.set(info.nodeId, { ...info, openTunnels: 0 });
      else if (known !== undefined && known.generation === info.generation) this.#sessions.delete(info.nodeId);
    }
    if (message.event !== undefined) this.events.publish(message.event);
  }

  setNodeDraining(nodeId: string, draining: boolean): NodeDrainOutcome {
    const session = this.session(nodeId);
    if (session === undefined) {
      const known = this.#config.nodes.some((n) => n.id === nodeId) || this.driver.status().nodes.some((n) => n.id === nodeId);
      return known
        ? { ok: false, code: 'node_not_connected', message: `node ${JSON.stringify(nodeId)} is not connected; draining applies to a live connection` }
        : { ok: false, code: 'node_not_found', message: `no node ${JSON.stringify(nodeId)} in the config` };
    }
    this.driver.setDraining(nodeId, draining);
    this.events.publish({ type: draining ? 'node.draining' : 'node.undrained', node: nodeId, by: 'admin' });
    // With workers the session is elsewhere: its node's live leases are its open tunnels.
    const openTunnels = this.nodes !== undefined ? session.openTunnels : this.driver.status().providers.reduce((sum, p) => sum + (p.nodeId === nodeId ? p.inFlight : 0), 0);
    this.logger.info({ node: nodeId, generation: session.generation, draining, openTunnels }, draining ? 'node draining (admin)' : 'node undrained (admin)');
    return { ok: true, node: nodeId, draining, openTunnels };
  }

  // --- drain and close ------------------------------------------------------

  /** fastify onRequest hook on the client listener; one bound function for every request. */
  readonly refuseWhileDraining = (_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    if (this.plane === undefined || !this.plane.shuttingDown) {
      done();
      return;
    }
    this.plane.refused('shutting_down');
    reply.code(503).header('content-type', 'application/json').header('retry-after', '1').header('connection', 'close').send(errorBody(Errors.shuttingDown));
  };

  shutdown(graceMs?: number): Promise<ShutdownReport> {
    this.#shutdown ??= this.#drain(graceMs ?? this.#config.drain?.graceMs ?? DEFAULT_DRAIN_GRACE_MS);
    return this.#shutdown;
  }

  async #drain(graceMs: number): Promise<ShutdownReport> {
    if (this.pool !== undefined) return this.#drainWorkers(graceMs);
    const plane = this.plane as DataPlane;
    const client = this.client as ClientServer;
    const started = performance.now();
    const deadline = started + graceMs;
    const open = plane.openExchanges;
    this.events.publish({ type: 'edge.draining', graceMs, openRequests: open });
    this.logger.info({ graceMs, openRequests: open }, 'draining: no new connections or requests; open requests may finish');
    // The same drain each I/O worker runs on its own listener.
    const aborted = await drainListener(plane, client.app.server, deadline);
    if (aborted > 0) this.logger.warn({ aborted, graceMs }, 'drain grace over: the requests still open were ended');
    await this.close();
    const report: ShutdownReport = { drained: aborted === 0, aborted, waitedMs: Math.round(performance.now() - started) };
    this.logger.info(report, 'edge stopped');
    return report;
  }

  /** Each worker drains its own listener and data plane; the grace runs in parallel. */
  async #drainWorkers(graceMs: number): Promise<ShutdownReport> {
    const pool = this.pool as WorkerPool;
    const started = performance.now();
    this.#shuttingDown = true;
    const open = (await this.#planes()).reduce((sum, p) => sum + p.openExchanges, 0);
    this.events.publish({ type: 'edge.draining', graceMs, openRequests: open });
    this.logger.info({ graceMs, openRequests: open, workers: pool.count }, 'draining: no new connections or requests; open requests may finish');
    const aborted = (await pool.callAll<number>({ type: 'drain', graceMs })).reduce((sum, n) => sum + n, 0);
    if (aborted > 0) this.logger.warn({ aborted, graceMs }, 'drain grace over: the requests still open were ended');
    await this.close();
    const report: ShutdownReport = { drained: aborted === 0, aborted, waitedMs: Math.round(performance.now() - started) };
    this.logger.info(report, 'edge stopped');
    return report;
  }

  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.series?.stop();
    await this.admin?.close();
    this.events.closeAll();
    await this.client?.close();
    await this.nodes?.close();
    await this.pool?.close();
    this.driver.close();
  }
}

export async function startEdge(config: EdgeConfig, options: EdgeOptions = {}): Promise<RunningEdge> {
  const logger = options.logger ?? createLogger('edge');
  const edge = new Edge(config, logger, options);
  await edge.listen();
  logger.info(
    {
      http: `${config.http.host}:${edge.httpPort}`,
      grpc: `${config.grpc.host}:${edge.grpcPort}`,
      admin: edge.adminPort === undefined ? null : `${config.admin?.host}:${edge.adminPort}`,
      httpPort: edge.httpPort,
      grpcPort: edge.grpcPort,
      adminPort: edge.adminPort ?? null,
    },
    'edge listening',
  );
  return edge;
}
