// A chat stream's `data: [DONE]` may have an event behind it in the same
// chunk: a usage chunk some servers write after it, a keepalive comment. The
// client has the end of its answer with that [DONE]: a provider reset after
// it adds no error of the edge's to the stream.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { startProvidersStack, startScriptedProvider, type ProvidersStack, type ScriptedProvider } from '../helpers/stack.js';

const ALIAS = 'm';
const chunk = (choices: object[], usage?: object): string => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served-p', choices, ...(usage === undefined ? {} : { usage }) })}\n\n`;
const TRAILERS: Record<string, string> = {
  usage: chunk([], { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 }),
  comment: ': bye\n\n',
};
const streamWith = (trailer: string): string =>
  chunk([{ index: 0, delta: { role: 'assistant', content: 'Hello' }, finish_reason: null }]) + chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]) + 'data: [DONE]\n\n' + TRAILERS[trailer];

/** Resets the provider's socket once the client read the whole stream. */
let resetProvider: (() => void) | undefined;
let provider: ScriptedProvider;
let stack: ProvidersStack;

before(async () => {
  provider = await startScriptedProvider((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // One write: [DONE] and the event behind it reach the edge in one chunk.
    res.write(streamWith(req.headers['x-trailer'] as string));
    resetProvider = () => res.socket?.resetAndDestroy();
  });
  stack = await startProvidersStack(ALIAS, { p: provider.url });
});

after(async () => {
  await stack.close();
  await provider.close();
});

for (const trailer of Object.keys(TRAILERS)) {
  test(`a provider reset after [DONE] and a ${trailer} event in the same chunk adds no error to the stream`, async () => {
    const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-trailer': trailer },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
    });
    assert.equal(res.status, 200);
    const expected = streamWith(trailer);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    let reset = false;
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      text += decoder.decode(r.value, { stream: true });
      if (!reset && text.length >= expected.length) {
        reset = true;
        resetProvider?.();
      }
    }
    assert.equal(text, expected, 'the provider\'s bytes, no error event after them');

    // The openai SDK reads the same answer whole.
    const client = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { headers: { 'x-trailer': trailer } });
    let content = '';
    for await (const c of stream) {
      content += c.choices[0]?.delta?.content ?? '';
      if (c.choices[0]?.finish_reason === 'stop') setImmediate(() => resetProvider?.());
    }
    assert.equal(content, 'Hello');
  });
}
