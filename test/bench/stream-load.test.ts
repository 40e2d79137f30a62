// The streaming load generator (bench/load/stream-load.ts) parses HTTP/1.1
// responses itself, so its verdicts are checked here against a scripted
// server on loopback that writes exact bytes, split at awkward places:
// chunk-size lines, CRLFs, "\n\n" and `data: [DONE]` cut across reads;
// bodies framed by chunks, by content-length and by connection close; a
// missing [DONE], an error status, a reset mid-stream, a stream cut at the
// deadline, and keep-alive reuse in the closed loop.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { streamLoad, type StreamLoadOptions } from '../../bench/load/stream-load.js';

/** Writes a response on a socket whose request has fully arrived. */
type Script = (socket: net.Socket) => Promise<void>;

const EVENTS = ['data: {"n":1}\n\n', 'data: {"n":2}\n\n', 'data: {"n":3}\n\n', 'data: [DONE]\n\n'];
const SSE = EVENTS.join('');

/** A server that answers each request (keep-alive) with `script`; counts connections and requests. */
async function scripted(script: Script): Promise<{ origin: string; connections: () => number; requests: () => number; close: () => Promise<void> }> {
  let connections = 0;
  let requests = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending = Buffer.alloc(0);
    let busy = false;
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const headEnd = pending.indexOf('\r\n\r\n');
      if (headEnd < 0 || busy) return;
      const length = Number(/content-length: (\d+)/i.exec(pending.toString('latin1', 0, headEnd))?.[1] ?? 0);
      if (pending.length < headEnd + 4 + length) return;
      pending = pending.subarray(headEnd + 4 + length);
      requests++;
      busy = true;
      void script(socket).then(() => {
        busy = false;
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    connections: () => connections,
    requests: () => requests,
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** Writes `text` in pieces of the given sizes (cycled), each in its own TCP segment. */
async function dribble(socket: net.Socket, text: string, sizes: readonly number[]): Promise<void> {
  socket.setNoDelay(true);
  const bytes = Buffer.from(text, 'latin1');
  for (let at = 0, k = 0; at < bytes.length; k++) {
    const size = sizes[k % sizes.length];
    socket.write(bytes.subarray(at, at + size));
    at += size;
    await sleep(2);
  }
}

function chunked(events: readonly string[]): string {
  return events.map((e) => `${Buffer.byteLength(e).toString(16)}\r\n${e}\r\n`).join('') + '0\r\n\r\n';
}

const HEAD_CHUNKED = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n';

function fixedSet(origin: string, extra: Partial<StreamLoadOptions> = {}): Promise<Awaited<ReturnType<typeof streamLoad>>> {
  return streamLoad({
    origin,
    path: '/v1/chat/completions',
    headers: { 'x-test': '1' },
    body: Buffer.from('{"stream":true}'),
    concurrency: 3,
    openPerSecond: 1_000,
    minEvents: 4,
    stallMs: 1_000,
    deadlineS: 5,
    ...extra,
  });
}

test('chunked SSE split at every awkward boundary: complete, every event counted, TTFB at the first body byte', async () => {
  // Pieces of 1, 2, 3 and 5 bytes cut through chunk-size lines, CRLFs, "\n\n" and [DONE]; the head arrives whole, then 30 ms pass.
  const server = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED);
    await sleep(30);
    await dribble(socket, chunked(EVENTS), [1, 2, 3, 5]);
  });
  try {
    const result = await fixedSet(server.origin);
    assert.equal(result.errors, 0);
    assert.equal(result.requests, 3);
    assert.equal(result.metrics.incomplete, 0);
    assert.equal(result.metrics.streams, 3);
    // 4 events per stream, 3 streams.
    assert.ok(Math.abs(result.metrics.eventsPerS * result.wallS - 12) < 1e-6, `events ${result.metrics.eventsPerS * result.wallS}`);
    assert.ok(result.metrics.ttfbP50Ms >= 25, `TTFB ${result.metrics.ttfbP50Ms} ms counts the wait after the headers`);
  } finally {
    await server.close();
  }
});

test('bodies framed by content-length and by connection close are read to their end; long events in one chunk too', async () => {
  // One write, one chunk: 60-byte events with the [DONE] inside the same read as the longer event before it.
  const long = ['x'.repeat(40), 'y'.repeat(40), 'z'.repeat(40)].map((s) => `data: {"s":"${s}"}\n\n`);
  const oneChunk = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED + chunked([long.join('') + 'data: [DONE]\n\n']));
  });
  const byLength = await scripted(async (socket) => {
    await dribble(socket, `HTTP/1.1 200 OK\r\ncontent-length: ${SSE.length}\r\n\r\n${SSE}`, [7, 11]);
  });
  const byClose = await scripted(async (socket) => {
    await dribble(socket, `HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n${SSE}`, [9]);
    socket.end();
  });
  try {
    for (const server of [oneChunk, byLength, byClose]) {
      const result = await fixedSet(server.origin);
      assert.deepEqual([result.requests, result.errors, result.metrics.incomplete], [3, 0, 0]);
      assert.ok(Math.abs(result.metrics.eventsPerS * result.wallS - 12) < 1e-6);
    }
  } finally {
    await oneChunk.close();
    await byLength.close();
    await byClose.close();
  }
});

test('a stream without [DONE], or with too few events, is incomplete; an error status is non-2xx', async () => {
  const noDone = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED + chunked(EVENTS.slice(0, 3).concat(['data: {"n":4}\n\n'])));
  });
  const short = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED + chunked(['data: {"n":1}\n\n', 'data: [DONE]\n\n']));
  });
  const failing = await scripted(async (socket) => {
    const body = '{"error":{"message":"no"}}';
    socket.write(`HTTP/1.1 503 Service Unavailable\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  });
  try {
    for (const server of [noDone, short]) {
      const result = await fixedSet(server.origin);
      assert.deepEqual([result.requests, result.errors, result.non2xx, result.metrics.incomplete], [0, 3, 0, 3]);
    }
    const result = await fixedSet(failing.origin);
    assert.deepEqual([result.requests, result.errors, result.non2xx, result.metrics.incomplete], [0, 3, 3, 0]);
  } finally {
    await noDone.close();
    await short.close();
    await failing.close();
  }
});

test('a reset or a malformed response mid-stream is an error; a stream open at the deadline is cut', async () => {
  const reset = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED + chunked(EVENTS.slice(0, 2)).slice(0, -5));
    await sleep(10);
    socket.resetAndDestroy();
  });
  const garbled = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED + 'zz\r\nnot a chunk\r\n');
  });
  const endless = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED + chunked(EVENTS.slice(0, 1)).slice(0, -5));
  });
  try {
    for (const server of [reset, garbled]) {
      const began = performance.now();
      const result = await fixedSet(server.origin);
      assert.deepEqual([result.requests, result.errors, result.non2xx, result.metrics.incomplete], [0, 3, 0, 0]);
      assert.ok(performance.now() - began < 2_000, 'the error ends the stream then, not the 5 s deadline');
    }
    const started = performance.now();
    const result = await fixedSet(endless.origin, { deadlineS: 0.3 });
    assert.deepEqual([result.requests, result.errors], [0, 3]);
    assert.ok(performance.now() - started < 1_500, 'cut at the deadline, not at the give-up');
  } finally {
    await reset.close();
    await garbled.close();
    await endless.close();
  }
});

test('closed loop: each slot reuses its keep-alive connection, and opens a new one after connection: close', async () => {
  const keepAlive = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED + chunked(EVENTS));
  });
  const closing = await scripted(async (socket) => {
    socket.write(HEAD_CHUNKED.replace('\r\n\r\n', '\r\nconnection: close\r\n\r\n') + chunked(EVENTS));
    socket.end();
  });
  try {
    const options = { durationS: 0.3, concurrency: 2, openPerSecond: undefined };
    const result = await fixedSet(keepAlive.origin, options);
    assert.equal(result.errors, 0);
    assert.ok(result.requests > 10, `${result.requests} streams`);
    assert.equal(keepAlive.requests(), result.metrics.streams);
    assert.equal(keepAlive.connections(), 2, 'one connection per slot');

    const again = await fixedSet(closing.origin, options);
    assert.equal(again.errors, 0);
    assert.ok(again.requests > 5, `${again.requests} streams`);
    assert.equal(closing.connections(), again.metrics.streams, 'a connection per stream');
  } finally {
    await keepAlive.close();
    await closing.close();
  }
});
