// Entry of one I/O worker thread (workers.count > 0): it owns whole client
// connections (fastify on the shared port, SO_REUSEPORT) and a share of the
// node connections (a reusePort listener feeding its grpc-js server), and
// does all per-request work for them. It reaches the scheduler only through
// the RemoteScheduler's rings, and other workers' nodes through PeerLinks.
import { parentPort, workerData } from 'node:worker_threads';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Logger } from 'pino';
import { EdgeObserver, type EventSink } from './observe/edge-observer.js';
import type { EdgeEvent } from '../contract/events.js';
import { EdgeMetrics } from './observe/metrics.js';
import { retireLanes } from './grpc/retire.js';
import type { SchedulerStatus } from '../contract/scheduler.js';
import { clientHttpsMaterial, nodeServerCredentials } from './tls.js';
import type { EdgeConfig } from '../shared/config-types.js';
import { errorBody, Errors } from '../shared/errors.js';
import { createLogger } from '../shared/logger.js';
import { DataPlane } from './data-plane.js';
import { drainListener } from './drain.js';
import { NodeGateway } from './grpc/node-gateway.js';
import type { NodeSession } from './grpc/node-session.js';
import { ClientServer } from './http/client-server.js';
import type { AffinityMessage, ControlRequest, IoWorkerData, SessionInfo, WorkerEvent } from '../contract/io-protocol.js';
import { PeerLinks } from './peer/peer-links.js';
import { inspectPlane } from './plane-inspection.js';
import { RemoteScheduler } from './remote-scheduler.js';

const EMPTY_STATUS: SchedulerStatus = { nodes: [], providers: [], groups: [], liveLeases: 0 };

/** Forwards events to the main thread's bus; run events only while someone subscribes there. */
class ForwardingSink implements EventSink {
  private readonly flag: Int32Array;
  constructor(buffer: SharedArrayBuffer) {
    this.flag = new Int32Array(buffer);
  }
  get active(): boolean {
    return Atomics.load(this.flag, 0) === 1;
  }
  publish(event: EdgeEvent): void {
    if (!this.active) return;
    parentPort?.postMessage({ type: 'event', event } satisfies WorkerEvent);
  }
}

/** Node lifecycle also updates the main thread's view of sessions (status), subscribers or not. */
class WorkerObserver extends EdgeObserver {
  constructor(
    sink: EventSink,
    metrics: EdgeMetrics,
    logger: Logger,
    private readonly index: number,
  ) {
    super(sink, metrics, logger);
  }
  override nodeConnected(session: NodeSession): void {
    this.post(session, false, { type: 'node.connected', node: session.nodeId, generation: session.generation, address: session.remoteAddress, agentVersion: session.agentVersion });
  }
  override nodeDisconnected(session: NodeSession, reason: string): void {
    this.post(session, true, { type: 'node.disconnected', node: session.nodeId, generation: session.generation, reason });
  }
  private post(session: NodeSession, gone: boolean, event: EdgeEvent): void {
    const info: SessionInfo = { nodeId: session.nodeId, generation: session.generation, agentVersion: session.agentVersion, remoteAddress: session.remoteAddress, connectedAtMs: session.connectedAtMs, worker: this.index };
    parentPort?.postMessage({ type: 'event', event, session: info, gone } satisfies WorkerEvent);
  }
}

class IoWorker {
  readonly logger: Logger;
  readonly port: RemoteScheduler;
  readonly nodes: NodeGateway;
  readonly peers: PeerLinks;
  readonly plane: DataPlane;
  readonly client: ClientServer;
  readonly metrics: EdgeMetrics;
  private config: EdgeConfig;
  private closing: Promise<void> | undefined;

  constructor(readonly data: IoWorkerData) {
    this.config = data.config;
    this.logger = createLogger('edge', data.logLevel).child({ worker: data.index });
    this.port = new RemoteScheduler(data.toMain, data.fromMain);
    this.nodes = new NodeGateway(data.config, this.port, this.logger);
    this.peers = new PeerLinks({ toPeer: data.toPeer, fromPeer: data.fromPeer }, this.nodes, this.port, this.logger);
    this.plane = new DataPlane(data.config, this.port, this.nodes, this.logger, { workerIndex: data.index, peers: this.peers });
    this.plane.onAffinity = (responseId, stored) => parentPort?.postMessage({ type: 'affinity', responseId, stored } satisfies AffinityMessage);
    this.peers.setMaxTunnelsPerNode(this.plane.tunnelLimit);
    this.client = new ClientServer(data.config, this.plane, clientHttpsMaterial(data.config.tls));
    this.metrics = new EdgeMetrics(
      {
        status: () => EMPTY_STATUS,
        connectedNodes: () => 0,
        openRequests: () => this.plane.openExchanges,
        workers: () => 0,
        configVersion: () => 0,
        shuttingDown: () => false,
        events: () => ({ subscribers: 0, published: 0, dropped: 0 }),
      },
      false,
    );
    const observer = new WorkerObserver(new ForwardingSink(data.eventsFlag), this.metrics, this.logger, data.index);
    this.plane.setObserver(observer);
    this.nodes.setObserver(observer);
    this.client.app.addHook('onRequest', this.refuseWhileDraining);
  }

  async start(): Promise<{ httpPort: number; grpcPort: number }> {
    const onError = (err: unknown): void => this.logger.error({ err }, 'scheduler answer failed');
    void this.port.run(onError);
    this.peers.run();
    const config = this.config;
    const grpcPort = await this.nodes.listenShared(config.grpc.host, this.data.grpcPort, nodeServerCredentials(config.tls));
    const httpPort = await this.client.listen(config.http.host, this.data.httpPort, true);
    return { httpPort, grpcPort };
  }

  readonly refuseWhileDraining = (_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    if (!this.plane.shuttingDown) {
      done();
      return;
    }
    this.plane.refused('shutting_down');
    reply.code(503).header('content-type', 'application/json').header('retry-after', '1').header('connection', 'close').send(errorBody(Errors.shuttingDown));
  };

  async control(request: ControlRequest): Promise<unknown> {
    switch (request.type) {
      case 'inspect':
        return inspectPlane(this.data.index, this.plane, this.nodes, this.peers, this.peers.ringUsage().map((r) => ({ name: `worker-${this.data.index}->worker-${r.peer}`, used: r.used, capacity: r.capacity })));
      case 'setConfig':
        // One synchronous step: requests see the old snapshot or the new one.
        this.config = request.config;
        this.nodes.setConfig(request.config);
        this.plane.setConfig(request.config);
        this.client.setConfig(request.config);
        this.peers.setMaxTunnelsPerNode(this.plane.tunnelLimit);
        return undefined;
      case 'notifyNode': {
        const session = this.nodes.session(request.nodeId);
        session?.sendConfigRefresh(request.changedPaths, request.configVersion);
        return session !== undefined;
      }
      case 'retireNode': {
        const lanes = this.nodes.lanes(request.nodeId);
        if (lanes.length > 0) retireLanes(lanes, request.graceMs, request.reason, request.holdAnchor === true);
        return lanes.length > 0;
      }
      case 'drain':
        return drainListener(this.plane, this.client.app.server, performance.now() + request.graceMs);
      case 'metrics':
        return this.metrics.scrapeJson();
      case 'affinity':
        this.plane.applyAffinity(request.responseId, request.stored);
        return undefined;
      case 'close':
        await this.close();
        return undefined;
    }
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.client.close();
      await this.nodes.close();
      this.peers.close();
      this.port.close();
    })();
    return this.closing;
  }
}

const data = workerData as IoWorkerData;
const io = new IoWorker(data);
parentPort?.on('message', (request: ControlRequest) => {
  io.control(request).then(
    (value) => parentPort?.postMessage({ type: 'reply', id: request.id, value }),
    (err: Error) => parentPort?.postMessage({ type: 'reply', id: request.id, error: err.message }),
  );
});
io.start().then(
  (ports) => parentPort?.postMessage({ type: 'ready', value: ports }),
  (err: Error) => {
    io.logger.error({ err }, 'I/O worker could not start');
    parentPort?.postMessage({ type: 'reply', id: 0, error: err.message });
    process.exit(1);
  },
);
