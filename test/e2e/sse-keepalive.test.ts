// While a streaming request waits long for its first byte, the edge keeps
// the client connection alive with SSE comments; clients ignore them.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { ALIAS, EMBED_ALIAS, startStack, waitUntil, type Stack } from '../helpers/stack.js';

describe('SSE keepalive while waiting for the first byte', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      mock: { ttftMs: 0, tokens: 3, intervalMs: 1 },
      // Serves /v1/responses too.
      providerType: 'vllm',
      configure: (raw) => {
        (raw.limits as Record<string, unknown>).sse_keepalive_ms = 100;
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  const body = JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'slow' }] });

  test('comments flow before the first token and the stream then arrives intact', async () => {
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-fail': 'slow-headers:450' },
      body,
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    // The head went out before the provider's: the run id is the request id the SDKs read (openai, then Anthropic).
    assert.match(res.headers.get('x-request-id') ?? '', /^run-/);
    assert.equal(res.headers.get('x-request-id'), res.headers.get('x-edge-run-id'));
    assert.equal(res.headers.get('request-id'), res.headers.get('x-edge-run-id'));
    const text = await res.text();
    const firstData = text.indexOf('data: ');
    const keepalives = text.slice(0, firstData).split(': keepalive\n\n').length - 1;
    assert.ok(keepalives >= 2, `expected keepalives before the first event, got ${keepalives}: ${JSON.stringify(text.slice(0, 200))}`);
    assert.match(text, /data: \[DONE\]/);
  });

  test('the official SDK ignores the comments', async () => {
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'x', maxRetries: 0 });
    const stream = await sdk.chat.completions.create(
      { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'slow' }] },
      { headers: { 'x-mock-fail': 'slow-headers:350' } },
    );
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
    assert.ok(content.length > 0);
  });

  test('a provider error after keepalives becomes an error event the SDK raises, and counts against the provider', async () => {
    const failuresBefore = stack.edge.driver.status().providers[0].outlier?.consecutiveFailures ?? 0;
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'x', maxRetries: 0 });
    const stream = await sdk.chat.completions.create(
      { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'slow' }] },
      { headers: { 'x-mock-fail': 'slow-headers:350,status:500' } },
    );
    await assert.rejects(async () => {
      for await (const _chunk of stream) {
        // nothing arrives
      }
    }, /500/);
    // With worker threads the release reaches the scheduler just after the client's last byte.
    await waitUntil(() => stack.edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0) === 0, 'the lease to be released');
    // A 5xx is the provider's failure (toward its ejection), as it is without keepalives.
    assert.equal(stack.edge.driver.status().providers[0].outlier?.consecutiveFailures, failuresBefore + 1);
  });

  test('a Responses stream failing before any provider event: the SDK\'s stream helper raises the gateway\'s error, not its own', async () => {
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'x', maxRetries: 0 });
    const stream = sdk.responses.stream({ model: ALIAS, input: 'slow' }, { headers: { 'x-mock-fail': 'slow-headers:350,status:500' } });
    // Without an opening response.created the helper threw its own OpenAIError ("When snapshot hasn't been set
    // yet, expected 'response.created' event"). Now it rejects with the stream's error event, as mid-stream.
    const outcome: unknown = await stream.finalResponse().then(
      () => assert.fail('a failed stream resolved'),
      (e: unknown) => e,
    );
    const error = outcome as { type?: string; code?: string; message?: string };
    assert.doesNotMatch(String(error.message), /snapshot/);
    assert.deepEqual([error.type, error.code], ['error', 'upstream_error']);
    assert.match(String(error.message), /^the provider answered HTTP 500: mock failure: status 500$/);
    await waitUntil(() => stack.edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0) === 0, 'the lease to be released');
    // The raw stream: the edge's three events, numbered as Responses events are.
    const raw = await sdk.responses.create({ model: ALIAS, input: 'slow', stream: true }, { headers: { 'x-mock-fail': 'slow-headers:350,status:500' } });
    const events: { type: string; sequence_number?: number }[] = [];
    for await (const event of raw) events.push(event);
    assert.deepEqual(events.map((e) => [e.type, e.sequence_number]), [['response.created', 0], ['error', 1], ['response.failed', 2]]);
    await waitUntil(() => stack.edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0) === 0, 'the lease to be released');
  });

  test('a provider\'s 400 after keepalives: the in-band error carries its message and says it was the request\'s fault', async () => {
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'x', maxRetries: 0 });
    const stream = await sdk.chat.completions.create(
      { model: ALIAS, stream: true, messages: [{ role: 'user', content: 'slow' }] },
      { headers: { 'x-mock-fail': 'slow-headers:350,status:400,param:messages' } },
    );
    const err: unknown = await (async () => {
      for await (const _chunk of stream) {
        // nothing arrives
      }
    })().then(
      () => assert.fail('the stream ended without an error'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof OpenAI.APIError, String(err));
    // The provider's own words, not only its status.
    assert.match(err.message, /the provider answered HTTP 400: mock failure: status 400/);
    assert.equal(err.type, 'invalid_request_error');
    // And its own code and param, which say what to fix, as the relayed 400 would have.
    assert.deepEqual([err.code, err.param], ['mock_failure', 'messages']);
    await waitUntil(() => stack.edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0) === 0, 'the lease to be released');
  });

  test('a provider\'s 529 after keepalives reaches an Anthropic client as overloaded_error, as a 503 does', async () => {
    const sdk = new Anthropic({ baseURL: stack.edge.url, apiKey: 'x', maxRetries: 0 });
    // no-retry: relayed at once (x-should-retry: false), not sent back to the queue.
    for (const status of [529, 503]) {
      const stream = sdk.messages.stream(
        { model: ALIAS, max_tokens: 8, messages: [{ role: 'user', content: 'slow' }] },
        { headers: { 'x-mock-fail': `slow-headers:350,status:${status},no-retry` } },
      );
      await assert.rejects(stream.finalMessage(), (err: unknown) => {
        assert.ok(err instanceof Anthropic.APIError, String(err));
        const body = err.error as { type?: string; error?: { type?: string; message?: string } };
        assert.equal(body.type, 'error', 'an Anthropic `event: error`');
        assert.equal(body.error?.type, 'overloaded_error', `provider ${status}: ${JSON.stringify(body)}`);
        assert.match(body.error?.message ?? '', new RegExp(`the provider answered HTTP ${status}`));
        return true;
      });
    }
    await waitUntil(() => stack.edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0) === 0, 'the lease to be released');
  });

  test('non-streaming requests get no keepalive', async () => {
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-fail': 'slow-headers:300' },
      body: body.replace('"stream":true', '"stream":false'),
    });
    assert.equal(res.status, 200);
    const json = (await res.json()) as { object: string };
    assert.equal(json.object, 'chat.completion');
  });

  test('an embeddings request with a stray stream: true gets no keepalive: its JSON answer arrives whole', async () => {
    // The embeddings API has no stream mode (providers ignore the field); a 200 event-stream head would turn
    // a slow batch's answer into an in-band error.
    const res = await fetch(`${stack.baseURL}/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-fail': 'slow-headers:300' },
      body: JSON.stringify({ model: EMBED_ALIAS, stream: true, input: ['a', 'b'] }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const json = (await res.json()) as { object: string; data: unknown[] };
    assert.equal(json.object, 'list');
    assert.equal(json.data.length, 2);
  });

  test('a provider\'s 429 after keepalives still sends the request back to the queue: only comments had gone out', async () => {
    const before = stack.mock.stats.requests;
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-fail': 'slow-headers:250,status:429' },
      body,
    });
    assert.equal(res.status, 200, 'the keepalives committed the head');
    const text = await res.text();
    // Sent again up to resilience.overload.max_requeues (3) times, as before any keepalive; then the error, in band.
    assert.equal(stack.mock.stats.requests - before, 4);
    assert.match(text, /"code":"upstream_error"/);
    await waitUntil(() => stack.edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0) === 0, 'the lease to be released');
  });
});
