// Model ids as the SDKs send them: an alias may hold a slash, a colon, a
// percent sign, non-ASCII, and be longer than 256 characters (the config
// bounds no alias), so GET /v1/models/{id} takes the rest of the path as the
// id and answers an unknown one of any length 404 model_not_found, as chat
// does, never the 414 of an id that has a bound (a stored response's).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { PROVIDER_ID, startStack, type Stack } from '../helpers/stack.js';

const LONG = `org/${'l'.repeat(300)}:tag`;
const ODD = ['org/model:tag', 'pct%41 ü', LONG];

describe('model ids with odd characters and past 256 characters', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      mock: { ttftMs: 0, tokens: 1, intervalMs: 1 },
      configure: (raw) => {
        for (const [i, alias] of ODD.entries()) (raw.models as unknown[]).push({ alias, providers: { [PROVIDER_ID]: `served-${i}` } });
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('each is listed, retrieved by both SDKs and served; an unknown long id is 404 model_not_found, a long response id 414', async () => {
    const openai = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const claude = new Anthropic({ baseURL: stack.edge.url, apiKey: 'unused', maxRetries: 0 });
    const listed: string[] = [];
    for await (const m of openai.models.list()) listed.push(m.id);
    for (const alias of ODD) {
      assert.ok(listed.includes(alias), alias);
      assert.equal((await openai.models.retrieve(alias)).id, alias);
      assert.equal((await claude.models.retrieve(alias)).id, alias);
      const chat = await openai.chat.completions.create({ model: alias, messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(chat.model, `served-${ODD.indexOf(alias)}`);
    }
    const unknown = await openai.models.retrieve('u'.repeat(300)).catch((e: unknown) => e);
    assert.ok(unknown instanceof OpenAI.NotFoundError, String(unknown));
    assert.equal(unknown.code, 'model_not_found');
    const unknownAnthropic = await claude.models.retrieve('u'.repeat(300)).catch((e: unknown) => e);
    assert.ok(unknownAnthropic instanceof Anthropic.NotFoundError, String(unknownAnthropic));
    const response = await fetch(`${stack.baseURL}/responses/${'r'.repeat(300)}`);
    assert.equal(response.status, 414);
    assert.equal(((await response.json()) as { error: { code: string } }).error.code, 'uri_too_long');
  });
});
