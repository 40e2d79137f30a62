// Tool calls and multi-byte text through the edge with the official SDKs,
// streamed and whole: the mock answers a request that offers tools with a
// call (its arguments: CJK, emoji and `usage` lures), in each API's format.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import OpenAI from 'openai';
import { MOCK_TOOL_ARGUMENTS } from '../../src/mock/tool-calls.js';
import { completionText } from '../../src/mock/responses.js';
import { ALIAS, PROVIDER_ID, SERVED, startStack, waitUntil, type Stack } from '../helpers/stack.js';

const WIDE = 'wide';
/** A served name of multi-byte characters: every token of its answers is mostly 3- and 4-byte UTF-8. */
const WIDE_SERVED = '東京🌸語-模型😀';
const EXPECTED_ARGS: unknown = JSON.parse(MOCK_TOOL_ARGUMENTS);

const weatherTool: OpenAI.ChatCompletionTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};

describe('tool calls and multi-byte text through the edge', () => {
  let stack: Stack;
  let openai: OpenAI;
  let claude: Anthropic;
  let n = 0;
  before(async () => {
    stack = await startStack({
      providerType: 'vllm',
      mock: { ttftMs: 0, tokens: 7, intervalMs: 1 },
      configure: (raw) => {
        (raw.models as unknown[]).push({ alias: WIDE, providers: { [PROVIDER_ID]: WIDE_SERVED } });
      },
    });
    openai = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 15_000 });
    claude = new Anthropic({ baseURL: stack.edge.url, apiKey: 'unused', maxRetries: 0, timeout: 15_000 });
  });
  after(async () => {
    await stack.close();
  });

  /** A fresh x-request-id, to find the request's run and the mock's record. */
  function rid(): string {
    return `tools-${process.pid}-${++n}`;
  }

  /** The tokens the edge counted for the run of request `id` equal the usage the mock sent. */
  async function assertTokens(id: string): Promise<void> {
    const record = stack.mock.requestLog.find((r) => r.requestId === id);
    assert.ok(record?.body !== undefined, 'the mock saw the request');
    const expected = { prompt: Math.max(1, Math.ceil(record.body.length / 4)), completion: record.tokens };
    let run: ReturnType<Stack['edge']['runs']['get']>;
    await waitUntil(() => (run = stack.edge.runs.list({ limit: 1000 }).find((r) => r.requestId === id))?.state === 'finished', `the run of ${id} to finish`);
    assert.deepEqual(run?.tokens, expected, JSON.stringify(run));
  }

  test('openai chat stream: finalChatCompletion has the tool call, its arguments exact, and the tokens are the provider usage', async () => {
    const id = rid();
    const stream = openai.chat.completions.stream(
      { model: ALIAS, messages: [{ role: 'user', content: 'weather in Tokyo?' }], tools: [weatherTool], stream_options: { include_usage: true } },
      { headers: { 'x-request-id': id } },
    );
    const final = await stream.finalChatCompletion();
    const call = final.choices[0].message.tool_calls?.[0];
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.equal(call?.type, 'function');
    assert.equal(call.type === 'function' ? call.function.name : '', 'get_weather');
    assert.equal(call.type === 'function' ? call.function.arguments : '', MOCK_TOOL_ARGUMENTS);
    await assertTokens(id);
  });

  test('openai chat whole: the tool call arguments parse to what the mock sent; tokens counted', async () => {
    const id = rid();
    const completion = await openai.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'weather?' }], tools: [weatherTool] }, { headers: { 'x-request-id': id } });
    const call = completion.choices[0].message.tool_calls?.[0];
    assert.deepEqual(call?.type === 'function' ? JSON.parse(call.function.arguments) : undefined, EXPECTED_ARGS);
    await assertTokens(id);
  });

  test('openai runTools: the tool runs with the arguments and the loop ends with the answer', async () => {
    const seen: unknown[] = [];
    const runner = openai.chat.completions.runTools({
      model: ALIAS,
      stream: true,
      messages: [{ role: 'user', content: 'weather in Tokyo?' }],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'weather',
            parameters: { type: 'object', properties: { city: { type: 'string' } } },
            parse: (text: string): unknown => JSON.parse(text),
            function: (args: unknown) => {
              seen.push(args);
              return '晴れ ☀️';
            },
          },
        },
      ],
    });
    const content = await runner.finalContent();
    assert.deepEqual(seen, [EXPECTED_ARGS]);
    assert.equal(content, completionText(SERVED, 7));
    const tool = JSON.parse(stack.mock.lastRequest('/v1/chat/completions')?.body?.toString('utf8') ?? '{}') as { messages: { role: string; content: unknown }[] };
    assert.deepEqual(tool.messages.at(-1), { role: 'tool', tool_call_id: 'call_chatcmpl-mock-' + (stack.mock.requestLog.at(-2)?.id ?? -1), content: '晴れ ☀️' });
  });

  test('anthropic stream: finalMessage has the tool_use block with its input; a tool_result turn gets the answer', async () => {
    const id = rid();
    const tools: Anthropic.Tool[] = [{ name: 'get_weather', description: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'weather in Tokyo?' }];
    const stream = claude.messages.stream({ model: ALIAS, max_tokens: 256, messages, tools }, { headers: { 'x-request-id': id } });
    const message = await stream.finalMessage();
    assert.equal(message.stop_reason, 'tool_use');
    const block = message.content[0];
    assert.equal(block.type, 'tool_use');
    assert.deepEqual(block.type === 'tool_use' ? block.input : undefined, EXPECTED_ARGS);
    await assertTokens(id);

    const id2 = rid();
    const next = await claude.messages
      .stream(
        {
          model: ALIAS,
          max_tokens: 256,
          tools,
          messages: [...messages, { role: 'assistant', content: message.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: block.type === 'tool_use' ? block.id : '', content: '晴れ ☀️' }] }],
        },
        { headers: { 'x-request-id': id2 } },
      )
      .finalMessage();
    assert.equal(next.stop_reason, 'end_turn');
    assert.deepEqual(next.content.map((b) => (b.type === 'text' ? b.text : b.type)), [completionText(SERVED, 7)]);
    await assertTokens(id2);
  });

  test('anthropic whole: the tool_use input is exact and the tokens are the top-level usage, not the input\'s "usage"', async () => {
    const id = rid();
    const message = await claude.messages.create(
      { model: ALIAS, max_tokens: 256, messages: [{ role: 'user', content: 'weather?' }], tools: [{ name: 'get_weather', input_schema: { type: 'object' } }] },
      { headers: { 'x-request-id': id } },
    );
    const block = message.content[0];
    assert.deepEqual(block.type === 'tool_use' ? block.input : undefined, EXPECTED_ARGS);
    await assertTokens(id);
  });

  test('anthropic toolRunner (streamed, /v1/messages?beta=true): the tool runs with the input and the loop ends with the answer', async () => {
    const seen: unknown[] = [];
    const runner = claude.beta.messages.toolRunner({
      model: ALIAS,
      max_tokens: 256,
      stream: true,
      messages: [{ role: 'user', content: 'weather in Tokyo?' }],
      tools: [
        betaTool({
          name: 'get_weather',
          description: 'weather',
          inputSchema: { type: 'object', properties: { city: { type: 'string' } } },
          run: (input) => {
            seen.push(input);
            return '晴れ ☀️';
          },
        }),
      ],
    });
    const final = await runner.runUntilDone();
    assert.deepEqual(seen, [EXPECTED_ARGS]);
    assert.deepEqual(final.content.map((b) => (b.type === 'text' ? b.text : b.type)), [completionText(SERVED, 7)]);
  });

  test('responses whole: the function_call item has the arguments; tokens counted', async () => {
    const id = rid();
    const response = await openai.responses.create({ model: ALIAS, input: 'weather?', tools: [{ type: 'function', name: 'get_weather', strict: false, parameters: {} }] }, { headers: { 'x-request-id': id } });
    const item = response.output[0];
    assert.deepEqual(item.type === 'function_call' ? JSON.parse(item.arguments) : undefined, EXPECTED_ARGS);
    await assertTokens(id);
  });

  test('responses stream: the function_call item has the arguments; its output in a next turn gets the answer', async () => {
    const id = rid();
    const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', strict: false, parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
    const deltas: string[] = [];
    const stream = openai.responses.stream({ model: ALIAS, input: 'weather in Tokyo?', tools }, { headers: { 'x-request-id': id } });
    stream.on('response.function_call_arguments.delta', (event) => deltas.push(event.delta));
    const response = await stream.finalResponse();
    const item = response.output[0];
    assert.equal(item.type, 'function_call');
    assert.equal(item.type === 'function_call' ? item.arguments : '', MOCK_TOOL_ARGUMENTS);
    assert.ok(deltas.length > 1, 'the arguments came in pieces');
    assert.equal(deltas.join(''), MOCK_TOOL_ARGUMENTS);
    await assertTokens(id);

    const id2 = rid();
    const next = await openai.responses
      .stream(
        { model: ALIAS, previous_response_id: response.id, tools, input: [{ type: 'function_call_output', call_id: item.type === 'function_call' ? item.call_id : '', output: '晴れ ☀️' }] },
        { headers: { 'x-request-id': id2 } },
      )
      .finalResponse();
    assert.equal(next.output_text, completionText(SERVED, 7));
    await assertTokens(id2);
  });

  test('multi-byte answers cut anywhere by the transport arrive exact: chat, Messages and Responses, streamed and whole', async () => {
    // Long answers: provider reads, frames and window credits cut them at arbitrary bytes, inside characters.
    const tokens = 3000;
    const expected = completionText(WIDE_SERVED, tokens);
    const headers = { 'x-mock-tokens': String(tokens), 'x-mock-interval-ms': '0' };
    const chunks: string[] = [];
    const chat = openai.chat.completions.stream({ model: WIDE, messages: [{ role: 'user', content: 'ünïcödé 🌍' }] }, { headers });
    chat.on('content', (delta) => chunks.push(delta));
    assert.equal((await chat.finalChatCompletion()).choices[0].message.content, expected);
    assert.equal(chunks.join(''), expected);
    assert.equal((await openai.chat.completions.create({ model: WIDE, messages: [{ role: 'user', content: 'x' }] }, { headers })).choices[0].message.content, expected);

    const message = await claude.messages.stream({ model: WIDE, max_tokens: 8192, messages: [{ role: 'user', content: '日本語' }] }, { headers }).finalMessage();
    assert.deepEqual(message.content.map((b) => (b.type === 'text' ? b.text : '')), [expected]);
    const whole = await claude.messages.create({ model: WIDE, max_tokens: 8192, messages: [{ role: 'user', content: '日本語' }] }, { headers });
    assert.deepEqual(whole.content.map((b) => (b.type === 'text' ? b.text : '')), [expected]);

    assert.equal((await openai.responses.stream({ model: WIDE, input: '🌸' }, { headers }).finalResponse()).output_text, expected);
    assert.equal((await openai.responses.create({ model: WIDE, input: '🌸' }, { headers })).output_text, expected);
    assert.ok(!expected.includes('\uFFFD'));
  });

  test('multi-byte tool arguments of a long call arrive exact through each SDK stream', async () => {
    const args = JSON.stringify({ text: '東京都🌸🍣'.repeat(150), note: 'usage' });
    const headers = { 'x-mock-tool-arguments': encodeURIComponent(args), 'x-mock-tokens': '500', 'x-mock-interval-ms': '0' };
    const chat = await openai.chat.completions.stream({ model: ALIAS, messages: [{ role: 'user', content: 'x' }], tools: [weatherTool] }, { headers }).finalChatCompletion();
    const call = chat.choices[0].message.tool_calls?.[0];
    assert.equal(call?.type === 'function' ? call.function.arguments : '', args);
    const message = await claude.messages.stream({ model: ALIAS, max_tokens: 8192, messages: [{ role: 'user', content: 'x' }], tools: [{ name: 't', input_schema: { type: 'object' } }] }, { headers }).finalMessage();
    assert.deepEqual(message.content[0].type === 'tool_use' ? message.content[0].input : undefined, JSON.parse(args));
    const response = await openai.responses.stream({ model: ALIAS, input: 'x', tools: [{ type: 'function', name: 't', strict: false, parameters: {} }] }, { headers }).finalResponse();
    assert.equal(response.output[0].type === 'function_call' ? response.output[0].arguments : '', args);
  });

  test('request bodies with multi-byte text around model, and an escaped "model" key: only the model value is rewritten', async () => {
    for (const [key, value] of [['"model"', '"llama3"'], ['"mod\\u0065l"', '"llama3"'], ['"model"', '"llam\\u0061\\u0033"']]) {
      const body = `{"messages":[{"role":"user","content":"前 🌸 \\ud83c\\udf38 é"}],${key}: ${value} ,"tail":"後 😀 日本語","n":"${'語'.repeat(3000)}"}`;
      const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      assert.equal(res.status, 200, await res.clone().text());
      await res.arrayBuffer();
      const received = stack.mock.lastRequest('/v1/chat/completions')?.body;
      assert.deepEqual(received, Buffer.from(body.replace(`${key}: ${value}`, `${key}: "${SERVED}"`)));
    }
  });
});
