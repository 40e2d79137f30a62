// Many concurrent streams on one node: the agent sends the frames of one
// event-loop turn as one FrameBatch, the edge unpacks them into the right
// tunnels. Every SDK stream gets exactly its own chunks, all of them, in
// order (the mock stamps each chunk with the request's x-request-id and its
// own token count), and the edge counts the batches it received (so the test
// fails if batching silently stopped).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { assertLogged, assertOwnChunks, clientRequestId } from '../helpers/identity.js';
import { ALIAS, inFlight, SERVED, startStack, waitUntil, type Stack } from '../helpers/stack.js';

const STREAMS = 30;
const TOKENS = 25;

describe('frame batching between agent and edge', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: STREAMS });
  });
  after(async () => {
    await stack.close();
  });

  test(`${STREAMS} concurrent streams each arrive whole, in order and to their own client; the edge received FrameBatch messages`, async () => {
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'sk-client-secret', maxRetries: 0, timeout: 15_000 });
    const before = (await stack.edge.inspect()).protocolStats.frameBatches ?? 0;
    await Promise.all(
      Array.from({ length: STREAMS }, async (_, i) => {
        // Each client its own id and length, so a stream that reached the wrong client cannot pass as its own.
        const requestId = clientRequestId('batching', i);
        const tokens = TOKENS + i;
        const stream = await sdk.chat.completions.create(
          { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'count' }] },
          { headers: { 'x-request-id': requestId, 'x-mock-tokens': String(tokens), 'x-mock-interval-ms': '5', 'x-mock-ttft-ms': '0' } },
        );
        const chunks: unknown[] = [];
        const parts: string[] = [];
        for await (const chunk of stream) {
          chunks.push(chunk);
          const content = chunk.choices[0]?.delta?.content;
          if (content) parts.push(content);
        }
        assertLogged(stack.mock.requestLog, assertOwnChunks(chunks, requestId, tokens), requestId, tokens);
        assert.equal(parts.length, tokens, `expected ${tokens} content chunks, got ${parts.length}`);
        assert.match(parts.join(''), new RegExp(SERVED));
      }),
    );
    const batches = ((await stack.edge.inspect()).protocolStats.frameBatches ?? 0) - before;
    assert.ok(batches > 0, 'the edge received no FrameBatch');
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released');
  });
});
