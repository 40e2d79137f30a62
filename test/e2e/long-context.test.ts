// The long-context class through the edge: a request estimated at or above
// scheduler.long_context_threshold_tokens goes only to a provider whose
// max_context_tokens covers it. When no provider of the model declares such
// a window, connected or not, the client hears at once that the prompt is
// too long (400 context_length_exceeded, in each API's error format), not
// after a queue timeout; when one does but is not connected, the request
// waits for it and the refusal names the window it waited for.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { ALIAS, EMBED_ALIAS, startStack, type Stack } from '../helpers/stack.js';

const WINDOW = 2_000;
const BIG_WINDOW = 50_000;
const QUEUE_TIMEOUT_MS = 600;

describe('prompts longer than the connected providers take', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      providerType: 'vllm', // serves /v1/messages too
      queueTimeoutMs: QUEUE_TIMEOUT_MS,
      configure(raw) {
        raw.scheduler = { long_context_threshold_tokens: 1_000 };
        const nodes = raw.nodes as { id: string; token: string; providers: { id: string; type?: string; capacity?: number; max_context_tokens?: number }[] }[];
        nodes[0].providers[0].max_context_tokens = WINDOW;
        // A bigger provider on a node that never connects here.
        nodes.push({ id: 'gpu-big', token: 'big-token', providers: [{ id: 'big', type: 'vllm', capacity: 1, max_context_tokens: BIG_WINDOW }] });
        const models = raw.models as { alias: string; providers: Record<string, string> }[];
        models[0].providers.big = 'big-served';
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  function chat(content: string): Promise<Response> {
    return fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content }] }),
    });
  }

  test('within the window: served, short or long', async () => {
    for (const content of ['hello '.repeat(100), 'hello '.repeat(1_000)]) {
      // ~150 and ~1,500 tokens by bytes / 4: short, then long and within the 2,000-token window
      const res = await chat(content);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
  });

  test('longer than every declared window: 400 context_length_exceeded at once, in the OpenAI and Anthropic formats', async () => {
    const long = 'hello '.repeat(80_000); // ~120,000 tokens by bytes / 4: more than even the big provider takes
    const err = await new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 }).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: long }] }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.code, 'context_length_exceeded');
    assert.match(err.message, /no provider of model "llama3" takes that many/);
    // Only admission gives this code; a queued request that expired would be no_provider_available.
    const anthropic = new Anthropic({ baseURL: stack.baseURL.replace(/\/v1$/, ''), apiKey: 'unused', maxRetries: 0 });
    const aerr = await anthropic.messages.create({ model: ALIAS, max_tokens: 8, messages: [{ role: 'user', content: long }] }).catch((e: unknown) => e);
    assert.ok(aerr instanceof Anthropic.BadRequestError, String(aerr));
    assert.equal((aerr.error as { error: { type: string } }).error.type, 'invalid_request_error');
  });

  test('a batch of embeddings inputs or completion prompts is as long as its longest item, not their sum', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const item = 'hello '.repeat(600); // ~600 tokens: within the 2,000-token window
    const batch = Array.from({ length: 20 }, (_, i) => `${i} ${item}`); // ~18,000 tokens by bytes / 4 together
    const embedded = await client.embeddings.create({ model: EMBED_ALIAS, input: batch });
    assert.equal(embedded.data.length, batch.length);
    const ids = Array.from({ length: 1_500 }, (_, i) => 100_000 + i); // 1,500 tokens each, ~2,600 by bytes / 4
    const fromIds = await client.embeddings.create({ model: EMBED_ALIAS, input: [ids, ids, ids] });
    assert.equal(fromIds.data.length, 3);
    // Summed, this batch would wait for the big provider (not connected here) and get a 503.
    const completed = await client.completions.create({ model: ALIAS, prompt: batch, max_tokens: 4 });
    assert.ok(completed.choices.length > 0);
    // One item past every window still makes the batch long.
    const err = await client.embeddings.create({ model: EMBED_ALIAS, input: ['hi', 'hello '.repeat(4_000)] }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.code, 'context_length_exceeded');
  });

  test('a batch item that is shorter in characters but longer in tokens sets the batch\'s class', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const digits = '3.14159 2.71828 '.repeat(300); // 4,800 characters, ~3,000 tokens: past the connected 2,000-token window
    const words = 'hello '.repeat(900); // 5,400 characters, ~900 tokens: the longest item by characters, and short
    for (const list of [[digits], [digits, words]]) {
      // No provider of the embeddings model takes 3,000 tokens: refused at once, never sent to the 2,000-token one.
      const err = await client.embeddings.create({ model: EMBED_ALIAS, input: list }).catch((e: unknown) => e);
      assert.ok(err instanceof OpenAI.BadRequestError, `${list.length} item(s): ${String(err)}`);
      assert.equal(err.code, 'context_length_exceeded');
    }
  });

  test("an image's base64 is not prompt text: a small prompt with a large image is within the window", async () => {
    // ~40,000 tokens by bytes / 4, past even the big provider's window; one image part and a question to the model.
    const data = Buffer.alloc(120_000, 7).toString('base64');
    const openai = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const chatted = await openai.chat.completions.create({
      model: ALIAS,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } }] }],
    });
    assert.ok(chatted.choices[0].message.content);
    const anthropic = new Anthropic({ baseURL: stack.baseURL.replace(/\/v1$/, ''), apiKey: 'unused', maxRetries: 0 });
    const messaged = await anthropic.messages.create({
      model: ALIAS,
      max_tokens: 8,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data } }, { type: 'text', text: 'What is in this picture?' }] }],
    });
    assert.equal(messaged.type, 'message');
    // Two images are more than the 2,000-token window: each counts as an image, not as nothing, so only the
    // big provider (not connected) takes them.
    const two = await openai.chat.completions
      .create({ model: ALIAS, messages: [{ role: 'user', content: [1, 2].map(() => ({ type: 'image_url' as const, image_url: { url: `data:image/png;base64,${data}` } })) }] })
      .catch((e: unknown) => e);
    assert.ok(two instanceof OpenAI.APIError && two.status === 503, String(two));
    assert.match(two.message, /about 32\d\d input tokens \(estimated\)/);
  });

  test("a completion's suffix is prompt text too: a short prompt with a long suffix is long", async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const suffix = 'return value + 1\n'.repeat(600); // ~3,600 tokens of code after the insertion point: past the 2,000-token window
    // Long, it waits for the big provider (not connected here) and times out; the 2,000-token one never gets it.
    const err = await client.completions.create({ model: ALIAS, prompt: 'def f(value):\n', suffix, max_tokens: 4 }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.APIError && err.status === 503, String(err));
    assert.equal(err.code, 'no_provider_available');
  });

  test('within a window whose provider is not connected: waits for it, then 503 naming the window', async () => {
    const res = await chat('hello '.repeat(4_000)); // ~6,000 tokens: only the big provider takes it
    assert.equal(res.status, 503);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'no_provider_available');
    assert.match(body.error.message, /with a context window for about \d+ input tokens \(estimated\) is available: none is connected, or each is drained, disabled, unhealthy or ejected; retry later$/);
  });

  test('x-edge-node naming a node that is not connected: waits for it, then 503 naming that node, not the model\'s others', async () => {
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-edge-node': 'gpu-big' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hello' }] }),
    });
    assert.equal(res.status, 503);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'no_provider_available');
    // The model's other provider is serving: the message must not say none of the model's is.
    assert.match(body.error.message, /^no provider for model "[^"]+" on the node named in x-edge-node \("gpu-big"\) is available: none is connected/);
  });

  test('context_length_exceeded names the field that holds the prompt on each OpenAI route', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const long = 'hello '.repeat(80_000); // more than every declared window
    const calls: [string, () => Promise<unknown>][] = [
      ['messages', () => client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: long }] })],
      ['prompt', () => client.completions.create({ model: ALIAS, prompt: long })],
      ['input', () => client.embeddings.create({ model: ALIAS, input: long })],
      ['input', () => client.responses.create({ model: ALIAS, input: long })],
    ];
    for (const [param, call] of calls) {
      const err = await call().catch((e: unknown) => e);
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.code, 'context_length_exceeded');
      assert.equal(err.param, param, err.message);
    }
  });
});

describe('limits.offload_bytes 0: no body goes to the pool for its size, yet the estimate counts what bytes / 4 misjudges', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      configure(raw) {
        raw.scheduler = { long_context_threshold_tokens: 1_000 };
        (raw.limits as Record<string, unknown>).offload_bytes = 0;
        (raw.nodes as { providers: { max_context_tokens?: number }[] }[])[0].providers[0].max_context_tokens = WINDOW;
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('a small prompt with a large image and a batch of short inputs are served, as with the default', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    // ~40,000 tokens by bytes / 4: refused context_length_exceeded were it not counted.
    const data = Buffer.alloc(120_000, 7).toString('base64');
    const chatted = await client.chat.completions.create({
      model: ALIAS,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${data}` } }] }],
    });
    assert.ok(chatted.choices[0].message.content);
    const batch = Array.from({ length: 20 }, (_, i) => `${i} ${'hello '.repeat(600)}`); // ~18,000 tokens by bytes / 4 together
    const embedded = await client.embeddings.create({ model: EMBED_ALIAS, input: batch });
    assert.equal(embedded.data.length, batch.length);
  });
});
