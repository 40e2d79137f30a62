// A hand-driven node for protocol tests: a real grpc-js client on the
// edge's NodeTunnel.Connect stream that sends exactly the messages a test
// scripts (good, bad, out of order, oversized) and records what the edge sends.
import * as grpc from '@grpc/grpc-js';
import type { EdgeMessage, NodeMessage, TunnelCancel, TunnelRequest } from '../../../src/gen/edge/v1/tunnel_pb.js';
import { dataFrame, endFrame, errorFrame, headersFrame, heartbeatMessage, registerMessage } from '../../../src/agent/frames.js';
import { CONNECT_PATH, decodeEdgeMessage, encodeNodeMessage } from '../../../src/shared/node-tunnel-service.js';

export const SSE = [{ $typeName: 'edge.v1.Header' as const, name: 'content-type', value: 'text/event-stream' }];
export const JSON_HEADERS = [{ $typeName: 'edge.v1.Header' as const, name: 'content-type', value: 'application/json' }];

export class FakeNode {
  readonly client: grpc.Client;
  readonly call: grpc.ClientDuplexStream<NodeMessage, EdgeMessage>;
  readonly received: EdgeMessage[] = [];
  /** Resolves with the status the edge ended the stream with. */
  readonly ended: Promise<grpc.StatusObject>;
  endedWith: grpc.StatusObject | undefined;
  private heartbeat: NodeJS.Timeout;
  private taken = 0;

  constructor(port: number, credentials = grpc.credentials.createInsecure(), options: grpc.ChannelOptions = {}) {
    this.client = new grpc.Client(`127.0.0.1:${port}`, credentials, { 'grpc.use_local_subchannel_pool': 1, ...options });
    this.call = this.client.makeBidiStreamRequest(CONNECT_PATH, encodeNodeMessage, decodeEdgeMessage);
    this.call.on('data', (m: EdgeMessage) => this.received.push(m));
    this.call.on('error', () => {});
    this.ended = new Promise((resolve) => {
      this.call.on('status', (status: grpc.StatusObject) => {
        this.endedWith = status;
        clearInterval(this.heartbeat);
        resolve(status);
      });
    });
    // Keep the session alive past the edge's heartbeat timeout.
    this.heartbeat = setInterval(() => this.send(heartbeatMessage(Date.now())), 150);
  }

  /** Stops heartbeating (silent, as a half-open peer is) until resumeHeartbeats(). */
  pauseHeartbeats(): void {
    clearInterval(this.heartbeat);
  }

  resumeHeartbeats(): void {
    clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => this.send(heartbeatMessage(Date.now())), 150);
  }

  /** Goes silent with the stream still open: a half-open peer (a frozen host, a dead NAT), as the edge sees it. */
  stopHeartbeat(): void {
    clearInterval(this.heartbeat);
  }

  send(message: NodeMessage): void {
    if (this.endedWith === undefined) this.call.write(message);
  }

  /** `joinGeneration` > 0: register as extra lane `lane` of that generation. */
  register(nodeId: string, token: string, providers: string[], lane = 0, joinGeneration = 0): void {
    this.send(registerMessage(nodeId, token, 'fake-node/1', providers, lane, joinGeneration));
  }

  async registered(timeoutMs = 2_000): Promise<number> {
    const m = await this.waitFor((e) => e.msg.case === 'registered' || e.msg.case === 'rejected', timeoutMs);
    if (m.msg.case !== 'registered') throw new Error(`rejected: ${m.msg.case === 'rejected' ? m.msg.value.reason : ''}`);
    return m.msg.value.generation;
  }

  /** The next TunnelRequest not yet taken. */
  async nextTunnel(timeoutMs = 2_000): Promise<TunnelRequest> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      for (; this.taken < this.received.length; this.taken++) {
        const m = this.received[this.taken];
        if (m.msg.case === 'tunnelRequest') {
          this.taken++;
          return m.msg.value;
        }
      }
      if (Date.now() > deadline) throw new Error('no TunnelRequest arrived');
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  cancels(): TunnelCancel[] {
    return this.received.flatMap((m) => (m.msg.case === 'cancel' ? [m.msg.value] : []));
  }

  async waitFor(predicate: (m: EdgeMessage) => boolean, timeoutMs = 2_000): Promise<EdgeMessage> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.received.find(predicate);
      if (found) return found;
      if (Date.now() > deadline) throw new Error('expected message did not arrive');
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  headers(tunnelId: number, seq: number, headers = SSE, status = 200): void {
    this.send(headersFrame(tunnelId, seq, status, headers));
  }

  data(tunnelId: number, seq: number, text: string): void {
    this.send(dataFrame(tunnelId, seq, Buffer.from(text)));
  }

  end(tunnelId: number, seq: number): void {
    this.send(endFrame(tunnelId, seq));
  }

  error(tunnelId: number, seq: number, code: string, message = 'fake failure'): void {
    this.send(errorFrame(tunnelId, seq, code, message));
  }

  /** A complete, well-formed SSE answer: HEADERS, one DATA per event, END. */
  answer(tunnelId: number, events: string[]): void {
    this.headers(tunnelId, 0);
    events.forEach((e, i) => this.data(tunnelId, i + 1, `data: ${e}\n\n`));
    this.end(tunnelId, events.length + 1);
  }

  close(): void {
    clearInterval(this.heartbeat);
    this.call.cancel();
    this.client.close();
  }
}
