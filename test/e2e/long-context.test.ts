// The long-context class through the edge: a request estimated at or above
// scheduler.long_context_threshold_tokens goes only to a provider whose
// max_context_tokens covers it. When none does, the client is told that in
// the refusal, not that no provider is connected (the provider is up).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ALIAS, startStack, type Stack } from '../helpers/stack.js';

const WINDOW = 2_000;

describe('a prompt longer than every provider\'s context window', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      configure(raw) {
        raw.scheduler = { long_context_threshold_tokens: 1_000 };
        const nodes = raw.nodes as { providers: { max_context_tokens?: number }[] }[];
        nodes[0].providers[0].max_context_tokens = WINDOW;
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

  test('is refused with a message that names the context window, while short prompts are served', async () => {
    const short = await chat('hello '.repeat(100));
    assert.equal(short.status, 200);
    await short.arrayBuffer();
    // Long class (≥ 1,000 estimated tokens) and within the window: served.
    const fits = await chat('hello '.repeat(1_000)); // ~1,500 tokens by bytes / 4
    assert.equal(fits.status, 200);
    await fits.arrayBuffer();
    const res = await chat('hello '.repeat(4_000)); // ~6,000 tokens by bytes / 4
    assert.equal(res.status, 503);
    const body = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'no_provider_available');
    assert.match(body.error.message, /with a context window for about \d+ input tokens \(estimated\)/);
    assert.doesNotMatch(body.error.message, /^no provider for model "llama3" is connected/);
  });
});
