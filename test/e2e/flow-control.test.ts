// Per-tunnel flow control across the node stream: a client that does not
// read holds back only its own tunnel (and, through the agent, the
// provider's socket), never the other tunnels of the same node.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import type { EdgeMessage } from '../../src/gen/edge/v1/tunnel_pb.js';
import { ALIAS, startStack, waitFor, waitUntil, type Stack } from '../helpers/stack.js';
import { stackWithFakeNode } from '../helpers/fake-node-stack.js';
import type { FakeNode } from '../workers/grpc/fake-node.js';

const WINDOW = 16 * 1024;

/** Opens a raw HTTP/1.1 streaming request whose response the test reads by hand. */
function rawStreamingRequest(stack: Stack, tokens: number): Socket {
  const body = JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'flood' }] });
  const socket = connect(stack.edge.httpPort, '127.0.0.1');
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
      `x-mock-tokens: ${tokens}\r\nx-mock-interval-ms: 0\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  socket.pause();
  return socket;
}

describe('per-tunnel flow control', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 8, tunnelWindowBytes: WINDOW, mock: { ttftMs: 0, tokens: 8, intervalMs: 0 } });
  });
  after(async () => {
    await stack.close();
  });

  test('a client reading 1 byte per 100 ms never stalls another stream on the same node, and its edge buffer stays within the window', async () => {
    const slow = rawStreamingRequest(stack, 200_000);
    const trickle = setInterval(() => slow.read(1), 100);
    try {
      // Let the slow tunnel fill every buffer between the provider and its client.
      await waitFor(async () => (await stack.edge.inspect()).tunnelBuffers.some((t) => t.highWaterBuffered >= WINDOW / 2), 'the slow tunnel to fill its window', 20_000);
      const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'x', maxRetries: 0 });
      const stream = await sdk.chat.completions.create(
        { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'normal' }] },
        { headers: { 'x-mock-tokens': '500', 'x-mock-interval-ms': '0' } },
      );
      let chunks = 0;
      for await (const _chunk of stream) chunks++;
      assert.ok(chunks >= 500, `the normal stream got all its chunks (${chunks})`);
      const slowRecord = stack.mock.requestLog.find((r) => r.receivedHeaders['x-mock-tokens'] === '200000');
      assert.ok(slowRecord && !slowRecord.completed, 'the slow stream is still far from done when the normal one completes');
      // The edge's own high-water marks count every byte in and out, so an overshoot between two looks cannot hide.
      const slowTunnel = (await stack.edge.inspect()).tunnelBuffers.find((t) => t.highWaterBuffered >= WINDOW / 2);
      assert.ok(slowTunnel !== undefined, 'the slow tunnel is still open');
      assert.ok(slowTunnel.highWaterBuffered > 0 && slowTunnel.highWaterBuffered <= WINDOW, `edge buffered at most ${slowTunnel.highWaterBuffered} bytes for the slow tunnel (window ${WINDOW})`);
      assert.ok(slowTunnel.highWaterOutstanding <= WINDOW, `the node never had more than the window outstanding (at most ${slowTunnel.highWaterOutstanding})`);
    } finally {
      clearInterval(trickle);
      slow.destroy();
    }
    await waitUntil(() => stack.edge.driver.status().providers.every((p) => p.inFlight === 0), 'the slow lease to be released');
  });

  test('a client that does not read makes the provider socket see backpressure', async () => {
    const waitsBefore = stack.mock.stats.backpressureWaits;
    const stalled = rawStreamingRequest(stack, 400_000);
    try {
      const find = () => stack.mock.requestLog.find((r) => r.receivedHeaders['x-mock-tokens'] === '400000');
      await waitUntil(() => find() !== undefined, 'the provider to get the request');
      // Kernel socket buffers absorb some megabytes first; then the whole chain must stop.
      let lastEmitted = -1;
      let unchangedSince = Date.now();
      await waitUntil(
        () => {
          const emitted = find()?.chunksEmitted ?? 0;
          if (emitted !== lastEmitted) {
            lastEmitted = emitted;
            unchangedSince = Date.now();
          }
          return Date.now() - unchangedSince >= 500;
        },
        'the provider to stall',
        20_000,
      );
      const record = find();
      assert.ok(record && !record.completed, 'the provider is stalled mid-response, not finished');
      assert.ok(record.chunksEmitted < 400_000);
      assert.ok(stack.mock.stats.backpressureWaits > waitsBefore && record.backpressureWaits > 0, 'its socket writes were held back');
    } finally {
      stalled.destroy();
    }
    await waitUntil(() => stack.mock.stats.aborted > 0, 'the stalled upstream request to be cancelled');
  });
});

describe('per-tunnel flow control against a hand-driven node', () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    ({ stack, node } = await stackWithFakeNode({ tunnelWindowBytes: WINDOW }));
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  test('an empty DATA frame returns no credit for bytes the client has not taken', async () => {
    const client = rawStreamingRequest(stack, 0);
    try {
      const tunnel = await node.nextTunnel();
      const id = tunnel.tunnelId;
      assert.equal(tunnel.initialCredit, WINDOW);
      // Whole 4 KiB events, sent while the window allows and the credit the edge returns allows more.
      const EVENT = `data: ${'x'.repeat(4096 - 8)}\n\n`;
      let outstanding = 0;
      let seq = 1;
      let credits = 0;
      let lastCreditAt = Date.now();
      const pump = (): void => {
        while (outstanding + EVENT.length <= WINDOW) {
          node.data(id, seq++, EVENT);
          outstanding += EVENT.length;
        }
      };
      node.call.on('data', (m: EdgeMessage) => {
        if (m.msg.case !== 'credit' || m.msg.value.tunnelId !== id) return;
        credits++;
        lastCreditAt = Date.now();
        outstanding -= m.msg.value.bytes;
        pump();
      });
      node.headers(id, 0);
      pump();
      // The client reads nothing: once the kernel's buffers are full, no credit comes back, and the edge
      // holds writes it could not flush (buffered > 0), seen twice 300 ms apart with no credit between.
      const stuck = async (): Promise<boolean> => (await stack.edge.inspect()).tunnelBuffers.some((t) => t.buffered > 0 && t.outstanding === WINDOW);
      await waitFor(async () => {
        const mark = credits;
        if (Date.now() - lastCreditAt < 700 || !(await stuck())) return false;
        await new Promise((resolve) => setTimeout(resolve, 300));
        return credits === mark && (await stuck());
      }, 'the credit to stop with writes held in the edge (the client reads nothing)', 30_000);
      assert.equal(outstanding, WINDOW, 'the whole window is out');
      const before = credits;
      for (let i = 0; i < 16; i++) node.data(id, seq++, '');
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(credits, before, 'empty frames freed no credit: the client took none of the bytes');
      const buffers = (await stack.edge.inspect()).tunnelBuffers;
      assert.ok(buffers.every((t) => t.highWaterOutstanding <= WINDOW), JSON.stringify(buffers));
      node.end(id, seq++);
    } finally {
      client.destroy();
    }
  });
});
