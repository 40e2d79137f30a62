// The gRPC listener nodes dial, and the registry of their current sessions.
// Authentication and activation happen in one synchronous step with the
// scheduler's connect (no check-then-act gap): a node is either rejected, or
// it is the current generation and any older session is fenced.
import { createHash, timingSafeEqual } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Register } from '../../gen/edge/v1/tunnel_pb.js';
import type { EdgeConfig } from '../../shared/config-types.js';
import { nodeTunnelService } from '../../shared/node-tunnel-service.js';
import type { SchedulerDriver } from '../../main/scheduler-driver.js';
import { NodeSession, type NodeCall, type SessionHost } from './node-session.js';
import { limitsOf } from '../../main/config-hardening.js';
import { ProtocolStats } from './frame-guard.js';

const REGISTER_TIMEOUT_MS = 10_000;
/** Room for a frame's fields around its DATA payload (headers, error text) under the transport cap. */
const FRAME_OVERHEAD_BYTES = 64 * 1024;

/** Node lifecycle, for events, metrics and logs; set once by the edge. */
export interface NodeObserver {
  nodeConnected(session: NodeSession): void;
  nodeDisconnected(session: NodeSession, reason: string): void;
  nodeLeaving(session: NodeSession, reason: string): void;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

export class NodeGateway implements SessionHost {
  private readonly server: grpc.Server;
  /** Protocol violations and drops, per kind, for logs and metrics. */
  readonly protocolStats = new ProtocolStats();
  /** limits.max_frame_bytes of the live config (read per DATA frame, so kept as a plain field). */
  maxFrameBytes = 0;
  private readonly current = new Map<string, NodeSession>();
  private readonly all = new Set<NodeSession>();
  private config: EdgeConfig;
  private tokenDigests = new Map<string, Buffer>();
  private observer: NodeObserver | undefined;

  constructor(
    config: EdgeConfig,
    private readonly driver: SchedulerDriver,
    readonly logger: Logger,
  ) {
    this.config = config;
    this.server = new grpc.Server({
      'grpc.keepalive_time_ms': 20_000,
      'grpc.keepalive_timeout_ms': 10_000,
      'grpc.keepalive_permit_without_calls': 1,
      // DATA payloads over max_frame_bytes fail their tunnel (NodeSession); a message
      // over this transport cap ends the node's whole stream (grpc-js RESOURCE_EXHAUSTED).
      'grpc.max_receive_message_length': limitsOf(config).maxFrameBytes + FRAME_OVERHEAD_BYTES,
    });
    this.setConfig(config);
    this.server.addService(nodeTunnelService, { connect: (call: NodeCall) => this.accept(call) });
  }

  /** A stream that has not registered within this long is closed; no longer than a registered node may stay silent. */
  get registerTimeoutMs(): number {
    return Math.min(REGISTER_TIMEOUT_MS, this.config.heartbeat.timeoutMs);
  }

  get heartbeatIntervalMs(): number {
    return this.config.heartbeat.intervalMs;
  }

  get heartbeatTimeoutMs(): number {
    return this.config.heartbeat.timeoutMs;
  }

  setConfig(config: EdgeConfig): void {
    this.config = config;
    this.tokenDigests = new Map(config.nodes.map((n) => [n.id, digest(n.token)]));
    this.maxFrameBytes = limitsOf(config).maxFrameBytes;
  }

  async listen(host: string, port: number, credentials = grpc.ServerCredentials.createInsecure()): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(`${host}:${port}`, credentials, (err, boundPort) => {
        if (err) reject(err);
        else resolve(boundPort);
      });
    });
  }

  /** The current session of a node, if it is connected. */
  session(nodeId: string): NodeSession | undefined {
    return this.current.get(nodeId);
  }

  sessions(): IterableIterator<NodeSession> {
    return this.current.values();
  }

  register(session: NodeSession, register: Register): string | undefined {
    const expected = this.tokenDigests.get(register.nodeId);
    if (!expected) return `unknown node id ${JSON.stringify(register.nodeId)}`;
    if (!timingSafeEqual(expected, digest(register.token))) return 'bad token';
    // Activation and fencing in one step, and grants for queued requests are
    // delivered only once this session is current and has sent Registered.
    const outcome = this.driver.deferDecisions(() => {
      const connected = this.driver.connect(register.nodeId);
      if (!connected) return `unknown node id ${JSON.stringify(register.nodeId)}`;
      const previous = this.current.get(register.nodeId);
      this.current.set(register.nodeId, session);
      session.activate(connected.generation);
      if (previous) {
        this.protocolStats.supersededSessions++;
        previous.close(`superseded by generation ${connected.generation}`);
      }
      return undefined;
    });
    if (outcome !== undefined) return outcome;
    const configured = this.config.nodes.find((n) => n.id === register.nodeId)?.providers.map((p) => p.id) ?? [];
    const missing = configured.filter((id) => !register.providerIds.includes(id));
    if (missing.length > 0) this.logger.warn({ node: register.nodeId, missing }, 'node did not announce every configured provider');
    this.observer?.nodeConnected(session);
    return undefined;
  }

  setObserver(observer: NodeObserver): void {
    this.observer = observer;
  }

  /** The node's current session said Leaving: no new requests for it; open ones finish. */
  leaving(session: NodeSession, reason: string): void {
    if (this.current.get(session.nodeId) !== session) return;
    this.driver.setDraining(session.nodeId, true);
    this.observer?.nodeLeaving(session, reason);
  }

  forget(session: NodeSession): void {
    this.all.delete(session);
  }

  unregister(session: NodeSession, reason: string): void {
    if (this.current.get(session.nodeId) === session) this.current.delete(session.nodeId);
    this.driver.disconnect(session.nodeId, session.generation);
    this.observer?.nodeDisconnected(session, reason);
    this.logger.debug({ node: session.nodeId, generation: session.generation, reason }, 'node unregistered');
  }

  async close(): Promise<void> {
    for (const session of [...this.all]) session.close('edge shutting down');
    await new Promise<void>((resolve) => {
      this.server.tryShutdown(() => resolve());
      setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 2_000).unref();
    });
  }

  private accept(call: NodeCall): void {
    this.all.add(new NodeSession(call, this));
  }
}
