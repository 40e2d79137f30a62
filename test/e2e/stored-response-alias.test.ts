// A stored response's GET goes to the provider that made it, under an alias
// that maps that provider now: a refresh that renames the alias it was made
// with keeps it reachable, and one that leaves no alias mapping the provider
// answers 409 response_provider_unavailable (never 404 model_not_found for a
// model the client never named).
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, edgeConfigObject, PROVIDER_ID, startStack, type Stack } from '../helpers/stack.js';

describe('stored responses across a refresh of their alias', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ providerType: 'vllm' });
  });
  after(async () => {
    await stack.close();
  });

  test('renamed: still retrieved from its provider; unmapped: 409 response_provider_unavailable', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const made = await client.responses.create({ model: ALIAS, input: 'keep this' });
    const raw = edgeConfigObject({ providerType: 'vllm' });
    const models = raw.models as { alias: string; providers: Record<string, string> }[];
    models[0].alias = 'renamed';
    assert.equal((await stack.edge.refresh({ mode: 'apply', config: raw })).status, 'applied');
    const again = await client.responses.retrieve(made.id);
    assert.equal(again.id, made.id);
    // No alias maps the provider any more (the other alias moves to a provider of the config no node serves).
    (raw.nodes as { providers: Record<string, unknown>[] }[])[0].providers.push({ id: 'elsewhere', type: 'vllm', capacity: 1 });
    raw.models = [{ alias: 'renamed', providers: { elsewhere: 'x' } }];
    const result = await stack.edge.refresh({ mode: 'apply', config: raw });
    assert.equal(result.status, 'applied', JSON.stringify(result));
    const before = stack.mock.stats.requests;
    try {
      await client.responses.retrieve(made.id);
      assert.fail('retrieved with no alias mapping its provider');
    } catch (err) {
      const e = err as { status?: number; code?: string; message?: string; headers?: Headers };
      assert.equal(e.status, 409, e.message);
      assert.equal(e.code, 'response_provider_unavailable');
      assert.match(e.message ?? '', new RegExp(`provider "${PROVIDER_ID}", which no model in the config serves now`));
      // Only a config change helps: the SDKs, which retry a 409, are told not to.
      assert.equal(e.headers?.get('x-should-retry'), 'false');
    }
    // A follow-up has no model to continue it with either: the same 409, not a 400 asking for a model that does not exist.
    await assert.rejects(client.responses.create({ model: 'renamed', input: 'go on', previous_response_id: made.id }), (err: unknown) => {
      const e = err as { status?: number; code?: string; message?: string; headers?: Headers };
      assert.equal(e.status, 409, e.message);
      assert.equal(e.code, 'response_provider_unavailable');
      assert.equal(e.headers?.get('x-should-retry'), 'false');
      return true;
    });
    assert.equal(stack.mock.stats.requests, before, 'never sent anywhere');
    // Another alias maps the provider again: a follow-up under the wrong one is told which model to use.
    raw.models = [{ alias: 'renamed', providers: { elsewhere: 'x' } }, { alias: 'kept', providers: { [PROVIDER_ID]: 'x' } }];
    assert.equal((await stack.edge.refresh({ mode: 'apply', config: raw })).status, 'applied');
    await assert.rejects(client.responses.create({ model: 'renamed', input: 'go on', previous_response_id: made.id }), (err: unknown) => {
      const e = err as { status?: number; code?: string; message?: string };
      assert.equal(e.status, 400, e.message);
      assert.equal(e.code, 'previous_response_model_mismatch');
      assert.match(e.message ?? '', /continue it with model "kept"/);
      return true;
    });
    assert.equal(stack.mock.stats.requests, before, 'never sent anywhere');
  });

  test('an absolute-form target reaches the provider in origin form: the client names no host for it', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const raw = edgeConfigObject({ providerType: 'vllm' });
    assert.equal((await stack.edge.refresh({ mode: 'apply', config: raw })).status, 'applied');
    const made = await client.responses.create({ model: ALIAS, input: 'absolute' });
    const text = await new Promise<string>((resolve, reject) => {
      const socket = connect(stack.edge.httpPort, '127.0.0.1');
      let got = '';
      socket.setEncoding('latin1').on('data', (s: string) => (got += s));
      socket.on('end', () => resolve(got));
      socket.on('error', reject);
      socket.write(`GET http://victim.internal/v1/responses/${made.id}?x=1 HTTP/1.1\r\nhost: edge\r\nconnection: close\r\n\r\n`);
    });
    assert.match(text, /^HTTP\/1\.1 200 /);
    assert.equal(stack.mock.requestLog.at(-1)?.path, `/v1/responses/${made.id}`);
  });
});
