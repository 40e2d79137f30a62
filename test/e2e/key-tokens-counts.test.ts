// auth.api_keys[].tokens_per_minute and the token-counting calls (Anthropic's
// messages.countTokens; OpenAI's responses.inputTokens.count alike): they generate
// nothing and their answer carries no `usage`, only the count asked for. A
// key that counts its prompts (as agents do before each turn) is not charged
// those prompts: each count gives its reservation back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { inFlight, startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const KEY = 'sk-counts-0123456789abcdef';
const PROMPT = 'x'.repeat(8000);

describe('tokens per minute: counting calls', () => {
  let mock: MockProvider;
  let stack: ProvidersStack;
  before(async () => {
    mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
    stack = await startProvidersStack('m', { 'p-a': mock.url }, {}, { 'p-a': ['chat', 'messages', 'responses'] }, {
      // A minute holds three of these prompts (~2,000 tokens each).
      auth: { api_keys: [{ name: 'counter', key_sha256: sha256Hex(KEY), tokens_per_minute: 6000 }] },
    });
  });
  after(async () => {
    await stack?.close();
    await mock?.close();
  });

  test('counting a prompt (messages.countTokens) spends none of the minute', async () => {
    const anthropic = new Anthropic({ baseURL: stack.edge.url, apiKey: KEY, maxRetries: 0 });
    for (let i = 0; i < 6; i++) {
      const counted = await anthropic.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: PROMPT }] });
      assert.ok(counted.input_tokens > 1000, JSON.stringify(counted));
    }
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
    // Six counts of ~2,000 tokens later, the minute is whole: a turn of that prompt is served.
    const turn = await anthropic.messages.create({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: PROMPT }] });
    assert.ok(turn.usage.input_tokens > 1000);
  });
});
