// A Responses stream the provider ended before its terminal event
// (response.completed, .failed or .incomplete), cleanly (a chunked body's last
// chunk, or a close-delimited body of a provider that died mid-answer), is a
// cut answer: the client gets the edge's error and response.failed, which the
// SDK's stream helper raises, never a clean end it would take for the whole
// answer. A provider's own `error` event ends its stream as it is, without a
// second error after it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, startScriptedProvider, startStack, type ScriptedProvider, type Stack } from '../helpers/stack.js';

const event = (name: string, data: object): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
const RESPONSE = { id: 'resp_1', object: 'response', created_at: 1, model: 'served', status: 'in_progress', output: [] as unknown[] };
const ITEM = { id: 'msg_1', type: 'message', status: 'in_progress', role: 'assistant', content: [] };
const OPENING =
  event('response.created', { sequence_number: 0, response: RESPONSE }) +
  event('response.in_progress', { sequence_number: 1, response: RESPONSE }) +
  event('response.output_item.added', { sequence_number: 2, output_index: 0, item: ITEM }) +
  event('response.content_part.added', { sequence_number: 3, item_id: 'msg_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }) +
  event('response.output_text.delta', { sequence_number: 4, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hel' });
const DONE_ITEM = { ...ITEM, status: 'completed', content: [{ type: 'output_text', text: 'Hel', annotations: [] }] };
const PROVIDER_ERROR = { type: 'error', code: 'server_error', message: 'the model crashed', param: null, sequence_number: 5 };
const ENDINGS: Record<string, string> = {
  whole:
    event('response.output_text.done', { sequence_number: 5, item_id: 'msg_1', output_index: 0, content_index: 0, text: 'Hel' }) +
    event('response.output_item.done', { sequence_number: 6, output_index: 0, item: DONE_ITEM }) +
    event('response.completed', { sequence_number: 7, response: { ...RESPONSE, status: 'completed', output: [DONE_ITEM] } }),
  incomplete: event('response.incomplete', { sequence_number: 5, response: { ...RESPONSE, status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } } }),
  cut: '',
  error: event('error', PROVIDER_ERROR),
  // The same error event as a data line alone (no `event:` line).
  'data-error': `data: ${JSON.stringify(PROVIDER_ERROR)}\n\n`,
};

let provider: ScriptedProvider;
let stack: Stack;

before(async () => {
  // Each answer ends cleanly after the ending its x-ending header names: a chunked body's last chunk, or
  // (x-close) a close-delimited body the provider ends by closing the connection.
  provider = await startScriptedProvider((req, res) => {
    // x-ending: comment: a comment (a provider's keepalive) and no event before the end.
    const body = req.headers['x-ending'] === 'comment' ? ': ping\n\n' : OPENING + ENDINGS[req.headers['x-ending'] as string];
    if (req.headers['x-close'] === undefined) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(body);
      return;
    }
    res.socket?.end(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n${body}`);
  });
  stack = await startStack({ providerType: 'vllm', providerUrl: provider.url });
});

after(async () => {
  await stack.close();
  await provider.close();
});

function streamText(headers: Record<string, string>): Promise<string> {
  return fetch(`${stack.baseURL}/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: ALIAS, stream: true, input: 'Hi' }),
  }).then((res) => {
    assert.equal(res.status, 200);
    return res.text();
  });
}

for (const [framing, close] of [
  ['chunked', {}],
  ['close-delimited', { 'x-close': '1' }],
] as const) {
  test(`a ${framing} Responses stream ended before its terminal event gets the edge's error and response.failed, which the SDK raises`, async () => {
    const headers = { 'x-ending': 'cut', ...close };
    const text = await streamText(headers);
    assert.ok(text.startsWith(OPENING), "the provider's events are relayed as they are");
    const last = text.slice(OPENING.length);
    assert.match(last, /^event: error\ndata: .*\n\nevent: response\.failed\ndata: .*\n\n$/, `an error after the provider's last event: ${JSON.stringify(last)}`);
    const [error, failed] = last
      .trim()
      .split('\n\n')
      .map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)) as { sequence_number: number; code?: string; response?: { id: string; status: string } });
    assert.equal(error.code, 'upstream_reset');
    assert.equal(error.sequence_number, 5, "numbered on from the provider's events");
    assert.equal(failed.sequence_number, 6);
    assert.equal(failed.response?.status, 'failed');
    assert.equal(failed.response?.id, 'resp_1');

    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'k', maxRetries: 0, timeout: 10_000 });
    const stream = await client.responses.create({ model: ALIAS, input: 'Hi', stream: true }, { headers });
    const seen: string[] = [];
    for await (const e of stream) seen.push(e.type);
    assert.deepEqual(seen.slice(-2), ['error', 'response.failed'], seen.join(','));
    await assert.rejects(client.responses.stream({ model: ALIAS, input: 'Hi' }, { headers }).finalResponse(), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'upstream_reset', String(err));
      return true;
    });
  });
}

test('a Responses stream cut after only a comment of the provider\'s opens with response.created, so the SDK raises the edge\'s error', async () => {
  const headers = { 'x-ending': 'comment' };
  const text = await streamText(headers);
  assert.ok(text.startsWith(': ping\n\n'), "the provider's comment is relayed as it is");
  const names = [...text.matchAll(/^event: (.*)$/gm)].map((m) => m[1]);
  assert.deepEqual(names, ['response.created', 'error', 'response.failed'], `a comment is no event: the stream is still opened (${JSON.stringify(text)})`);
  const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'k', maxRetries: 0, timeout: 10_000 });
  await assert.rejects(client.responses.stream({ model: ALIAS, input: 'Hi' }, { headers }).finalResponse(), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'upstream_reset', String(err));
    return true;
  });
});

test('a whole Responses stream, and ones the provider ended with its own incomplete or error event, are relayed as they are', async () => {
  for (const close of [{}, { 'x-close': '1' }] as Record<string, string>[]) {
    for (const ending of ['whole', 'incomplete', 'error', 'data-error']) {
      assert.equal(await streamText({ 'x-ending': ending, ...close }), OPENING + ENDINGS[ending], `${ending} ${JSON.stringify(close)}: no second error after the provider's`);
    }
  }
});
