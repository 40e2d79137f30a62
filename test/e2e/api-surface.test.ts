// The Anthropic Messages API and the OpenAI Responses API through the edge,
// end to end with the official SDKs unmodified: SDK -> edge -> gRPC -> a real
// node agent -> mock providers speaking each API's exact wire format. One node
// runs three providers: p-a and p-b (vllm: every API) and p-c (openai_compat:
// chat, completions, embeddings as the agent announces, although the edge's
// own config for it lists messages too: the announcement wins).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Agent } from 'undici';
import type { NodeAgent } from '../../src/agent/agent.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { inFlight, startRegisteredAgent, testWorkers, waitFor, waitUntil } from '../helpers/stack.js';

const ALIAS = 'coder';
const FOLLOW_UP_ROUNDS = 20;
/** Only p-a serves it, with no queue: a busy p-a means 429 queue_full. */
const SOLO = 'solo';
const SERVED: Record<string, string> = { 'p-a': 'served-a', 'p-b': 'served-b', 'p-c': 'served-c' };

interface ApiStack {
  readonly edge: RunningEdge;
  readonly agent: NodeAgent;
  readonly mocks: Record<string, MockProvider>;
  close(): Promise<void>;
}

async function startApiStack(): Promise<ApiStack> {
  const mocks: Record<string, MockProvider> = {};
  for (const id of ['p-a', 'p-b', 'p-c']) mocks[id] = await startMockProvider({ ttftMs: 0, tokens: 6, intervalMs: 1 });
  const config = parseEdgeConfig(
    {
      listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
      admin: { host: '127.0.0.1', port: 0 },
      limits: { tunnel_timeout_ms: 30_000 },
      heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
      workers: { count: testWorkers() },
      nodes: [
        {
          id: 'gpu-1',
          token: 'node-token',
          providers: [
            { id: 'p-a', type: 'vllm', capacity: 1 },
            { id: 'p-b', type: 'vllm', capacity: 1 },
            // The edge alone would believe p-c serves messages; its node says otherwise.
            { id: 'p-c', type: 'openai_compat', capacity: 1, endpoints: ['chat', 'completions', 'embeddings', 'messages'] },
          ],
        },
      ],
      models: [
        { alias: ALIAS, queue_timeout_ms: 10_000, providers: SERVED },
        { alias: SOLO, max_queue: 0, providers: { 'p-a': 'served-a' } },
      ],
    },
    'test',
  );
  const edge = await startEdge(config, { logger: silentLogger(), admin: true });
  const agent = await startRegisteredAgent({
    edge: { address: `127.0.0.1:${edge.grpcPort}` },
    node: { id: 'gpu-1', token: 'node-token' },
    providers: [
      { id: 'p-a', type: 'vllm', base_url: mocks['p-a'].url },
      { id: 'p-b', type: 'vllm', base_url: mocks['p-b'].url },
      { id: 'p-c', type: 'openai_compat', base_url: mocks['p-c'].url },
    ],
    reconnect: { initial_ms: 50, max_ms: 200 },
  });
  return {
    edge,
    agent,
    mocks,
    async close() {
      await agent.stop();
      await edge.close();
      for (const mock of Object.values(mocks)) await mock.close();
    },
  };
}

function anthropic(stack: ApiStack, apiKey = 'sk-ant-client-secret'): Anthropic {
  return new Anthropic({ baseURL: stack.edge.url, apiKey, maxRetries: 0, timeout: 15_000 });
}

function openai(stack: ApiStack): OpenAI {
  return new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'sk-client-secret', maxRetries: 0, timeout: 15_000 });
}

/** Requests each mock received on `path`. */
function hits(stack: ApiStack, path: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [id, mock] of Object.entries(stack.mocks)) out[id] = mock.requestLog.filter((r) => r.path === path).length;
  return out;
}

/** A chat request that holds its provider's only slot for `ms` (Node sends a response head with its first body byte, so the lease is watched instead). */
async function holdSlot(stack: ApiStack, ms: number, alias = ALIAS): Promise<{ provider: string; done: Promise<void> }> {
  const busy = (): Set<string> => new Set(stack.edge.driver.status().providers.filter((p) => p.inFlight > 0).map((p) => p.id));
  const before = busy();
  const done = fetch(`${stack.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-mock-ttft-ms': String(ms), 'x-mock-tokens': '1' },
    body: JSON.stringify({ model: alias, stream: true, messages: [{ role: 'user', content: 'hold' }] }),
  }).then(async (res) => {
    assert.equal(res.status, 200);
    await res.text();
  });
  let provider = '';
  await waitUntil(() => {
    const now = [...busy()].filter((id) => !before.has(id));
    provider = now[0] ?? '';
    return now.length > 0;
  }, 'the hold to take a slot');
  return { provider, done };
}

async function metricSample(stack: ApiStack, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`${stack.edge.adminUrl}/metrics`)).text();
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}

describe('Anthropic Messages and OpenAI Responses through the edge (official SDKs)', () => {
  let stack: ApiStack;
  before(async () => {
    stack = await startApiStack();
  });
  after(async () => {
    await stack?.close();
  });

  test('messages.create: the served model answers in Anthropic format; x-api-key stays at the edge, anthropic-version passes; its usage is counted', async () => {
    const before = await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' });
    const beforePrompt = await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'prompt' });
    const message = await anthropic(stack).messages.create(
      { model: ALIAS, max_tokens: 64, messages: [{ role: 'user', content: 'Hello' }] },
      { headers: { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'test-beta-2025' } },
    );
    assert.equal(message.type, 'message');
    assert.equal(message.role, 'assistant');
    assert.equal(message.stop_reason, 'end_turn');
    const block = message.content[0];
    assert.equal(block.type, 'text');
    assert.match(block.type === 'text' ? block.text : '', /^hello from served-[ab]/);
    assert.ok(message.usage.input_tokens > 0 && message.usage.output_tokens === 6);
    const provider = message.model === 'served-a' ? 'p-a' : 'p-b';
    const seen = stack.mocks[provider].lastRequest('/v1/messages');
    assert.ok(seen !== undefined, 'the provider got the request');
    assert.equal(seen.headers['x-api-key'], undefined, 'the client key is not forwarded');
    assert.equal(seen.headers.authorization, undefined);
    assert.ok(!JSON.stringify(seen.headers).includes('sk-ant-client-secret'));
    assert.equal(seen.headers['anthropic-version'], '2023-06-01', 'anthropic-version passes through');
    assert.equal(seen.headers['anthropic-beta'], 'test-beta-2025', 'anthropic-beta passes through');
    assert.equal(hits(stack, '/v1/messages')['p-c'], 0, 'p-c does not serve messages');
    // A whole JSON answer's usage is read like a stream's last event (token metric, fair-queuing charge).
    await waitFor(async () => (await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' })) - before >= 6, 'the answer\'s tokens to be counted');
    assert.equal((await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' })) - before, 6, 'output_tokens of the JSON body counted');
    assert.equal((await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'prompt' })) - beforePrompt, message.usage.input_tokens, 'input_tokens of the JSON body counted');
  });

  test('messages.stream: text events in order, stop_reason, usage; the tokens reach the edge metrics', async () => {
    const before = await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' });
    const beforePrompt = await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'prompt' });
    const stream = anthropic(stack).messages.stream({ model: ALIAS, max_tokens: 64, messages: [{ role: 'user', content: 'Stream it' }] });
    const texts: string[] = [];
    stream.on('text', (delta) => texts.push(delta));
    const final = await stream.finalMessage();
    assert.equal(texts.length, 6);
    assert.equal(texts.join(''), (final.content[0] as { text: string }).text);
    assert.equal(final.stop_reason, 'end_turn');
    assert.equal(final.usage.output_tokens, 6);
    assert.ok(final.usage.input_tokens > 0);
    await waitFor(async () => (await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' })) - before >= 6, 'the stream\'s tokens to be counted');
    const after = await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' });
    const afterPrompt = await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'prompt' });
    assert.equal(after - before, 6, 'output_tokens of message_delta counted');
    assert.equal(afterPrompt - beforePrompt, final.usage.input_tokens, 'input_tokens of message_start counted');
  });

  test('prompt-cached Messages: cache_read_input_tokens count as prompt tokens, whole and streamed', async () => {
    // Anthropic counts cached prompt tokens apart from input_tokens; OpenAI's prompt_tokens includes them.
    const system: Anthropic.TextBlockParam[] = [{ type: 'text', text: 'A long, stable system prompt. '.repeat(20), cache_control: { type: 'ephemeral' } }];
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Hello' }];
    const prompt = () => metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'prompt' });
    const whole = await prompt();
    const message = await anthropic(stack).messages.create({ model: ALIAS, max_tokens: 64, system, messages });
    const wholeTokens = message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0) + (message.usage.cache_creation_input_tokens ?? 0);
    assert.ok((message.usage.cache_read_input_tokens ?? 0) > message.usage.input_tokens, 'the mock answered a cache hit');
    await waitFor(async () => (await prompt()) - whole >= wholeTokens, 'the whole answer\'s prompt tokens to be counted');
    assert.equal((await prompt()) - whole, wholeTokens, 'input plus cached tokens, once');
    const streamed = await prompt();
    const final = await anthropic(stack).messages.stream({ model: ALIAS, max_tokens: 64, system, messages }).finalMessage();
    const streamTokens = final.usage.input_tokens + (final.usage.cache_read_input_tokens ?? 0) + (final.usage.cache_creation_input_tokens ?? 0);
    assert.ok((final.usage.cache_read_input_tokens ?? 0) > 0);
    // message_delta carries output_tokens only: the prompt count comes from message_start, cache counts included.
    await waitFor(async () => (await prompt()) - streamed >= streamTokens, 'the stream\'s prompt tokens to be counted');
    assert.equal((await prompt()) - streamed, streamTokens);
  });

  test('messages.countTokens answers input_tokens', async () => {
    const count = await anthropic(stack).messages.countTokens({ model: ALIAS, messages: [{ role: 'user', content: 'How many tokens is this?' }] });
    assert.ok(Number.isInteger(count.input_tokens) && count.input_tokens > 0);
    assert.equal(hits(stack, '/v1/messages/count_tokens')['p-c'], 0);
  });

  test('responses.create: output_text from the served model', async () => {
    const response = await openai(stack).responses.create({ model: ALIAS, input: 'Say hello' });
    assert.equal(response.object, 'response');
    assert.equal(response.status, 'completed');
    assert.match(response.output_text, /^hello from served-[ab]/);
    assert.equal(response.usage?.output_tokens, 6);
    assert.equal(hits(stack, '/v1/responses')['p-c'], 0, 'p-c does not serve responses');
  });

  test('a responses stream runs from output_text.delta to response.completed; usage reaches the metrics', async () => {
    const before = await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' });
    const stream = await openai(stack).responses.create({ model: ALIAS, input: 'Stream it', stream: true });
    const types: string[] = [];
    let text = '';
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed') completed = event.response;
    }
    assert.equal(types[0], 'response.created');
    assert.equal(types.at(-1), 'response.completed');
    assert.equal(types.filter((t) => t === 'response.output_text.delta').length, 6);
    assert.ok(types.indexOf('response.output_text.delta') < types.indexOf('response.completed'));
    assert.match(text, /^hello from served-[ab]/);
    assert.equal(completed?.usage?.output_tokens, 6);
    await waitFor(async () => (await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' })) - before >= 6, 'the stream\'s tokens to be counted');
    assert.equal((await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' })) - before, 6);
  });

  test('previous_response_id, GET and DELETE go to the provider that made the response, with another free in the pool', async () => {
    const client = openai(stack);
    // p-a (first by id) is busy, so the first response is made on p-b.
    await waitUntil(() => inFlight(stack.edge) === 0, 'earlier leases released (with workers the release trails the response)');
    const hold = await holdSlot(stack, 600);
    assert.equal(hold.provider, 'p-a');
    const { data: first, response: raw } = await client.responses.create({ model: ALIAS, input: 'First turn' }).withResponse();
    assert.equal(raw.headers.get('x-edge-provider'), 'p-b');
    await hold.done;
    await waitUntil(() => inFlight(stack.edge) === 0, 'both slots free');
    // Both free now: without affinity the tie goes to p-a, which has no such response (404).
    for (let turn = 0; turn < 3; turn++) {
      const { data: next, response } = await client.responses.create({ model: ALIAS, input: `Turn ${turn}`, previous_response_id: first.id }).withResponse();
      assert.equal(response.headers.get('x-edge-provider'), 'p-b', `turn ${turn} lands where the previous response lives`);
      assert.equal(next.previous_response_id, first.id);
    }
    const streamed = await client.responses.create({ model: ALIAS, input: 'Streamed turn', previous_response_id: first.id, stream: true });
    let completedOn: string | undefined;
    for await (const event of streamed) if (event.type === 'response.completed') completedOn = event.response.model;
    assert.equal(completedOn, 'served-b');
    const retrieved = await client.responses.retrieve(first.id);
    assert.equal(retrieved.id, first.id);
    assert.equal(retrieved.output_text, first.output_text);
    // cancel and input_items are the stored response's too: same provider.
    const cancelled = await client.responses.cancel(first.id);
    assert.equal(cancelled.id, first.id);
    const items = await client.responses.inputItems.list(first.id);
    assert.deepEqual(items.data, []);
    const suffixed = (suffix: string) => stack.mocks['p-b'].requestLog.filter((r) => r.path === `/v1/responses/${first.id}/${suffix}`).length;
    assert.deepEqual([suffixed('cancel'), suffixed('input_items')], [1, 1]);
    await assert.rejects(client.responses.cancel('resp_never_seen'), (err: unknown) => err instanceof OpenAI.NotFoundError);
    // An id as long as the edge stores (256 characters) is looked up like any other, never refused by the router.
    for (const call of [(id: string) => client.responses.retrieve(id), (id: string) => client.responses.cancel(id), (id: string) => client.responses.delete(id)]) {
      await assert.rejects(call(`resp_${'x'.repeat(251)}`), (err: unknown) => {
        assert.ok(err instanceof OpenAI.NotFoundError, String(err));
        assert.equal((err.error as { code?: string }).code, 'response_not_found');
        return true;
      });
    }
    // Longer than any stored id: a 414 in OpenAI's shape, which the SDK raises as an APIError with its code.
    await assert.rejects(client.responses.retrieve(`resp_${'x'.repeat(300)}`), (err: unknown) => {
      assert.ok(err instanceof OpenAI.APIError && err.status === 414, String(err));
      assert.equal((err.error as { code?: string }).code, 'uri_too_long');
      return true;
    });
    await client.responses.delete(first.id);
    assert.equal(stack.mocks['p-b'].requestLog.filter((r) => r.method === 'DELETE').length, 1);
    await assert.rejects(client.responses.retrieve(first.id), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal((err.error as { code?: string }).code, 'response_not_found');
      return true;
    });
    assert.equal(stack.mocks['p-a'].requestLog.filter((r) => r.path.startsWith('/v1/responses/')).length, 0, 'nothing ever went to p-a for it');
  });

  test('retrieving or cancelling a stored response counts none of its tokens again (metrics, run record)', async () => {
    const client = openai(stack);
    const finished = (runId: string | null) => waitUntil(() => stack.edge.runs.get(runId ?? '')?.state === 'finished', `run ${runId} to finish`);
    const tokens = async () => [await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'prompt' }), await metricSample(stack, 'edge_stream_tokens_total', { model: ALIAS, kind: 'completion' })];
    const before = await tokens();
    const made = await client.responses.create({ model: ALIAS, input: 'Count me once' }).withResponse();
    await finished(made.response.headers.get('x-edge-run-id'));
    const counted = await tokens();
    assert.deepEqual([counted[0] - before[0], counted[1] - before[1]], [made.data.usage?.input_tokens, made.data.usage?.output_tokens], 'the response made is counted');
    // Each answer repeats the stored response's usage; no token was generated for it.
    for (const call of [() => client.responses.retrieve(made.data.id).withResponse(), () => client.responses.cancel(made.data.id).withResponse()]) {
      const { data, response } = await call();
      assert.equal(data.usage?.output_tokens, made.data.usage?.output_tokens);
      const runId = response.headers.get('x-edge-run-id');
      await finished(runId);
      assert.equal(stack.edge.runs.get(runId ?? '')?.tokens, null, 'the run reports no usage of its own');
    }
    assert.deepEqual(await tokens(), counted, 'edge_stream_tokens_total unchanged');
  });

  test('a follow-up sent the moment its response arrives, on another connection, finds the response (every worker knows it)', async () => {
    // Each call on its own connection: with I/O workers the follow-up usually
    // lands on a worker other than the one that relayed the response, which
    // knows where the response lives only through the pool.
    const dispatchers: Agent[] = [];
    const fresh = (): OpenAI => {
      const dispatcher = new Agent({ connections: 1 });
      dispatchers.push(dispatcher);
      return new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'sk-client-secret', maxRetries: 0, timeout: 15_000, fetchOptions: { dispatcher } });
    };
    const before = testWorkers() > 1 ? (await stack.edge.inspect()).planes.map((p) => p.requests) : [];
    const lost: string[] = [];
    try {
      for (let round = 0; round < FOLLOW_UP_ROUNDS; round++) {
        const first = await fresh().responses.create({ model: ALIAS, input: `round ${round}` });
        const next = await fresh()
          .responses.create({ model: ALIAS, input: 'and then', previous_response_id: first.id })
          .catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
        if (next instanceof Error) lost.push(`${first.id}: ${next.message}`);
        else assert.equal(next.previous_response_id, first.id);
      }
    } finally {
      await Promise.all(dispatchers.map((d) => d.close()));
    }
    assert.deepEqual(lost, [], `follow-ups refused, of ${FOLLOW_UP_ROUNDS}`);
    if (testWorkers() > 1) {
      const after = (await stack.edge.inspect()).planes.map((p, i) => p.requests - (before[i] ?? 0));
      assert.ok(after.filter((n) => n > 0).length > 1, `the calls reached more than one worker: ${after.join(', ')}`);
    }
  });

  test('an unknown previous_response_id is refused at the edge as OpenAI refuses it (400 previous_response_not_found), never sent to a provider that lacks it', async () => {
    const before = hits(stack, '/v1/responses');
    await assert.rejects(openai(stack).responses.create({ model: ALIAS, input: 'x', previous_response_id: 'resp_never_seen' }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal((err.error as { code?: string; param?: string }).code, 'previous_response_not_found');
      assert.match(err.message, /Previous response with id "resp_never_seen" not found/);
      assert.equal((err.error as { param?: string }).param, 'previous_response_id');
      return true;
    });
    assert.deepEqual(hits(stack, '/v1/responses'), before);
  });

  test('a follow-up under a model its response\'s provider does not serve is a 400 at once, not a 409 the SDK retries', async () => {
    await waitUntil(() => inFlight(stack.edge) === 0, 'earlier leases released');
    const hold = await holdSlot(stack, 600);
    assert.equal(hold.provider, 'p-a');
    const { data: first, response: raw } = await openai(stack).responses.create({ model: ALIAS, input: 'made on p-b' }).withResponse();
    assert.equal(raw.headers.get('x-edge-provider'), 'p-b');
    await hold.done;
    const before = hits(stack, '/v1/responses');
    // SOLO is served by p-a alone: no wait makes p-b serve it.
    await assert.rejects(openai(stack).responses.create({ model: SOLO, input: 'continue', previous_response_id: first.id }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal((err.error as { code?: string }).code, 'previous_response_model_mismatch');
      assert.match(err.message, /stored on provider "p-b", which does not serve model "solo"/);
      return true;
    });
    assert.deepEqual(hits(stack, '/v1/responses'), before, 'nothing was sent, nor retried');
  });

  test('models.list and models.retrieve answer an Anthropic client in its own shape, paged as its SDK pages; an OpenAI client keeps its', async () => {
    const client = anthropic(stack);
    const firstPage = await client.models.list({ limit: 1 });
    assert.deepEqual(firstPage.data.map((m) => m.id), [ALIAS]);
    assert.equal(firstPage.data[0].type, 'model');
    assert.equal(firstPage.data[0].display_name, ALIAS);
    assert.ok(!Number.isNaN(Date.parse(firstPage.data[0].created_at)), firstPage.data[0].created_at);
    assert.equal(firstPage.has_more, true);
    const all: string[] = [];
    for await (const model of client.models.list({ limit: 1 })) all.push(model.id);
    assert.deepEqual(all, [ALIAS, SOLO], 'the auto-pager walked every page by after_id');
    const back = await client.models.list({ before_id: SOLO, limit: 5 });
    assert.deepEqual(back.data.map((m) => m.id), [ALIAS]);
    const one = await client.models.retrieve(SOLO);
    assert.equal(one.id, SOLO);
    assert.equal(one.type, 'model');
    await assert.rejects(client.models.retrieve('no-such-model'), (err: unknown) => {
      assert.ok(err instanceof Anthropic.NotFoundError, String(err));
      assert.equal((err.error as { type?: string }).type, 'error');
      return true;
    });
    await assert.rejects(client.models.list({ limit: 0 }), (err: unknown) => err instanceof Anthropic.BadRequestError);
    const unknownBefore = await fetch(`${stack.edge.url}/v1/models?after_id=${ALIAS}&before_id=nope`, { headers: { 'anthropic-version': '2023-06-01' } });
    assert.match(((await unknownBefore.json()) as { error: { message: string } }).error.message, /no model "nope"/, 'the id at fault is named');
    const wrongMethod = await fetch(`${stack.edge.url}/v1/models`, { method: 'POST', headers: { 'anthropic-version': '2023-06-01' } });
    assert.equal(wrongMethod.status, 405);
    assert.equal(((await wrongMethod.json()) as { type?: string }).type, 'error', 'a 405 in Anthropic\'s format');
    const openaiList = await openai(stack).models.list();
    assert.deepEqual(openaiList.data.map((m) => [m.id, m.object]), [[ALIAS, 'model'], [SOLO, 'model']]);
  });

  test('an unknown model is an Anthropic-format 404 not_found_error', async () => {
    await assert.rejects(anthropic(stack).messages.create({ model: 'no-such-model', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
      assert.ok(err instanceof Anthropic.NotFoundError, String(err));
      assert.equal(err.status, 404);
      const body = err.error as { type?: string; error?: { type?: string; message?: string } };
      assert.equal(body.type, 'error');
      assert.equal(body.error?.type, 'not_found_error');
      assert.match(body.error?.message ?? '', /no-such-model/);
      return true;
    });
  });

  test('an Anthropic SDK call the edge does not serve (Files, Skills, Message Batches) is a 404 in Anthropic format; an OpenAI client\'s stays OpenAI\'s', async () => {
    const batch = { requests: [{ custom_id: 'a', params: { model: 'llama3', max_tokens: 8, messages: [{ role: 'user' as const, content: 'hi' }] } }] };
    for (const call of [() => anthropic(stack).beta.files.list(), () => anthropic(stack).beta.skills.list(), () => anthropic(stack).messages.batches.create(batch)]) {
      await assert.rejects(call(), (err: unknown) => {
        assert.ok(err instanceof Anthropic.NotFoundError, String(err));
        const body = err.error as { type?: string; error?: { type?: string; message?: string } };
        assert.equal(body.type, 'error', JSON.stringify(body));
        assert.equal(body.error?.type, 'not_found_error');
        assert.match(body.error?.message ?? '', /unknown route/);
        return true;
      });
    }
    const openai = await fetch(`${stack.edge.url}/v1/files`);
    assert.equal(openai.status, 404);
    assert.equal(((await openai.json()) as { error: { code: string } }).error.code, 'unknown_url');
  });

  test('a full queue is an Anthropic-format 429 rate_limit_error with Retry-After', async () => {
    await waitUntil(() => inFlight(stack.edge) === 0, 'earlier leases released');
    const hold = await holdSlot(stack, 500, SOLO);
    try {
      await assert.rejects(anthropic(stack).messages.create({ model: SOLO, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
        assert.ok(err instanceof Anthropic.RateLimitError, String(err));
        const body = err.error as { type?: string; error?: { type?: string; message?: string } };
        assert.equal(body.type, 'error');
        assert.equal(body.error?.type, 'rate_limit_error');
        assert.match(body.error?.message ?? '', /queue_full/);
        assert.ok(Number(err.headers?.get('retry-after')) >= 1);
        assert.match(err.requestID ?? '', /^run-/, 'the run id is the request id the SDK reads');
        return true;
      });
    } finally {
      await hold.done;
    }
  });

  test('a provider that does not serve /v1/messages is never chosen for it; capacity is one budget across APIs', async () => {
    const before = hits(stack, '/v1/messages');
    // p-a and p-b are both busy with chat: Messages requests must wait, although p-c is free.
    await waitUntil(() => inFlight(stack.edge) === 0, 'earlier leases released');
    const holdA = await holdSlot(stack, 400);
    const holdB = await holdSlot(stack, 400);
    assert.deepEqual([holdA.provider, holdB.provider].sort(), ['p-a', 'p-b']);
    const started = performance.now();
    const client = anthropic(stack);
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => client.messages.create({ model: ALIAS, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).withResponse()),
    );
    await Promise.all([holdA.done, holdB.done]);
    const providers = answers.map((a) => a.response.headers.get('x-edge-provider'));
    assert.ok(providers.every((p) => p === 'p-a' || p === 'p-b'), providers.join(','));
    assert.ok(performance.now() - started >= 300, 'they waited for a chat slot to free: capacity is shared');
    assert.ok(Number(answers[0].response.headers.get('x-edge-queue-ms')) > 100);
    const after = hits(stack, '/v1/messages');
    assert.equal(after['p-c'], before['p-c']);
    assert.equal(after['p-a'] + after['p-b'] - before['p-a'] - before['p-b'], 4);
    // Meanwhile chat still uses p-c.
    const chat = await openai(stack).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] });
    assert.match(chat.model, /^served-/);
  });

  test('an error after the stream began arrives in each API\'s own stream events', async () => {
    await waitUntil(() => inFlight(stack.edge) === 0, 'earlier leases released');
    // The provider resets the connection half-way through: headers and some events are already out.
    const failing = { headers: { 'x-mock-fail': 'reset-mid-stream', 'x-mock-tokens': '8' } };
    const stream = anthropic(stack).messages.stream({ model: ALIAS, max_tokens: 64, messages: [{ role: 'user', content: 'x' }] }, failing);
    const texts: string[] = [];
    stream.on('text', (t) => texts.push(t));
    await assert.rejects(stream.finalMessage(), (err: unknown) => {
      assert.ok(err instanceof Anthropic.APIError, String(err));
      const body = err.error as { type?: string; error?: { type?: string; message?: string } };
      assert.equal(body.type, 'error', 'an Anthropic `event: error`');
      assert.equal(body.error?.type, 'api_error');
      assert.match(body.error?.message ?? '', /upstream_reset/);
      return true;
    });
    assert.ok(texts.length > 0, 'the stream had begun');

    const responses = await openai(stack).responses.create({ model: ALIAS, input: 'x', stream: true }, failing);
    const events: { type: string; sequence_number?: number; response?: { id?: string; status?: string; error?: { code?: string } } }[] = [];
    for await (const event of responses) events.push(event as (typeof events)[number]);
    const types = events.map((e) => e.type);
    // The edge's error and response.failed number on from the provider's events, as every Responses event is numbered.
    assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i), `sequence numbers: ${events.map((e) => `${e.type}#${String(e.sequence_number)}`).join(',')}`);
    assert.equal(types[0], 'response.created');
    assert.ok(types.includes('response.output_text.delta'));
    assert.ok(types.includes('error'), types.join(','));
    const failed = events.at(-1);
    assert.equal(failed?.type, 'response.failed', 'a terminal Responses event');
    assert.equal(failed?.response?.status, 'failed');
    assert.equal(failed?.response?.id, (events[0] as { response?: { id?: string } }).response?.id, 'names the response that failed');

    // A Response object has an output list: the SDK's stream helper copies it from response.failed (a replay
    // with starting_after skips the error event and meets response.failed alone).
    assert.deepEqual((failed?.response as { output?: unknown[] }).output, []);
    // The stream helper raises the error event as the API's own error.
    const helper = openai(stack).responses.stream({ model: ALIAS, input: 'x' }, failing);
    await assert.rejects(helper.finalResponse(), (err: unknown) => {
      assert.equal((err as { code?: string }).code, 'upstream_reset', String(err));
      return true;
    });
  });

  test('responses.compact and responses.inputTokens.count are proxied like any Responses call (the mock serves neither: its own refusal)', async () => {
    await waitUntil(() => inFlight(stack.edge) === 0, 'earlier leases released');
    const client = openai(stack);
    const total = (path: string): number => Object.values(hits(stack, path)).reduce((a, b) => a + b, 0);
    for (const [path, call] of [
      ['/v1/responses/input_tokens', () => client.responses.inputTokens.count({ model: ALIAS, input: 'count me' })],
      ['/v1/responses/compact', () => client.responses.compact({ model: ALIAS, input: 'compact me' })],
    ] as const) {
      const before = total(path);
      await assert.rejects(call(), (err: unknown) => {
        assert.ok(err instanceof OpenAI.APIError, String(err));
        // The mock's words (it reads the path as a stored response id), relayed: not the edge's 405.
        assert.match(String(err.message), /Method POST not allowed on \/v1\/responses\/|Unknown request URL/, String(err));
        assert.ok(err.headers?.get('x-edge-provider'), 'relayed by the edge');
        return true;
      });
      assert.equal(total(path), before + 1, 'the provider got the request');
    }
  });

  test('when the provider that stored a response is gone, a follow-up is a clear 409, never served elsewhere', async () => {
    await waitUntil(() => inFlight(stack.edge) === 0, 'earlier leases released');
    const client = openai(stack);
    const first = await client.responses.create({ model: ALIAS, input: 'remember me' });
    await stack.agent.stop();
    await waitUntil(() => stack.edge.driver.status().nodes.every((n) => !n.connected), 'the node to be gone');
    const before = hits(stack, '/v1/responses');
    for (const attempt of [
      () => client.responses.create({ model: ALIAS, input: 'again', previous_response_id: first.id }),
      () => client.responses.retrieve(first.id),
    ]) {
      await assert.rejects(attempt(), (err: unknown) => {
        assert.ok(err instanceof OpenAI.ConflictError, String(err));
        assert.equal((err.error as { code?: string }).code, 'response_provider_unavailable');
        assert.match((err.error as { message?: string }).message ?? '', /not sent elsewhere/);
        return true;
      });
    }
    assert.deepEqual(hits(stack, '/v1/responses'), before);
  });

  test('a model none of whose providers serve the API is refused at once with a clear 400', async () => {
    const config = parseEdgeConfig(
      {
        listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
        workers: { count: testWorkers() },
        nodes: [{ id: 'n', token: 't', providers: [{ id: 'compat', type: 'openai_compat' }] }],
        models: [{ alias: 'chat-only', queue_timeout_ms: 30_000, providers: { compat: 'x' } }],
      },
      'test',
    );
    const edge = await startEdge(config, { logger: silentLogger() });
    try {
      const started = performance.now();
      await assert.rejects(new Anthropic({ baseURL: edge.url, apiKey: 'k', maxRetries: 0 }).messages.create({ model: 'chat-only', max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }), (err: unknown) => {
        assert.ok(err instanceof Anthropic.BadRequestError, String(err));
        const body = err.error as { error?: { type?: string; message?: string } };
        assert.equal(body.error?.type, 'invalid_request_error');
        assert.match(body.error?.message ?? '', /serves \/v1\/messages/);
        return true;
      });
      await assert.rejects(new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'k', maxRetries: 0 }).responses.create({ model: 'chat-only', input: 'x' }), (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal((err.error as { code?: string }).code, 'api_not_served');
        return true;
      });
      assert.ok(performance.now() - started < 2_000, 'refused at once, not after the queue timeout');
    } finally {
      await edge.close();
    }
  });
});
