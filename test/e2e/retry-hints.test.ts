// Every 429 and 503 the edge answers says when to come back (README,
// "Errors"): also the failures that carry no measured hint, here a node's
// ERROR session_busy (429) after dispatch, answered through the exchange's
// failure path rather than the queue's refusal. The official SDK reads the
// hint instead of falling back to its own backoff.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack, waitUntil, inFlight, type Stack } from '../helpers/stack.js';
import { FakeNode } from '../workers/grpc/fake-node.js';

describe('retry hints on failures after dispatch', () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    stack = await startStack({ startAgent: false });
    node = new FakeNode(stack.edge.grpcPort);
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    await node.registered();
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  test('a node answering ERROR session_busy gives the client 429 with Retry-After and retry-after-ms', async () => {
    const pending = fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] }),
    });
    const tunnel = await node.nextTunnel();
    node.error(tunnel.tunnelId, 0, 'session_busy', 'the session is running another turn');
    const res = await pending;
    const body = (await res.json()) as { error: { code: string } };
    assert.equal(res.status, 429);
    assert.equal(body.error.code, 'session_busy');
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(res.headers.get('retry-after-ms'), '1000');
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease released');
  });

  test('the openai SDK waits out the hint and retries: the second try is served', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 1, timeout: 10_000 });
    const started = Date.now();
    const answer = client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] });
    const first = await node.nextTunnel();
    node.error(first.tunnelId, 0, 'session_busy');
    const second = await node.nextTunnel(5_000);
    const waited = Date.now() - started;
    node.headers(second.tunnelId, 0, [{ $typeName: 'edge.v1.Header', name: 'content-type', value: 'application/json' }]);
    node.data(second.tunnelId, 1, JSON.stringify({ id: 'c1', object: 'chat.completion', created: 0, model: ALIAS, choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] }));
    node.end(second.tunnelId, 2);
    assert.equal((await answer).choices[0].message.content, 'ok');
    // retry-after-ms 1000, which the SDK honours (without a hint it backs off about 0.5 s).
    assert.ok(waited >= 900, `the SDK retried after ${waited} ms`);
  });
});
