// Many concurrent streams on one node: the agent sends the frames of one
// event-loop turn as one FrameBatch, the edge unpacks them into the right
// tunnels. Every SDK stream gets all its chunks in order, and the edge counts
// the batches it received (so the test fails if batching silently stopped).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
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

  test(`${STREAMS} concurrent streams arrive whole and in order; the edge received FrameBatch messages`, async () => {
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'sk-client-secret', maxRetries: 0, timeout: 15_000 });
    const before = (await stack.edge.inspect()).protocolStats.frameBatches ?? 0;
    const texts = await Promise.all(
      Array.from({ length: STREAMS }, async () => {
        const stream = await sdk.chat.completions.create(
          { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'count' }] },
          { headers: { 'x-mock-tokens': String(TOKENS), 'x-mock-interval-ms': '5', 'x-mock-ttft-ms': '0' } },
        );
        const parts: string[] = [];
        for await (const chunk of stream) {
          const content = chunk.choices[0]?.delta?.content;
          if (content) parts.push(content);
        }
        return parts;
      }),
    );
    const reference = texts[0];
    assert.equal(reference.length, TOKENS, `expected ${TOKENS} content chunks, got ${reference.length}`);
    assert.match(reference.join(''), new RegExp(SERVED));
    for (const parts of texts) assert.deepEqual(parts, reference, 'every stream carries the same tokens in the same order');
    const batches = ((await stack.edge.inspect()).protocolStats.frameBatches ?? 0) - before;
    assert.ok(batches > 0, 'the edge received no FrameBatch');
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released');
  });
});
