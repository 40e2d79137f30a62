// A request that may go to fewer providers than its alias has (one node named
// in x-edge-node, or the provider holding its previous_response_id) is
// refused at once when none of those could ever serve it (its API, or a
// context window for its prompt), in its API's error format, rather than
// waiting out its queue for a provider that is not coming.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { ALIAS, NODE_ID, startStack, type Stack } from '../helpers/stack.js';

const QUEUE_TIMEOUT_MS = 5_000;

describe('requests narrowed to a node or a stored response', () => {
  let stack: Stack;
  let openai: OpenAI;
  before(async () => {
    stack = await startStack({
      providerType: 'vllm', // serves Messages and Responses
      queueTimeoutMs: QUEUE_TIMEOUT_MS,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      configure(raw) {
        raw.scheduler = { long_context_threshold_tokens: 1_000 };
        const nodes = raw.nodes as { id: string; token: string; providers: Record<string, unknown>[] }[];
        nodes[0].providers[0].max_context_tokens = 2_000;
        // A chat-only provider with a big window, on a node that never connects here.
        nodes.push({ id: 'gpu-big', token: 'big-token-0123456789', providers: [{ id: 'big', type: 'openai_compat', capacity: 1, max_context_tokens: 50_000, endpoints: ['chat'] }] });
        (raw.models as { providers: Record<string, string> }[])[0].providers.big = 'big-served';
      },
    });
    openai = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await stack.close();
  });

  const long = 'hello '.repeat(4_000); // ~6,000 tokens by bytes / 4: only 'big' declares a window for it

  test('x-edge-node naming a node none of whose providers serves the API: 404 node_not_found at once', async () => {
    const anthropic = new Anthropic({ baseURL: stack.baseURL.replace(/\/v1$/, ''), apiKey: 'unused', maxRetries: 0 });
    const started = Date.now();
    const err = await anthropic.messages.create({ model: ALIAS, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-edge-node': 'gpu-big' } }).catch((e: unknown) => e);
    assert.ok(err instanceof Anthropic.NotFoundError, String(err));
    assert.match(err.message, /x-edge-node serves no provider for model \\?"llama3\\?" on \/v1\/messages/);
    assert.ok(Date.now() - started < QUEUE_TIMEOUT_MS / 2, 'not after the queue timeout');
  });

  test('x-edge-node naming a node whose windows are all too small: 400 context_length_exceeded at once', async () => {
    const started = Date.now();
    const err = await openai.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: long }] }, { headers: { 'x-edge-node': NODE_ID } }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.code, 'context_length_exceeded');
    assert.match(err.message, /on the node named in x-edge-node/);
    assert.ok(Date.now() - started < QUEUE_TIMEOUT_MS / 2, 'not after the queue timeout');
  });

  test('previous_response_id whose provider\'s window is too small for the prompt: 400 context_length_exceeded at once, not sent elsewhere', async () => {
    const first = await openai.responses.create({ model: ALIAS, input: 'hi' });
    const started = Date.now();
    const err = await openai.responses.create({ model: ALIAS, input: long, previous_response_id: first.id }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.code, 'context_length_exceeded');
    assert.match(err.message, /the provider "gpu-1-mock" that stored its previous response/);
    assert.ok(Date.now() - started < QUEUE_TIMEOUT_MS / 2, 'not after the queue timeout');
    // A prompt within its window still goes there.
    const next = await openai.responses.create({ model: ALIAS, input: 'and then?', previous_response_id: first.id });
    assert.equal(next.object, 'response');
  });
});
