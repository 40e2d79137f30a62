// LeanHttp1 on a bare node:http server over loopback: the keep-alive sweep
// closes connections that wait for a request too long, answers 408 to one
// whose body does not all come within the request timeout, and spares one
// whose response is still running, however long it runs.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { silentLogger } from '../../src/shared/logger.js';
import { LeanHttp1 } from '../../src/workers/http/lean-http1.js';

const KEEP_ALIVE_MS = 300;
const REQUEST_TIMEOUT_MS = 600;
const ROUTES = ['/v1/chat/completions'];

/** A provider-like owner: answers at once, or after `x-delay-ms`, writing a first chunk at once. */
const owner = {
  serveLean(_path: string, request: IncomingMessage, response: ServerResponse, body: Buffer): void {
    const delay = Number(request.headers['x-delay-ms'] ?? 0);
    response.writeHead(200, ['content-type', 'text/plain']);
    if (request.headers['x-cut'] !== undefined) {
      // A provider's body cut short: what was written, then the cut, in one turn (as a node's frames arrive together).
      response.write('partial body');
      response.destroy();
      return;
    }
    if (delay === 0) {
      response.end(`got ${body.length}`);
      return;
    }
    response.write('first ');
    setTimeout(() => response.end('last'), delay);
  },
  flushTimeoutMs: 0,
  clientStalled(): void {},
  refusesHead(): boolean {
    return false;
  },
  /** What the connections refused themselves (the 408), in order. */
  refusals: [] as string[],
  refused(code: string): void {
    this.refusals.push(code);
  },
  logger: silentLogger(),
};

function request(delayMs = 0): string {
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nX-Delay-Ms: ${delayMs}\r\nContent-Length: 2\r\n\r\n{}`;
}

/** A bare node:http server on loopback whose every request is lean, with these timeouts; closed after the suite. */
function leanServer(timeouts: { keepAliveMs: number; headersTimeoutMs: number; requestTimeoutMs: number }): { lean: () => LeanHttp1 | undefined; port: () => number } {
  const server = createServer(() => assert.fail('every request here is lean'));
  let lean: LeanHttp1 | undefined;
  let port = 0;
  before(async () => {
    lean = LeanHttp1.install(server, owner, { maxHeaderBytes: 16 * 1024, bodyLimit: 1024, ...timeouts, routes: ROUTES });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { lean: () => lean, port: () => port };
}

describe('LeanHttp1', () => {
  const lean = leanServer({ keepAliveMs: KEEP_ALIVE_MS, headersTimeoutMs: KEEP_ALIVE_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS });

  async function client(): Promise<{ socket: Socket; text: () => string; closedAt: () => number }> {
    const socket = connect(lean.port(), '127.0.0.1');
    await once(socket, 'connect');
    let text = '';
    let closedAt = 0;
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    socket.on('close', () => (closedAt = Date.now()));
    return { socket, text: () => text, closedAt: () => closedAt };
  }

  test('a response destroyed in the turn it was written still sends its head and body before the cut', async () => {
    const cut = await client();
    cut.socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nX-Cut: 1\r\nContent-Length: 2\r\n\r\n{}');
    await once(cut.socket, 'close');
    assert.match(cut.text(), /^HTTP\/1\.1 200 /, 'the head');
    assert.match(cut.text(), /partial body/, 'the body so far');
    assert.doesNotMatch(cut.text(), /\r\n0\r\n\r\n$/, 'no last chunk: the client sees the body cut short');
  });

  test('a kept-alive connection that waits past the keep-alive timeout is closed; one that never sent a request too', async () => {
    assert.ok(lean.lean() !== undefined, 'installed on a plain node:http server');
    const served = await client();
    const silent = await client();
    const started = Date.now();
    served.socket.write(request());
    // The sweep runs every max(1 s, keepAliveMs / 8): both are closed within a sweep after the timeout.
    while ((served.closedAt() === 0 || silent.closedAt() === 0) && Date.now() - started < 5_000) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.match(served.text(), /^HTTP\/1\.1 200 OK\r\n[^]*Content-Length: 5\r\n\r\ngot 2$/);
    assert.match(served.text(), /Keep-Alive: timeout=0\r\n/);
    assert.ok(served.closedAt() - started >= KEEP_ALIVE_MS, `closed ${served.closedAt() - started} ms after the request, before the keep-alive timeout`);
    assert.ok(silent.closedAt() > 0 && served.closedAt() > 0, 'both closed within 5 s');
  });

  test('a body that does not all come within the request timeout gets 408 request_timeout and the connection closes; a slow one in time is served', async () => {
    const stalled = await client();
    const slowButInTime = await client();
    const started = Date.now();
    const head = 'POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n';
    stalled.socket.write(`${head}{"a"`);
    slowButInTime.socket.write(`${head}{"a"`);
    await new Promise((resolve) => setTimeout(resolve, REQUEST_TIMEOUT_MS / 3));
    slowButInTime.socket.write(':"bc"}');
    while (stalled.closedAt() === 0 && Date.now() - started < 5_000) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(stalled.closedAt() - started >= REQUEST_TIMEOUT_MS, `closed ${stalled.closedAt() - started} ms after its head, before the request timeout`);
    assert.match(stalled.text(), /^HTTP\/1\.1 408 Request Timeout\r\n[^]*Connection: close\r\n\r\n/);
    const body = JSON.parse(stalled.text().split('\r\n\r\n')[1]) as { error: { code: string; type: string } };
    assert.equal(body.error.code, 'request_timeout');
    assert.deepEqual(owner.refusals, ['request_timeout'], 'the 408 is counted once, the slow request in time not at all');
    assert.match(slowButInTime.text(), /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\ngot 10$/);
    slowButInTime.socket.destroy();
  });

  test('a response that runs longer than the keep-alive and request timeouts is not cut', async () => {
    const slow = await client();
    slow.socket.write(request(1_600));
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    assert.equal(slow.closedAt(), 0, 'the running response kept its connection');
    while (!slow.text().endsWith('last\r\n0\r\n\r\n')) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.match(slow.text(), /Transfer-Encoding: chunked\r\n\r\n6\r\nfirst \r\n4\r\nlast\r\n0\r\n\r\n$/);
    slow.socket.destroy();
  });
});

describe('LeanHttp1 with a keep-alive longer than the head timeout', () => {
  const HEADERS_TIMEOUT_MS = 300;
  const LONG_KEEP_ALIVE_MS = 4_000;
  const lean = leanServer({ keepAliveMs: LONG_KEEP_ALIVE_MS, headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: 0 });

  test("a connection that sends nothing is closed at the head timeout, as node:http's headersTimeout closes it; one between requests keeps its keep-alive", async () => {
    const open = async (): Promise<{ socket: Socket; closedAt: () => number }> => {
      const socket = connect(lean.port(), '127.0.0.1');
      await once(socket, 'connect');
      let closedAt = 0;
      socket.on('close', () => (closedAt = Date.now()));
      socket.on('error', () => {});
      return { socket, closedAt: () => closedAt };
    };
    const started = Date.now();
    const silent = await open();
    const served = await open();
    served.socket.write(request());
    while (silent.closedAt() === 0 && Date.now() - started < LONG_KEEP_ALIVE_MS - 1_000) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(silent.closedAt() > 0, 'the silent connection outlived the head timeout (it waited for the keep-alive one)');
    assert.equal(served.closedAt(), 0, 'the connection between requests waits out its keep-alive');
    served.socket.destroy();
  });
});
