// RunningEdge.close() "closes at once" (an embedder's shutdown, every test's
// teardown): with a stream still open it returns without waiting for the
// stream to end by itself (here, it never would before its 60 s tunnel
// deadline), the client's stream ends with an error event, and the node
// hears the cancel. Before, close() awaited the client listener first, which
// waited for that stream, which only the node listener's close (next) ended.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALIAS, NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack } from '../helpers/stack.js';
import { FakeNode } from '../workers/grpc/fake-node.js';

test('close() with a stream open ends it and returns, well before the tunnel deadline', async () => {
  const stack = await startStack({ startAgent: false, tunnelTimeoutMs: 60_000 });
  const node = new FakeNode(stack.edge.grpcPort);
  try {
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    await node.registered();
    const pending = fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] })}\n\n`);
    const res = await pending;
    const body = res.text().catch((err: unknown) => `(cut: ${String(err)})`);
    const closed = stack.edge.close().then(() => 'closed');
    const within = await Promise.race([closed, new Promise<string>((resolve) => setTimeout(() => resolve('still closing'), 10_000).unref())]);
    assert.equal(within, 'closed', 'close() waited for the open stream');
    const text = await body;
    assert.match(text, /Hi/);
    assert.match(text, /"error"|\(cut:/, 'the stream did not end as if complete');
  } finally {
    node.close();
    await stack.close().catch(() => {});
  }
});
