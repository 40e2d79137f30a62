// Streams whose provider misbehaves at the edges of the relay, through a
// hand-driven node and the official openai SDK:
// - a Responses stream that fails while its first event is still half
//   received gets the response.created the SDK needs before the error, so
//   the caller reads the gateway's error, not the SDK's complaint;
// - a stream: true request whose provider, slower than the keepalive
//   interval (the 200 head already sent), answers with a JSON body gets an
//   in-band error instead of an empty stream.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, type Stack } from '../helpers/stack.js';
import { stackWithFakeNode } from '../helpers/fake-node-stack.js';
import { JSON_HEADERS, SSE, type FakeNode } from '../workers/grpc/fake-node.js';

describe('stream edges', () => {
  let stack: Stack;
  let node: FakeNode;
  let client: OpenAI;
  before(async () => {
    ({ stack, node } = await stackWithFakeNode({ providerType: 'vllm', configure: (raw) => void Object.assign(raw.limits as object, { sse_keepalive_ms: 200 }) }));
    client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  /** A chat stream through the SDK: its text, or the error it raised. */
  async function streamedChatText(): Promise<string> {
    const stream = await client.chat.completions.create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    return text;
  }

  test("a Responses stream cut while its first event is half received: the SDK raises the gateway's error", async () => {
    const stream = client.responses.stream({ model: ALIAS, input: 'hi' });
    const tunnel = await node.nextTunnel();
    node.headers(tunnel.tunnelId, 0, SSE);
    // response.created, large and split by the node's frames: its blank line never came.
    node.data(tunnel.tunnelId, 1, `event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_half","object":"response","instructions":"${'x'.repeat(2_000)}`);
    node.error(tunnel.tunnelId, 2, 'upstream_reset', 'the provider closed the connection');
    // The stream helper raises the error event as the API's own error, once it has its response.created.
    await assert.rejects(stream.finalResponse(), (err: Error & { code?: string }) => {
      assert.doesNotMatch(err.message, /snapshot/, 'the SDK got the response.created it needs first');
      assert.equal(err.code, 'upstream_reset', String(err));
      return true;
    });
  });

  test('a stream whose content-type is spelled in capitals (Text/Event-Stream) is still a stream: a failure mid-way is an in-band error, not a cut', async () => {
    const pending = streamedChatText();
    const tunnel = await node.nextTunnel();
    node.headers(tunnel.tunnelId, 0, [{ $typeName: 'edge.v1.Header', name: 'content-type', value: 'Text/Event-Stream; charset=UTF-8' }]);
    node.data(tunnel.tunnelId, 1, `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] })}\n\n`);
    node.error(tunnel.tunnelId, 2, 'upstream_reset', 'the provider closed the connection');
    await assert.rejects(pending, (err: Error & { code?: string }) => {
      assert.equal(err.code, 'upstream_reset', String(err));
      return true;
    });
  });

  test('a stream: true answered with JSON after the keepalive committed the stream: an in-band error, never an empty answer', async () => {
    const pending = streamedChatText();
    const tunnel = await node.nextTunnel();
    // Past the 200 ms keepalive: the edge has sent its 200 event-stream head.
    await new Promise((resolve) => setTimeout(resolve, 500));
    node.headers(tunnel.tunnelId, 0, JSON_HEADERS);
    node.data(tunnel.tunnelId, 1, JSON.stringify({ id: 'c1', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'Hi there' }, finish_reason: 'stop' }] }));
    node.end(tunnel.tunnelId, 2);
    await assert.rejects(pending, /not an event stream/);
  });

  test('a 204 with DATA behind it: the bytes never reach the client, whose next response on the connection is its own', async () => {
    const socket = connect(stack.edge.httpPort, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1').on('data', (s: string) => (text += s));
    const body = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] });
    const requestBytes = `POST /v1/chat/completions HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    socket.write(requestBytes);
    const first = await node.nextTunnel();
    node.headers(first.tunnelId, 0, [], 204);
    node.data(first.tunnelId, 1, 'HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\ninjected');
    node.end(first.tunnelId, 2);
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.write(requestBytes);
    const second = await node.nextTunnel();
    node.headers(second.tunnelId, 0, [{ $typeName: 'edge.v1.Header', name: 'content-type', value: 'application/json' }, { $typeName: 'edge.v1.Header', name: 'content-length', value: '6' }]);
    node.data(second.tunnelId, 1, '"real"');
    node.end(second.tunnelId, 2);
    const deadline = Date.now() + 3_000;
    while (!text.endsWith('"real"') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    socket.destroy();
    assert.doesNotMatch(text, /injected/);
    const statuses = [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => m[1]);
    assert.deepEqual(statuses, ['204', '200'], text);
  });

  test("a node's content-length that is not one plain decimal fails the request (502), never framing the client's body", async () => {
    for (const headers of [[['content-length', '5, 5']], [['content-length', '0x10']], [['content-length', '0'], ['content-length', '500']]]) {
      const pending = fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] }) });
      const tunnel = await node.nextTunnel();
      node.headers(tunnel.tunnelId, 0, headers.map(([name, value]) => ({ $typeName: 'edge.v1.Header' as const, name, value })));
      const res = await pending;
      assert.equal(res.status, 502, JSON.stringify(headers));
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'node_protocol_error');
    }
  });
});
