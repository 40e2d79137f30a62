// Property tests of the node protocol's receiving side. (1) Decoding random
// or mutated bytes as a NodeMessage either throws an Error or yields a
// message that re-encodes to itself. (2) Random frame sequences, good and
// bad, fed to a real NodeSession: it never throws, every consumer sees
// exactly what a reference model of the rules says (HEADERS? DATA* then
// END or ERROR, nothing after, nothing of another tunnel's), and the node is
// fenced exactly when the model says so. Deterministic (fixed seed;
// FUZZ_SEED to explore others), FUZZ_RUNS scales the budget.
import { LogThrottle } from '../../../src/shared/log-throttle.js';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { equals, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { FrameKind, NodeMessageSchema, type EdgeMessage, type Header, type NodeMessage, type Register } from '../../../src/gen/edge/v1/tunnel_pb.js';
import { dataFrame, endFrame, errorFrame, headersFrame, registerMessage } from '../../../src/agent/frames.js';
import { decodeNodeMessage, encodeNodeMessage } from '../../../src/shared/node-tunnel-service.js';
import { silentLogger } from '../../../src/shared/logger.js';
import { MAX_SESSION_VIOLATIONS, ProtocolStats } from '../../../src/workers/grpc/frame-guard.js';
import { NodeSession, type NodeCall, type SessionHost } from '../../../src/workers/grpc/node-session.js';
import type { TunnelConsumer } from '../../../src/workers/tunnel/tunnel-consumer.js';

const SEED = Number(process.env.FUZZ_SEED ?? 0x0f4a_3e11);
const RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const MAX_DATA = 24;

// --- (1) decoder -----------------------------------------------------------

function decodes(bytes: Uint8Array): void {
  let message: NodeMessage;
  try {
    message = decodeNodeMessage(Buffer.from(bytes));
  } catch (err) {
    assert.ok(err instanceof Error, `threw a non-Error: ${String(err)}`);
    return;
  }
  const again = decodeNodeMessage(encodeNodeMessage(message));
  assert.ok(equals(NodeMessageSchema, message, again), 'decode(encode(decode(x))) == decode(x)');
}

const validMessage = fc.oneof(
  fc.tuple(fc.string(), fc.string(), fc.array(fc.string(), { maxLength: 3 })).map(([id, token, providers]) => registerMessage(id, token, 'v', providers)),
  fc.tuple(fc.nat(), fc.nat(), fc.nat({ max: 599 }), fc.string()).map(([t, s, status, v]) => headersFrame(t, s, status, [{ $typeName: 'edge.v1.Header', name: 'a', value: v } as Header])),
  fc.tuple(fc.nat(), fc.nat(), fc.uint8Array({ maxLength: 64 })).map(([t, s, d]) => dataFrame(t, s, d)),
  fc.tuple(fc.nat(), fc.nat()).map(([t, s]) => endFrame(t, s)),
  fc.tuple(fc.nat(), fc.nat(), fc.string()).map(([t, s, c]) => errorFrame(t, s, c, 'm')),
);

test('random bytes decode as a NodeMessage or throw an Error, never anything else', () => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 256 }), (bytes) => decodes(bytes)), { seed: SEED, numRuns: RUNS });
});

test('mutated valid messages (flipped, cut, spliced bytes) decode cleanly or throw an Error', () => {
  const mutated = fc.tuple(validMessage, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }), fc.nat()).map(([m, flips, cut]) => {
    const bytes = Uint8Array.from(toBinary(NodeMessageSchema, m));
    for (const [at, value] of flips) if (bytes.length > 0) bytes[at % bytes.length] = value;
    return bytes.subarray(0, bytes.length === 0 ? 0 : cut % (bytes.length + 1));
  });
  fc.assert(fc.property(mutated, (bytes) => decodes(bytes)), { seed: SEED, numRuns: RUNS });
});

// --- (2) NodeSession against a reference model -----------------------------

type Event = string;

class Recorder implements TunnelConsumer {
  readonly events: Event[] = [];
  onHeaders(status: number): void {
    this.events.push(`H${status}`);
  }
  onData(bytes: Uint8Array): void {
    this.events.push(`D${Buffer.from(bytes).toString('latin1')}`);
  }
  onEnd(): void {
    this.events.push('E');
  }
  onError(code: string): void {
    this.events.push(`X${code}`);
  }
}

class FakeCall extends EventEmitter {
  readonly written: EdgeMessage[] = [];
  getPeer(): string {
    return 'fuzz:0';
  }
  write(message: EdgeMessage): boolean {
    this.written.push(message);
    return true;
  }
  end(): void {}
}

function host(stats: ProtocolStats): SessionHost {
  return {
    heartbeatIntervalMs: 3_600_000,
    heartbeatTimeoutMs: 7_200_000,
    registerTimeoutMs: 3_600_000,
    maxFrameBytes: MAX_DATA,
    protocolStats: stats,
    credentialRejections: new LogThrottle(10_000),
    registerTimeoutLog: new LogThrottle(10_000),
    logger: silentLogger(),
    register(session: NodeSession, _register: Register): string | undefined {
      session.activate(1);
      return undefined;
    },
    unregister(): void {},
    forget(): void {},
  };
}

/** The rules, restated as simply as possible. */
class Model {
  readonly events = new Map<number, Event[]>();
  private readonly open = new Map<number, { nextSeq: number; sawHeaders: boolean }>();
  /** Tunnels the edge failed for a bad frame (it cancels them): later frames are late, not violations. */
  private readonly cancelled = new Set<number>();
  private violations = 0;
  closed = false;

  constructor(readonly ids: readonly number[]) {
    for (const id of ids) {
      this.events.set(id, []);
      this.open.set(id, { nextSeq: 0, sawHeaders: false });
    }
  }

  frame(tunnelId: number, seq: number, kind: number, data: string, code: string): void {
    if (this.closed) return;
    const t = this.open.get(tunnelId);
    if (t === undefined) {
      const opened = tunnelId !== 0 && tunnelId <= Math.max(...this.ids);
      // Never opened, or ended by the node's own END/ERROR: a violation.
      if (!opened || !this.cancelled.has(tunnelId)) this.violate();
      return;
    }
    const log = this.events.get(tunnelId) as Event[];
    const bad =
      seq !== t.nextSeq ||
      (kind === FrameKind.HEADERS && t.sawHeaders) ||
      (kind === FrameKind.DATA && (!t.sawHeaders || data.length > MAX_DATA)) ||
      (kind === FrameKind.END && !t.sawHeaders) ||
      ![FrameKind.HEADERS, FrameKind.DATA, FrameKind.END, FrameKind.ERROR].includes(kind);
    if (bad) {
      this.open.delete(tunnelId);
      this.cancelled.add(tunnelId);
      log.push('Xnode_protocol_error');
      this.violate();
      return;
    }
    t.nextSeq++;
    if (kind === FrameKind.HEADERS) {
      t.sawHeaders = true;
      log.push('H200');
    } else if (kind === FrameKind.DATA) log.push(`D${data}`);
    else {
      this.open.delete(tunnelId);
      log.push(kind === FrameKind.END ? 'E' : `X${code || 'upstream_error'}`);
    }
  }

  private violate(): void {
    if (++this.violations > MAX_SESSION_VIOLATIONS) {
      this.closed = true;
      for (const id of this.open.keys()) (this.events.get(id) as Event[]).push('Xnode_disconnected');
      this.open.clear();
    }
  }
}

/** A frame with a kind the protocol does not define. */
function withKind(message: NodeMessage, kind: number): NodeMessage {
  if (message.msg.case === 'frame') message.msg.value.kind = kind;
  return message;
}

interface FrameSpec {
  readonly target: number;
  readonly seqDelta: number;
  readonly kind: number;
  readonly dataLen: number;
  readonly code: string;
}

const frameSpec: fc.Arbitrary<FrameSpec> = fc.record({
  // 0..tunnels-1: an open tunnel; more: a never-opened id; -1: id 0.
  target: fc.oneof({ weight: 10, arbitrary: fc.integer({ min: 0, max: 3 }) }, { weight: 1, arbitrary: fc.integer({ min: -1, max: 8 }) }),
  seqDelta: fc.oneof({ weight: 12, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: -2, max: 2 }) }),
  kind: fc.oneof(
    { weight: 6, arbitrary: fc.constant(FrameKind.DATA) },
    { weight: 3, arbitrary: fc.constant(FrameKind.HEADERS) },
    { weight: 1, arbitrary: fc.constantFrom(FrameKind.END, FrameKind.ERROR, FrameKind.UNSPECIFIED, 7) },
  ),
  dataLen: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 0, max: 8 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: MAX_DATA + 8 }) }),
  code: fc.constantFrom('', 'upstream_reset', 'weird'),
});

/** Frames as one FrameBatch message (the agent's once-per-turn batching): the same rules apply to each, in order. */
function batchOf(frames: NodeMessage[]): NodeMessage {
  const value = frames.map((m) => (m.msg.case === 'frame' ? m.msg.value : undefined)).filter((f) => f !== undefined);
  return { $typeName: 'edge.v1.NodeMessage', msg: { case: 'frameBatch', value: { $typeName: 'edge.v1.FrameBatch', frames: value } } };
}

test('random frame sequences, alone or in batches: no throw, each tunnel gets exactly what the rules allow, fencing as modelled', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 4 }), fc.array(frameSpec, { maxLength: 80 }), fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 20 }), (tunnels, frames, groupSizes) => {
      const call = new FakeCall();
      const stats = new ProtocolStats();
      const session = new NodeSession(call as unknown as NodeCall, host(stats));
      call.emit('data', registerMessage('n', 't', 'v', []));
      const consumers = new Map<number, Recorder>();
      for (let i = 0; i < tunnels; i++) {
        const consumer = new Recorder();
        const id = session.openTunnel(consumer, { runId: 'r', providerId: 'p', adapter: 0, sessionId: 'default', target: 't', method: 'POST', path: '/', headers: [], body: new Uint8Array(0), stream: true, timeoutMs: 0, ttfbTimeoutMs: 0, idleTimeoutMs: 0, initialCredit: 0 } as Parameters<NodeSession['openTunnel']>[1]);
        consumers.set(id, consumer);
      }
      const ids = [...consumers.keys()];
      const model = new Model(ids);
      const sent = new Map<number, number>();
      // Frames go out in groups (sizes cycle through groupSizes): a group of one as a plain frame, more as a FrameBatch.
      let group: NodeMessage[] = [];
      let groupIndex = 0;
      const flush = (): void => {
        if (group.length === 1) call.emit('data', group[0]);
        else if (group.length > 1) call.emit('data', batchOf(group));
        group = [];
        groupIndex++;
      };
      try {
        for (const f of frames) {
          const tunnelId = f.target === -1 ? 0 : f.target < tunnels ? ids[f.target] : 100 + f.target;
          const seq = Math.max(0, (sent.get(tunnelId) ?? 0) + f.seqDelta);
          sent.set(tunnelId, seq + 1);
          // The payload names its tunnel and seq: a byte delivered to the wrong consumer cannot go unnoticed.
          const data = `${tunnelId}.${seq}|`.padEnd(f.dataLen, '#').slice(0, Math.max(f.dataLen, 0));
          const frame =
            f.kind === FrameKind.DATA ? dataFrame(tunnelId, seq, Buffer.from(data, 'latin1'))
            : f.kind === FrameKind.HEADERS ? headersFrame(tunnelId, seq, 200, [])
            : f.kind === FrameKind.END ? endFrame(tunnelId, seq)
            : f.kind === FrameKind.ERROR ? errorFrame(tunnelId, seq, f.code, 'm')
            : withKind(endFrame(tunnelId, seq), f.kind);
          group.push(frame);
          if (group.length >= groupSizes[groupIndex % groupSizes.length]) flush();
          model.frame(tunnelId, seq, f.kind, f.kind === FrameKind.DATA ? data : '', f.code);
        }
        flush();
        for (const id of ids) {
          assert.deepEqual(consumers.get(id)?.events, model.events.get(id), `tunnel ${id}`);
        }
        assert.equal(session.isActive, !model.closed, 'fenced exactly when the rules say');
      } finally {
        session.close('end of run');
      }
    }),
    { seed: SEED, numRuns: Math.max(50, Math.round(RUNS / 4)) },
  );
});
