// A Messages stream the provider ended before message_stop (a close-delimited
// body of a provider that died mid-answer ends cleanly at the node) is a cut
// answer: the client gets Anthropic's error event, which its SDK raises,
// never a clean end it would take for the whole answer. A provider's own
// `event: error` ends its stream as it is, without a second error after it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { startProvidersStack, startScriptedProvider, type ProvidersStack, type ScriptedProvider } from '../helpers/stack.js';

const ALIAS = 'claude-ish';
const event = (name: string, data: unknown): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...(data as object) })}\n\n`;
const OPENING =
  event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'served-p', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 7, output_tokens: 1 } } }) +
  event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hel' } });
const ENDINGS: Record<string, string> = {
  whole: event('content_block_stop', { index: 0 }) + event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }) + event('message_stop', {}),
  cut: '',
  error: event('error', { error: { type: 'overloaded_error', message: 'Overloaded' } }),
  // The SSE spec lets a field's value follow its colon without the space.
  errorTight: event('error', { error: { type: 'overloaded_error', message: 'Overloaded' } }).replace('event: ', 'event:'),
};

const DONE = 'data: [DONE]\n\n';
/** Ends the held answer of an `x-done: later` request: its `data: [DONE]` after the rest reached the client. */
let sendDone: (() => void) | undefined;
/** Resets the provider's socket of an `x-trailer: ping-reset` answer, after its ping reached the client. */
let resetProvider: (() => void) | undefined;

let provider: ScriptedProvider;
let stack: ProvidersStack;

before(async () => {
  // Each answer ends cleanly (the chunked body's last chunk), after the ending its x-ending header names.
  provider = await startScriptedProvider((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // vLLM's /v1/messages writes the chat API's `data: [DONE]` after its last event, whole or failed.
    if (req.headers['x-done'] === 'later') {
      res.write(OPENING + ENDINGS[req.headers['x-ending'] as string]);
      if (req.headers['x-trailer'] === 'ping-reset') {
        sendDone = () => res.write(event('ping', {}));
        resetProvider = () => res.socket?.resetAndDestroy();
      } else sendDone = () => res.end(req.headers['x-trailer'] === 'ping' ? `${event('ping', {})}: still here\n\n` : DONE);
    } else res.end(OPENING + ENDINGS[req.headers['x-ending'] as string] + (req.headers['x-done'] === 'yes' ? DONE : ''));
  });
  stack = await startProvidersStack(ALIAS, { p: provider.url }, {}, { p: ['messages'] });
});

after(async () => {
  await stack.close();
  await provider.close();
});

function streamText(ending: string, done = 'no'): Promise<string> {
  return fetch(`${stack.edge.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-ending': ending, 'x-done': done },
    body: JSON.stringify({ model: ALIAS, max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
  }).then((res) => {
    assert.equal(res.status, 200);
    return res.text();
  });
}

test('a Messages stream ended before message_stop gets an Anthropic error event, which the SDK raises', async () => {
  const text = await streamText('cut');
  assert.ok(text.startsWith(OPENING), 'the provider\'s events are relayed as they are');
  const last = text.slice(OPENING.length);
  assert.match(last, /^event: error\ndata: /, `an error event after the provider's last one: ${JSON.stringify(last)}`);
  const body = JSON.parse(last.slice(last.indexOf('data: ') + 6)) as { type: string; error: { type: string; message: string } };
  assert.equal(body.type, 'error');
  assert.equal(body.error.type, 'api_error');

  const client = new Anthropic({ baseURL: stack.edge.url, apiKey: 'k', maxRetries: 0, timeout: 10_000 });
  const stream = await client.messages.create({ model: ALIAS, max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { headers: { 'x-ending': 'cut' } });
  const seen: string[] = [];
  await assert.rejects(
    (async () => {
      for await (const e of stream) seen.push(e.type);
    })(),
    (err: unknown) => err instanceof Anthropic.APIError && /upstream_reset/.test(err.message),
  );
  assert.deepEqual(seen, ['message_start', 'content_block_start', 'content_block_delta']);
});

test('a whole Messages stream, and one the provider ended with its own error event, are relayed as they are', async () => {
  assert.equal(await streamText('whole'), OPENING + ENDINGS.whole);
  assert.equal(await streamText('error'), OPENING + ENDINGS.error, 'no second error after the provider\'s');
  assert.equal(await streamText('errorTight'), OPENING + ENDINGS.errorTight, 'nor after its `event:error` without the space');
});

test('a stream that ends with data: [DONE] after message_stop or after the provider\'s error (vLLM) is relayed as it is', async () => {
  assert.equal(await streamText('whole', 'yes'), OPENING + ENDINGS.whole + DONE);
  assert.equal(await streamText('error', 'yes'), OPENING + ENDINGS.error + DONE, 'no error of the edge\'s after the provider\'s');
  // [DONE] in a chunk of its own, after message_stop reached the client.
  const client = new Anthropic({ baseURL: stack.edge.url, apiKey: 'k', maxRetries: 0, timeout: 10_000 });
  const stream = await client.messages.create({ model: ALIAS, max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { headers: { 'x-ending': 'whole', 'x-done': 'later' } });
  const seen: string[] = [];
  for await (const e of stream) {
    seen.push(e.type);
    if (e.type === 'message_stop') sendDone?.();
  }
  assert.deepEqual(seen, ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
});

test('a ping or a comment after message_stop does not make a whole stream look cut', async () => {
  const res = await fetch(`${stack.edge.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-ending': 'whole', 'x-done': 'later', 'x-trailer': 'ping' },
    body: JSON.stringify({ model: ALIAS, max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  let trailed = false;
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    text += decoder.decode(r.value, { stream: true });
    // The trailer goes out once message_stop reached the client: a chunk of its own.
    if (!trailed && text.includes('message_stop')) {
      trailed = true;
      sendDone?.();
    }
  }
  assert.equal(text, `${OPENING}${ENDINGS.whole}${event('ping', {})}: still here\n\n`, 'relayed as it is, no error after it');
});

test('a provider reset after message_stop and a ping adds no error: the client has its whole answer', async () => {
  const res = await fetch(`${stack.edge.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-ending': 'whole', 'x-done': 'later', 'x-trailer': 'ping-reset' },
    body: JSON.stringify({ model: ALIAS, max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  let trailed = false;
  let reset = false;
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    text += decoder.decode(r.value, { stream: true });
    if (!trailed && text.includes('message_stop')) {
      trailed = true;
      sendDone?.();
    }
    // The ping reached the client: now the provider's socket dies, before its body's last chunk.
    if (!reset && text.includes('"type":"ping"')) {
      reset = true;
      resetProvider?.();
    }
  }
  assert.ok(reset, 'the ping was relayed');
  assert.equal(text, `${OPENING}${ENDINGS.whole}${event('ping', {})}`, 'the stream ends as the provider left it, no error event after it');
});
