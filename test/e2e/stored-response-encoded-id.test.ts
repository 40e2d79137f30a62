// A stored response's id in its path may come percent-encoded (`%72esp_…` is
// `resp_…`): the provider decodes it, so the edge must read the same id on
// every route (GET, DELETE, cancel, input_items), and forget the one a DELETE
// removed, not the encoded spelling of it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, startStack, type Stack } from '../helpers/stack.js';

/** `id` with its first character percent-encoded, as a client or proxy may send it. */
function encoded(id: string): string {
  return `%${id.charCodeAt(0).toString(16).toUpperCase()}${id.slice(1)}`;
}

describe('stored responses named by a percent-encoded id', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ providerType: 'vllm' });
  });
  after(async () => {
    await stack.close();
  });

  test('GET, cancel, input_items reach its provider; DELETE removes it there and at the edge', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const made = await client.responses.create({ model: ALIAS, input: 'encoded' });
    const path = `${stack.baseURL}/responses/${encoded(made.id)}`;
    const got = await fetch(path);
    assert.equal(got.status, 200);
    assert.equal(((await got.json()) as { id: string }).id, made.id);
    const cancelled = await fetch(`${path}/cancel`, { method: 'POST' });
    assert.equal(cancelled.status, 200);
    await cancelled.arrayBuffer();
    const items = await fetch(`${path}/input_items`);
    assert.equal(items.status, 200);
    await items.arrayBuffer();

    const deleted = await fetch(path, { method: 'DELETE' });
    assert.equal(deleted.status, 200);
    assert.deepEqual(await deleted.json(), { id: made.id, object: 'response.deleted', deleted: true });
    // Gone from the provider: the edge must not keep routing to it (a follow-up would reach a provider that lacks it).
    const sent = stack.mock.stats.requests;
    await assert.rejects(client.responses.retrieve(made.id), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal((err.error as { code?: string }).code, 'response_not_found', 'answered by the edge, which forgot it');
      return true;
    });
    await assert.rejects(client.responses.create({ model: ALIAS, input: 'more', previous_response_id: made.id }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal((err.error as { code?: string }).code, 'previous_response_not_found');
      return true;
    });
    assert.equal(stack.mock.stats.requests, sent, 'neither was sent to the provider');
  });
});
