// One node connection (one gRPC bidi stream): the registration handshake,
// heartbeats both ways, and the tunnels open on it. Frames are checked for
// order here, so consumers only ever see HEADERS? DATA* (END | ERROR).
import { create } from '@bufbuild/protobuf';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  EdgeMessageSchema,
  FrameKind,
  type EdgeMessage,
  type Header,
  type NodeMessage,
  type Register,
  type TunnelFrame,
} from '../../gen/edge/v1/tunnel_pb.js';
import type { TunnelConsumer } from '../tunnel/tunnel-consumer.js';

export type NodeCall = ServerDuplexStream<NodeMessage, EdgeMessage>;

/** What a session needs from the edge around it. */
export interface SessionHost {
  readonly heartbeatIntervalMs: number;
  readonly heartbeatTimeoutMs: number;
  readonly registerTimeoutMs: number;
  /** Checks credentials and activates the node (calling session.activate), or returns a rejection reason. */
  register(session: NodeSession, register: Register): string | undefined;
  /** Called once when an active session ends, whatever the cause. */
  unregister(session: NodeSession, reason: string): void;
  /** Called once when any session ends (registered or not). */
  forget(session: NodeSession): void;
  readonly logger: Logger;
}

export interface TunnelRequestFields {
  readonly runId: string;
  readonly providerId: string;
  readonly target: string;
  readonly method: string;
  readonly path: string;
  readonly headers: { name: string; value: string }[];
  readonly body: Uint8Array;
  readonly stream: boolean;
  readonly timeoutMs: number;
}

class OpenTunnel {
  nextSeq = 0;
  constructor(readonly consumer: TunnelConsumer) {}
}

type SessionState = 'registering' | 'active' | 'closed';

export class NodeSession {
  nodeId = '';
  generation = 0;
  agentVersion = '';
  readonly remoteAddress: string;
  connectedAtMs = 0;
  private state: SessionState = 'registering';
  private readonly tunnels = new Map<number, OpenTunnel>();
  private nextTunnelId = 1;
  private lastSeenMs = Date.now();
  private heartbeatTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly call: NodeCall,
    private readonly host: SessionHost,
  ) {
    this.remoteAddress = call.getPeer();
    call.on('data', (message: NodeMessage) => this.onMessage(message));
    call.on('end', () => this.close('node closed the stream'));
    call.on('cancelled', () => this.close('connection lost'));
    call.on('error', (err: Error) => this.close(`stream error: ${err.message}`));
    // Until Register arrives the heartbeat timer doubles as the register deadline.
    this.heartbeatTimer = setTimeout(onRegisterTimeout, host.registerTimeoutMs, this);
  }

  get isActive(): boolean {
    return this.state === 'active';
  }

  get openTunnels(): number {
    return this.tunnels.size;
  }

  /** Sends a tunnel request; returns the tunnel id. Throws if the stream is gone. */
  openTunnel(consumer: TunnelConsumer, fields: TunnelRequestFields): number {
    if (this.state !== 'active') throw new Error(`node ${this.nodeId} session is ${this.state}`);
    const tunnelId = this.nextTunnelId++;
    if (this.nextTunnelId > 0xffff_ffff) this.nextTunnelId = 1;
    this.tunnels.set(tunnelId, new OpenTunnel(consumer));
    this.call.write(
      create(EdgeMessageSchema, {
        msg: {
          case: 'tunnelRequest',
          value: {
            runId: fields.runId,
            tunnelId,
            providerId: fields.providerId,
            target: fields.target,
            method: fields.method,
            path: fields.path,
            headers: fields.headers,
            body: fields.body,
            stream: fields.stream,
            timeoutMs: fields.timeoutMs,
          },
        },
      }),
    );
    return tunnelId;
  }

  /** Stops a tunnel from the edge side: no more frames reach its consumer; the node aborts upstream. */
  cancelTunnel(tunnelId: number, reason: string): void {
    if (!this.tunnels.delete(tunnelId) || this.state !== 'active') return;
    this.call.write(create(EdgeMessageSchema, { msg: { case: 'cancel', value: { tunnelId, reason } } }));
  }

  /** Ends the session; open tunnels fail with node_disconnected. Idempotent. */
  close(reason: string): void {
    if (this.state === 'closed') return;
    const wasActive = this.state === 'active';
    this.state = 'closed';
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
    const open = [...this.tunnels.values()];
    this.tunnels.clear();
    if (wasActive) this.host.unregister(this, reason);
    this.host.forget(this);
    for (const tunnel of open) tunnel.consumer.onError('node_disconnected', `node ${this.nodeId} disconnected: ${reason}`);
    try {
      this.call.end();
    } catch {
      // already torn down by the transport
    }
    this.host.logger.info({ node: this.nodeId, generation: this.generation, reason, failedTunnels: open.length }, 'node session closed');
  }

  /** @internal heartbeat timer */
  heartbeat(): void {
    if (this.state !== 'active') return;
    if (Date.now() - this.lastSeenMs > this.host.heartbeatTimeoutMs) {
      this.close('heartbeat timeout');
      return;
    }
    this.send(create(EdgeMessageSchema, { msg: { case: 'heartbeat', value: { unixMs: Date.now() } } }));
  }

  private send(message: EdgeMessage): void {
    try {
      this.call.write(message);
    } catch (err) {
      this.close(`write failed: ${(err as Error).message}`);
    }
  }

  private onMessage(message: NodeMessage): void {
    this.lastSeenMs = Date.now();
    const msg = message.msg;
    switch (msg.case) {
      case 'frame':
        if (this.state === 'active') this.onFrame(msg.value);
        return;
      case 'heartbeat':
        return;
      case 'register':
        this.onRegister(msg.value);
        return;
      case 'leaving':
        this.host.logger.info({ node: this.nodeId, reason: msg.value.reason }, 'node is leaving');
        return;
      default:
        return;
    }
  }

  private onRegister(register: Register): void {
    if (this.state !== 'registering') {
      this.host.logger.warn({ node: this.nodeId }, 'node sent register twice on one stream; ignored');
      return;
    }
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
    this.nodeId = register.nodeId;
    this.agentVersion = register.agentVersion;
    const rejection = this.host.register(this, register);
    if (rejection !== undefined) {
      this.host.logger.warn({ node: register.nodeId, peer: this.remoteAddress, reason: rejection }, 'node rejected');
      this.send(create(EdgeMessageSchema, { msg: { case: 'rejected', value: { reason: rejection } } }));
      this.close(`rejected: ${rejection}`);
    }
  }

  /** Makes this session the node's current connection; Registered goes out before any tunnel. */
  activate(generation: number): void {
    this.generation = generation;
    this.state = 'active';
    this.connectedAtMs = Date.now();
    this.send(
      create(EdgeMessageSchema, {
        msg: {
          case: 'registered',
          value: { generation, heartbeatIntervalMs: this.host.heartbeatIntervalMs, heartbeatTimeoutMs: this.host.heartbeatTimeoutMs },
        },
      }),
    );
    this.heartbeatTimer = setInterval(onHeartbeat, this.host.heartbeatIntervalMs, this);
    this.host.logger.info({ node: this.nodeId, generation, peer: this.remoteAddress, agentVersion: this.agentVersion }, 'node connected');
  }

  private onFrame(frame: TunnelFrame): void {
    const tunnel = this.tunnels.get(frame.tunnelId);
    if (!tunnel) return; // finished or cancelled here; late frames are expected after a cancel
    if (frame.seq !== tunnel.nextSeq) {
      this.tunnels.delete(frame.tunnelId);
      this.host.logger.warn({ node: this.nodeId, tunnel: frame.tunnelId, expected: tunnel.nextSeq, got: frame.seq }, 'out-of-order frame; tunnel failed');
      this.call.write(create(EdgeMessageSchema, { msg: { case: 'cancel', value: { tunnelId: frame.tunnelId, reason: 'protocol error' } } }));
      tunnel.consumer.onError('node_protocol_error', `frame ${frame.seq} arrived where ${tunnel.nextSeq} was expected`);
      return;
    }
    tunnel.nextSeq++;
    switch (frame.kind) {
      case FrameKind.HEADERS:
        tunnel.consumer.onHeaders(frame.status, frame.headers);
        return;
      case FrameKind.DATA:
        tunnel.consumer.onData(frame.data);
        return;
      case FrameKind.END:
        this.tunnels.delete(frame.tunnelId);
        tunnel.consumer.onEnd();
        return;
      case FrameKind.ERROR:
        this.tunnels.delete(frame.tunnelId);
        tunnel.consumer.onError(frame.errorCode || 'upstream_error', frame.errorMessage);
        return;
      default:
        this.tunnels.delete(frame.tunnelId);
        tunnel.consumer.onError('node_protocol_error', `unknown frame kind ${String(frame.kind)}`);
    }
  }
}

function onHeartbeat(session: NodeSession): void {
  session.heartbeat();
}

function onRegisterTimeout(session: NodeSession): void {
  session.close('no register message in time');
}
