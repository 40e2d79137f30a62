// The data path of one thread: the client listener, the node gateway, the
// data plane that joins them, and (in an I/O worker) the links to the other
// workers' nodes. With workers.count 0 the composition root runs one on the
// main thread with the SchedulerDriver as its port; each I/O worker runs one
// with a RemoteScheduler (records over SAB rings), so both modes share every
// line of wiring here. It implements the DataPath the edge talks to.
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { DataPath, DataPathEvents, DataPathPorts, KeyLoadEntry } from '../contract/data-path.js';
import type { EdgeEvent } from '../contract/events.js';
import { DRAIN_FLAG, EVENTS_FLAG, FLAG_COUNT, type PlaneInspection, type SessionInfo } from '../contract/io-protocol.js';
import type { SchedulerPort } from '../contract/scheduler-port.js';
import type { SchedulerStatus } from '../contract/scheduler.js';
import type { EdgeConfig } from '../shared/config-types.js';
import type { NodeCommandResult } from '../shared/node-commands.js';
import type { TlsMaterial } from '../shared/tls-material.js';
import { DataPlane } from './data-plane.js';
import { drainListener } from './drain.js';
import { NodeGateway, registerTimeoutMs } from './grpc/node-gateway.js';
import type { NodeSession } from './grpc/node-session.js';
import { retireLanes } from './grpc/retire.js';
import { ClientServer } from './http/client-server.js';
import { EdgeObserver, type EventSink } from './observe/edge-observer.js';
import { RUN_REPORT_DELAY_MS, RunForwarder } from './observe/run-forwarder.js';
import { EdgeMetrics, ringFill } from './observe/metrics.js';
import { PeerLinks } from './peer/peer-links.js';
import { inspectPlane } from './plane-inspection.js';
import { nodeServerCredentials, ReloadableServerCredentials } from './tls.js';

/** An I/O worker's place among its peers: its index and the worker <-> worker rings. */
export interface WorkerPlacement {
  readonly index: number;
  /** toPeer[j]: ring this worker -> worker j; undefined at its own index. */
  readonly toPeer: readonly (SharedArrayBuffer | undefined)[];
  readonly fromPeer: readonly (SharedArrayBuffer | undefined)[];
  /** The Int32 flags the pool sets (io-protocol's EVENTS_FLAG, DRAIN_FLAG). */
  readonly flags: SharedArrayBuffer;
  /** The model list's `created`, the same on every worker. */
  readonly modelsCreated: number;
}

/** The scheduler's state is the main thread's; the data path's own metrics never read it. */
const EMPTY_STATUS: SchedulerStatus = { nodes: [], providers: [], groups: [], liveLeases: 0 };

/** Bus events go out while someone subscribes; node sessions always (status keeps its view of them). */
class PlaneObserver extends EdgeObserver {
  readonly #events: DataPathEvents;
  readonly #worker: number;
  readonly runReports: RunForwarder;

  constructor(sink: EventSink, metrics: EdgeMetrics, logger: Logger, events: DataPathEvents, worker: number) {
    // Run reports always go (the run records need them): once a turn on the main thread, every few ms from an I/O worker.
    const runReports = new RunForwarder((runs) => events({ type: 'runs', events: runs }), worker >= 0 ? RUN_REPORT_DELAY_MS : 0);
    super(sink, metrics, logger, runReports);
    this.runReports = runReports;
    this.#events = events;
    this.#worker = worker;
  }

  override nodeConnected(session: NodeSession): void {
    this.#post(session, false, { type: 'node.connected', node: session.nodeId, generation: session.generation, address: session.remoteAddress, agentVersion: session.agentVersion, drained: session.registeredDraining });
  }

  override nodeDisconnected(session: NodeSession, reason: string): void {
    this.#post(session, true, { type: 'node.disconnected', node: session.nodeId, generation: session.generation, reason });
  }

  #post(session: NodeSession, gone: boolean, event: EdgeEvent): void {
    const info: SessionInfo = { nodeId: session.nodeId, generation: session.generation, agentVersion: session.agentVersion, remoteAddress: session.remoteAddress, connectedAtMs: session.connectedAtMs, worker: this.#worker };
    this.#events({ type: 'event', event, session: info, gone });
  }
}

export class LocalPlane implements DataPath, EventSink {
  readonly workers = 0;
  readonly nodes: NodeGateway;
  readonly plane: DataPlane;
  readonly client: ClientServer;
  readonly metrics: EdgeMetrics;
  readonly #peers: PeerLinks | undefined;
  readonly #index: number;
  readonly #events: DataPathEvents;
  /** EVENTS_FLAG and DRAIN_FLAG; shared with the pool in a worker, so no message is needed to flip them. */
  readonly #flags: Int32Array;
  readonly #observer: PlaneObserver;
  #closing: Promise<void> | undefined;

  /** The node listener's credentials; built at construction so that a reload before start is not lost. */
  readonly #nodeCredentials: grpc.ServerCredentials;

  /** `tls`: what the listeners serve, read and checked by the main thread (shared/tls-material.ts). */
  constructor(config: EdgeConfig, tls: TlsMaterial, port: SchedulerPort, logger: Logger, events: DataPathEvents, worker?: WorkerPlacement) {
    this.#events = events;
    // The handshake within the register timeout (fixed at start, as the credentials are).
    this.#nodeCredentials = nodeServerCredentials(config.tls?.nodes, tls.nodes, registerTimeoutMs(config));
    this.#index = worker?.index ?? -1;
    this.#flags = new Int32Array(worker?.flags ?? new ArrayBuffer(4 * FLAG_COUNT));
    this.nodes = new NodeGateway(config, port, logger);
    this.#peers = worker === undefined ? undefined : new PeerLinks({ toPeer: worker.toPeer, fromPeer: worker.fromPeer }, this.nodes, port, logger);
    this.plane = new DataPlane(config, port, this.nodes, logger, { workerIndex: this.#index, peers: this.#peers, flags: this.#flags });
    this.#peers?.setMaxTunnelsPerNode(this.plane.tunnelLimit);
    this.client = new ClientServer(config, this.plane, tls.client, worker?.modelsCreated);
    this.metrics = new EdgeMetrics(
      {
        status: () => EMPTY_STATUS,
        connectedNodes: () => 0,
        openRequests: () => this.plane.openExchanges,
        workers: () => 0,
        ringOccupancy: () => ringFill(this.#peers?.ringUsage() ?? []),
        configVersion: () => 0,
        shuttingDown: () => false,
        events: () => ({ subscribers: 0, published: 0, dropped: 0 }),
        lean: () => this.client.leanStats,
        protocol: () => this.nodes.protocolStats.snapshot(),
      },
      false,
    );
    const observer = (this.#observer = new PlaneObserver(this, this.metrics, logger, events, this.#index));
    this.plane.setObserver(observer);
    this.nodes.setObserver(observer);
  }

  // --- EventSink (run events, forwarded while someone subscribes) ----------------

  get active(): boolean {
    return Atomics.load(this.#flags, EVENTS_FLAG) === 1;
  }

  /** Node events always go (status and the console follow them); run events only while a subscriber wants them. */
  publish(event: EdgeEvent): void {
    if (this.active || !event.type.startsWith('run.')) this.#events({ type: 'event', event });
  }

  // --- DataPath --------------------------------------------------------------------

  /** In a worker, `shared` ports: every worker listens on the same ones (SO_REUSEPORT). */
  async start(config: EdgeConfig, _logLevel: string, ports?: DataPathPorts): Promise<DataPathPorts> {
    this.#peers?.run();
    const credentials = this.#nodeCredentials;
    const grpcPort = ports === undefined ? await this.nodes.listen(config.grpc.host, config.grpc.port, credentials) : await this.nodes.listenShared(config.grpc.host, ports.grpcPort, credentials);
    try {
      const httpPort = ports === undefined ? await this.client.listen(config.http.host, config.http.port) : await this.client.listen(config.http.host, ports.httpPort, true);
      return { httpPort, grpcPort };
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  setConfig(config: EdgeConfig): Promise<void> {
    this.setConfigHere(config);
    return Promise.resolve();
  }

  /** This thread's swap (an I/O worker's answer to the pool's setConfig). */
  setConfigHere(config: EdgeConfig): void {
    // One synchronous step: requests on this thread see the old snapshot or the new one.
    this.nodes.setConfig(config);
    this.plane.setConfig(config);
    this.client.setConfig(config);
    this.#peers?.setMaxTunnelsPerNode(this.plane.tunnelLimit);
    // Last: a provider whose type agrees with its node's again may be granted a waiter at once.
    this.nodes.recheckTypes();
  }

  setCertificates(tls: TlsMaterial): Promise<void> {
    this.setCertificatesHere(tls);
    return Promise.resolve();
  }

  /** This thread's listeners serve `tls` to every handshake from now on (an I/O worker's answer to the pool's setCertificates). */
  setCertificatesHere(tls: TlsMaterial): void {
    if (tls.client !== undefined) this.client.setCertificate(tls.client);
    if (tls.nodes !== undefined && this.#nodeCredentials instanceof ReloadableServerCredentials) this.#nodeCredentials.reload(tls.nodes);
  }

  setEventsActive(active: boolean): void {
    Atomics.store(this.#flags, EVENTS_FLAG, active ? 1 : 0);
  }

  notifyNode(nodeId: string, changedPaths: readonly string[], configVersion: number): boolean {
    const session = this.nodes.session(nodeId);
    session?.sendConfigRefresh(changedPaths, configVersion);
    return session !== undefined;
  }

  nodeCommand(nodeId: string, kind: string, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<NodeCommandResult> {
    const session = this.nodes.session(nodeId);
    if (session === undefined) return Promise.resolve({ node: nodeId, kind, status: 'not_connected', message: `node ${nodeId} has no connection on this edge` });
    return session.sendCommand(kind, args, deadlineMs);
  }

  retireNode(nodeId: string, graceMs: number, reason: string, holdAnchor = false): boolean {
    const lanes = this.nodes.lanes(nodeId);
    if (lanes.length > 0) retireLanes(lanes, graceMs, reason, holdAnchor);
    return lanes.length > 0;
  }

  cancelRun(runId: string): Promise<boolean> {
    return Promise.resolve(this.plane.cancelRun(runId));
  }

  /** Worker `peer` was respawned on fresh rings (worker mode only). */
  replacePeer(peer: number, toPeer: SharedArrayBuffer, fromPeer: SharedArrayBuffer): void {
    this.#peers?.replacePeer(peer, toPeer, fromPeer);
  }

  inspect(): Promise<readonly PlaneInspection[]> {
    return Promise.resolve([this.inspectHere()]);
  }

  /** This thread's part of an inspection. */
  inspectHere(): PlaneInspection {
    const peers = this.#peers;
    const rings = peers === undefined ? [] : peers.ringUsage().map((r) => ({ name: `worker-${this.#index}->worker-${r.peer}`, used: r.used, capacity: r.capacity }));
    return inspectPlane(this.#index, this.plane, this.nodes, peers, this.client.leanStats, this.client.a2a.handler.relayedStreams, rings);
  }

  keyLoad(): readonly KeyLoadEntry[] {
    return this.client.auth.load(performance.now());
  }

  ringUsage(): PlaneInspection['rings'] {
    return [];
  }

  /** Drains this thread's listener; resolves with the requests aborted at the deadline. */
  beginDrain(): void {
    Atomics.store(this.#flags, DRAIN_FLAG, 1);
  }

  drain(graceMs: number): Promise<number> {
    return drainListener(this.plane, this.client.app.server, performance.now() + graceMs);
  }

  async metricParts(): Promise<unknown[]> {
    return [await this.metrics.scrapeJson()];
  }

  /** Sends the run reports held for the next batch now (close, or a worker about to exit on a fault). */
  flushRunReports(): void {
    this.#observer.runReports.flush();
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      // At once: a queued request gets 503 shutting_down now (with its node gone it would wait out its queue
      // timeout, and the client listener's close with it), and an open response ends with that error.
      this.plane.beginShutdown();
      this.plane.abortAll();
      // The client listener's close waits for open responses, and an open stream ends only when its tunnel
      // does: the node side closes while the client side is closing, never after it.
      const client = this.client.close();
      // Awaited below: a rejection while the node side closes must not count as unhandled (which ends the process).
      client.catch(() => undefined);
      await this.nodes.close();
      await client;
      this.#peers?.close();
      // The last runs' reports, without waiting for the timer (a worker may be gone before it fires).
      this.flushRunReports();
    })();
    return this.#closing;
  }
}
