// Frames of many tunnels leave the agent as FrameBatch messages, once per
// event-loop turn, when (and only when) the edge advertises that it accepts
// them; per-tunnel order and bytes are unchanged, and no batch goes past the
// edge's limit.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { toBinary } from '@bufbuild/protobuf';
import { FrameKind, NodeMessageSchema, type NodeMessage, type TunnelFrame } from '../../src/gen/edge/v1/tunnel_pb.js';
import { NodeAgent } from '../../src/agent/agent.js';
import { EdgeConnection, type ConnectionOwner } from '../../src/agent/edge-connection.js';
import { FrameBatcher } from '../../src/agent/frame-batcher.js';
import { Upstreams } from '../../src/agent/upstreams.js';
import { dataFrame, endFrame, headersFrame } from '../../src/agent/frames.js';
import { agentConfig, FakeEdge, silentLogger, waitFor, type EdgeStream, type RegisterAnswer } from './fake-edge.js';
import { UpstreamServer } from './upstream-server.js';

const TUNNELS = 40;
const CHUNKS = 6;

function chunkOf(tunnel: number, i: number, size: number): string {
  return `data: t${tunnel} c${i} ${'x'.repeat(size)}\n\n`;
}

/** An agent on a fake edge (answering Register with `answer`) and a provider that streams CHUNKS chunks per request, 5 ms apart. */
async function rig(t: TestContext, answer: RegisterAnswer, chunkBytes = 16): Promise<{ stream: EdgeStream }> {
  const edge = await FakeEdge.start(answer);
  const upstream = await UpstreamServer.start((req, res) => {
    const tunnel = Number(req.url?.split('/').pop());
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    let i = 0;
    const timer = setInterval(() => {
      res.write(chunkOf(tunnel, i, chunkBytes));
      if (++i === CHUNKS) {
        clearInterval(timer);
        res.end();
      }
    }, 5);
  });
  const agent = new NodeAgent(agentConfig(edge.address, [{ id: 'p1', baseUrl: upstream.url, connections: TUNNELS }]), { logger: silentLogger });
  t.after(async () => {
    await agent.stop();
    edge.close();
    await upstream.close();
  });
  agent.start();
  const stream = await edge.registeredStream(0);
  await waitFor('the agent to see Registered', () => (agent.isConnected() ? true : undefined));
  return { stream };
}

/** Opens TUNNELS tunnels at once and waits for all of them to end; checks each one's frames. */
async function runTunnels(stream: EdgeStream, chunkBytes = 16): Promise<void> {
  for (let id = 1; id <= TUNNELS; id++) stream.sendTunnel({ tunnelId: id, providerId: 'p1', method: 'GET', path: `/stream/${id}` });
  for (let id = 1; id <= TUNNELS; id++) {
    const frames = await stream.terminalFrames(id, 10_000);
    assert.deepEqual(frames.map((f) => f.seq), frames.map((_, i) => i), `tunnel ${id}: seq in order`);
    assert.equal(frames[0].kind, FrameKind.HEADERS);
    assert.equal(frames.at(-1)?.kind, FrameKind.END);
    const body = Buffer.concat(frames.filter((f) => f.kind === FrameKind.DATA).map((f) => f.data)).toString();
    let expected = '';
    for (let i = 0; i < CHUNKS; i++) expected += chunkOf(id, i, chunkBytes);
    assert.equal(body, expected, `tunnel ${id}: body intact`);
  }
}

function batches(stream: EdgeStream): TunnelFrame[][] {
  const out: TunnelFrame[][] = [];
  for (const m of stream.messages) if (m.msg.case === 'frameBatch') out.push(m.msg.value.frames);
  return out;
}

test('an edge that accepts batches gets the frames of many tunnels in FrameBatch messages, each tunnel in order and intact', async (t) => {
  const { stream } = await rig(t, { kind: 'accept', maxFrameBatchBytes: 1 << 20 });
  await runTunnels(stream);
  const all = batches(stream);
  assert.ok(all.length > 0, 'no FrameBatch arrived');
  assert.ok(all.some((frames) => new Set(frames.map((f) => f.tunnelId)).size > 1), 'no batch carried frames of two tunnels');
  const frameMessages = stream.messages.filter((m) => m.msg.case === 'frame' || m.msg.case === 'frameBatch').length;
  assert.ok(frameMessages < stream.allFrames().length / 2, `${stream.allFrames().length} frames took ${frameMessages} messages`);
});

test('an edge that does not advertise batches (an older edge) gets single frames only', async (t) => {
  const { stream } = await rig(t, { kind: 'accept' });
  await runTunnels(stream);
  assert.equal(batches(stream).length, 0);
});

test('no batch exceeds the limit the edge advertised', async (t) => {
  const limit = 4096;
  const { stream } = await rig(t, { kind: 'accept', maxFrameBatchBytes: limit }, 600);
  await runTunnels(stream, 600);
  const all = stream.messages.filter((m) => m.msg.case === 'frameBatch');
  assert.ok(all.length > 0, 'no FrameBatch arrived');
  for (const message of all) assert.ok(toBinary(NodeMessageSchema, message).length <= limit, 'a batch over the limit');
});

test('FrameBatcher: one turn\'s frames go out together at the end of the turn; a lone frame goes alone', async () => {
  const written: NodeMessage[] = [];
  const batcher = new FrameBatcher((m) => written.push(m), 1 << 20);
  batcher.add(headersFrame(1, 0, 200, []).msg.value as TunnelFrame);
  batcher.add(dataFrame(2, 3, Buffer.from('a')).msg.value as TunnelFrame);
  batcher.add(dataFrame(1, 1, Buffer.from('b')).msg.value as TunnelFrame);
  assert.equal(written.length, 0, 'nothing is written within the turn');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(written.length, 1);
  const first = written[0].msg;
  assert.equal(first.case, 'frameBatch');
  assert.deepEqual(first.case === 'frameBatch' ? first.value.frames.map((f) => [f.tunnelId, f.seq]) : [], [[1, 0], [2, 3], [1, 1]]);
  batcher.add(dataFrame(1, 2, Buffer.from('c')).msg.value as TunnelFrame);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(written.length, 2);
  assert.equal(written[1].msg.case, 'frame');
});

test('FrameBatcher: a batch that would pass the byte bound is written first; a frame larger than the bound goes alone', async () => {
  const written: NodeMessage[] = [];
  const batcher = new FrameBatcher((m) => written.push(m), 1_000);
  for (let i = 0; i < 10; i++) batcher.add(dataFrame(1, i, Buffer.alloc(300)).msg.value as TunnelFrame);
  batcher.add(dataFrame(1, 10, Buffer.alloc(5_000)).msg.value as TunnelFrame);
  await new Promise((resolve) => setImmediate(resolve));
  const seqs = written.map((m) => (m.msg.case === 'frameBatch' ? m.msg.value.frames.map((f) => f.seq) : m.msg.case === 'frame' ? [m.msg.value.seq] : []));
  assert.deepEqual(seqs.flat(), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'order kept across batches');
  for (const m of written) {
    if (m.msg.case === 'frameBatch') assert.ok(toBinary(NodeMessageSchema, m).length <= 1_000);
  }
  assert.equal(written.at(-1)?.msg.case, 'frame', 'the oversized frame went alone');
});

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const seqsOf = (written: NodeMessage[]): number[][] =>
  written.map((m) => (m.msg.case === 'frameBatch' ? m.msg.value.frames.map((f) => f.tunnelId * 100 + f.seq) : m.msg.case === 'frame' ? [m.msg.value.tunnelId * 100 + m.msg.value.seq] : []));

test('FrameBatcher with a delay: a stream\'s later DATA frames wait for company across turns, then leave together in order', async () => {
  const written: NodeMessage[] = [];
  const batcher = new FrameBatcher((m) => written.push(m), 1 << 20, 30);
  batcher.add(dataFrame(1, 4, Buffer.from('a')).msg.value as TunnelFrame);
  await turn();
  batcher.add(dataFrame(2, 9, Buffer.from('b')).msg.value as TunnelFrame);
  await turn();
  batcher.add(dataFrame(1, 5, Buffer.from('c')).msg.value as TunnelFrame);
  await turn();
  assert.equal(written.length, 0, 'later DATA frames wait past the turn');
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.deepEqual(seqsOf(written), [[104, 209, 105]], 'one message after the delay, in production order');
});

test('FrameBatcher with a delay: HEADERS, END and a stream\'s first DATA frames leave at the turn\'s end, taking waiting frames along', async () => {
  const written: NodeMessage[] = [];
  const batcher = new FrameBatcher((m) => written.push(m), 1 << 20, 10_000);
  for (const urgent of [headersFrame(3, 0, 200, []), dataFrame(3, 1, Buffer.from('x')), dataFrame(3, 3, Buffer.from('y')), endFrame(3, 7, 1)]) {
    batcher.add(dataFrame(1, 6, Buffer.from('w')).msg.value as TunnelFrame);
    batcher.add(urgent.msg.value as TunnelFrame);
    await turn();
  }
  assert.deepEqual(seqsOf(written), [[106, 300], [106, 301], [106, 303], [106, 307]], 'each turn\'s frames left at its end, none held for the 10 s delay');
  // Dropped frames arm nothing: no write after a discard.
  batcher.add(dataFrame(1, 8, Buffer.from('z')).msg.value as TunnelFrame);
  batcher.discard();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(written.length, 4);
});

/** An EdgeConnection registered with a fake edge that accepts batches. */
async function connection(t: TestContext): Promise<{ conn: EdgeConnection; stream: EdgeStream }> {
  const edge = await FakeEdge.start({ kind: 'accept', maxFrameBatchBytes: 1 << 20 });
  const owner: ConnectionOwner = { onRegistered() {}, onRejected() {}, onClosed() {} };
  const conn = new EdgeConnection(agentConfig(edge.address, [{ id: 'p1', baseUrl: 'http://127.0.0.1:9' }]), new Upstreams([]), owner, silentLogger);
  t.after(() => {
    conn.close('test over');
    edge.close();
  });
  conn.open();
  const stream = await edge.registeredStream(0);
  await waitFor('Registered', () => (conn.registered ? true : undefined));
  return { conn, stream };
}

test('frames pending in the batch go out before a Leaving written in the same turn', async (t) => {
  const { conn, stream } = await connection(t);
  conn.send(dataFrame(1, 0, Buffer.from('a')));
  conn.send(dataFrame(2, 0, Buffer.from('b')));
  conn.leave('shutdown');
  await waitFor('Leaving', () => (stream.messages.some((m) => m.msg.case === 'leaving') ? true : undefined));
  assert.deepEqual(stream.messages.map((m) => m.msg.case), ['frameBatch', 'leaving']);
});

test('end() delivers a batch still pending before it half-closes the stream', async (t) => {
  const { conn, stream } = await connection(t);
  conn.send(dataFrame(1, 0, Buffer.from('a')));
  conn.send(dataFrame(1, 1, Buffer.from('b')));
  await conn.end(1_000);
  assert.deepEqual(stream.allFrames().map((f) => f.seq), [0, 1]);
});
