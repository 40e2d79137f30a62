// TunnelExecutor against a real HTTP upstream, with a recording frame sink in
// place of the edge stream: backpressure, deadlines and error mapping.
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import assert from 'node:assert/strict';
import { create } from '@bufbuild/protobuf';
import { FrameKind, TunnelRequestSchema, type NodeMessage, type TunnelFrame } from '../../src/gen/edge/v1/tunnel_pb.js';
import { TunnelExecutor, type FrameSink } from '../../src/agent/tunnel-executor.js';
import { Upstreams } from '../../src/agent/upstreams.js';
import { classifyUpstreamError } from '../../src/agent/tunnel-errors.js';
import { UPSTREAM_BAD_RESPONSE, UPSTREAM_BODY_TIMEOUT, UPSTREAM_CLOSED, UPSTREAM_CONNECT_TIMEOUT, UPSTREAM_HEADERS_TIMEOUT, UPSTREAM_TLS_FAILED } from '../../src/agent/http1-client.js';
import type { Dispatcher } from 'undici';
import type { PooledHandler } from '../../src/agent/upstream-pool.js';
import { waitFor } from './fake-edge.js';
import { UpstreamServer } from './upstream-server.js';

class RecordingSink implements FrameSink {
  readonly frames: TunnelFrame[] = [];
  readonly drainWaiters: TunnelExecutor[] = [];
  finished = 0;
  /** Frame indexes at which send() answers false, as a full gRPC stream buffer does. */
  readonly fullAt = new Set<number>();

  send(message: NodeMessage): boolean {
    if (message.msg.case === 'frame') this.frames.push(message.msg.value);
    return !this.fullAt.has(this.frames.length - 1);
  }
  resumeOnDrain(tunnel: TunnelExecutor): void {
    this.drainWaiters.push(tunnel);
  }
  tunnelFinished(): void {
    this.finished++;
  }
  drain(): void {
    for (const tunnel of this.drainWaiters.splice(0)) tunnel.resume();
  }
  kinds(): FrameKind[] {
    return this.frames.map((f) => f.kind);
  }
}

function tunnelRequest(providerId: string, timeoutMs = 0) {
  return create(TunnelRequestSchema, { tunnelId: 1, providerId, method: 'GET', path: '/stream', timeoutMs });
}

test('a full edge stream pauses the upstream body until it drains, then the rest follows in order', async (t) => {
  const chunks = ['one|', 'two|', 'three|', 'four|'];
  let writtenBeforeDrain = 0;
  const upstream = await UpstreamServer.start(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    for (const chunk of chunks) {
      res.write(chunk);
      writtenBeforeDrain++;
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    res.end();
  });
  const upstreams = new Upstreams([{ id: 'p', type: 'openai_compat', baseUrl: upstream.url, apiKey: undefined, connections: 1 }]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });

  const sink = new RecordingSink();
  sink.fullAt.add(0).add(1); // the buffer is full after HEADERS, and again after the first DATA
  new TunnelExecutor(tunnelRequest('p'), sink).start(upstreams);

  // HEADERS went out and found the buffer full: the executor must stop relaying.
  await waitFor('HEADERS', () => (sink.frames.length > 0 ? true : undefined));
  assert.equal(sink.drainWaiters.length, 1);
  await waitFor('the upstream to finish writing', () => (writtenBeforeDrain === chunks.length ? true : undefined));
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.deepEqual(sink.kinds(), [FrameKind.HEADERS], 'no DATA may be relayed while paused');

  // Drained: one DATA goes out, finds the buffer full again, and the executor pauses again.
  sink.drain();
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.deepEqual(sink.kinds(), [FrameKind.HEADERS, FrameKind.DATA], 'paused again after the DATA that filled the buffer');
  assert.equal(sink.drainWaiters.length, 1);

  sink.drain();
  await waitFor('END', () => (sink.frames.at(-1)?.kind === FrameKind.END ? true : undefined));
  assert.deepEqual(sink.frames.map((f) => f.seq), sink.frames.map((_, i) => i));
  const body = Buffer.concat(sink.frames.filter((f) => f.kind === FrameKind.DATA).map((f) => f.data)).toString();
  assert.equal(body, chunks.join(''));
  assert.equal(sink.finished, 1);
});

test('a provider that compresses when asked answers the agent uncompressed: the relayed bytes are the plain body', async (t) => {
  const plain = JSON.stringify({ id: 'resp_plain', object: 'response', usage: { input_tokens: 3, output_tokens: 5 } });
  const upstream = await UpstreamServer.start((req, res) => {
    // As a compressing server or proxy does: gzip whenever the request accepts it.
    if (/\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      res.end(gzipSync(plain));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(plain);
  });
  const upstreams = new Upstreams([{ id: 'p', type: 'openai_compat', baseUrl: upstream.url, apiKey: undefined, connections: 1 }]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new RecordingSink();
  // What an SDK's fetch sends, passed on by an edge that forwards it.
  const request = create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'POST', path: '/v1/responses', headers: [{ name: 'accept-encoding', value: 'gzip, deflate, br' }] });
  new TunnelExecutor(request, sink).start(upstreams);
  await waitFor('END', () => (sink.frames.at(-1)?.kind === FrameKind.END ? true : undefined));
  assert.equal(upstream.requests[0].headers['accept-encoding'], 'identity');
  assert.equal(sink.frames[0].headers.find((h) => h.name === 'content-encoding'), undefined);
  assert.equal(Buffer.concat(sink.frames.filter((f) => f.kind === FrameKind.DATA).map((f) => f.data)).toString(), plain);
});

test('the tunnel deadline ends it with upstream_timeout and closes the upstream request', async (t) => {
  let upstreamClosed = false;
  const upstream = await UpstreamServer.start((req, res) => {
    res.on('close', () => (upstreamClosed = true));
    res.writeHead(200);
    res.write('partial');
  });
  const upstreams = new Upstreams([{ id: 'p', type: 'vllm', baseUrl: upstream.url, apiKey: undefined, connections: 1 }]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const sink = new RecordingSink();
  const started = Date.now();
  new TunnelExecutor(tunnelRequest('p', 80), sink).start(upstreams);
  await waitFor('ERROR', () => (sink.frames.at(-1)?.kind === FrameKind.ERROR ? true : undefined));
  assert.ok(Date.now() - started >= 75, 'not before the deadline');
  assert.deepEqual(sink.kinds(), [FrameKind.HEADERS, FrameKind.DATA, FrameKind.ERROR]);
  assert.equal(sink.frames[2].errorCode, 'upstream_timeout');
  await waitFor('the upstream to see the close', () => (upstreamClosed ? true : undefined));
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(sink.frames.length, 3, 'nothing after ERROR');
});

test('the upstream request carries the tunnel\'s own ttfb and idle deadlines: 0 is none, never undici\'s 300 s defaults', async (t) => {
  const upstream = await UpstreamServer.start((_req, res) => {
    res.writeHead(200);
    res.end('ok');
  });
  const upstreams = new Upstreams([{ id: 'p', type: 'vllm', baseUrl: upstream.url, apiKey: undefined, connections: 1 }]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  // What undici is asked to do, recorded on the way into the real pool.
  const pool = upstreams.get('p')?.pool;
  assert.ok(pool !== undefined);
  const seen: Dispatcher.DispatchOptions[] = [];
  const dispatch = pool.dispatch.bind(pool);
  pool.dispatch = (options: Dispatcher.DispatchOptions, handler: PooledHandler) => {
    seen.push(options);
    return dispatch(options, handler);
  };
  for (const [ttfbTimeoutMs, idleTimeoutMs] of [[0, 0], [301_000, 121_000]]) {
    const sink = new RecordingSink();
    new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/', ttfbTimeoutMs, idleTimeoutMs }), sink).start(upstreams);
    await waitFor('END', () => (sink.frames.at(-1)?.kind === FrameKind.END ? true : undefined));
    const options = seen.at(-1);
    // undici reads 0 as "no timeout"; left undefined it applies its own 300 s to both.
    assert.deepEqual({ headersTimeout: options?.headersTimeout, bodyTimeout: options?.bodyTimeout }, { headersTimeout: ttfbTimeoutMs, bodyTimeout: idleTimeoutMs });
  }
});

test('a provider slower than the tunnel\'s ttfb_timeout_ms, or silent mid-body past idle_timeout_ms, ends with upstream_timeout', async (t) => {
  let closed = 0;
  const upstream = await UpstreamServer.start((req, res) => {
    res.on('close', () => closed++);
    if (req.url === '/slow-head') {
      setTimeout(() => res.writeHead(200).end('late'), 1_500).unref();
      return;
    }
    res.writeHead(200);
    res.write('first');
    setTimeout(() => res.end('late'), 1_500).unref();
  });
  const upstreams = new Upstreams([{ id: 'p', type: 'vllm', baseUrl: upstream.url, apiKey: undefined, connections: 2 }]);
  t.after(async () => {
    await upstreams.destroy();
    await upstream.close();
  });
  const started = performance.now();
  const head = new RecordingSink();
  const body = new RecordingSink();
  new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 1, providerId: 'p', method: 'GET', path: '/slow-head', ttfbTimeoutMs: 300 }), head).start(upstreams);
  new TunnelExecutor(create(TunnelRequestSchema, { tunnelId: 2, providerId: 'p', method: 'GET', path: '/stall', idleTimeoutMs: 300 }), body).start(upstreams);
  await waitFor('both ERRORs', () => (head.frames.at(-1)?.kind === FrameKind.ERROR && body.frames.at(-1)?.kind === FrameKind.ERROR ? true : undefined), 3_000);
  assert.ok(performance.now() - started < 1_400, 'cut by the request\'s deadlines, before the provider answered');
  assert.deepEqual(head.frames.map((f) => [f.kind, f.errorCode]), [[FrameKind.ERROR, 'upstream_timeout']]);
  assert.deepEqual(body.frames.map((f) => [f.kind, f.errorCode]), [[FrameKind.HEADERS, ''], [FrameKind.DATA, ''], [FrameKind.ERROR, 'upstream_timeout']]);
  await waitFor('the provider to see both requests closed', () => (closed === 2 ? true : undefined));
});

test('unknown and cli providers are answered at once with a single ERROR frame', async () => {
  const upstreams = new Upstreams([{ id: 'runner', type: 'cli', baseUrl: undefined, apiKey: undefined, connections: 1 }]);
  const sink = new RecordingSink();
  new TunnelExecutor(tunnelRequest('nope'), sink).start(upstreams);
  new TunnelExecutor(tunnelRequest('runner'), sink).start(upstreams);
  assert.deepEqual(
    sink.frames.map((f) => [f.kind, f.seq, f.errorCode]),
    [
      [FrameKind.ERROR, 0, 'unknown_provider'],
      [FrameKind.ERROR, 0, 'adapter_not_supported'],
    ],
  );
  assert.equal(sink.finished, 2);
});

test('upstream failures map to distinct codes by kind and phase', () => {
  const coded = (code: string) => Object.assign(new Error(code), { code });
  assert.equal(classifyUpstreamError(coded('ECONNREFUSED'), false), 'upstream_connect_failed');
  assert.equal(classifyUpstreamError(coded('ENOTFOUND'), false), 'upstream_connect_failed');
  assert.equal(classifyUpstreamError(coded(UPSTREAM_CONNECT_TIMEOUT), false), 'upstream_connect_failed');
  assert.equal(classifyUpstreamError(coded(UPSTREAM_TLS_FAILED), false), 'upstream_connect_failed');
  assert.equal(classifyUpstreamError(new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')]), false), 'upstream_connect_failed');
  assert.equal(classifyUpstreamError(coded('ECONNRESET'), true), 'upstream_reset');
  assert.equal(classifyUpstreamError(coded(UPSTREAM_CLOSED), true), 'upstream_reset');
  assert.equal(classifyUpstreamError(coded('ETIMEDOUT'), true), 'upstream_reset');
  assert.equal(classifyUpstreamError(coded(UPSTREAM_HEADERS_TIMEOUT), true), 'upstream_timeout');
  assert.equal(classifyUpstreamError(coded(UPSTREAM_BODY_TIMEOUT), true), 'upstream_timeout');
  assert.equal(classifyUpstreamError(coded(UPSTREAM_BAD_RESPONSE), true), 'upstream_error');
  // undici's codes: nothing on the upstream path raises them any more.
  assert.equal(classifyUpstreamError(coded('UND_ERR_HEADERS_TIMEOUT'), true), 'upstream_error');
  assert.equal(classifyUpstreamError(new Error('no code'), true), 'upstream_error');
});
