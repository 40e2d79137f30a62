// The deadline on a node:http response's last write, on a bare node:http
// server: armed when an end leaves bytes in the socket, cut (and counted)
// when they make no progress, and gone with that response. Its clearing
// used to run after node:http had detached the socket, so with a pipelined
// request waiting (node:http then sets no keep-alive timer) it stayed armed
// for the next response: one slower than the deadline had its connection cut.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { watchLastWrite, type FlushOwner } from '../../../src/workers/http/flush-watch.js';

async function serve(handler: (n: number, res: ServerResponse) => void, owner: FlushOwner): Promise<{ port: number; close: () => void }> {
  let n = 0;
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    watchLastWrite(res, owner);
    handler(++n, res);
  });
  server.keepAliveTimeout = 5_000;
  server.setTimeout(0);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

test('a pipelined answer slower than the deadline is not cut by the deadline of the large answer before it', async () => {
  let cuts = 0;
  const owner: FlushOwner = { flushTimeoutMs: 300, clientStalled: () => void cuts++ };
  // An 8 MiB answer in one end(): its last bytes wait in the socket while the client reads them; then one taking 1 s.
  const server = await serve((n, res) => (n === 1 ? res.end(Buffer.alloc(8 << 20, 97)) : setTimeout(() => res.end('second'), 1_000)), owner);
  const socket = connect(server.port, '127.0.0.1');
  try {
    await once(socket, 'connect');
    socket.write('GET /1 HTTP/1.1\r\nhost: x\r\n\r\nGET /2 HTTP/1.1\r\nhost: x\r\n\r\n');
    let tail = '';
    let closed = false;
    socket.on('data', (chunk: Buffer) => {
      tail = (tail + chunk.toString('latin1')).slice(-64);
    });
    socket.on('close', () => (closed = true));
    for (const deadline = Date.now() + 10_000; !tail.endsWith('second') && !closed; ) {
      assert.ok(Date.now() < deadline, 'neither the second answer nor a close');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(closed, false, 'the connection was cut before the second answer');
    assert.equal(cuts, 0);
  } finally {
    socket.destroy();
    server.close();
  }
});

test('a client that stops reading an answer is cut once its last bytes make no progress, and counted', async () => {
  let cuts = 0;
  const owner: FlushOwner = { flushTimeoutMs: 300, clientStalled: () => void cuts++ };
  const server = await serve((_n, res) => res.end(Buffer.alloc(16 << 20, 97)), owner);
  const socket = connect(server.port, '127.0.0.1');
  try {
    await once(socket, 'connect');
    socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    await once(socket, 'data');
    socket.pause();
    for (const deadline = Date.now() + 10_000; cuts === 0; ) {
      assert.ok(Date.now() < deadline, 'no cut');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(cuts, 1);
  } finally {
    socket.destroy();
    server.close();
  }
});
