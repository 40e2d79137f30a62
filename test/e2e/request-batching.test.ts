// Many concurrent requests to one node: the edge sends the TunnelRequests of
// one event-loop turn as one TunnelRequestBatch to an agent that announced
// the request_batch capability, and the agent starts each as if it had come
// alone. Every SDK client gets exactly its own answer (the mock stamps each
// body with the request's x-request-id and token count), and the edge counts
// the batches it sent, so the test fails if batching silently stopped.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { assertLogged, assertOwnBody, clientRequestId } from '../helpers/identity.js';
import { ALIAS, inFlight, startStack, waitUntil, type Stack } from '../helpers/stack.js';

const CLIENTS = 40;

describe('tunnel request batching between edge and agent', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: CLIENTS });
  });
  after(async () => {
    await stack.close();
  });

  test(`${CLIENTS} concurrent requests each get their own answer; the edge sent TunnelRequestBatch messages`, async () => {
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'sk-client-secret', maxRetries: 0, timeout: 15_000 });
    const before = (await stack.edge.inspect()).protocolStats.requestBatches ?? 0;
    // Three waves: on an idle machine one wave may land one request per turn.
    for (let wave = 0; wave < 3; wave++) {
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, i) => {
          const requestId = clientRequestId(`request-batching-${wave}`, i);
          const tokens = 3 + (i % 7);
          const response = await sdk.chat.completions
            .create({ model: ALIAS, messages: [{ role: 'user', content: `client ${i}` }] }, { headers: { 'x-request-id': requestId, 'x-mock-tokens': String(tokens), 'x-mock-ttft-ms': '0' } })
            .asResponse();
          assert.equal(response.status, 200);
          const body = await response.text();
          assertLogged(stack.mock.requestLog, assertOwnBody(body, requestId, tokens), requestId, tokens);
        }),
      );
    }
    const batches = ((await stack.edge.inspect()).protocolStats.requestBatches ?? 0) - before;
    assert.ok(batches > 0, 'the edge sent no TunnelRequestBatch');
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released');
  });
});
