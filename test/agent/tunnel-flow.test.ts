// Flow control and frame coalescing in the agent's TunnelExecutor, against a
// real HTTP upstream: DATA never exceeds the edge's credit, a spent window
// stops reading the provider, close-together chunks share one frame, and no
// frame passes coalesce_max_bytes or the edge's max_frame_bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { create } from '@bufbuild/protobuf';
import { FrameKind, TunnelRequestSchema, type NodeMessage, type TunnelFrame } from '../../src/gen/edge/v1/tunnel_pb.js';
import { TunnelExecutor, type FrameSink } from '../../src/agent/tunnel-executor.js';
import { Upstreams } from '../../src/agent/upstreams.js';
import { NodeAgent } from '../../src/agent/agent.js';
import { agentConfig, FakeEdge, silentLogger, waitFor } from './fake-edge.js';
import { UpstreamServer } from './upstream-server.js';

class Recorder implements FrameSink {
  readonly frames: TunnelFrame[] = [];
  send(message: NodeMessage): boolean {
    if (message.msg.case === 'frame') this.frames.push(message.msg.value);
    return true;
  }
  resumeOnDrain(): void {}
  tunnelFinished(): void {}
  data(): TunnelFrame[] {
    return this.frames.filter((f) => f.kind === FrameKind.DATA);
  }
  dataBytes(): number {
    return this.data().reduce((sum, f) => sum + f.data.length, 0);
  }
}

async function upstreamWith(handler: Parameters<typeof UpstreamServer.start>[0]) {
  const upstream = await UpstreamServer.start(handler);
  const upstreams = new Upstreams([{ id: 'p', type: 'openai_compat', baseUrl: upstream.url, apiKey: undefined, connections: 1 }]);
  return { upstream, upstreams };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('DATA never exceeds the credit; a spent window stops reading the provider until credit arrives', async (t) => {
  const total = 32 * 1024 * 1024;
  let written = 0;
  let blocked = false;
  const { upstream, upstreams } = await upstreamWith(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const piece = Buffer.alloc(64 * 1024, 0x61);
    while (written < total) {
      written += piece.length;
      if (!res.write(piece)) {
        blocked = true;
        await new Promise((resolve) => res.once('drain', resolve));
      }
    }
    res.end();
  });
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Recorder();
  const window = 8192;
  const tunnel = new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/', initialCredit: window }), sink, {
    coalesceDelayMs: 0,
    coalesceMaxBytes: 16_384,
    batchFrames: true,
    batchDelayMs: 0,
  });
  tunnel.start(upstreams);
  await waitFor('the window to be spent', () => (sink.dataBytes() === window ? true : undefined));
  await sleep(100);
  assert.equal(sink.dataBytes(), window, 'nothing beyond the window is sent');
  assert.ok(written < total, 'the provider could not write its whole body: its socket saw backpressure');
  let granted = window;
  tunnel.addCredit(window);
  granted += window;
  await sleep(20);
  assert.equal(sink.dataBytes(), granted, 'credit lets exactly that many more bytes out');
  const step = 4 * 1024 * 1024;
  while (sink.frames.at(-1)?.kind !== FrameKind.END) {
    tunnel.addCredit(step);
    granted += step;
    await sleep(10);
    assert.ok(sink.dataBytes() <= granted, `sent ${sink.dataBytes()} with ${granted} granted`);
  }
  assert.equal(sink.dataBytes(), total);
  assert.ok(blocked || written === total);
  assert.deepEqual(sink.frames.map((f) => f.seq), sink.frames.map((_, i) => i));
});

test('chunks arriving close together share a DATA frame; an idle stream\'s first chunk goes out at once', async (t) => {
  let release: (() => void) | undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const { upstream, upstreams } = await upstreamWith(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: first\n\n');
    await gate;
    for (let i = 0; i < 50; i++) res.write(`data: burst-${i}\n\n`);
    await sleep(100);
    res.end('data: [DONE]\n\n');
  });
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Recorder();
  new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/' }), sink, {
    coalesceDelayMs: 20,
    coalesceMaxBytes: 1 << 20,
    batchFrames: true,
    batchDelayMs: 0,
  }).start(upstreams);
  await waitFor('the first chunk', () => (sink.data().length === 1 ? true : undefined), 2_000);
  assert.equal(Buffer.from(sink.data()[0].data).toString(), 'data: first\n\n', 'the first chunk was not held back');
  await sleep(30); // idle again
  release?.();
  await waitFor('END', () => (sink.frames.at(-1)?.kind === FrameKind.END ? true : undefined));
  const body = Buffer.concat(sink.data().map((f) => f.data)).toString();
  assert.equal(body, 'data: first\n\n' + Array.from({ length: 50 }, (_, i) => `data: burst-${i}\n\n`).join('') + 'data: [DONE]\n\n');
  assert.ok(sink.data().length <= 5, `51 burst chunks went out as ${sink.data().length} frames`);
});

test('bytes held for coalescing when the provider fails go out ahead of the ERROR, in order', async (t) => {
  const { upstream, upstreams } = await upstreamWith(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: first\n\n');
    await sleep(30);
    // Close-together chunks the agent holds for company, then the connection closes without the last chunk.
    for (let i = 0; i < 5; i++) res.write(`data: burst-${i}\n\n`);
    res.socket?.end();
  });
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Recorder();
  new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/' }), sink, {
    coalesceDelayMs: 1_000,
    coalesceMaxBytes: 1 << 20,
    batchFrames: true,
    batchDelayMs: 0,
  }).start(upstreams);
  await waitFor('ERROR', () => (sink.frames.at(-1)?.kind === FrameKind.ERROR ? true : undefined));
  assert.equal(sink.frames.at(-1)?.errorCode, 'upstream_reset');
  const body = Buffer.concat(sink.data().map((f) => f.data)).toString();
  assert.equal(body, 'data: first\n\n' + Array.from({ length: 5 }, (_, i) => `data: burst-${i}\n\n`).join(''));
  assert.deepEqual(sink.frames.map((f) => f.seq), sink.frames.map((_, i) => i), 'one sequence, the ERROR last');
});

test('a coalesced frame is sent as soon as it reaches the size bound', async (t) => {
  const { upstream, upstreams } = await upstreamWith(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.write(Buffer.alloc(10, 1));
    await sleep(5);
    for (let i = 0; i < 40; i++) res.write(Buffer.alloc(1000, 2));
    res.end();
  });
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Recorder();
  new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/' }), sink, {
    coalesceDelayMs: 1_000,
    coalesceMaxBytes: 8_000,
    batchFrames: true,
    batchDelayMs: 0,
  }).start(upstreams);
  await waitFor('END', () => (sink.frames.at(-1)?.kind === FrameKind.END ? true : undefined));
  assert.equal(sink.dataBytes(), 40_010);
  for (const frame of sink.data().slice(1, -1)) assert.ok(frame.data.length >= 8_000, `a middle frame of ${frame.data.length} bytes went out before the bound`);
});

test('with an unlimited window a big upstream chunk is split: no DATA frame passes the edge\'s max_frame_bytes', async (t) => {
  const body = Buffer.alloc(256 * 1024);
  for (let i = 0; i < body.length; i++) body[i] = i % 251;
  const { upstream, upstreams } = await upstreamWith((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(body);
  });
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Recorder();
  // initialCredit 0: no flow control, so credit never splits anything.
  new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/', initialCredit: 0 }), sink, { coalesceDelayMs: 2, coalesceMaxBytes: 16_384, batchFrames: true, batchDelayMs: 0 }, 4096).start(upstreams);
  await waitFor('END', () => (sink.frames.at(-1)?.kind === FrameKind.END ? true : undefined));
  const largest = Math.max(...sink.data().map((f) => f.data.length));
  assert.ok(largest <= 4096, `a DATA frame of ${largest} bytes (the edge allows 4096)`);
  assert.ok(Buffer.concat(sink.data().map((f) => f.data)).equals(body), 'the body arrives whole and in order');
});

test('no DATA frame passes coalesce_max_bytes: merged chunks fill a frame up to the size, never past it', async (t) => {
  const { upstream, upstreams } = await upstreamWith(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.write(Buffer.alloc(10, 1));
    await sleep(5);
    for (let i = 0; i < 40; i++) {
      res.write(Buffer.alloc(700, 2));
      await sleep(1);
    }
    res.write(Buffer.alloc(5_000, 3)); // one chunk far over the size
    res.end();
  });
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Recorder();
  new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/' }), sink, {
    coalesceDelayMs: 1_000,
    coalesceMaxBytes: 1_000,
    batchFrames: true,
    batchDelayMs: 0,
  }).start(upstreams);
  await waitFor('END', () => (sink.frames.at(-1)?.kind === FrameKind.END ? true : undefined), 5_000);
  assert.equal(sink.dataBytes(), 10 + 40 * 700 + 5_000);
  const sizes = sink.data().map((f) => f.data.length);
  assert.ok(sizes.every((n) => n <= 1_000), `frames over coalesce_max_bytes (1000): ${sizes.filter((n) => n > 1_000).join(', ')}`);
  assert.ok(sizes.slice(1, -1).every((n) => n === 1_000), `merged frames are filled to the size: ${sizes.join(', ')}`);
});

test('an event stream cut for size is cut at an event\'s end: every frame but the last holds whole events', async (t) => {
  const events = Array.from({ length: 400 }, (_, i) => `data: {"i":${i},"text":"${'x'.repeat(i % 97)}"}\n\n`);
  const { upstream, upstreams } = await upstreamWith((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(events.join(''));
  });
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Recorder();
  new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/' }), sink, {
    coalesceDelayMs: 20,
    coalesceMaxBytes: 4_096,
    batchFrames: true,
    batchDelayMs: 0,
  }).start(upstreams);
  await waitFor('END', () => (sink.frames.at(-1)?.kind === FrameKind.END ? true : undefined));
  const frames = sink.data().map((f) => Buffer.from(f.data).toString());
  assert.equal(frames.join(''), events.join(''));
  assert.ok(frames.length > 5, `${frames.length} frames`);
  for (const frame of frames) {
    assert.ok(frame.length <= 4_096);
    assert.ok(frame.endsWith('\n\n'), `a frame ends inside an event: …${JSON.stringify(frame.slice(-20))}`);
  }
});

test('the agent takes max_frame_bytes from Registered: through a real edge connection, no frame passes it', async (t) => {
  const edge = await FakeEdge.start({ kind: 'accept', maxFrameBytes: 8192, maxFrameBatchBytes: 1 << 20 });
  const body = Buffer.alloc(300 * 1024, 0x62);
  const upstream = await UpstreamServer.start((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(body);
  });
  const agent = new NodeAgent(agentConfig(edge.address, [{ id: 'p1', baseUrl: upstream.url }]), { logger: silentLogger });
  t.after(async () => {
    await agent.stop();
    edge.close();
    await upstream.close();
  });
  agent.start();
  const stream = await edge.registeredStream(0);
  await waitFor('the agent to see Registered', () => (agent.isConnected() ? true : undefined));
  stream.sendTunnel({ tunnelId: 1, providerId: 'p1', method: 'GET', path: '/', initialCredit: 0 });
  const frames = await stream.terminalFrames(1, 5_000);
  assert.equal(frames.at(-1)?.kind, FrameKind.END);
  const data = frames.filter((f) => f.kind === FrameKind.DATA);
  const largest = Math.max(...data.map((f) => f.data.length));
  assert.ok(largest <= 8192, `a DATA frame of ${largest} bytes (Registered said 8192)`);
  assert.equal(data.reduce((n, f) => n + f.data.length, 0), body.length);
});
