// The client listener's lean HTTP/1.1 connection (src/workers/http/lean-http1.ts),
// through a real edge over raw loopback sockets: API POSTs answered off the
// socket, pipelined requests in order, the hand-over to node:http (and
// fastify) for anything that is not a plain API POST, keep-alive and
// Connection: close, a client that leaves, and the edge's close.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ALIAS, inFlight, openExchanges, startStack, waitFor, waitUntil, type Stack } from '../helpers/stack.js';
import { assertOwnBody, assertOwnStream } from '../helpers/identity.js';

interface Reply {
  readonly status: number;
  /** Lower-cased names. */
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Reads HTTP/1.1 responses off one socket, framed by Content-Length or chunked. */
class Replies {
  #buffer = Buffer.alloc(0);
  #waiter: (() => void) | undefined;
  ended = false;

  constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      this.#waiter?.();
    });
    socket.on('close', () => {
      this.ended = true;
      this.#waiter?.();
    });
  }

  async next(timeoutMs = 5_000): Promise<Reply> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const reply = this.#take();
      if (reply !== undefined) return reply;
      if (this.ended) throw new Error(`the connection closed before a whole response; have ${JSON.stringify(this.#buffer.toString('latin1').slice(0, 300))}`);
      if (Date.now() > deadline) throw new Error(`no whole response within ${timeoutMs} ms; have ${JSON.stringify(this.#buffer.toString('latin1').slice(0, 300))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        this.#waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  #take(): Reply | undefined {
    const text = this.#buffer.toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const lines = text.slice(0, end).split('\r\n');
    const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(lines[0])?.[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    let at = end + 4;
    let body = '';
    if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      if (this.#buffer.length < at + length) return undefined;
      body = this.#buffer.subarray(at, at + length).toString();
      at += length;
    } else if (headers['transfer-encoding'] === 'chunked') {
      for (;;) {
        const lineEnd = text.indexOf('\r\n', at);
        if (lineEnd < 0) return undefined;
        const size = Number.parseInt(text.slice(at, lineEnd), 16);
        if (this.#buffer.length < lineEnd + 2 + size + 2) return undefined;
        body += this.#buffer.subarray(lineEnd + 2, lineEnd + 2 + size).toString();
        at = lineEnd + 2 + size + 2;
        if (size === 0) break;
      }
    } else {
      return undefined;
    }
    this.#buffer = this.#buffer.subarray(at);
    return { status, headers, body };
  }
}

function post(path: string, body: unknown, extra: readonly string[] = []): string {
  const text = JSON.stringify(body);
  return [`POST ${path} HTTP/1.1`, 'Host: edge', 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(text)}`, ...extra, '', text].join('\r\n');
}

function chat(requestId: string, tokens = 3, stream = false): string {
  return post('/v1/chat/completions', { model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }, [`X-Request-Id: ${requestId}`, `X-Mock-Tokens: ${tokens}`]);
}

/** The lean connection's counters, summed over the edge's data paths (main, or each I/O worker). */
async function leanStats(stack: Stack): Promise<{ requests: number; handedOver: number }> {
  const planes = (await stack.edge.inspect()).planes;
  return { requests: planes.reduce((n, p) => n + p.lean.requests, 0), handedOver: planes.reduce((n, p) => n + p.lean.handedOver, 0) };
}

async function open(stack: Stack): Promise<{ socket: Socket; replies: Replies }> {
  const socket = connect(stack.edge.httpPort, '127.0.0.1');
  await once(socket, 'connect');
  return { socket, replies: new Replies(socket) };
}

describe('the lean HTTP/1.1 connection', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 8 });
  });
  after(async () => {
    await stack.close();
  });

  test('pipelined API POSTs, a GET fastify serves and a POST after it are answered in order on one connection', async () => {
    const before = await leanStats(stack);
    const { socket, replies } = await open(stack);
    socket.write(chat('lean-a', 2) + chat('lean-b', 4, true) + 'GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n' + chat('lean-c', 5));
    const a = await replies.next();
    assert.equal(a.status, 200);
    // The provider's Content-Length is relayed; the connection is kept alive.
    assert.equal(a.headers['content-length'], String(Buffer.byteLength(a.body)));
    assert.equal(a.headers.connection, 'keep-alive');
    assert.match(a.headers['keep-alive'] ?? '', /^timeout=\d+$/);
    assert.ok(a.headers.date !== undefined && !Number.isNaN(Date.parse(a.headers.date)));
    assert.ok(a.headers['x-edge-run-id'] !== undefined);
    assertOwnBody(a.body, 'lean-a', 2);
    const b = await replies.next();
    assert.equal(b.status, 200);
    assert.match(b.headers['content-type'] ?? '', /^text\/event-stream/);
    assertOwnStream(b.body, 'lean-b', 4);
    const health = await replies.next();
    assert.equal(health.status, 200);
    assert.deepEqual(JSON.parse(health.body), { status: 'ok' });
    const c = await replies.next();
    assert.equal(c.status, 200);
    assertOwnBody(c.body, 'lean-c', 5);
    // The two POSTs before the GET were read by the lean connection; at the GET it went to node:http, which read the rest.
    assert.deepEqual(await leanStats(stack), { requests: before.requests + 2, handedOver: before.handedOver + 1 });
    socket.destroy();
  });

  test('a head split over two writes and a chunked body go to node:http and are answered the same', async () => {
    const before = await leanStats(stack);
    const { socket, replies } = await open(stack);
    const whole = chat('split-a', 2);
    socket.write(whole.slice(0, 20));
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.write(whole.slice(20));
    assertOwnBody((await replies.next()).body, 'split-a', 2);
    const json = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    socket.write(['POST /v1/chat/completions HTTP/1.1', 'Host: edge', 'Content-Type: application/json', 'X-Request-Id: chunked-b', 'X-Mock-Tokens: 3', 'Transfer-Encoding: chunked', '', `${json.length.toString(16)}`, json, '0', '', ''].join('\r\n'));
    const chunked = await replies.next();
    assert.equal(chunked.status, 200);
    assertOwnBody(chunked.body, 'chunked-b', 3);
    assert.deepEqual(await leanStats(stack), { requests: before.requests, handedOver: before.handedOver + 1 });
    socket.destroy();
  });

  test('an absolute-form target (POST http://host/v1/...) is served by its path, as fastify serves a GET one', async () => {
    const { socket, replies } = await open(stack);
    const body = { model: ALIAS, messages: [{ role: 'user', content: 'hi' }] };
    socket.write(post(`http://127.0.0.1:${stack.edge.httpPort}/v1/chat/completions`, body, ['X-Request-Id: absolute-a', 'X-Mock-Tokens: 3']));
    const reply = await replies.next();
    assert.equal(reply.status, 200, reply.body);
    assertOwnBody(reply.body, 'absolute-a', 3);
    // The same target form on a fastify route, for comparison: it always was routed by its path.
    socket.write(`GET http://127.0.0.1:${stack.edge.httpPort}/v1/models HTTP/1.1\r\nHost: edge\r\n\r\n`);
    assert.equal((await replies.next()).status, 200);
    socket.destroy();
  });

  test('the API answers errors in its format on the lean path, and Connection: close ends the connection after the answer', async () => {
    const before = await leanStats(stack);
    const { socket, replies } = await open(stack);
    socket.write(post('/v1/chat/completions', { model: 'no-such-model', messages: [] }) + post('/v1/messages', { model: ALIAS }, ['Connection: close']));
    const missing = await replies.next();
    assert.equal(missing.status, 404);
    assert.equal((JSON.parse(missing.body) as { error: { code: string } }).error.code, 'model_not_found');
    const anthropic = await replies.next();
    assert.equal(anthropic.status, 400);
    assert.equal((JSON.parse(anthropic.body) as { type: string }).type, 'error', 'Anthropic error shape on /v1/messages');
    assert.equal(anthropic.headers.connection, 'close');
    await waitUntil(() => replies.ended, 'the edge to close the connection');
    assert.deepEqual(await leanStats(stack), { requests: before.requests + 2, handedOver: before.handedOver });
  });

  test('after a Connection: close answer, a request the client still sends is not served: the provider never sees it', async () => {
    const socket = connect({ port: stack.edge.httpPort, host: '127.0.0.1', allowHalfOpen: true });
    await once(socket, 'connect');
    const replies = new Replies(socket);
    const ended = once(socket, 'end');
    const body = { model: ALIAS, messages: [{ role: 'user', content: 'hi' }] };
    socket.write(post('/v1/chat/completions', body, ['X-Mock-Tokens: 3', 'Connection: close']));
    const first = await replies.next();
    assert.equal(first.status, 200);
    assert.equal(first.headers.connection, 'close');
    await ended; // the edge's FIN; this side may still write (half-open)
    const before = stack.mock.stats.requests;
    socket.write(post('/v1/chat/completions', body, ['X-Mock-Tokens: 3']));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(stack.mock.stats.requests, before, 'a request after the close reached the provider');
    socket.end();
    await waitUntil(() => replies.ended, 'the connection to close once the client ends too');
    await waitFor(async () => inFlight(stack.edge) === 0 && (await openExchanges(stack.edge)) === 0, 'nothing left open');
  });

  test('pipelined past a Connection: close on node:http: the requests before it are still answered, in order, and the one after is not served', async () => {
    const { socket, replies } = await open(stack);
    const before = stack.mock.stats.requests;
    // The GET hands the connection to node:http; llhttp refuses the bytes after the close (HPE_CLOSED_CONNECTION) while pipe-b still runs.
    socket.write(chat('pipe-a', 2) + 'GET /healthz HTTP/1.1\r\nHost: edge\r\n\r\n' + chat('pipe-b', 3) + 'GET /healthz HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n' + chat('pipe-c', 4));
    assertOwnBody((await replies.next()).body, 'pipe-a', 2);
    assert.equal((await replies.next()).status, 200);
    assertOwnBody((await replies.next()).body, 'pipe-b', 3);
    const last = await replies.next();
    assert.equal(last.status, 200);
    assert.equal(last.headers.connection, 'close');
    await waitUntil(() => replies.ended, 'the edge to close the connection after the close answer');
    assert.equal(stack.mock.stats.requests, before + 2, 'pipe-c, after the close, never reached the provider');
    await waitFor(async () => inFlight(stack.edge) === 0 && (await openExchanges(stack.edge)) === 0, 'nothing left open');
  });

  test('pipelined past a request node:http cannot parse: the ones before it are answered first, in order, then its 400 and the close', async () => {
    // A chunked body hands the connection to node:http at once; the bad bytes after a valid request or in a later
    // body must not take the place of the answers still due (the lean connection answers them first too).
    const chunked = (requestId: string, tokens: number): string => {
      const body = JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] });
      return `POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nX-Request-Id: ${requestId}\r\nX-Mock-Tokens: ${tokens}\r\nX-Mock-Interval-Ms: 20\r\nTransfer-Encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    };
    const cases: [what: string, after: string, code: string][] = [
      ['bytes that are not HTTP', 'hello edge\r\n\r\n', 'HPE_INVALID_METHOD'],
      ['a bad chunk size in the next body', 'POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 'HPE_INVALID_CHUNK_SIZE'],
    ];
    for (const [what, after, code] of cases) {
      const { socket, replies } = await open(stack);
      socket.write(chunked('bad-a', 3) + chunked('bad-b', 4) + after);
      const a = await replies.next();
      assert.equal(a.status, 200, `${what}: the first request's own answer, not the refusal`);
      assertOwnStream(a.body, 'bad-a', 3);
      assertOwnStream((await replies.next()).body, 'bad-b', 4);
      const refusal = await replies.next();
      assert.equal(refusal.status, 400, what);
      assert.match(refusal.body, new RegExp(code), what);
      await waitUntil(() => replies.ended, `${what}: the edge to close the connection after the refusal`);
    }
    await waitFor(async () => inFlight(stack.edge) === 0 && (await openExchanges(stack.edge)) === 0, 'nothing left open');
  });

  test('a client that leaves mid-stream releases its lease and exchange at once', async () => {
    const { socket, replies } = await open(stack);
    socket.write(post('/v1/chat/completions', { model: ALIAS, stream: true, messages: [] }, ['X-Mock-Tokens: 200', 'X-Mock-Interval-Ms: 50']));
    await waitUntil(() => inFlight(stack.edge) === 1, 'the stream to hold a lease');
    await new Promise((resolve) => setTimeout(resolve, 150));
    socket.destroy();
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease to be released');
    await waitFor(async () => (await openExchanges(stack.edge)) === 0, 'the exchange to end');
    assert.equal(replies.ended, true);
  });

  test('with listen.http.lean_http1 false node:http reads every request, and the API answers the same (the same headers too)', async () => {
    const own = await startStack({
      configure: (raw) => {
        (raw.listen as { http: Record<string, unknown> }).http.lean_http1 = false;
      },
    });
    try {
      const { socket, replies } = await open(own);
      socket.write(chat('off-a', 2) + chat('off-b', 3, true));
      const offA = await replies.next();
      assertOwnBody(offA.body, 'off-a', 2);
      const offB = await replies.next();
      assertOwnStream(offB.body, 'off-b', 3);
      assert.deepEqual(await leanStats(own), { requests: 0, handedOver: 0 });
      socket.destroy();
      // The lean path serializes the relayed head itself: it carries the same headers as node:http's, whole answer and stream.
      const lean = await open(stack);
      lean.socket.write(chat('on-a', 2) + chat('on-b', 3, true));
      const onA = await lean.replies.next();
      const onB = await lean.replies.next();
      lean.socket.destroy();
      for (const [on, off] of [[onA, offA], [onB, offB]]) {
        assert.deepEqual(Object.keys(on.headers).sort(), Object.keys(off.headers).sort());
        for (const name of ['content-type', 'x-edge-node', 'x-edge-provider', 'connection']) assert.equal(on.headers[name], off.headers[name], name);
        assert.match(on.headers['x-edge-queue-ms'] ?? '', /^\d+$/);
        assert.match(on.headers['x-edge-overhead-ms'] ?? '', /^\d+\.\d{3}$/);
      }
      assert.equal(onA.headers['content-length'], String(Buffer.byteLength(onA.body)));
      assert.equal(onB.headers['transfer-encoding'], 'chunked');
    } finally {
      await own.close();
    }
  });

  test('the edge closes idle kept-alive connections when it stops', async () => {
    const own = await startStack();
    const { socket, replies } = await open(own);
    socket.write(chat('idle-a', 1));
    assertOwnBody((await replies.next()).body, 'idle-a', 1);
    const started = Date.now();
    await own.close();
    await waitUntil(() => replies.ended, 'the idle connection to be closed');
    assert.ok(Date.now() - started < 5_000, 'close did not wait for the idle connection');
  });
});
