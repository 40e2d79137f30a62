// Usage per client API key in /metrics (edge_key_requests_total,
// edge_key_tokens_total) and in the run records (GET /admin/runs?key=):
// what each key asked and what its answers cost, as
// the official openai SDK saw it, summed over every data path (I/O workers
// too), with the key's own refusals (its concurrency limit) under their
// status, and nothing for a request that named no valid key.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, EMBED_ALIAS } from '../helpers/stack.js';
import { inFlight, sample, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const ALICE = 'sk-usage-alice-0123456';
const BOB = 'sk-usage-bob-987654321';

describe('usage per API key', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({
      capacity: 4,
      mock: { ttftMs: 0, tokens: 3, intervalMs: 1 },
      apiKeys: [
        { name: 'alice', key_sha256: sha256Hex(ALICE) },
        { name: 'bob', key_sha256: sha256Hex(BOB), max_concurrent: 1 },
      ],
    });
  });
  after(async () => {
    await stack?.close();
  });

  const client = (key: string): OpenAI => new OpenAI({ baseURL: stack.baseURL, apiKey: key, maxRetries: 0 });

  test('requests by status and tokens by model are counted under the key that sent them', async () => {
    const alice = client(ALICE);
    let alicePrompt = 0;
    let aliceCompletion = 0;
    // Each on its own connection at times, so that with I/O workers more than one data path counts.
    for (let i = 0; i < 4; i++) {
      const answer = await alice.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: `hello ${'there '.repeat(i)}` }] });
      alicePrompt += answer.usage?.prompt_tokens ?? 0;
      aliceCompletion += answer.usage?.completion_tokens ?? 0;
    }
    let streamedCompletion = 0;
    const stream = await alice.chat.completions.create({ model: ALIAS, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream' }] });
    for await (const chunk of stream) {
      if (chunk.usage) {
        alicePrompt += chunk.usage.prompt_tokens;
        streamedCompletion += chunk.usage.completion_tokens;
      }
    }
    assert.ok(streamedCompletion > 0, 'the stream reported its usage');
    aliceCompletion += streamedCompletion;

    const bob = client(BOB);
    const embedding = await bob.embeddings.create({ model: EMBED_ALIAS, input: 'a b c' });
    const bobPrompt = embedding.usage.prompt_tokens;
    // Bob's limit is one request at a time: a second while the first streams is refused 429 under his key.
    const slow = await bob.chat.completions.create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'slow' }] }, { headers: { 'x-mock-tokens': '50', 'x-mock-interval-ms': '20' } });
    const refused = await bob.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'too many' }] }).then(
      () => assert.fail('bob passed his max_concurrent'),
      (err: unknown) => err,
    );
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    for await (const _ of slow) { /* read to the end */ }
    // No valid key: refused before the data path, under no key.
    await client('sk-nobody-000000000000').chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).catch(() => undefined);
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');

    const text = await stack.metrics();
    assert.match(text, /^# TYPE edge_key_requests_total counter$/m);
    assert.equal(sample(text, 'edge_key_requests_total', { key: 'alice', status: '200' }), 5);
    assert.equal(sample(text, 'edge_key_requests_total', { key: 'bob', status: '200' }), 2);
    assert.equal(sample(text, 'edge_key_requests_total', { key: 'bob', status: '429' }), 1);
    assert.equal(sample(text, 'edge_key_tokens_total', { key: 'alice', model: ALIAS, kind: 'prompt' }), alicePrompt);
    assert.equal(sample(text, 'edge_key_tokens_total', { key: 'alice', model: ALIAS, kind: 'completion' }), aliceCompletion);
    assert.equal(sample(text, 'edge_key_tokens_total', { key: 'bob', model: EMBED_ALIAS, kind: 'prompt' }), bobPrompt);
    // Every key's requests are all the data path saw: no request is counted under no key, or twice.
    const keyed = [...text.matchAll(/^edge_key_requests_total\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    const all = [...text.matchAll(/^edge_requests_total\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    assert.equal(keyed, 8);
    assert.equal(all, 8);

    // The run records name the key; ?key= lists one key's runs, from every data path.
    const { json: runs } = await stack.admin('/admin/runs?key=bob');
    assert.deepEqual(runs.runs.map((r: { key: string; status: number }) => [r.key, r.status]).sort(), [['bob', 200], ['bob', 200], ['bob', 429]]);
    const { json: all5 } = await stack.admin('/admin/runs?key=alice&state=finished');
    assert.equal(all5.runs.length, 5);
    assert.ok(all5.runs.every((r: { key: string; model: string }) => r.key === 'alice' && r.model === ALIAS));
    const { json: one } = await stack.admin(`/admin/runs/${all5.runs[0].id}`);
    assert.equal(one.key, 'alice');
  });
});
