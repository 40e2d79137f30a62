// Two PeerLinks over real SAB rings in one thread, as two I/O workers hold
// them: the client's worker opens a tunnel on a node whose lane is still
// registering on the other worker (the open is deferred there), then cancels.
// The cancel must cancel the deferred open: nothing may reach the node. Also: opens
// larger than a ring record, and what the frames carry across.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PeerLinks, type PeerConsumer } from '../../../src/workers/peer/peer-links.js';
import { createRing } from '../../../src/shared/ring/spsc-ring.js';
import { silentLogger } from '../../../src/shared/logger.js';
import type { NodeGateway } from '../../../src/workers/grpc/node-gateway.js';
import type { NodeSession } from '../../../src/workers/grpc/node-session.js';
import type { SchedulerPort } from '../../../src/contract/scheduler-port.js';
import { Adapter } from '../../../src/gen/edge/v1/tunnel_pb.js';

type Waiter = (session: NodeSession | undefined) => void;

const NODE = 'gpu-1';
const GENERATION = 7;

function fields(): Parameters<NodeSession['openTunnel']>[1] {
  return { runId: 'run-1', providerId: 'p', target: 'm', method: 'POST', path: '/v1/chat/completions', headers: [], body: new Uint8Array(2), stream: false, timeoutMs: 1_000, ttfbTimeoutMs: 0, idleTimeoutMs: 0, initialCredit: 0, adapter: Adapter.OPENAI_COMPAT, sessionId: '' };
}

async function turns(n = 20): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** A node session stub whose openTunnel hands each tunnel's fields to `onOpen`. */
function sessionStub(onOpen: (fields: { runId: string; body: Uint8Array }) => void): NodeSession {
  let opened = 0;
  return {
    nodeId: NODE,
    generation: GENERATION,
    isActive: true,
    openTunnels: 0,
    openTunnel: (_consumer: unknown, f: { runId: string; body: Uint8Array }) => {
      onOpen(f);
      return ++opened;
    },
    cancelTunnel: () => undefined,
    grantCredit: () => undefined,
  } as unknown as NodeSession;
}

/** Worker 0 (the client's) and worker 1 (the node's) over one real ring pair, both draining. */
function twoWorkers(nodeGateway: NodeGateway): { clientSide: PeerLinks; nodeSide: PeerLinks } {
  const zeroToOne = createRing(1 << 16);
  const oneToZero = createRing(1 << 16);
  const port = { confirmSent: () => true } as unknown as SchedulerPort;
  const clientSide = new PeerLinks({ toPeer: [undefined, zeroToOne], fromPeer: [undefined, oneToZero] }, {} as NodeGateway, port, silentLogger());
  const nodeSide = new PeerLinks({ toPeer: [oneToZero, undefined], fromPeer: [zeroToOne, undefined] }, nodeGateway, port, silentLogger());
  clientSide.run();
  nodeSide.run();
  return { clientSide, nodeSide };
}

/** Opens two tunnels from worker 0 on the node at worker 1 and returns the bodies the node's session was handed, in order. */
async function bodiesOfTwoOpens(first: Uint8Array, second: Uint8Array): Promise<Uint8Array[]> {
  // Kept as given, as NodeSession's request batcher keeps them until the turn ends.
  const bodies: Uint8Array[] = [];
  const session = sessionStub((f) => bodies.push(f.body));
  const { clientSide, nodeSide } = twoWorkers({ whenCurrent: (_nodeId: string, waiter: Waiter) => waiter(session) } as unknown as NodeGateway);
  try {
    const consumer: PeerConsumer = { onHeaders() {}, onData() {}, onEnd() {}, onError() {}, onRefused() {} };
    const host = clientSide.nodeHost(1, NODE, GENERATION, 42);
    host.openTunnel(consumer, { ...fields(), body: first });
    host.openTunnel(consumer, { ...fields(), body: second });
    for (let i = 0; i < 50 && bodies.length < 2; i++) await turns();
    return bodies;
  } finally {
    clientSide.close();
    nodeSide.close();
  }
}

test('a cancel that arrives while the open waits for a registering lane cancels the open', async () => {
  const deferred: Waiter[] = [];
  const opened: string[] = [];
  // The node side (worker 1): a lane of the node is registering, so the open waits.
  const nodeGateway = { whenCurrent: (_nodeId: string, waiter: Waiter) => deferred.push(waiter) } as unknown as NodeGateway;
  const session = sessionStub((f) => opened.push(f.runId));
  const { clientSide, nodeSide } = twoWorkers(nodeGateway);
  try {
    const consumer: PeerConsumer = { onHeaders() {}, onData() {}, onEnd() {}, onError() {}, onRefused() {} };
    const host = clientSide.nodeHost(1, NODE, GENERATION, 42);
    const tunnelId = host.openTunnel(consumer, fields());
    await turns();
    assert.equal(deferred.length, 1, 'the open waits for the registering lane');
    host.cancelTunnel(tunnelId, 'client closed');
    await turns();
    // The lane's registration settles: the node is current.
    for (const waiter of deferred.splice(0)) waiter(session);
    await turns();
    assert.deepEqual(opened, [], 'no tunnel request was sent to the node after the cancel');
  } finally {
    clientSide.close();
    nodeSide.close();
  }
});

test('an open larger than a ring record (a request body near limits.body_bytes) reaches the node whole, in pieces, in order', async () => {
  // 200 KiB through a 64 KiB ring (at most 32 KiB a record): three times the ring itself, so the pieces must also wait for space.
  const big = Uint8Array.from({ length: 200 * 1024 }, (_, i) => (i * 7 + 3) & 0xff);
  const small = Uint8Array.from([1, 2, 3]);
  const bodies = await bodiesOfTwoOpens(big, small);
  assert.equal(bodies.length, 2, 'both tunnels opened on the node');
  assert.deepEqual(Buffer.from(bodies[0]), Buffer.from(big), 'the large body arrives byte for byte');
  assert.deepEqual(Buffer.from(bodies[1]), Buffer.from(small), 'the open after it is not overtaken or corrupted');
});

test('a small open keeps its body when the ring reuses its bytes before the node sends it (the request batcher encodes at the end of the turn)', async () => {
  // A 2 KB JSON body, then 200 KiB through the same 64 KiB ring: the ring wraps over the small record's bytes.
  const small = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(2000) }] }));
  const big = Uint8Array.from({ length: 200 * 1024 }, (_, i) => 97 + (i % 26));
  const bodies = await bodiesOfTwoOpens(small, big);
  assert.equal(bodies.length, 2, 'both tunnels opened on the node');
  assert.equal(Buffer.from(bodies[0]).toString(), small.toString(), 'the small body is intact after the ring carried the large one');
  assert.deepEqual(Buffer.from(bodies[1]), Buffer.from(big));
});

test('the provider time the node measured crosses to the client worker with the HEADERS and END frames', async () => {
  let nodeConsumer: { onHeaders(status: number, headers: never[], upstreamUs: number): void; onEnd(upstreamUs: number): void } | undefined;
  const session = {
    ...sessionStub(() => undefined),
    openTunnel: (consumer: typeof nodeConsumer) => {
      nodeConsumer = consumer;
      return 1;
    },
  } as unknown as NodeSession;
  const { clientSide, nodeSide } = twoWorkers({ whenCurrent: (_nodeId: string, waiter: Waiter) => waiter(session) } as unknown as NodeGateway);
  try {
    const seen: string[] = [];
    const consumer: PeerConsumer = {
      onHeaders: (status, _headers, upstreamUs) => void seen.push(`headers ${status} ${upstreamUs}`),
      onData() {},
      onEnd: (upstreamUs) => void seen.push(`end ${upstreamUs}`),
      onError() {},
      onRefused() {},
    };
    clientSide.nodeHost(1, NODE, GENERATION, 42).openTunnel(consumer, fields());
    for (let i = 0; i < 50 && nodeConsumer === undefined; i++) await turns();
    assert.ok(nodeConsumer !== undefined, 'the tunnel opened on the node worker');
    nodeConsumer.onHeaders(200, [], 1_234);
    nodeConsumer.onEnd(4_000_000_001);
    for (let i = 0; i < 50 && seen.length < 2; i++) await turns();
    assert.deepEqual(seen, ['headers 200 1234', 'end 4000000001']);
  } finally {
    clientSide.close();
    nodeSide.close();
  }
});

test('an open a dead worker left in its ring is not sent once that worker is replaced', async () => {
  const opened: string[] = [];
  const session = sessionStub((f) => opened.push(f.runId));
  const { clientSide, nodeSide } = twoWorkers({ whenCurrent: (_nodeId: string, waiter: Waiter) => waiter(session) } as unknown as NodeGateway);
  try {
    const consumer: PeerConsumer = { onHeaders() {}, onData() {}, onEnd() {}, onError() {}, onRefused() {} };
    // Worker 0 commits an open, then "exits" before worker 1 drains it: the pool released its lease
    // and worker 1 is told to replace its link to worker 0 (fresh rings).
    clientSide.nodeHost(1, NODE, GENERATION, 42).openTunnel(consumer, fields());
    nodeSide.replacePeer(0, createRing(1 << 16), createRing(1 << 16));
    await turns();
    assert.deepEqual(opened, [], 'nothing reached the node for a client that is gone');
  } finally {
    clientSide.close();
    nodeSide.close();
  }
});

test('a response head or error text larger than a ring record fails the request instead of the worker', async () => {
  const nodeConsumers: { onHeaders(status: number, headers: { name: string; value: string }[], upstreamUs: number): void; onError(code: string, message: string): void }[] = [];
  const cancelled: string[] = [];
  let opens = 0;
  const session = {
    ...sessionStub(() => undefined),
    openTunnel: (consumer: (typeof nodeConsumers)[number]) => {
      nodeConsumers.push(consumer);
      return ++opens;
    },
    cancelTunnel: (_id: number, reason: string) => void cancelled.push(reason),
  } as unknown as NodeSession;
  const { clientSide, nodeSide } = twoWorkers({ whenCurrent: (_nodeId: string, waiter: Waiter) => waiter(session) } as unknown as NodeGateway);
  try {
    const seen: string[] = [];
    const consumer: PeerConsumer = {
      onHeaders: (status) => void seen.push(`headers ${status}`),
      onData() {},
      onEnd: () => void seen.push('end'),
      onError: (code, message) => void seen.push(`error ${code} ${message.length}`),
      onRefused() {},
    };
    // A 64 KiB ring holds records of at most 32 KiB: a 40 KB header value cannot go in one.
    clientSide.nodeHost(1, NODE, GENERATION, 42).openTunnel(consumer, fields());
    for (let i = 0; i < 50 && nodeConsumers.length < 1; i++) await turns();
    nodeConsumers[0].onHeaders(200, [{ $typeName: 'edge.v1.Header', name: 'x-huge', value: 'v'.repeat(40_000) } as never], 0);
    for (let i = 0; i < 50 && seen.length < 1; i++) await turns();
    assert.equal(seen.length, 1);
    assert.match(seen[0], /^error node_protocol_error /);
    assert.deepEqual(cancelled, ['response head too large'], 'the node is told to stop');
    // The node's own error with a huge text: cut, delivered.
    clientSide.nodeHost(1, NODE, GENERATION, 43).openTunnel(consumer, fields());
    for (let i = 0; i < 50 && nodeConsumers.length < 2; i++) await turns();
    nodeConsumers[1].onError('upstream_error', 'e'.repeat(100_000));
    for (let i = 0; i < 50 && seen.length < 2; i++) await turns();
    assert.equal(seen[1], 'error upstream_error 4097');
  } finally {
    clientSide.close();
    nodeSide.close();
  }
});
