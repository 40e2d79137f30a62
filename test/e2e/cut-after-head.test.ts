// A non-streaming answer whose HEADERS, part of its body and ERROR reach the
// edge in one FrameBatch (the agent reads a provider's head, body and reset
// in one turn; with I/O workers, often) on a connection node:http serves:
// one whose first request was not a lean one (a GET /v1/models, say), or any
// with listen.http.lean_http1: false. The client must get the head and the
// body so far, then the cut. node:http corks a response's socket for the
// rest of the turn, and the cut used to destroy it in that turn, dropping
// the head and body: the client saw a connection closed before any
// response, which the SDKs take for a connection error and send again
// (maxRetries), so the provider ran the request three times.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, describe, test } from 'node:test';
import OpenAI from 'openai';
import { dataFrame, errorFrame, headersFrame } from '../../src/agent/frames.js';
import type { Header, NodeMessage } from '../../src/gen/edge/v1/tunnel_pb.js';
import { ALIAS, inFlight, waitUntil, type Stack } from '../helpers/stack.js';
import { stackWithFakeNode } from '../helpers/fake-node-stack.js';
import type { FakeNode } from '../workers/grpc/fake-node.js';

const BODY = JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'hello world' }, finish_reason: 'stop' }] });
const HALF = BODY.slice(0, BODY.length >> 1);

const header = (name: string, value: string): Header => ({ $typeName: 'edge.v1.Header', name, value });

/** HEADERS (a JSON head with its content-length), half the body and an ERROR, as one FrameBatch. */
function cutInOneBatch(node: FakeNode, tunnelId: number): void {
  const frames: NodeMessage[] = [
    headersFrame(tunnelId, 0, 200, [header('content-type', 'application/json'), header('content-length', String(BODY.length))]),
    dataFrame(tunnelId, 1, Buffer.from(HALF)),
    errorFrame(tunnelId, 2, 'upstream_reset', 'read ECONNRESET'),
  ];
  node.send({ $typeName: 'edge.v1.NodeMessage', msg: { case: 'frameBatch', value: { $typeName: 'edge.v1.FrameBatch', frames: frames.map((m) => (m.msg.case === 'frame' ? m.msg.value : assert.fail('a frame'))) } } });
}

const CHAT = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });

describe('a JSON answer cut in the turn its head arrived, on a node:http connection', () => {
  const closers: (() => Promise<void>)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close();
  });

  async function start(leanHttp1: boolean): Promise<{ stack: Stack; node: FakeNode }> {
    const started = await stackWithFakeNode({
      providerType: 'vllm',
      configure: (raw) => {
        (raw.listen as { http: Record<string, unknown> }).http.lean_http1 = leanHttp1;
      },
    });
    closers.push(async () => {
      started.node.close();
      await started.stack.close();
    });
    return started;
  }

  /**
   * One chat call through the openai SDK (maxRetries 2), every attempt that
   * reaches the node answered by `answer`: what the call threw, and how many
   * attempts reached the node. Its lease must be released after.
   */
  async function cutCall(stack: Stack, node: FakeNode, answer: (tunnelId: number) => void): Promise<{ err: unknown; tunnels: number }> {
    const client = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'x', maxRetries: 2 });
    let tunnels = 0;
    let settled = false;
    const call = client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).finally(() => (settled = true));
    const answering = (async () => {
      while (!settled) {
        const tunnel = await node.nextTunnel(200).catch(() => undefined);
        if (tunnel === undefined) continue;
        tunnels++;
        answer(tunnel.tunnelId);
      }
    })();
    const err = await call.then(() => assert.fail('a cut body resolved'), (e: unknown) => e);
    await answering;
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease released');
    return { err, tunnels };
  }

  test('a keep-alive connection handed to node:http by a GET: the second request gets its head and half its body, then the cut', async () => {
    const { stack, node } = await start(true);
    const socket = connect(Number(new URL(stack.edge.url).port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => {});
    socket.write('GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n');
    await waitUntil(() => /\r\n\r\n\{.*\}$/s.test(received), 'the models list');
    const before = received.length;
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(CHAT)}\r\n\r\n${CHAT}`);
    const tunnel = await node.nextTunnel();
    cutInOneBatch(node, tunnel.tunnelId);
    await closed;
    const answer = received.slice(before);
    assert.match(answer, /^HTTP\/1\.1 200 /, `the head went out before the cut (got ${JSON.stringify(answer.slice(0, 80))})`);
    assert.ok(answer.endsWith(`\r\n\r\n${HALF}`), 'then the body so far, and nothing more');
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease released');
  });

  // HEADERS, then ERROR, no DATA between (a provider that reset right after its head): both
  // responses keep a relayed head until the first body write, so the cut used to send nothing at all.
  for (const leanHttp1 of [true, false]) {
    test(`a head and no body, then a reset (lean_http1 ${leanHttp1}): the SDK sees the head and a cut body, not a connection error it would retry`, async () => {
      const { stack, node } = await start(leanHttp1);
      const { err, tunnels } = await cutCall(stack, node, (tunnelId) => {
        // In one turn or two, alike: no body byte was written, so the head was still only stored.
        node.headers(tunnelId, 0, [header('content-type', 'application/json'), header('content-length', String(BODY.length))]);
        node.error(tunnelId, 1, 'upstream_reset', 'read ECONNRESET');
      });
      assert.ok(!(err instanceof OpenAI.APIConnectionError), `not a connection error: ${String(err)}`);
      assert.equal(tunnels, 1, 'the request reached the provider once');
    });
  }

  test('listen.http.lean_http1 false: the SDK sees a cut body, not a connection error it would retry', async () => {
    const { stack, node } = await start(false);
    const { err, tunnels } = await cutCall(stack, node, (tunnelId) => cutInOneBatch(node, tunnelId));
    assert.ok(!(err instanceof OpenAI.APIConnectionError), `not a connection error: ${String(err)}`);
    assert.equal(tunnels, 1, 'the request reached the provider once');
  });
});
