// An answer's `usage` is not always its last field: vLLM puts
// prompt_logprobs, prompt_token_ids and kv_transfer_params after it, tens of
// KiB when a client asks for prompt_logprobs or return_token_ids, and a
// Response (response.completed in a stream) ends with `user` and the
// request's `metadata`. Read only from the body's last 2 KiB, those answers
// counted no tokens: no edge_stream_tokens_total, no tokens in the run
// record, no fair-queuing charge.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { NodeAgent } from '../../src/agent/agent.js';
import { NODE_ID, NODE_TOKEN, startRegisteredAgent, startScriptedProvider, testWorkers, waitFor, type ScriptedProvider } from '../helpers/stack.js';

/** vLLM's ChatCompletionResponse, fields in its order, with prompt_logprobs and prompt_token_ids asked for. */
function vllmAnswer(): string {
  const promptLogprobs = [null, ...Array.from({ length: 400 }, (_, i) => ({ [String(1000 + i)]: { logprob: -1.25, rank: 3, decoded_token: 'tok' } }))];
  return JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'served-p',
    choices: [{ index: 0, message: { role: 'assistant', content: 'hi', tool_calls: [] }, logprobs: null, finish_reason: 'stop', stop_reason: null }],
    service_tier: null,
    system_fingerprint: null,
    usage: { prompt_tokens: 401, total_tokens: 411, completion_tokens: 10, prompt_tokens_details: null },
    prompt_logprobs: promptLogprobs,
    prompt_token_ids: Array.from({ length: 401 }, (_, i) => 1000 + i),
    kv_transfer_params: null,
  });
}

const METADATA = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`trace_${i}`, 'v'.repeat(500)]));

/** A Responses stream as OpenAI sends it: response.completed's response ends with usage, user, metadata. */
function responsesStream(): string[] {
  const response = { id: 'resp_1', object: 'response', created_at: 1, status: 'completed', model: 'served-p', output: [{ type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'hi', annotations: [] }] }], parallel_tool_calls: true, tools: [], top_p: 1, truncation: 'disabled', usage: { input_tokens: 36, input_tokens_details: { cached_tokens: 0 }, output_tokens: 87, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 123 }, user: null, metadata: METADATA };
  const event = (data: { type: string }): string => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;
  return [
    event({ type: 'response.created', sequence_number: 0, response: { ...response, status: 'in_progress', output: [], usage: null } } as { type: string }),
    event({ type: 'response.output_text.delta', sequence_number: 1, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'hi' } as { type: string }),
    event({ type: 'response.completed', sequence_number: 2, response } as { type: string }),
  ];
}

describe("an answer with fields after its usage (vLLM's prompt_logprobs)", () => {
  let provider: ScriptedProvider;
  let edge: RunningEdge;
  let agent: NodeAgent;
  before(async () => {
    const body = vllmAnswer();
    provider = await startScriptedProvider((req, res) => {
      if (req.url === '/v1/responses') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const event of responsesStream()) res.write(event);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    const url = provider.url;
    edge = await startEdge(
      parseEdgeConfig(
        {
          listen: { http: { port: 0 }, grpc: { port: 0 } },
          admin: { host: '127.0.0.1', port: 0 },
          heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
          workers: { count: testWorkers() },
          nodes: [{ id: NODE_ID, token: NODE_TOKEN, providers: [{ id: 'p', type: 'vllm', capacity: 4 }] }],
          models: [{ alias: 'm', providers: { p: 'served-p' } }],
        },
        'test',
      ),
      { logger: silentLogger(), admin: true },
    );
    agent = await startRegisteredAgent({ edge: { address: `127.0.0.1:${edge.grpcPort}` }, node: { id: NODE_ID, token: NODE_TOKEN }, providers: [{ id: 'p', type: 'vllm', base_url: url }], reconnect: { initial_ms: 50, max_ms: 200 } });
  });
  after(async () => {
    await agent?.stop();
    await edge?.close();
    await provider?.close();
  });

  async function finishedRecord(runId: string | null): Promise<{ state?: string; tokens?: unknown }> {
    let record: { state?: string; tokens?: unknown } = {};
    await waitFor(async () => {
      record = (await (await fetch(`${edge.adminUrl}/admin/runs/${runId}`)).json()) as typeof record;
      return record.state === 'finished';
    }, 'the run to finish');
    return record;
  }

  async function tokensMetric(kind: string): Promise<number> {
    const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    const line = metrics.split('\n').find((l) => l.startsWith('edge_stream_tokens_total{') && l.includes(`kind="${kind}"`));
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
  }

  test("vLLM's chat completion with prompt_logprobs: its tokens are counted once, in the run record and the token metric", async () => {
    const [prompt, completion] = [await tokensMetric('prompt'), await tokensMetric('completion')];
    const client = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const { data, response } = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], prompt_logprobs: 1 } as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse();
    assert.equal(data.usage?.prompt_tokens, 401);
    const record = await finishedRecord(response.headers.get('x-edge-run-id'));
    assert.deepEqual(record.tokens, { prompt: 401, completion: 10 }, JSON.stringify(record));
    assert.equal((await tokensMetric('prompt')) - prompt, 401);
    assert.equal((await tokensMetric('completion')) - completion, 10);
  });

  test('a Responses stream whose response.completed ends with a large metadata: its tokens are counted', async () => {
    const [prompt, completion] = [await tokensMetric('prompt'), await tokensMetric('completion')];
    const client = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const { data: stream, response } = await client.responses.create({ model: 'm', input: 'hi', stream: true, metadata: METADATA }).withResponse();
    let usage: OpenAI.Responses.ResponseUsage | undefined;
    for await (const event of stream) if (event.type === 'response.completed') usage = event.response.usage;
    assert.equal(usage?.input_tokens, 36);
    const record = await finishedRecord(response.headers.get('x-edge-run-id'));
    assert.deepEqual(record.tokens, { prompt: 36, completion: 87 }, JSON.stringify(record));
    assert.equal((await tokensMetric('prompt')) - prompt, 36);
    assert.equal((await tokensMetric('completion')) - completion, 87);
  });
});
