// The real path end to end: official openai SDK -> edge (fastify) -> gRPC
// bidi stream -> node agent -> mock provider (undici) -> back, streaming.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, EMBED_ALIAS, EMBED_SERVED, inFlight, NODE_TOKEN, SERVED, sessionOf, startStack, waitUntil, type Stack } from '../helpers/stack.js';

function client(stack: Stack): OpenAI {
  return new OpenAI({ baseURL: stack.baseURL, apiKey: 'sk-client-secret', maxRetries: 0, timeout: 15_000 });
}

describe('openai SDK through the edge', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 1, mock: { ttftMs: 0, tokens: 5, intervalMs: 1 } });
  });
  after(async () => {
    await stack.close();
  });

  test('non-streaming chat completion reaches the served model and returns its answer', async () => {
    const completion = await client(stack).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    const last = stack.mock.requestLog.at(-1);
    assert.equal(last?.model, SERVED, 'the provider saw the served name, not the alias');
    assert.equal(completion.object, 'chat.completion');
    assert.match(completion.choices[0].message.content ?? '', new RegExp(SERVED));
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released (with workers the release record trails the response)');
  });

  test('the client Authorization header never reaches the provider', async () => {
    await client(stack).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    const headers = stack.mock.requestLog.at(-1)?.receivedHeaders ?? {};
    assert.equal(headers.authorization, undefined);
    assert.ok(!JSON.stringify(headers).includes('sk-client-secret'));
  });

  test('only the top-level model is rewritten; every other byte passes through', async () => {
    const body = '{"messages":[{"role":"user","content":"keep \\u00e9 \\"model\\": \\"x\\""}],  "model" : "llama3","temperature":0.25e0,"extra":{"model":"nested"}}';
    const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    const received = stack.mock.requestLog.at(-1)?.body?.toString('utf8');
    assert.equal(received, body.replace('"model" : "llama3"', `"model" : "${SERVED}"`));
  });

  test('streaming: the first chunk reaches the client long before the provider emits the last', async () => {
    const stream = await client(stack).chat.completions.create(
      { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'count' }] },
      { headers: { 'x-mock-tokens': '20', 'x-mock-interval-ms': '50', 'x-mock-ttft-ms': '0' } },
    );
    const emittedAtArrival: number[] = [];
    let text = '';
    for await (const chunk of stream) {
      const entry = stack.mock.requestLog.at(-1);
      emittedAtArrival.push(entry?.chunksEmitted ?? -1);
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.ok(emittedAtArrival.length >= 20, `got ${emittedAtArrival.length} chunks`);
    assert.ok(emittedAtArrival[0] < 5, `first chunk arrived after the provider had emitted ${emittedAtArrival[0]} chunks`);
    for (let i = 1; i < emittedAtArrival.length; i++) assert.ok(emittedAtArrival[i] >= emittedAtArrival[i - 1]);
    assert.match(text, new RegExp(SERVED));
  });

  test('streaming: the response head reaches the client when the provider sends it, not with the first token', async () => {
    // The mock sends its head at once and its first token after 4 s; the SDK's timeout (1.5 s, room for a loaded host) runs until the head.
    const stream = await new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 1_500 }).chat.completions.create(
      { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'think first' }] },
      { headers: { 'x-mock-ttft-ms': '4000', 'x-mock-tokens': '3' } },
    );
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    assert.match(text, new RegExp(SERVED));
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease to be released');
  });

  test('embeddings and /v1/models work through the SDK', async () => {
    const sdk = client(stack);
    const embedding = await sdk.embeddings.create({ model: EMBED_ALIAS, input: ['a', 'b'] });
    assert.equal(embedding.data.length, 2);
    assert.ok(embedding.data[0].embedding.length > 0);
    assert.equal(stack.mock.requestLog.at(-1)?.model, EMBED_SERVED);
    const models = [];
    for await (const model of sdk.models.list()) models.push(model.id);
    assert.deepEqual(models.sort(), [ALIAS, EMBED_ALIAS].sort());
    const one = await sdk.models.retrieve(ALIAS);
    assert.deepEqual({ id: one.id, object: one.object, owned_by: one.owned_by }, { id: ALIAS, object: 'model', owned_by: 'edge' });
    const missing = await sdk.models.retrieve('org/no-such-model').catch((e: unknown) => e);
    assert.ok(missing instanceof OpenAI.NotFoundError, String(missing));
    assert.equal(missing.code, 'model_not_found');
  });

  test('aborting mid-stream cancels the upstream request and frees the slot', async () => {
    const controller = new AbortController();
    const stream = await client(stack).chat.completions.create(
      { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'long' }] },
      { headers: { 'x-mock-tokens': '200', 'x-mock-interval-ms': '20' }, signal: controller.signal },
    );
    const abortsBefore = stack.mock.stats.aborted;
    let seen = 0;
    try {
      for await (const _chunk of stream) {
        if (++seen === 3) controller.abort();
      }
    } catch (err) {
      assert.match(String(err), /abort/i);
    }
    assert.ok(seen < 200, 'the stream stopped at the abort');
    await waitUntil(() => stack.mock.stats.aborted > abortsBefore, 'the mock to record the abort');
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease to be released');
    // capacity is 1: this only succeeds if the aborted request's slot was freed
    const completion = await client(stack).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'next' }] });
    assert.equal(completion.object, 'chat.completion');
  });

  test('killing the node connection mid-stream ends the client stream with an error, then the agent reconnects', async () => {
    const agent = stack.agent!;
    const generationBefore = agent.generation;
    const stream = await client(stack).chat.completions.create(
      { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'long' }] },
      { headers: { 'x-mock-tokens': '200', 'x-mock-interval-ms': '20' } },
    );
    let seen = 0;
    const reconnected = once(agent, 'registered');
    await assert.rejects(async () => {
      for await (const _chunk of stream) {
        if (++seen === 3) agent.dropConnection();
      }
    }, /disconnected|error|terminated/i);
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease to be released');
    await reconnected;
    assert.notEqual(agent.generation, generationBefore);
    const completion = await client(stack).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'after' }] });
    assert.equal(completion.object, 'chat.completion');
  });
});

describe('errors in OpenAI format', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ bodyBytes: 4096 });
  });
  after(async () => {
    await stack.close();
  });

  async function post(body: string | Buffer): Promise<{ status: number; json: { error: { message: string; type: string; code: string; param: string | null } } }> {
    const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return { status: res.status, json: (await res.json()) as { error: { message: string; type: string; code: string; param: string | null } } };
  }

  test('unknown model gets 404 model_not_found', async () => {
    const err = await client(stack).chat.completions.create({ model: 'nope', messages: [] }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'model_not_found');
    const { json } = await post('{"model":"nope"}');
    assert.deepEqual(Object.keys(json.error).sort(), ['code', 'message', 'param', 'type']);
  });

  test('malformed JSON gets 400 invalid_json', async () => {
    const { status, json } = await post('{"model": "llama3", ');
    assert.equal(status, 400);
    assert.equal(json.error.code, 'invalid_json');
    assert.equal(json.error.type, 'invalid_request_error');
  });

  test('missing model gets 400 naming the param', async () => {
    const { status, json } = await post('{"messages":[]}');
    assert.equal(status, 400);
    assert.equal(json.error.param, 'model');
  });

  test('a body over the limit gets 413', async () => {
    const { status, json } = await post(JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'x'.repeat(10_000) }] }));
    assert.equal(status, 413);
    assert.equal(json.error.code, 'request_too_large');
  });

  test('unknown routes get 404 in OpenAI format', async () => {
    const res = await fetch(`${stack.baseURL}/nope`);
    assert.equal(res.status, 404);
    const json = (await res.json()) as { error: { code: string } };
    assert.equal(json.error.code, 'unknown_url');
  });
});

describe('node admission', () => {
  test('a node with a wrong token is refused and serves nothing', async () => {
    const stack = await startStack({ startAgent: false, queueTimeoutMs: 300 });
    try {
      const agent = await stack.startAgent('wrong-token');
      const [reason] = (await once(agent, 'rejected')) as [string];
      assert.match(reason, /token/);
      assert.equal(await sessionOf(stack.edge, 'gpu-1'), undefined);
      assert.notEqual(NODE_TOKEN, 'wrong-token');
    } finally {
      await stack.close();
    }
  });

  test('no node connected: the request waits its queue timeout, then gets 503', async () => {
    const stack = await startStack({ startAgent: false, queueTimeoutMs: 300 });
    try {
      const err = await client(stack).chat.completions.create({ model: ALIAS, messages: [] }).catch((e: unknown) => e);
      assert.ok(err instanceof OpenAI.APIError);
      assert.equal(err.status, 503);
      assert.equal(err.code, 'no_provider_available');
      assert.ok(err.headers?.get('retry-after'));
    } finally {
      await stack.close();
    }
  });
});
