// The agent's connection pool per provider: at most `connections` requests
// at once, each on its own keep-alive connection (reused, never more opened
// than needed); the rest wait in FIFO order and start as connections free; a
// connection whose request failed or was cancelled serves the next one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { create } from '@bufbuild/protobuf';
import { FrameKind, TunnelRequestSchema, type NodeMessage, type TunnelFrame } from '../../src/gen/edge/v1/tunnel_pb.js';
import { TunnelExecutor, type FrameSink } from '../../src/agent/tunnel-executor.js';
import { Upstreams } from '../../src/agent/upstreams.js';
import { waitFor } from './fake-edge.js';
import { closedPort, UpstreamServer } from './upstream-server.js';

class Sink implements FrameSink {
  readonly frames: TunnelFrame[] = [];
  send(message: NodeMessage): boolean {
    if (message.msg.case === 'frame') this.frames.push(message.msg.value);
    return true;
  }
  resumeOnDrain(): void {}
  tunnelFinished(): void {}
  ended(tunnelId: number): boolean {
    return this.frames.some((f) => f.tunnelId === tunnelId && (f.kind === FrameKind.END || f.kind === FrameKind.ERROR));
  }
  endedWith(tunnelId: number): FrameKind | undefined {
    return this.frames.find((f) => f.tunnelId === tunnelId && (f.kind === FrameKind.END || f.kind === FrameKind.ERROR))?.kind;
  }
}

function request(tunnelId: number, path: string) {
  return create(TunnelRequestSchema, { tunnelId, providerId: 'p', method: 'GET', path });
}

test('beyond `connections` requests wait in order and start as connections free; connections are reused', async (t) => {
  const held: (() => void)[] = [];
  const sockets = new Set<unknown>();
  const started: string[] = [];
  const upstream = await UpstreamServer.start((req, res) => {
    sockets.add(req.socket);
    started.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('x');
    held.push(() => res.end('y'));
  });
  const upstreams = new Upstreams([{ id: 'p', type: 'openai_compat', baseUrl: upstream.url, apiKey: undefined, connections: 2 }]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Sink();
  for (let id = 1; id <= 5; id++) new TunnelExecutor(request(id, `/r${id}`), sink).start(upstreams);
  await waitFor('two requests at the provider', () => (started.length === 2 ? true : undefined));
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(started, ['/r1', '/r2'], 'no more than `connections` at once');
  assert.equal(upstreams.get('p')?.pool?.waiting, 3);
  // Each finished request lets the next waiting one in, in order.
  for (let done = 0; done < 5; done++) {
    await waitFor(`request ${done + 1} held`, () => (held.length > done ? true : undefined));
    held[done]();
    await waitFor(`tunnel ${done + 1} ended`, () => (sink.ended(done + 1) ? true : undefined));
  }
  assert.deepEqual(started, ['/r1', '/r2', '/r3', '/r4', '/r5']);
  assert.equal(sockets.size, 2, 'five requests over the same two keep-alive connections');
  assert.equal(upstreams.get('p')?.pool?.busy, 0);
});

test('a cancelled request frees its connection for the next; a cancelled waiting request is never sent', async (t) => {
  const started: string[] = [];
  const sockets = new Set<unknown>();
  const upstream = await UpstreamServer.start((req, res) => {
    sockets.add(req.socket);
    started.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'text/plain' });
    if (req.url === '/slow') res.write('x'); // never ends by itself
    else res.end('quick');
  });
  const upstreams = new Upstreams([{ id: 'p', type: 'openai_compat', baseUrl: upstream.url, apiKey: undefined, connections: 1 }]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Sink();
  const slow = new TunnelExecutor(request(1, '/slow'), sink);
  slow.start(upstreams);
  const skipped = new TunnelExecutor(request(2, '/never'), sink);
  skipped.start(upstreams);
  new TunnelExecutor(request(3, '/after'), sink).start(upstreams);
  await waitFor('the slow request at the provider', () => (started.length === 1 ? true : undefined));
  skipped.cancel('client left while waiting');
  slow.cancel('client left');
  await waitFor('the next request served on the freed connection', () => (sink.endedWith(3) === FrameKind.END ? true : undefined));
  assert.deepEqual(started, ['/slow', '/after']);
  assert.equal(sockets.size, 2, 'the slow one\'s socket was aborted; the cancelled waiter cost no other');
  assert.equal(upstreams.get('p')?.pool?.busy, 0);
  assert.equal(upstreams.get('p')?.pool?.waiting, 0);
});

test('a request cancelled while it waits for a connection lets go of its body at once, not when a connection frees', async (t) => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const upstream = await UpstreamServer.start((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('x'); // never ends: the one connection stays busy
  });
  const upstreams = new Upstreams([{ id: 'p', type: 'openai_compat', baseUrl: upstream.url, apiKey: undefined, connections: 1 }]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Sink();
  new TunnelExecutor(request(1, '/slow'), sink).start(upstreams);
  await waitFor('the slow request holds the connection', () => (upstreams.get('p')?.pool?.busy === 1 ? true : undefined));
  let body: Uint8Array | undefined = new Uint8Array(4 * 1024 * 1024);
  const released = new WeakRef(body);
  let waiter: TunnelExecutor | undefined = new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 2, providerId: 'p', method: 'POST', path: '/big', body }), sink);
  body = undefined;
  waiter.start(upstreams);
  assert.equal(upstreams.get('p')?.pool?.waiting, 1);
  waiter.cancel('client left while waiting');
  waiter = undefined;
  assert.equal(upstreams.get('p')?.pool?.waiting, 0, 'a cancelled waiter is not counted as waiting');
  for (let i = 0; i < 5 && released.deref() !== undefined; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  assert.equal(released.deref(), undefined, 'the 4 MB body is collectable while the connection is still busy');
});

test('a provider that refuses connections fails every request, waiting ones included, with upstream_connect_failed', async (t) => {
  const upstreams = new Upstreams([{ id: 'p', type: 'openai_compat', baseUrl: `http://127.0.0.1:${await closedPort()}`, apiKey: undefined, connections: 2 }]);
  t.after(() => upstreams.destroy());
  const sink = new Sink();
  for (let id = 1; id <= 6; id++) new TunnelExecutor(request(id, `/r${id}`), sink).start(upstreams);
  await waitFor('every tunnel to end', () => (sink.frames.length === 6 ? true : undefined), 5_000);
  assert.deepEqual(
    sink.frames.map((f) => [f.tunnelId, f.kind, f.errorCode]).sort((a, b) => (a[0] as number) - (b[0] as number)),
    [1, 2, 3, 4, 5, 6].map((id) => [id, FrameKind.ERROR, 'upstream_connect_failed']),
  );
  assert.equal(upstreams.get('p')?.pool?.busy, 0);
});

test('a replaced pool closes its idle connections at once and its busy ones when no request needs them', async (t) => {
  let open = 0;
  const held: (() => void)[] = [];
  const upstream = await UpstreamServer.start((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    if (req.url?.startsWith('/slow')) {
      res.write('x');
      held.push(() => res.end('y'));
    } else res.end('quick');
  });
  upstream.server.on('connection', (socket) => {
    open++;
    socket.on('close', () => open--);
  });
  const config = (id: string) => ({ id, type: 'openai_compat' as const, baseUrl: upstream.url, apiKey: undefined, connections: 1 });
  const upstreams = new Upstreams([config('p'), config('q')]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new Sink();
  const tunnel = (id: number, providerId: string, path: string) => new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: id, providerId, method: 'GET', path }), sink).start(upstreams);

  // Idle at the swap: closed at once.
  tunnel(1, 'p', '/quick');
  await waitFor('tunnel 1 ended', () => (sink.ended(1) ? true : undefined));
  assert.equal(open, 1, 'its keep-alive connection stays open');
  upstreams.replace(config('p'));
  await waitFor('the idle connection closed', () => (open === 0 ? true : undefined));
  assert.equal(upstreams.retiring, 0);

  // Busy at the swap, with a request waiting for it: that one is still served, then the connection closes.
  tunnel(2, 'q', '/slow');
  tunnel(3, 'q', '/after');
  await waitFor('tunnel 2 at the provider', () => (held.length === 1 ? true : undefined));
  upstreams.replace(config('q'));
  assert.equal(upstreams.retiring, 1, 'the old pool still carries tunnel 2');
  tunnel(4, 'q', '/new-pool');
  await waitFor('tunnel 4 ended', () => (sink.ended(4) ? true : undefined));
  held[0]();
  await waitFor('tunnels 2 and 3 ended', () => (sink.ended(2) && sink.ended(3) ? true : undefined));
  assert.equal(sink.endedWith(3), FrameKind.END, 'the waiting request was served by the old pool');
  await waitFor('only the new pool\'s connection open', () => (open === 1 ? true : undefined));
  assert.equal(upstreams.retiring, 0);
  assert.deepEqual(upstream.requests.map((r) => r.url), ['/quick', '/slow', '/new-pool', '/after']);
});
