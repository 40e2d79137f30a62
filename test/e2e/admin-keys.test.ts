// GET /admin/keys: each client API key as an operator sees it: what the
// config grants it, what it holds open now, and what it used since start
// (requests by status, tokens by model), summed over every data path (I/O
// workers too). Driven with the official openai SDK; a key a refresh
// removes stays listed, unconfigured, with what it used.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, EMBED_ALIAS, waitFor } from '../helpers/stack.js';
import { applyApiKeys, inFlight, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const ALICE = 'sk-keys-alice-0123456';
const BOB = 'sk-keys-bob-9876543210';

interface KeyJson {
  name: string;
  configured: boolean;
  models: string[] | null;
  maxConcurrent: number | null;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  requestsLeft: number | null;
  tokensLeft: number | null;
  priority: number;
  weight: number;
  fairnessHeader: boolean;
  inFlight: number;
  requests: { total: number; errors: number; byStatus: Record<string, number> };
  tokens: { prompt: number; completion: number; byModel: Record<string, { prompt: number; completion: number }> };
}

describe('GET /admin/keys', () => {
  let stack: OpsStack;
  const apiKeys = [
    { name: 'alice', key_sha256: sha256Hex(ALICE), models: [ALIAS], max_concurrent: 3, requests_per_minute: 600, tokens_per_minute: 1_000_000, priority: 5, weight: 2 },
    { name: 'bob', key_sha256: sha256Hex(BOB) },
  ];
  before(async () => {
    stack = await startOpsStack({
      capacity: 4,
      mock: { ttftMs: 0, tokens: 3, intervalMs: 1 },
      apiKeys: apiKeys,
    });
  });
  after(async () => {
    await stack?.close();
  });

  const client = (key: string): OpenAI => new OpenAI({ baseURL: stack.baseURL, apiKey: key, maxRetries: 0 });
  async function keys(): Promise<Map<string, KeyJson>> {
    const { status, json } = await stack.admin('/admin/keys');
    assert.equal(status, 200);
    assert.equal(json.auth, true);
    return new Map((json.keys as KeyJson[]).map((k) => [k.name, k]));
  }

  test('lists the grants, the open requests and the use of each key, never the key', async () => {
    const fresh = await keys();
    assert.deepEqual([...fresh.keys()], ['alice', 'bob'], 'in config order');
    assert.deepEqual(fresh.get('alice'), {
      name: 'alice',
      configured: true,
      models: [ALIAS],
      maxConcurrent: 3,
      requestsPerMinute: 600,
      tokensPerMinute: 1_000_000,
      requestsLeft: 600,
      tokensLeft: 1_000_000,
      priority: 5,
      weight: 2,
      fairnessHeader: false,
      inFlight: 0,
      requests: { total: 0, errors: 0, byStatus: {} },
      tokens: { prompt: 0, completion: 0, byModel: {} },
    });
    assert.equal(fresh.get('bob')?.models, null, 'every model');
    assert.equal(fresh.get('bob')?.maxConcurrent, null, 'no limit');
    assert.equal(fresh.get('bob')?.requestsPerMinute, null, 'no limit');
    assert.equal(fresh.get('bob')?.tokensPerMinute, null, 'no limit');
    assert.equal(fresh.get('bob')?.tokensLeft, null, 'no limit');
    const { json: raw } = await stack.admin('/admin/keys');
    assert.doesNotMatch(JSON.stringify(raw), new RegExp(`${sha256Hex(ALICE)}|${ALICE}`), 'neither the key nor its digest');

    const alice = client(ALICE);
    let prompt = 0;
    let completion = 0;
    for (let i = 0; i < 3; i++) {
      const answer = await alice.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: `hello ${'again '.repeat(i)}` }] });
      prompt += answer.usage?.prompt_tokens ?? 0;
      completion += answer.usage?.completion_tokens ?? 0;
    }
    const refused = await alice.embeddings.create({ model: EMBED_ALIAS, input: 'x' }).then(
      () => assert.fail('alice used a model she is not granted'),
      (err: unknown) => err,
    );
    assert.ok(refused instanceof OpenAI.PermissionDeniedError, String(refused));
    // The provider's own refusal reaches the client, and the key's errors.
    const bad = await alice.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] }, { headers: { 'x-mock-fail': 'status:400' } }).then(
      () => assert.fail('the provider refused it'),
      (err: unknown) => err,
    );
    assert.ok(bad instanceof OpenAI.BadRequestError, String(bad));

    // Bob's stream is open while the operator looks: it is his one request in flight.
    const bob = client(BOB);
    const stream = await bob.chat.completions.create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'slow' }] }, { headers: { 'x-mock-tokens': '40', 'x-mock-interval-ms': '25' } });
    const reading = (async () => {
      for await (const _ of stream) { /* read to the end */ }
    })();
    await waitFor(async () => (await keys()).get('bob')?.inFlight === 1, "bob's stream to show as open");
    assert.equal((await keys()).get('alice')?.inFlight, 0);
    await reading;
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');

    const used = await keys();
    const a = used.get('alice');
    // The 403 was refused before the data path, as a bad body is: edge_rejects_total counts it, not the key's requests.
    assert.deepEqual(a?.requests, { total: 4, errors: 1, byStatus: { '200': 3, '400': 1 } });
    assert.ok(prompt > 0 && completion > 0);
    assert.deepEqual(a?.tokens, { prompt, completion, byModel: { [ALIAS]: { prompt, completion } } });
    assert.equal(used.get('bob')?.inFlight, 0);
    assert.deepEqual(used.get('bob')?.requests, { total: 1, errors: 0, byStatus: { '200': 1 } });
    assert.equal(used.get('bob')?.tokens.completion, 40, "the stream's 40 tokens");
  });

  test('a key a refresh removes stays listed, unconfigured, with what it used', async () => {
    const before = (await keys()).get('bob');
    const { status } = await applyApiKeys(stack, [apiKeys[0]]);
    assert.equal(status, 200);
    const after = await keys();
    assert.deepEqual([...after.keys()], ['alice', 'bob']);
    const bob = after.get('bob');
    assert.equal(bob?.configured, false);
    assert.equal(bob?.models, null);
    assert.deepEqual(bob?.requests, before?.requests);
    await assert.rejects(client(BOB).models.list(), OpenAI.AuthenticationError, 'the key no longer authenticates');
  });

  test('takes no parameters: one is a 400 in the admin format', async () => {
    const { status, json } = await stack.admin('/admin/keys?name=alice');
    assert.equal(status, 400);
    assert.deepEqual(json, { error: { code: 'invalid_request', message: 'unknown parameter "name"; /admin/keys takes no parameters' } });
  });
});

describe('GET /admin/keys with auth off', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({ mock: { ttftMs: 0, tokens: 2, intervalMs: 1 } });
  });
  after(async () => {
    await stack?.close();
  });

  test('says auth is off and lists nothing, whatever was served', async () => {
    await new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 }).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    const { status, json } = await stack.admin('/admin/keys');
    assert.equal(status, 200);
    assert.deepEqual(json, { auth: false, keys: [] });
  });
});

describe('GET /admin/keys with a model alias named like an Object.prototype property', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      configure(raw) {
        // The config takes any alias without brackets.
        (raw.models as { alias: string }[])[0].alias = '__proto__';
        raw.auth = { api_keys: [{ name: 'alice', key_sha256: sha256Hex(ALICE) }] };
      },
    });
  });
  after(async () => {
    await stack?.close();
  });

  test("lists its tokens under its name, and leaves the edge's objects alone", async () => {
    const answer = await new OpenAI({ baseURL: stack.baseURL, apiKey: ALICE, maxRetries: 0 }).chat.completions.create({ model: '__proto__', messages: [{ role: 'user', content: 'hi' }] });
    const prompt = answer.usage?.prompt_tokens ?? 0;
    const completion = answer.usage?.completion_tokens ?? 0;
    assert.ok(prompt > 0 && completion > 0);
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
    const { json } = await stack.admin('/admin/keys');
    const alice = (json.keys as KeyJson[])[0];
    assert.deepEqual(alice.tokens, JSON.parse(JSON.stringify({ prompt, completion, byModel: Object.fromEntries([['__proto__', { prompt, completion }]]) })));
    assert.equal(({} as { prompt?: unknown }).prompt, undefined, 'no "prompt" on every object of the edge process');
  });
});
