// A streaming client that stops reading but keeps its connection open (a
// hung process, or a deliberate slow reader). The idle timeout ends its
// exchange and frees its lease (the provider stops at the tunnel window),
// but the stream's last bytes can never reach it. Before, the socket and
// everything buffered for it (about a tunnel window) stayed for as long as
// the client kept the connection, so such clients piled up sockets and
// memory. Now a response whose last bytes make no progress for
// idle_timeout_ms is cut: the connection closes, on the lean path and on
// node:http's alike. An A2A event stream waited for its client to drain
// with no deadline at all, holding the connection and a keepalive timer:
// it gets the same idle_timeout_ms.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { test } from 'node:test';
import { LocalPlane } from '../../src/workers/local-plane.js';
import { ALIAS, inFlight, startStack, waitUntil, type Stack } from '../helpers/stack.js';

const IDLE_MS = 500;

function stalledCuts(metrics: string): string | undefined {
  return /^edge_client_stalled_cuts_total (\d+)$/m.exec(metrics)?.[1];
}

// An A2A stream's events are small and come at token rate: filling the kernel's buffers takes seconds, so
// the test waits for the edge's own count of connections, which only the single-thread mode shows here.
const workers = Number(process.env.EDGE_TEST_WORKERS ?? 0);

function clientConnections(stack: Stack): Promise<number> {
  const plane = stack.edge.plane;
  assert.ok(plane instanceof LocalPlane);
  return new Promise((resolve, reject) => plane.client.app.server.getConnections((err, count) => (err ? reject(err) : resolve(count))));
}

for (const path of ['lean', 'node:http', 'a2a'] as const) {
  const skip = path === 'a2a' && workers > 0 ? "the I/O workers' connection counts are not visible from here (the same A2A code runs there)" : false;
  test(`a streaming client that stops reading is cut once its last bytes make no progress for idle_timeout_ms (${path})`, { skip }, async () => {
    const stack = await startStack({
      mock: { tokens: 1_000_000, intervalMs: 0, ttftMs: 0 },
      configure: (raw) => {
        (raw.limits as Record<string, unknown>).idle_timeout_ms = IDLE_MS;
        raw.a2a = { agents: [{ id: 'w', model: ALIAS, name: 'W', description: 'writes', skills: [{ id: 'w', name: 'w', description: 'w', tags: [] }] }] };
      },
    });
    const socket = connect(new URL(stack.edge.url).port as unknown as number, '127.0.0.1');
    try {
      await once(socket, 'connect');
      const body = JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'a long answer' }] });
      const a2a = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'message/stream', params: { message: { kind: 'message', messageId: 'm-1', role: 'user', parts: [{ kind: 'text', text: 'a long answer' }] } } });
      // A chunked upload goes to node:http; one with a length is read by the lean path; A2A is node:http's, its events written by the A2A surface.
      socket.write(
        path === 'a2a'
          ? `POST /a2a/w HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(a2a)}\r\n\r\n${a2a}`
          : path === 'lean'
          ? `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
          : `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`,
      );
      await once(socket, 'data');
      socket.pause(); // the head came: the client reads no more, and keeps the connection
      if (path === 'a2a') {
        // The task runs on without its caller (its events merge in its queue); the writer gave up on the client.
        for (const deadline = Date.now() + 30_000; (await clientConnections(stack)) > 0; ) {
          assert.ok(Date.now() < deadline, 'the edge still holds the connection of the A2A client that stopped reading');
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      } else {
        // The idle timeout frees the lease...
        await waitUntil(() => inFlight(stack.edge) === 0, 'the lease released by the idle timeout', 10_000);
        // ...and, its last bytes stuck, the edge closes the connection (polled: reading before it would let them out).
        for (const deadline = Date.now() + 10_000; stalledCuts(await stack.edge.scrapeMetrics()) !== '1'; ) {
          assert.ok(Date.now() < deadline, 'the edge still holds the connection of the client that stopped reading');
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
      let ended = false;
      socket.on('end', () => (ended = true));
      socket.on('data', () => {});
      socket.resume();
      await waitUntil(() => ended, 'the edge closed the connection of the client that stopped reading', 5_000);
      // Operators see it: one connection cut for not reading.
      assert.equal(stalledCuts(await stack.edge.scrapeMetrics()), '1', 'edge_client_stalled_cuts_total');
    } finally {
      socket.destroy();
      await stack.close();
    }
  });
}
