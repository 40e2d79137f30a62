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

const REGISTER_TIMEOUT_MS = 10_000;

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

export class NodeGateway implements SessionHost {
  readonly registerTimeoutMs = REGISTER_TIMEOUT_MS;
  private readonly server = new grpc.Server({
    'grpc.keepalive_time_ms': 20_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
  });
  private readonly current = new Map<string, NodeSession>();
  private readonly all = new Set<NodeSession>();
  private config: EdgeConfig;
  private tokenDigests = new Map<string, Buffer>();

  constructor(
    config: EdgeConfig,
    private readonly driver: SchedulerDriver,
    readonly logger: Logger,
  ) {
    this.config = config;
    this.setConfig(config);
    this.server.addService(nodeTunnelService, { connect: (call: NodeCall) => this.accept(call) });
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
  }

  async listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, boundPort) => {
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
      if (previous) previous.close(`superseded by generation ${connected.generation}`);
      return undefined;
    });
    if (outcome !== undefined) return outcome;
    const configured = this.config.nodes.find((n) => n.id === register.nodeId)?.providers.map((p) => p.id) ?? [];
    const missing = configured.filter((id) => !register.providerIds.includes(id));
    if (missing.length > 0) this.logger.warn({ node: register.nodeId, missing }, 'node did not announce every configured provider');
    return undefined;
  }

  forget(session: NodeSession): void {
    this.all.delete(session);
  }

  unregister(session: NodeSession, reason: string): void {
    if (this.current.get(session.nodeId) === session) this.current.delete(session.nodeId);
    this.driver.disconnect(session.nodeId, session.generation);
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
