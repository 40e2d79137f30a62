// The edge's memory of stored responses (limits.stored_responses ids, least
// recently used first out) holds only responses the provider stored: one made
// with a top-level `"store": false` (every call of a Codex-style client) has
// nothing to continue, and remembering it would push a stored response out,
// so that its follow-up got 400 previous_response_not_found while its
// provider still held it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { Agent } from 'undici';
import { ALIAS, edgeConfigObject, startStack, testWorkers, type Stack } from '../helpers/stack.js';

const BOUND = 3;

describe('stored responses with limits.stored_responses small', () => {
  let stack: Stack;
  let client: OpenAI;
  before(async () => {
    stack = await startStack({ providerType: 'vllm', configure: (raw) => ((raw.limits as Record<string, unknown>).stored_responses = BOUND) });
    client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await stack.close();
  });

  test('store: false responses take no slot: a stored one outlives more of them than the bound', async () => {
    const kept = await client.responses.create({ model: ALIAS, input: 'keep me' });
    const stateless: string[] = [];
    for (let i = 0; i <= BOUND; i++) stateless.push((await client.responses.create({ model: ALIAS, input: `stateless ${i}`, store: false })).id);
    // The same, spelt as other clients may: an escaped key, whitespace around the colon.
    const raw = await fetch(`${stack.baseURL}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"model":${JSON.stringify(ALIAS)},"input":"escaped","st\\u006fre" :\n false}`,
    });
    assert.equal(raw.status, 200);
    stateless.push(((await raw.json()) as { id: string }).id);
    const next = await client.responses.create({ model: ALIAS, input: 'and then', previous_response_id: kept.id });
    assert.equal(next.previous_response_id, kept.id);
    // Not remembered: continuing one is refused at the edge, as a provider that kept nothing refuses it.
    const sent = stack.mock.stats.requests;
    await assert.rejects(client.responses.create({ model: ALIAS, input: 'x', previous_response_id: stateless[0] }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal((err.error as { code?: string }).code, 'previous_response_not_found');
      return true;
    });
    assert.equal(stack.mock.stats.requests, sent);
  });

  test('stored responses (store absent, true, or false only inside another member) fill it: the least recently used goes first', async () => {
    const first = await client.responses.create({ model: ALIAS, input: 'first', store: true });
    const nested = await fetch(`${stack.baseURL}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // Only the top level is the request's own `store` (the mock reads no other member).
      body: JSON.stringify({ model: ALIAS, input: 'nested', text: { format: { type: 'text' }, store: false } }),
    });
    assert.equal(nested.status, 200);
    const nestedId = ((await nested.json()) as { id: string }).id;
    for (let i = 0; i < BOUND - 1; i++) await client.responses.create({ model: ALIAS, input: `more ${i}` });
    // BOUND + 1 stored since `first`: it is out.
    await assert.rejects(client.responses.retrieve(first.id), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal((err.error as { code?: string }).code, 'response_not_found');
      return true;
    });
    assert.equal((await client.responses.retrieve(nestedId)).id, nestedId, 'a store inside another member is not the request\'s');
  });

  test('a response used on one connection is the most recently used on every I/O worker: a follow-up on any other still finds it', async () => {
    // Each call on its own connection: with I/O workers they spread over the workers, and each holds its own LRU.
    const dispatchers: Agent[] = [];
    const fresh = (): OpenAI => {
      const dispatcher = new Agent({ connections: 1 });
      dispatchers.push(dispatcher);
      return new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0, fetchOptions: { dispatcher } });
    };
    try {
      const ids: string[] = [];
      for (let i = 0; i < BOUND; i++) ids.push((await fresh().responses.create({ model: ALIAS, input: `lru ${i}` })).id);
      // Used once, on one worker's connection: now the least recently used is ids[1], everywhere.
      assert.equal((await fresh().responses.retrieve(ids[0])).id, ids[0]);
      await fresh().responses.create({ model: ALIAS, input: 'one more' });
      const before = testWorkers() > 1 ? (await stack.edge.inspect()).planes.map((p) => p.requests) : [];
      const refused: string[] = [];
      for (let i = 0; i < 12; i++) {
        // store: false, so these take no slot of their own.
        await fresh()
          .responses.create({ model: ALIAS, input: `follow ${i}`, previous_response_id: ids[0], store: false })
          .catch((err: unknown) => refused.push(String(err)));
      }
      assert.deepEqual(refused, [], 'the recently used response is known on every worker');
      if (testWorkers() > 1) {
        const after = (await stack.edge.inspect()).planes.map((p, i) => p.requests - (before[i] ?? 0));
        assert.ok(after.filter((n) => n > 0).length > 1, `the follow-ups reached more than one worker: ${after.join(', ')}`);
      }
      await assert.rejects(fresh().responses.retrieve(ids[1]), (err: unknown) => err instanceof OpenAI.NotFoundError, 'the least recently used one went out');
    } finally {
      await Promise.all(dispatchers.map((d) => d.close()));
    }
  });

  test('the bound is validated, and a refresh that changes it needs a restart', async () => {
    for (const bad of [0, 1.5, '100']) {
      const raw = edgeConfigObject({ providerType: 'vllm' });
      (raw.limits as Record<string, unknown>).stored_responses = bad;
      const result = await stack.edge.refresh({ mode: 'apply', config: raw });
      assert.equal(result.rejection, 'invalid_config', JSON.stringify(result));
      assert.ok(result.reasons.some((r) => r.startsWith('limits.stored_responses: expected an integer from 1 to 10000000')), result.reasons.join('\n'));
    }
    const raw = edgeConfigObject({ providerType: 'vllm' });
    (raw.limits as Record<string, unknown>).stored_responses = BOUND + 1;
    const result = await stack.edge.refresh({ mode: 'apply', config: raw });
    assert.equal(result.rejection, 'restart_required', JSON.stringify(result));
    assert.ok(result.reasons.some((r) => r.startsWith('limits.stored_responses: needs a restart')), result.reasons.join('\n'));
  });
});
