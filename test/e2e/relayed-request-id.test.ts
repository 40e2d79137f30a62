// Every relayed answer names a request id where the SDKs read it
// (x-request-id for openai, request-id for Anthropic): the provider's own
// when it sent one, else the edge's run id. A provider's error relayed as
// it came, or an error in-band in a stream the provider began, then tells
// the user something an operator can look up (GET /admin/runs/{id}).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { ALIAS, inFlight, waitUntil, type Stack } from '../helpers/stack.js';
import { stackWithFakeNode } from '../helpers/fake-node-stack.js';
import { JSON_HEADERS, SSE, type FakeNode } from '../workers/grpc/fake-node.js';

describe('request ids on relayed answers', () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    ({ stack, node } = await stackWithFakeNode({ providerType: 'vllm' }));
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  test("Anthropic: a provider's own 400 without a request id: the SDK's error names the run", async () => {
    const client = new Anthropic({ baseURL: stack.edge.url, apiKey: 'x', maxRetries: 0 });
    const pending = client.messages.create({ model: ALIAS, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, JSON_HEADERS, 400);
    node.data(t.tunnelId, 1, JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long' } }));
    node.end(t.tunnelId, 2);
    const err = await pending;
    assert.ok(err instanceof Anthropic.BadRequestError, String(err));
    assert.match(err.requestID ?? '', /^run-/);
    assert.equal(err.requestID, err.headers?.get('x-edge-run-id'));
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease released');
  });

  test('openai: a stream that fails mid-way raises an error naming the run; a successful answer carries it too', async () => {
    const client = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const reading = (async () => {
      const stream = await client.chat.completions.create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] });
      for await (const _ of stream);
    })().catch((e: unknown) => e);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, SSE);
    node.data(t.tunnelId, 1, `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] })}\n\n`);
    node.error(t.tunnelId, 2, 'upstream_reset', 'provider closed the connection');
    const err = await reading;
    assert.ok(err instanceof OpenAI.APIError, String(err));
    assert.match(err.requestID ?? '', /^run-/);

    const answered = client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    const u = await node.nextTunnel();
    node.headers(u.tunnelId, 0, JSON_HEADERS, 200);
    node.data(u.tunnelId, 1, JSON.stringify({ id: 'c', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] }));
    node.end(u.tunnelId, 2);
    const { request_id: requestId, response } = await answered;
    assert.equal(requestId, response.headers.get('x-edge-run-id'));
    assert.match(requestId ?? '', /^run-/);
    await waitUntil(() => inFlight(stack.edge) === 0, 'the leases released');
  });

  test("a provider's own request ids are relayed as they came, and not doubled", async () => {
    const pending = fetch(`${stack.edge.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: ALIAS, messages: [] }) });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, [...JSON_HEADERS, { $typeName: 'edge.v1.Header', name: 'X-Request-Id', value: 'req_provider_1' }, { $typeName: 'edge.v1.Header', name: 'request-id', value: 'req_provider_2' }], 500);
    node.data(t.tunnelId, 1, JSON.stringify({ error: { message: 'boom', type: 'server_error' } }));
    node.end(t.tunnelId, 2);
    const res = await pending;
    await res.arrayBuffer();
    assert.equal(res.headers.get('x-request-id'), 'req_provider_1');
    assert.equal(res.headers.get('request-id'), 'req_provider_2');
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease released');
  });
});
