// The edge's side of TunnelRequest batching, on a real NodeSession over a
// recording call: requests opened in one turn leave together at the end of
// the turn (a lone one as a plain tunnel_request), a cancel or credit written
// in the same turn never overtakes the request it concerns, a batch stays
// under its body bound, and an agent that did not announce the capability
// gets every request at once, unbatched, as before.
import { LogThrottle } from '../../../src/shared/log-throttle.js';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { afterEach, test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { EdgeMessage, Register } from '../../../src/gen/edge/v1/tunnel_pb.js';
import { registerMessage } from '../../../src/agent/frames.js';
import { silentLogger } from '../../../src/shared/logger.js';
import { encodeEdgeMessage } from '../../../src/shared/node-tunnel-service.js';
import { REQUEST_BATCH_CAPABILITY } from '../../../src/shared/request-batch.js';
import { MAX_EDGE_TO_NODE_MESSAGE_BYTES } from '../../../src/shared/wire-limits.js';
import { ProtocolStats } from '../../../src/workers/grpc/frame-guard.js';
import { NodeSession, type NodeCall, type SessionHost } from '../../../src/workers/grpc/node-session.js';
import type { TunnelConsumer } from '../../../src/workers/tunnel/tunnel-consumer.js';

class RecordingCall extends EventEmitter {
  readonly written: EdgeMessage[] = [];
  getPeer(): string {
    return 'test:0';
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
    maxFrameBytes: 1 << 20,
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

const consumer = { onHeaders() {}, onData() {}, onEnd() {}, onError() {} } as unknown as TunnelConsumer;

function fields(body = 0): Parameters<NodeSession['openTunnel']>[1] {
  return { runId: 'r', providerId: 'p', adapter: 0, sessionId: 'default', target: 't', method: 'POST', path: '/', headers: [], body: new Uint8Array(body), stream: false, timeoutMs: 0, ttfbTimeoutMs: 0, idleTimeoutMs: 0, initialCredit: 0 } as Parameters<NodeSession['openTunnel']>[1];
}

const open: NodeSession[] = [];
afterEach(() => {
  // Their heartbeat timers would keep the test process alive.
  for (const s of open.splice(0)) s.close('test over');
});

function session(capabilities: string[]): { call: RecordingCall; session: NodeSession; stats: ProtocolStats } {
  const call = new RecordingCall();
  const stats = new ProtocolStats();
  const s = new NodeSession(call as unknown as NodeCall, host(stats));
  open.push(s);
  call.emit('data', registerMessage('n', 't', 'v', ['p'], 0, 0, new Map(), capabilities));
  call.written.length = 0; // Registered
  return { call, session: s, stats };
}

/** What was written, as `case:tunnel ids`. */
function shape(written: readonly EdgeMessage[]): string[] {
  return written.map((m) => {
    const msg = m.msg;
    if (msg.case === 'tunnelRequestBatch') return `batch:${msg.value.requests.map((r) => r.tunnelId).join(',')}`;
    if (msg.case === 'tunnelRequest' || msg.case === 'cancel' || msg.case === 'credit') return `${msg.case}:${msg.value.tunnelId}`;
    return String(msg.case);
  });
}

test('one turn\'s requests go out as one batch at the end of the turn; a lone request goes alone', async () => {
  const { call, session: s, stats } = session([REQUEST_BATCH_CAPABILITY]);
  const ids = [s.openTunnel(consumer, fields()), s.openTunnel(consumer, fields()), s.openTunnel(consumer, fields())];
  assert.deepEqual(shape(call.written), [], 'nothing written before the turn ends');
  await nextTurn();
  assert.deepEqual(shape(call.written), [`batch:${ids.join(',')}`]);
  const lone = s.openTunnel(consumer, fields());
  await nextTurn();
  assert.deepEqual(shape(call.written).slice(1), [`tunnelRequest:${lone}`]);
  assert.equal(stats.requestBatches, 1);
});

test('a cancel or credit in the same turn goes after the pending requests, never before', async () => {
  const { call, session: s } = session([REQUEST_BATCH_CAPABILITY]);
  const a = s.openTunnel(consumer, fields());
  const b = s.openTunnel(consumer, fields());
  s.grantCredit(a, 100);
  const c = s.openTunnel(consumer, fields());
  s.cancelTunnel(b, 'client left');
  await nextTurn();
  assert.deepEqual(shape(call.written), [`batch:${a},${b}`, `credit:${a}`, `tunnelRequest:${c}`, `cancel:${b}`]);
});

test('a batch stays under its body bound: the request that would pass it starts the next one', async () => {
  const { call, session: s } = session([REQUEST_BATCH_CAPABILITY]);
  const ids = [s.openTunnel(consumer, fields(200 * 1024)), s.openTunnel(consumer, fields(100 * 1024)), s.openTunnel(consumer, fields(1024))];
  await nextTurn();
  assert.deepEqual(shape(call.written), [`tunnelRequest:${ids[0]}`, `batch:${ids[1]},${ids[2]}`]);
});

test('a batch of requests with large heads stays within the message size the agent accepts', async () => {
  // limits.max_header_bytes may be up to 1 MiB, and every end-to-end client header is forwarded:
  // 64 such requests with small bodies were one 64 MiB+ message, which the agent's gRPC refuses (the node's stream fails).
  const { call, session: s } = session([REQUEST_BATCH_CAPABILITY]);
  const head = [{ $typeName: 'edge.v1.Header', name: 'x-big', value: 'v'.repeat(1_000_000) }];
  const ids: number[] = [];
  for (let i = 0; i < 64; i++) ids.push(s.openTunnel(consumer, { ...fields(16), headers: head } as Parameters<NodeSession['openTunnel']>[1]));
  await nextTurn();
  let sent = 0;
  for (const message of call.written) {
    assert.ok(encodeEdgeMessage(message).byteLength <= MAX_EDGE_TO_NODE_MESSAGE_BYTES, `a ${encodeEdgeMessage(message).byteLength}-byte message`);
    sent += message.msg.case === 'tunnelRequestBatch' ? message.msg.value.requests.length : 1;
  }
  assert.equal(sent, ids.length, 'every request went out');
  assert.ok(call.written.length > 1);
});

test('an agent without the capability gets each request at once, unbatched', async () => {
  const { call, session: s, stats } = session(['commands']);
  const ids = [s.openTunnel(consumer, fields()), s.openTunnel(consumer, fields())];
  assert.deepEqual(shape(call.written), ids.map((id) => `tunnelRequest:${id}`));
  await nextTurn();
  assert.equal(call.written.length, 2);
  assert.equal(stats.requestBatches, 0);
});

test('a write that throws closes the session: no tunnel is left on it unanswered, a full batch\'s or a cancel\'s', async () => {
  // A full batch is written inside openTunnel: the request that filled it is refused (it throws), the batched ones fail.
  const { call, session: s } = session([REQUEST_BATCH_CAPABILITY]);
  const failed: string[] = [];
  const watching = { ...consumer, onError: (code: string) => failed.push(code) } as unknown as TunnelConsumer;
  for (let i = 0; i < 64; i++) s.openTunnel(watching, fields());
  call.write = () => {
    throw new Error('transport gone');
  };
  assert.throws(() => s.openTunnel(watching, fields()), /session is closed/);
  assert.equal(s.isActive, false);
  assert.equal(s.openTunnels, 0, 'no tunnel tracked on the closed session');
  assert.equal(failed.length, 64);
  assert.ok(failed.every((code) => code === 'node_disconnected'));

  // A cancel whose write throws: the session closes, its other tunnels fail at once.
  const second = session([REQUEST_BATCH_CAPABILITY]);
  const errors: string[] = [];
  const recorder = { ...consumer, onError: (code: string) => errors.push(code) } as unknown as TunnelConsumer;
  const a = second.session.openTunnel(recorder, fields());
  second.session.openTunnel(recorder, fields());
  await nextTurn();
  second.call.write = () => {
    throw new Error('transport gone');
  };
  second.session.cancelTunnel(a, 'client left');
  assert.equal(second.session.isActive, false);
  assert.deepEqual(errors, ['node_disconnected'], 'the other tunnel failed, the cancelled one is not told twice');
});
