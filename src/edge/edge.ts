// The composition root: assembles one edge process from the scheduler
// thread's parts (scheduler driver, event bus, config refresh, admin
// listener, /metrics) and the data path (client and node listeners, tunnels),
// which it reaches only through the DataPath interface: a LocalPlane on this
// thread with workers.count 0, a WorkerPool of I/O worker threads otherwise.
// The scheduler's own metrics carry no per-request counts; those come from
// the data path's threads and are merged at scrape time in either mode.
import type { Logger } from 'pino';
import type { EdgeConfig } from '../shared/config-types.js';
import { createLogger } from '../shared/logger.js';
import type { DataPath, DataPathEvents } from '../contract/data-path.js';
import type { PlaneInspection, WorkerEvent } from '../contract/io-protocol.js';
import { LocalPlane } from '../workers/local-plane.js';
import { AggregatorRegistry } from 'prom-client';
import { AdminServer } from '../main/admin/admin-server.js';
import type { AdminOps, NodeDrainOutcome, RunCancelOutcome } from '../main/admin/ops.js';
import { buildEdgeStatus, livenessOf, tenantNamesOf, type EdgeStatus, type SessionView } from '../main/admin/status.js';
import { EdgeSeries, SERIES_METRICS, type SeriesPoint } from '../main/admin/series.js';
import { buildKeysView, KEY_METRICS, keysLeftOf, type KeysView } from '../main/admin/keys.js';
import { DEFAULT_ADMIN_PORT, DEFAULT_DRAIN_GRACE_MS } from '../main/config.js';
import { EventBus } from '../main/events/event-bus.js';
import { RunStore } from '../main/runs/run-store.js';
import { EdgeMetrics, ringFill } from '../workers/observe/metrics.js';
import { BootstrapServer } from '../main/bootstrap/bootstrap-server.js';
import { runNodeCommand, type NodeCommandOutcome } from '../main/nodes/node-commands.js';
import type { NodeCommandKind, NodeCommandResult } from '../shared/node-commands.js';
import { ConfigRefresher, type RefreshRequest, type RefreshResult, type RefreshTarget } from '../main/refresh/refresher.js';
import { SchedulerDriver } from '../main/scheduler-driver.js';
import { WorkerPool } from '../main/worker-pool.js';
import type { SchedulerStatus } from '../contract/scheduler.js';
import { dialAddress, urlHost } from '../shared/url-host.js';
import { StartError } from '../shared/start-error.js';
import { readTlsMaterialSync, type TlsMaterial } from '../shared/tls-material.js';
import { ServedCertificates } from '../main/refresh/certificates.js';

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
  /** Undefined unless config.bootstrap is set. */
  readonly bootstrapPort: number | undefined;
  readonly adminUrl: string | undefined;
  readonly driver: SchedulerDriver;
  /** The data path: on this thread (workers.count 0) or in the I/O workers; the same calls either way. */
  readonly plane: DataPath;
  /** I/O worker threads running the data path; 0 = the main thread does. */
  readonly workers: number;
  readonly url: string;
  readonly events: EventBus;
  /** Run records (GET /admin/runs), fed by the data path in every mode. */
  readonly runs: RunStore;
  readonly metrics: EdgeMetrics;
  /** The running config snapshot (replaced whole by a refresh, never mutated). */
  readonly config: EdgeConfig;
  readonly configVersion: number;
  /** Swaps the live config snapshot in one synchronous step (resolves once every I/O worker has it); no validation, no node notices (refresh() does both). */
  setConfig(config: EdgeConfig): Promise<void>;
  /** Config refresh (evaluate / apply), as the admin API and SIGHUP run it. */
  refresh(request: RefreshRequest): Promise<RefreshResult>;
  status(): Promise<EdgeStatus>;
  /** The data path's state in every thread (by postMessage from I/O workers). */
  inspect(): Promise<EdgeInspection>;
  /** The Prometheus text GET /metrics serves: this thread's registry and every I/O worker's, aggregated. */
  scrapeMetrics(): Promise<string>;
  setNodeDraining(nodeId: string, draining: boolean): NodeDrainOutcome;
  /** Resets a provider's outlier breaker (POST /admin/providers/:id/reset); undefined for an unknown provider. */
  resetProvider(providerId: string): boolean | undefined;
  /** Cancels an open run (POST /admin/runs/:id/cancel). */
  cancelRun(runId: string): Promise<RunCancelOutcome>;
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

/** The data path for workers.count: this thread (0) or a pool of I/O workers. The only place the count matters. */
function createDataPath(config: EdgeConfig, tls: TlsMaterial, driver: SchedulerDriver, logger: Logger, events: DataPathEvents): DataPath {
  return config.workers.count > 0 ? new WorkerPool(config.workers.count, driver, logger, events, tls) : new LocalPlane(config, tls, driver, logger, events);
}

/** The certificates the config names, read and checked once for every thread; a problem stops the start with one line. */
function startingTls(config: EdgeConfig): TlsMaterial {
  const problems: string[] = [];
  const tls = readTlsMaterialSync(config.tls, problems);
  if (tls === undefined) throw new StartError(problems.join('; '));
  return tls;
}

/** Client requests open over every thread of the data path. */
function sumOpen(planes: readonly PlaneInspection[]): number {
  let open = 0;
  for (const p of planes) open += p.openExchanges;
  return open;
}

class Edge implements RunningEdge, RefreshTarget, AdminOps {
  httpPort = 0;
  grpcPort = 0;
  adminPort: number | undefined;
  bootstrapPort: number | undefined;
  #bootstrap: BootstrapServer | undefined;
  readonly startedAt = Date.now();
  readonly events = new EventBus();
  readonly runs: RunStore;
  readonly metrics: EdgeMetrics;
  readonly driver: SchedulerDriver;
  readonly plane: DataPath;
  readonly admin: AdminServer | undefined;
  /** The console's 15-minute charts; kept only when the admin listener runs. */
  readonly series: EdgeSeries | undefined;
  readonly refresher: ConfigRefresher;
  readonly logger: Logger;
  /** Node sessions as the data path reported them (status). */
  readonly #sessions = new Map<string, SessionView>();
  /** Node -> the newest connection generation the data path reported (generations only grow within this process). */
  readonly #newestGeneration = new Map<string, number>();
  /** Node -> the connection generation whose agent sent Leaving (a later connection has another). */
  readonly #leaving = new Map<string, number>();
  /**
   * Per node, the connection whose agent a drain command drained (it answered ok, or registered drained): the
   * agent refuses new tunnels until the undrain command, so POST …/undrain alone would lift only the edge's side.
   */
  readonly #commandDrained = new Map<string, number>();
  /** node-commands.ts's count of drain and undrain commands in flight, per node. */
  readonly #drainCommands = new Map<string, number>();
  /** Node connections a config change retires, by generation: an admin undrain must not put them back to work. */
  readonly #retiring = new Map<string, number>();
  readonly #https: boolean;
  /** What the listeners serve; a refresh swaps renewed certificates in. */
  readonly certificates: ServedCertificates;
  #shuttingDown = false;
  #config: EdgeConfig;
  #shutdown: Promise<ShutdownReport> | undefined;
  #closing: Promise<void> | undefined;

  constructor(config: EdgeConfig, logger: Logger, options: EdgeOptions) {
    this.#config = config;
    this.logger = logger;
    this.runs = new RunStore(this.events, config.runs?.maxFinished);
    this.driver = new SchedulerDriver(config);
    this.driver.scheduler.outliers.setListener((change) => {
      this.logger.warn(change, change.type === 'provider.ejected' ? 'provider ejected as an outlier' : `outlier: ${change.type}`);
      this.events.publish(change);
    });
    this.driver.scheduler.overload.setListener((change) => {
      this.logger.info(change, change.type === 'provider.overloaded' ? 'provider overloaded: concurrency lowered' : 'provider back at full concurrency');
      this.events.publish(change);
    });
    this.driver.onProviderHealth = (node, provider, healthy) => {
      this.logger.warn({ node, provider }, healthy ? 'provider health probe passes again' : 'provider health probe fails: out of rotation');
      this.events.publish({ type: healthy ? 'provider.healthy' : 'provider.unhealthy', provider, node });
    };
    const tls = startingTls(config);
    this.certificates = new ServedCertificates(tls);
    this.#https = tls.client !== undefined;
    this.plane = createDataPath(config, tls, this.driver, logger, (event) => this.#planeEvent(event));
    this.events.onActiveChange = (active) => this.plane.setEventsActive(active);
    this.metrics = new EdgeMetrics({
      status: () => this.driver.status(),
      connectedNodes: () => this.connectedNodeIds().length,
      openRequests: () => 0,
      workers: () => this.#config.workers.count,
      ringOccupancy: () => ringFill(this.plane.ringUsage()),
      configVersion: () => this.refresher.configVersion,
      shuttingDown: () => this.shuttingDown,
      events: () => ({ subscribers: this.events.subscribers.size, published: this.events.publishedTotal, dropped: this.events.droppedTotal }),
      tenantNames: () => tenantNamesOf(this.#config),
      certificates: () => this.certificates.served(),
      keysLeft: () => keysLeftOf(this.#config, this.plane.keyLoad()),
    });
    this.refresher = new ConfigRefresher(this, options.configFile, {
      refreshed: (result, origin) => this.#refreshed(result, origin),
      committed: (configVersion, changedPaths) => this.#committed(configVersion, changedPaths),
      live: (configVersion, changedPaths, origin, late) => this.#live(configVersion, changedPaths, origin, late),
    });
    this.admin = options.admin === true && config.admin !== undefined ? new AdminServer(config.admin, this) : undefined;
    this.series = this.admin === undefined ? undefined : new EdgeSeries({ metricsParts: () => this.#metricsParts(SERIES_METRICS), groups: () => this.driver.status().groups });
  }

  get workers(): number {
    return this.plane.workers;
  }

  async listen(): Promise<void> {
    const config = this.#config;
    try {
      const ports = await this.plane.start(config, this.logger.level);
      this.httpPort = ports.httpPort;
      this.grpcPort = ports.grpcPort;
      if (this.admin) this.adminPort = await this.admin.listen(config.admin?.host ?? '127.0.0.1', config.admin?.port ?? DEFAULT_ADMIN_PORT);
      if (config.bootstrap !== undefined) {
        const bootstrap = config.bootstrap;
        const source = { config: () => this.#config, edgeAddress: () => bootstrap.edgeAddress ?? dialAddress(config.grpc.host, this.grpcPort) };
        ({ server: this.#bootstrap, port: this.bootstrapPort } = await BootstrapServer.start(bootstrap, source, this.logger.child({ listener: 'bootstrap' })));
      }
      this.series?.start();
    } catch (err) {
      await this.admin?.close();
      await this.plane.close();
      this.driver.close();
      throw err;
    }
  }

  get url(): string {
    return `${this.#https ? 'https' : 'http'}://${urlHost(this.#config.http.host)}:${this.httpPort}`;
  }

  get adminUrl(): string | undefined {
    return this.adminPort === undefined ? undefined : `http://${urlHost(this.#config.admin?.host ?? '127.0.0.1')}:${this.adminPort}`;
  }

  get config(): EdgeConfig {
    return this.#config;
  }

  get configVersion(): number {
    return this.refresher.configVersion;
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  get metricsContentType(): string {
    return this.metrics.contentType;
  }

  // --- config ---------------------------------------------------------------

  setConfig(next: EdgeConfig): Promise<void> {
    // One synchronous step, so no request sees a mix of snapshots. The
    // scheduler goes last: its pump may grant queued requests at once, and
    // those grants must find the data path already on the new snapshot.
    // With workers the snapshot reaches them by message, a moment later:
    // each worker swaps it in one step, so its requests see old or new; the
    // promise says when every one has.
    this.#config = next;
    const everywhere = this.plane.setConfig(next);
    this.driver.setConfig(next);
    return everywhere;
  }

  setCertificates(tls: TlsMaterial): Promise<void> {
    return this.plane.setCertificates(tls);
  }

  refresh(request: RefreshRequest): Promise<RefreshResult> {
    return this.refresher.refresh(request);
  }

  connectedNodeIds(): string[] {
    const ids: string[] = [];
    for (const n of this.driver.status().nodes) if (n.connected) ids.push(n.id);
    return ids;
  }

  notifyNode(nodeId: string, changedPaths: readonly string[], configVersion: number): boolean {
    return this.plane.notifyNode(nodeId, changedPaths, configVersion);
  }

  commandNode(nodeId: string, kind: string, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<NodeCommandResult> {
    return this.plane.nodeCommand(nodeId, kind, args, deadlineMs);
  }

  async nodeCommand(ref: string, kind: NodeCommandKind, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<NodeCommandOutcome> {
    const setEdgeDraining = (nodeId: string, draining: boolean, checkOnly = false): { code: string; message: string } | undefined => {
      const outcome = this.setNodeDraining(nodeId, draining, true, checkOnly);
      return outcome.ok ? undefined : { code: outcome.code, message: outcome.message };
    };
    const agentDrained = (nodeId: string, drained: boolean): void => {
      const generation = this.#sessions.get(nodeId)?.generation;
      if (!drained) this.#commandDrained.delete(nodeId);
      else if (generation !== undefined) this.#commandDrained.set(nodeId, generation);
    };
    return runNodeCommand({ config: this.#config, plane: this.plane, setEdgeDraining, drainCommands: this.#drainCommands, agentDrained }, ref, kind, args, deadlineMs);
  }

  retireNode(nodeId: string, reason: string): boolean {
    const graceMs = this.#config.drain?.graceMs ?? DEFAULT_DRAIN_GRACE_MS;
    // Where the streams are decides, not this thread's session view: with I/O workers that view
    // learns of a new connection a message later, and a token revoked in between must still retire it.
    // No new grants (set in this same turn, before any stream closes), then the streams close as they go idle.
    if (!this.plane.retireNode(nodeId, graceMs, reason)) return false;
    const generation = this.#sessions.get(nodeId)?.generation;
    if (generation !== undefined) this.#retiring.set(nodeId, generation);
    this.driver.setDraining(nodeId, true);
    this.events.publish({ type: 'node.draining', node: nodeId, by: 'config' });
    this.logger.info({ node: nodeId, generation, reason, graceMs }, 'retiring node session: no new requests, closed once idle');
    return true;
  }

  #committed(configVersion: number, changedPaths: readonly string[]): void {
    this.events.publish({ type: 'config.applied', configVersion, changedPaths: [...changedPaths] });
  }

  /**
   * A provider the refresh added to a connected node serves only once that node announces it: say so, or the operator
   * waits for requests that never come. Judged once the nodes answered their refresh_config, not at the commit: an
   * agent whose file already names the provider announces it in that answer (`providers[id] (added)`).
   */
  #warnUnannounced(result: RefreshResult): void {
    const unannounced: string[] = [];
    for (const p of this.driver.status().providers) {
      if (!p.connected || p.announced || !result.changes.some((c) => c.path === `nodes[${p.nodeId}].providers[${p.id}]`)) continue;
      // The agent's answer lists what it applied before what needs its restart (commands.ts refreshConfig).
      const answer = result.nodes.find((n) => n.node === p.nodeId);
      const applied = answer === undefined || (answer.status !== 'applied' && answer.status !== 'restart_required') ? '' : answer.message.split('; needs an agent restart')[0];
      if (applied.includes(`providers[${p.id}] (added)`)) continue;
      unannounced.push(p.id);
    }
    if (unannounced.length > 0) {
      this.logger.warn(
        { providers: unannounced },
        "providers the refresh added are not announced by their node's connected agent: they get no requests until it runs them (add them to that agent's config file, then send it the refresh_config command; an agent that predates Announce needs a restart)",
      );
    }
  }

  #live(configVersion: number, changedPaths: readonly string[], origin: string, late: string | undefined): void {
    // Once every I/O worker has it: a script that waits for this line and sends a request finds the new config.
    if (late === undefined) this.logger.info({ origin, configVersion, changed: changedPaths }, 'config applied');
    else this.logger.warn({ origin, configVersion, changed: changedPaths, late }, 'config applied');
  }

  #refreshed(result: RefreshResult, origin: string): void {
    // An evaluate that could not read or validate its candidate failed (400), as a rejected apply did.
    const failed = result.rejection === 'invalid_config' || result.rejection === 'no_config_source';
    this.metrics.refreshed(result.mode, failed ? 'rejected' : result.status);
    const paths = result.changes.map((c) => c.path);
    const renewed = result.certificates.filter((c) => c.changed);
    if (result.status === 'applied' && renewed.length > 0) this.logger.info({ origin, certificates: renewed }, 'TLS certificates reloaded: new handshakes get them');
    if (result.status === 'applied' && result.changes.length === 0) return;
    if (result.status === 'applied') {
      // config.applied went out when it was committed (#committed); this is the nodes' part.
      this.logger.info({ origin, configVersion: result.configVersion, notified: result.notified.map((n) => n.node), retired: result.retired, nodes: result.nodes }, 'config refresh: nodes answered');
      this.#warnUnannounced(result);
    } else if (result.rejection !== null && result.mode === 'apply') {
      this.logger.warn({ origin, rejection: result.rejection, reasons: result.reasons }, 'config refresh rejected; the running config stays');
    } else {
      this.logger.info({ origin, mode: result.mode, status: result.status, rejection: result.rejection, changed: paths }, 'config refresh');
    }
  }

  // --- admin ----------------------------------------------------------------

  async status(): Promise<EdgeStatus> {
    const rejectsPerMinute = (alias: string, total: number): number => this.series?.rejectsPerMinute(alias, total) ?? 0;
    const planes = await this.plane.inspect();
    const rings = this.plane.ringUsage();
    for (const p of planes) rings.push(...p.rings);
    return buildEdgeStatus(this, sumOpen(planes), rings, { liveness: livenessOf(planes.flatMap((p) => p.sessions)), rejectsPerMinute });
  }

  seriesPoints(): readonly SeriesPoint[] {
    return this.series?.points ?? [];
  }

  async keys(): Promise<KeysView> {
    return buildKeysView(this.#config, this.plane.keyLoad(), await this.#metricsParts(KEY_METRICS));
  }

  /** `names` of the main thread's metrics, and every data path thread's registry. */
  async #metricsParts(names: readonly string[]): Promise<unknown[][]> {
    // The main thread's own part without the process metrics: reading those would reset the event-loop lag /metrics reports.
    const own = await this.metrics.partJson(names);
    return [own, ...((await this.plane.metricParts()) as unknown[][])];
  }

  async inspect(): Promise<EdgeInspection> {
    const planes = await this.plane.inspect();
    const protocolStats: Record<string, number> = {};
    let crossTunnels = 0;
    for (const p of planes) {
      crossTunnels += p.crossTunnelsOut;
      for (const [k, v] of Object.entries(p.protocolStats)) protocolStats[k] = (protocolStats[k] ?? 0) + v;
    }
    return {
      planes,
      openExchanges: sumOpen(planes),
      tunnelBuffers: planes.flatMap((p) => p.tunnelBuffers),
      sessions: planes.flatMap((p) => p.sessions),
      protocolStats,
      crossTunnels,
    };
  }

  scheduler(): SchedulerStatus {
    return this.driver.status();
  }

  session(nodeId: string): SessionView | undefined {
    return this.#sessions.get(nodeId);
  }

  async scrapeMetrics(): Promise<string> {
    const parts = [await this.metrics.scrapeJson(), ...(await this.plane.metricParts())];
    return AggregatorRegistry.aggregate(parts as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
  }

  /** The data path's report: node sessions update the status view; the rest go on the bus. */
  #planeEvent(message: WorkerEvent): void {
    if (message.type === 'runs') {
      this.runs.runs(message.events);
      // Their clients got a cut connection: counted here as the 502 their records say (their worker counted nothing),
      // under the provider the record names (where it had gone, kept from its last report), and under its key.
      if (message.workerExited === true) {
        for (const event of message.events) {
          if (event.type !== 'run.finished') continue;
          const record = this.runs.get(event.runId);
          this.metrics.requestLost(event.model, record?.provider ?? '', event.status, record?.key ?? undefined);
        }
      }
      return;
    }
    const info = message.session;
    if (info !== undefined) {
      const known = this.#sessions.get(info.nodeId);
      // With I/O workers each worker reports on its own: a superseded connection's news may come after its successor's.
      const newest = this.#newestGeneration.get(info.nodeId) ?? 0;
      if (info.generation > newest) this.#newestGeneration.set(info.nodeId, info.generation);
      if (!message.gone) {
        if (info.generation >= newest) this.#sessions.set(info.nodeId, { ...info, openTunnels: 0 });
      } else if (known !== undefined && known.generation === info.generation) this.#sessions.delete(info.nodeId);
    }
    if (message.event !== undefined) {
      // The connection whose agent said Leaving: its drain is the agent's, not the operator's to lift.
      if (message.event.type === 'node.leaving') this.#leaving.set(message.event.node, message.event.generation);
      if (message.event.type === 'node.connected' && message.event.drained) this.#commandDrained.set(message.event.node, message.event.generation);
      this.events.publish(message.event);
    }
  }

  /** A node's live leases are its open tunnels, whichever thread holds its streams. */
  #leasesOn(nodeId: string): number {
    // The node's own count: a provider a refresh moved away still has requests open on it.
    return this.driver.status().nodes.find((n) => n.id === nodeId)?.leases ?? 0;
  }

  resetProvider(providerId: string): boolean | undefined {
    if (!this.driver.status().providers.some((p) => p.id === providerId)) return undefined;
    const reset = this.driver.resetOutlier(providerId);
    if (reset) {
      this.events.publish({ type: 'provider.reset', provider: providerId, by: 'admin' });
      this.logger.info({ provider: providerId }, 'provider breaker reset (admin)');
    }
    return reset;
  }

  async cancelRun(runId: string): Promise<RunCancelOutcome> {
    const record = this.runs.get(runId);
    if (record?.state === 'finished') return 'finished';
    // Unknown to the records may still be running: they lag the data path by a turn, or 2 ms with I/O workers.
    if (await this.plane.cancelRun(runId)) {
      this.logger.info({ runId }, 'run cancelled (admin)');
      return 'cancelled';
    }
    return record === undefined ? 'not_found' : 'finished';
  }

  /** `byCommand`: a drain or undrain command's own switch on the edge's side; `checkOnly`: say whether it would be refused, switch nothing. */
  setNodeDraining(nodeId: string, draining: boolean, byCommand = false, checkOnly = false): NodeDrainOutcome {
    const session = this.session(nodeId);
    if (session === undefined) {
      const known = this.#config.nodes.some((n) => n.id === nodeId) || this.driver.status().nodes.some((n) => n.id === nodeId);
      if (known) return { ok: false, code: 'node_not_connected', message: `node ${JSON.stringify(nodeId)} is not connected; draining applies to a live connection` };
      // This route takes an id only; a label here is an easy slip (commands take either), so say where it works.
      const labelled = this.#config.nodes.filter((n) => n.labels?.includes(nodeId) === true).map((n) => n.id);
      const hint = labelled.length === 0 ? '' : `; ${JSON.stringify(nodeId)} is a label (of ${labelled.map((id) => JSON.stringify(id)).join(', ')}): this route takes a node id, the drain and undrain commands take a label (POST /admin/nodes/${encodeURIComponent(nodeId)}/commands {"kind":"${draining ? 'drain' : 'undrain'}"})`;
      return { ok: false, code: 'node_not_found', message: `no node ${JSON.stringify(nodeId)} in the config${hint}` };
    }
    if (!draining && this.#leaving.get(nodeId) === session.generation) {
      return { ok: false, code: 'node_leaving', message: `node ${JSON.stringify(nodeId)} is leaving (its agent is shutting down or was told to drain): it refuses new requests on this connection; its next connection starts undrained` };
    }
    if (!draining && !byCommand && this.#commandDrained.get(nodeId) === session.generation) {
      // The agent would refuse every request sent there (node_leaving), each then waiting for another node.
      return {
        ok: false,
        code: 'node_drained_by_command',
        message: `node ${JSON.stringify(nodeId)} was drained by a drain command, which its agent keeps (across reconnects too): lift it with the undrain command (POST /admin/nodes/${encodeURIComponent(nodeId)}/commands {"kind":"undrain"})`,
      };
    }
    if (!draining && this.#retiring.get(nodeId) === session.generation) {
      // Its token changed or it left the config: this connection closes once idle and must take nothing new.
      return { ok: false, code: 'node_retiring', message: `node ${JSON.stringify(nodeId)} is being retired by a config change (its connection closes once idle); its next connection starts undrained` };
    }
    if (checkOnly) return { ok: true, node: nodeId, draining, openTunnels: this.#leasesOn(nodeId) };
    const was = this.driver.status().nodes.find((n) => n.id === nodeId)?.draining;
    if (!this.driver.setDraining(nodeId, draining)) {
      // The session view trails the scheduler by a message: the connection it saw is gone already.
      return { ok: false, code: 'node_not_connected', message: `node ${JSON.stringify(nodeId)} is not connected; draining applies to a live connection` };
    }
    const openTunnels = this.#leasesOn(nodeId);
    // A repeated drain (or undrain) is a no-op: the event stream tells of changes only.
    if (was !== draining) {
      this.events.publish({ type: draining ? 'node.draining' : 'node.undrained', node: nodeId, by: 'admin' });
      this.logger.info({ node: nodeId, generation: session.generation, draining, openTunnels }, draining ? 'node draining (admin)' : 'node undrained (admin)');
    }
    return { ok: true, node: nodeId, draining, openTunnels };
  }

  // --- drain and close ------------------------------------------------------

  shutdown(graceMs?: number): Promise<ShutdownReport> {
    this.#shutdown ??= this.#drain(graceMs ?? this.#config.drain?.graceMs ?? DEFAULT_DRAIN_GRACE_MS);
    return this.#shutdown;
  }

  /** Every thread drains its own listener and data plane; the grace runs in parallel. */
  async #drain(graceMs: number): Promise<ShutdownReport> {
    const started = performance.now();
    this.#shuttingDown = true;
    // Refusing first, then telling: once 'draining' is logged no thread serves a new request.
    this.plane.beginDrain();
    // The grace starts now, not once every worker has said how much is open (a wedged one answers late or never).
    const drained = this.plane.drain(graceMs);
    // Awaited below: a rejection while the workers are asked what is open must not count as unhandled.
    drained.catch(() => undefined);
    const open = sumOpen(await this.plane.inspect());
    this.events.publish({ type: 'edge.draining', graceMs, openRequests: open });
    this.logger.info({ graceMs, openRequests: open, workers: this.plane.workers }, 'draining: no new connections or requests; open requests may finish');
    const aborted = await drained;
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
    await this.#bootstrap?.close();
    await this.admin?.close();
    this.events.closeAll();
    await this.plane.close();
    this.driver.close();
    await this.refresher.close();
  }
}

export async function startEdge(config: EdgeConfig, options: EdgeOptions = {}): Promise<RunningEdge> {
  const logger = options.logger ?? createLogger('edge');
  const edge = new Edge(config, logger, options);
  await edge.listen();
  logger.info(
    {
      http: dialAddress(config.http.host, edge.httpPort),
      grpc: dialAddress(config.grpc.host, edge.grpcPort),
      admin: edge.adminPort === undefined ? null : dialAddress(config.admin?.host ?? '127.0.0.1', edge.adminPort),
      httpPort: edge.httpPort,
      grpcPort: edge.grpcPort,
      adminPort: edge.adminPort ?? null,
    },
    'edge listening',
  );
  return edge;
}
