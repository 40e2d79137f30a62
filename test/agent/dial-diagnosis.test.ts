// The agent's dial diagnosis (src/agent/tls.ts) is one TLS connection of its
// own: against an edge that takes the TCP connection and never answers, it
// gives up within its limit and leaves no socket behind.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { test } from 'node:test';
import { diagnoseEdgeDial } from '../../src/agent/tls.js';

test('a diagnosis against a silent listener ends within its limit, learns nothing, and closes its socket', async () => {
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.resume();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  try {
    assert.equal(await diagnoseEdgeDial(`127.0.0.1:${port}`, undefined, 200), undefined);
    assert.equal(sockets.length, 1);
    if (!sockets[0].closed) await once(sockets[0], 'close');
  } finally {
    server.close();
  }
});
