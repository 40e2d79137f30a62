// Test doubles for the node agent: a tiny edge (real grpc-js server on
// loopback, speaking edge.v1.NodeTunnel) and a config builder.
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { pino } from 'pino';
import {
  EdgeMessageSchema,
  FrameKind,
  TunnelRequestSchema,
  type EdgeMessage,
  type NodeMessage,
  type Register,
  type TunnelFrame,
  type TunnelRequest,
} from '../../src/gen/edge/v1/tunnel_pb.js';
import { nodeTunnelService } from '../../src/shared/node-tunnel-service.js';
import { DEFAULT_TUNNEL_OPTIONS, type AgentConfig, type AgentProviderConfig } from '../../src/agent/config.js';

type ServerCall = grpc.ServerDuplexStream<NodeMessage, EdgeMessage>;
type MessageInit = MessageInitShape<typeof TunnelRequestSchema>;

/** How the fake edge answers a Register. */
export type RegisterAnswer =
  | { kind: 'accept'; heartbeatIntervalMs?: number; heartbeatTimeoutMs?: number; sendHeartbeats?: boolean; maxFrameBatchBytes?: number; maxFrameBytes?: number }
  | { kind: 'reject'; reason: string }
  /** Takes the Register and never answers it. */
  | { kind: 'silent' };

export const silentLogger = pino({ level: 'silent' });

export function waitFor<T>(what: string, check: () => T | undefined, timeoutMs = 2000): Promise<T> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const poll = (): void => {
      const value = check();
      if (value !== undefined) resolve(value);
      else if (Date.now() - started > timeoutMs) reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      else setTimeout(poll, 5);
    };
    poll();
  });
}

/** One Connect stream the agent opened. */
export class EdgeStream {
  readonly call: ServerCall;
  register: Register | undefined;
  /** Everything the agent sent after Register, in order (a FrameBatch as it came). */
  readonly messages: NodeMessage[] = [];
  closed = false;
  #heartbeatTimer: NodeJS.Timeout | undefined;

  constructor(call: ServerCall) {
    this.call = call;
  }

  send(message: EdgeMessage): void {
    if (!this.closed) this.call.write(message);
  }

  sendTunnel(init: MessageInit): void {
    this.send(create(EdgeMessageSchema, { msg: { case: 'tunnelRequest', value: create(TunnelRequestSchema, init) } }));
  }

  cancel(tunnelId: number): void {
    this.send(create(EdgeMessageSchema, { msg: { case: 'cancel', value: { tunnelId, reason: 'client closed' } } }));
  }

  /** Every frame received, in order, batches unpacked. */
  allFrames(): TunnelFrame[] {
    const frames: TunnelFrame[] = [];
    for (const m of this.messages) {
      if (m.msg.case === 'frame') frames.push(m.msg.value);
      else if (m.msg.case === 'frameBatch') frames.push(...m.msg.value.frames);
    }
    return frames;
  }

  framesOf(tunnelId: number): TunnelFrame[] {
    return this.allFrames().filter((frame) => frame.tunnelId === tunnelId);
  }

  /** Resolves with the tunnel's frames once its END or ERROR arrived. */
  terminalFrames(tunnelId: number, timeoutMs = 2000): Promise<TunnelFrame[]> {
    return waitFor(`END/ERROR of tunnel ${tunnelId}`, () => {
      const frames = this.framesOf(tunnelId);
      const last = frames.at(-1);
      return last !== undefined && (last.kind === FrameKind.END || last.kind === FrameKind.ERROR) ? frames : undefined;
    }, timeoutMs);
  }

  startHeartbeats(intervalMs: number): void {
    this.#heartbeatTimer = setInterval(() => this.send(create(EdgeMessageSchema, { msg: { case: 'heartbeat', value: { unixMs: Date.now() } } })), intervalMs);
  }

  /** Ends the stream from the edge side with an error status, as a crashing edge would. */
  kill(): void {
    this.stop();
    this.call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'edge killed the stream' });
  }

  stop(): void {
    this.closed = true;
    clearInterval(this.#heartbeatTimer);
  }
}

export class FakeEdge {
  readonly server = new grpc.Server();
  port = 0;
  readonly streams: EdgeStream[] = [];
  answer: RegisterAnswer = { kind: 'accept' };
  /** Streams that register as extra lanes (join_generation > 0) get this answer instead, when set. */
  joinAnswer: RegisterAnswer | undefined;
  #generation = 0;

  static async start(answer?: RegisterAnswer, port = 0): Promise<FakeEdge> {
    const edge = new FakeEdge();
    if (answer !== undefined) edge.answer = answer;
    edge.server.addService(nodeTunnelService, { connect: (call: ServerCall) => edge.#onConnect(call) });
    edge.port = await new Promise<number>((resolve, reject) => {
      edge.server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
    });
    return edge;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Resolves with the n-th stream (0-based) once its Register arrived. */
  registeredStream(n: number, timeoutMs = 2000): Promise<EdgeStream> {
    return waitFor(`registration #${n}`, () => {
      const stream = this.streams[n];
      return stream?.register !== undefined ? stream : undefined;
    }, timeoutMs);
  }

  close(): void {
    for (const stream of this.streams) stream.stop();
    this.server.forceShutdown();
  }

  #onConnect(call: ServerCall): void {
    const stream = new EdgeStream(call);
    this.streams.push(stream);
    call.on('data', (message: NodeMessage) => {
      if (stream.register === undefined && message.msg.case === 'register') {
        stream.register = message.msg.value;
        this.#answer(stream);
      } else {
        stream.messages.push(message);
      }
    });
    call.on('error', () => stream.stop());
    call.on('cancelled', () => stream.stop());
    call.on('end', () => {
      stream.stop();
      call.end();
    });
  }

  #answer(stream: EdgeStream): void {
    const joining = (stream.register?.joinGeneration ?? 0) > 0;
    const answer = joining && this.joinAnswer !== undefined ? this.joinAnswer : this.answer;
    if (answer.kind === 'silent') return;
    if (answer.kind === 'reject') {
      stream.send(create(EdgeMessageSchema, { msg: { case: 'rejected', value: { reason: answer.reason } } }));
      stream.stop();
      stream.call.end();
      return;
    }
    const heartbeatIntervalMs = answer.heartbeatIntervalMs ?? 1000;
    stream.send(create(EdgeMessageSchema, {
      msg: {
        case: 'registered',
        value: {
          generation: ++this.#generation,
          heartbeatIntervalMs,
          heartbeatTimeoutMs: answer.heartbeatTimeoutMs ?? 10_000,
          maxFrameBatchBytes: answer.maxFrameBatchBytes ?? 0,
          maxFrameBytes: answer.maxFrameBytes ?? 0,
        },
      },
    }));
    if (answer.sendHeartbeats !== false) stream.startHeartbeats(heartbeatIntervalMs);
  }
}

export function agentConfig(edgeAddress: string, providers: Partial<AgentProviderConfig>[], reconnect = { initialMs: 20, maxMs: 100 }): AgentConfig {
  return {
    edge: { address: edgeAddress },
    node: { id: 'gpu-1', token: 'demo-node-token-change-me-7f3a9c' },
    providers: providers.map((p, i) => ({
      id: p.id ?? `provider-${i}`,
      type: p.type ?? 'openai_compat',
      baseUrl: p.baseUrl,
      apiKey: p.apiKey,
      connections: p.connections ?? 8,
    })),
    tunnels: DEFAULT_TUNNEL_OPTIONS,
    reconnect,
    logLevel: 'silent',
  };
}

export type { TunnelRequest };
