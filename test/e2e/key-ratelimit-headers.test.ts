// x-ratelimit-* on the answers of an API key with requests_per_minute or
// tokens_per_minute, as OpenAI's API sends them and the openai SDK exposes
// them (withResponse): the key's limit, what it had left when its request
// was granted, and how long until it is full again; with I/O workers too,
// where the scheduler thread holds the buckets. A key without limits gets
// none, and a provider's own x-ratelimit-* (its account's) never reaches a
// limited key's client beside the edge's.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { durationOf } from '../../src/workers/http/rate-limit-headers.js';
import { startProvidersStack, startScriptedProvider, type ProvidersStack, type ScriptedProvider } from '../helpers/stack.js';
import { ALIAS, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

const HANA = 'sk-headers-hana-0123456789';
const BOB = 'sk-headers-bob-9876543210';
const IDA = 'sk-headers-ida-5555555555';
const KAI = 'sk-headers-kai-7777777777';
const LIA = 'sk-headers-lia-8888888888';

const RATE_HEADERS = /^x-ratelimit-/;

describe('x-ratelimit-* headers', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({
      capacity: 4,
      mock: { ttftMs: 0, tokens: 4, intervalMs: 1 },
      apiKeys: [
        { name: 'hana', key_sha256: sha256Hex(HANA), requests_per_minute: 60, tokens_per_minute: 10_000 },
        { name: 'ida', key_sha256: sha256Hex(IDA), tokens_per_minute: 10_000 },
        { name: 'bob', key_sha256: sha256Hex(BOB) },
        { name: 'kai', key_sha256: sha256Hex(KAI), requests_per_minute: 2 },
        { name: 'lia', key_sha256: sha256Hex(LIA), tokens_per_minute: 100 },
      ],
    });
  });
  after(async () => {
    await stack?.close();
  });

  const client = (key: string): OpenAI => new OpenAI({ baseURL: stack.baseURL, apiKey: key, maxRetries: 0 });

  test('each answer says the limit, what was left when it was granted and when the bucket is full again', async () => {
    const first = await client(HANA).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    const h1 = first.response.headers;
    assert.equal(h1.get('x-ratelimit-limit-requests'), '60');
    assert.equal(h1.get('x-ratelimit-remaining-requests'), '59', 'its own request taken');
    // One request of 60 a minute: a second, less what refilled between its admission and its grant.
    assert.match(h1.get('x-ratelimit-reset-requests') ?? '', /^(9\d\dms|1s)$/);
    assert.equal(h1.get('x-ratelimit-limit-tokens'), '10000');
    const left1 = Number(h1.get('x-ratelimit-remaining-tokens'));
    // Its estimated prompt reserved (bytes / 4 of the body): a few tens of tokens.
    assert.ok(left1 < 10_000 && left1 > 9_900, `tokens left ${left1}`);
    assert.match(h1.get('x-ratelimit-reset-tokens') ?? '', /^\d+ms$|^\d+(\.\d+)?s$/);
    const used1 = first.data.usage?.total_tokens ?? 0;
    assert.ok(used1 > 0);

    // Streamed: the head carries them as well, and the first answer's usage was charged since.
    const second = await client(HANA).chat.completions.create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    for await (const _ of second.data) { /* to the end */ }
    const h2 = second.response.headers;
    assert.ok(Number(h2.get('x-ratelimit-remaining-requests')) <= 59);
    const left2 = Number(h2.get('x-ratelimit-remaining-tokens'));
    assert.ok(left2 < left1 - used1 + 50 && left2 > left1 - used1 - 200, `left ${left1}, then ${used1} used and a reservation: ${left2}`);

    const tokensOnly = await client(IDA).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    assert.equal(tokensOnly.response.headers.get('x-ratelimit-limit-tokens'), '10000');
    assert.equal(tokensOnly.response.headers.get('x-ratelimit-limit-requests'), null, 'no requests_per_minute: no request headers');

    const unlimited = await client(BOB).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    assert.deepEqual([...unlimited.response.headers.keys()].filter((name) => RATE_HEADERS.test(name)), [], 'a key without limits gets none');
  });

  test("a refusal by the key's own limits carries them too: nothing left, and when it is back", async () => {
    for (let i = 0; i < 2; i++) await client(KAI).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    const refused = await client(KAI).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).then(
      () => assert.fail('a third request in the minute must be refused'),
      (err: unknown) => err,
    );
    assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
    assert.equal(refused.headers.get('x-ratelimit-limit-requests'), '2');
    assert.equal(refused.headers.get('x-ratelimit-remaining-requests'), '0');
    // Two of 2 a minute spent just now: the bucket is full again in about a minute.
    assert.match(refused.headers.get('x-ratelimit-reset-requests') ?? '', /^(59(\.\d+)?s|1m0s)$/);

    // Over its tokens: a prompt of ~250 estimated tokens against 100 a minute is admitted on a full bucket
    // (a debt); the next is refused until the debt is paid.
    const big = { model: ALIAS, messages: [{ role: 'user' as const, content: 'x'.repeat(1000) }] };
    await client(LIA).chat.completions.create(big);
    const tokenRefused = await client(LIA).chat.completions.create(big).then(
      () => assert.fail('a prompt on a bucket in debt must be refused'),
      (err: unknown) => err,
    );
    assert.ok(tokenRefused instanceof OpenAI.RateLimitError, String(tokenRefused));
    assert.equal(tokenRefused.headers.get('x-ratelimit-limit-tokens'), '100');
    assert.equal(tokenRefused.headers.get('x-ratelimit-remaining-tokens'), '0');
    // More than the minute's 100 owed: over a minute until full.
    assert.match(tokenRefused.headers.get('x-ratelimit-reset-tokens') ?? '', /^[1-9]\d*m[\d.]+s$/);
    assert.equal(tokenRefused.headers.get('x-ratelimit-limit-requests'), null);
  });

  test("an image's base64 reserves what an image costs, not bytes / 4 of it", async () => {
    // ~100 KB of base64: taken for bytes / 4 it would reserve ~25,000 tokens, over ida's whole minute.
    const image = `data:image/png;base64,${Buffer.alloc(75_000, 7).toString('base64')}`;
    const answer = await client(IDA)
      .chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: image } }] }] })
      .withResponse();
    const left = Number(answer.response.headers.get('x-ratelimit-remaining-tokens'));
    assert.ok(left > 10_000 - 2_500 && left < 10_000, `tokens left at its grant: ${left}`);
  });

  test('durations are written as OpenAI writes them', () => {
    assert.equal(durationOf(0), '0ms');
    assert.equal(durationOf(17.2), '18ms');
    assert.equal(durationOf(1000), '1s');
    assert.equal(durationOf(1500), '1.5s');
    assert.equal(durationOf(360_000), '6m0s');
    assert.equal(durationOf(61_250), '1m1.25s');
  });
});

describe("a provider's own x-ratelimit-*", () => {
  let provider: ScriptedProvider;
  let stack: ProvidersStack;
  before(async () => {
    provider = await startScriptedProvider((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'x-ratelimit-remaining-requests': '4999', 'x-ratelimit-limit-requests': '5000' });
      res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }));
    });
    stack = await startProvidersStack('upstream', { 'gpu-1-up': provider.url }, {}, {}, {
      auth: {
        api_keys: [
          { name: 'hana', key_sha256: sha256Hex(HANA), requests_per_minute: 60 },
          { name: 'bob', key_sha256: sha256Hex(BOB) },
        ],
      },
    });
  });
  after(async () => {
    await stack?.close();
    await provider?.close();
  });

  test("is replaced by the edge's for a limited key, and relayed as it is for a key without limits", async () => {
    const limited = await new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: HANA, maxRetries: 0 }).chat.completions.create({ model: 'upstream', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    assert.equal(limited.response.headers.get('x-ratelimit-limit-requests'), '60');
    assert.equal(limited.response.headers.get('x-ratelimit-remaining-requests'), '59');
    const unlimited = await new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: BOB, maxRetries: 0 }).chat.completions.create({ model: 'upstream', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    assert.equal(unlimited.response.headers.get('x-ratelimit-remaining-requests'), '4999');
  });
});
