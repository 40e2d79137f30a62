// auth.api_keys[].tokens_per_minute: one token bucket per key for the whole
// edge (with I/O workers a key's requests reach every worker and still share
// it). A request is admitted while the key's bucket holds a token, and is
// charged what its provider reported (prompt + completion, streams included);
// past the minute the key gets 429 rate_limit_exceeded with a Retry-After
// that says when its debt is paid, in each API's format as the official SDKs
// read it. A request refused after admission, never reaching a provider,
// gives its reservation back; a refresh changes the limit on a running edge.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Agent, request } from 'undici';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, waitFor } from '../helpers/stack.js';
import { applyApiKeys, inFlight, sample, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const TINA = 'sk-tokens-tina-0123456789';
const UMA = 'sk-tokens-uma-9876543210';
const VIC = 'sk-tokens-vic-5555555555';
const BOB = 'sk-tokens-bob-7777777777';
/** Completion tokens the mock streams per answer (x-mock-tokens). */
const COMPLETION = 30;

interface Answer {
  status: number;
  retryAfter: number;
  body: { usage?: { prompt_tokens: number; completion_tokens: number }; error?: { code: string; type: string; message: string } };
}

describe('tokens per minute per API key', () => {
  let stack: OpsStack;
  const apiKeys = [
    { name: 'tina', key_sha256: sha256Hex(TINA), tokens_per_minute: 100 },
    { name: 'uma', key_sha256: sha256Hex(UMA), tokens_per_minute: 100, requests_per_minute: 1000 },
    { name: 'vic', key_sha256: sha256Hex(VIC), tokens_per_minute: 3000 },
    { name: 'bob', key_sha256: sha256Hex(BOB) },
  ];
  before(async () => {
    stack = await startOpsStack({
      capacity: 4,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      apiKeys,
    });
  });
  after(async () => {
    await stack?.close();
  });

  /** One chat on its own connection (with I/O workers, the requests of one key reach several workers). */
  const chat = async (key: string, content = 'hi'): Promise<Answer> => {
    const dispatcher = new Agent({ connections: 1, pipelining: 0 });
    try {
      const res = await request(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        dispatcher,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-mock-tokens': String(COMPLETION) },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content }] }),
      });
      return { status: res.statusCode, retryAfter: Number(res.headers['retry-after'] ?? -1), body: (await res.body.json()) as Answer['body'] };
    } finally {
      await dispatcher.close();
    }
  };

  test('charged what the provider reported: served while the minute holds any, then 429 with the Retry-After its debt needs, in each format', async () => {
    const started = performance.now();
    const served: Answer[] = [];
    let refused: Answer | undefined;
    while (refused === undefined && served.length < 10) {
      const answer = await chat(TINA);
      if (answer.status === 200) served.push(answer);
      else refused = answer;
    }
    assert.ok(refused !== undefined, 'refused within 10 requests');
    const used = served.map((a) => (a.body.usage?.prompt_tokens ?? NaN) + (a.body.usage?.completion_tokens ?? NaN));
    assert.ok(used.every((n) => n > COMPLETION), `each charged its prompt and its ${COMPLETION} completion tokens: ${used.join(', ')}`);
    const total = used.reduce((a, b) => a + b, 0);
    const refill = ((performance.now() - started) * 100) / 60_000;
    // Each was admitted while the bucket held a token, charged at its end: the last one served found some left, the refused one none.
    assert.ok(total - used[used.length - 1] < 100 + refill, `served past the minute: ${used.join(' + ')}`);
    assert.ok(total >= 100 - 1, `refused with ${100 - total} tokens of the minute left (${used.join(' + ')})`);
    assert.equal(refused.status, 429);
    assert.equal(refused.body.error?.code, 'rate_limit_exceeded');
    assert.equal(refused.body.error?.type, 'rate_limit_error');
    // The debt (total - 100) plus one token, refilled at 100 a minute.
    const expected = Math.ceil(((total - 100 + 1) * 60) / 100);
    assert.ok(refused.retryAfter <= expected && refused.retryAfter >= expected - 2, `Retry-After ${refused.retryAfter}, debt of ${total - 100} needs ~${expected} s`);
    assert.equal(refused.body.error?.message, `this API key is at its limit of 100 tokens per minute; retry in ${refused.retryAfter} s`);

    const sdkError = await new OpenAI({ baseURL: stack.baseURL, apiKey: TINA, maxRetries: 0 }).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).then(
      () => assert.fail('tina passed her tokens'),
      (err: unknown) => err,
    );
    assert.ok(sdkError instanceof OpenAI.RateLimitError && sdkError.code === 'rate_limit_exceeded', String(sdkError));
    const anthropicError = await new Anthropic({ baseURL: stack.edge.url, apiKey: TINA, maxRetries: 0 }).messages
      .create({ model: ALIAS, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] })
      .catch((err: unknown) => err);
    assert.ok(anthropicError instanceof Anthropic.RateLimitError, String(anthropicError));
    assert.equal((anthropicError.error as { error?: { type?: string } }).error?.type, 'rate_limit_error');
    // The operator sees the debt the key is paying back.
    const tina = ((await stack.admin('/admin/keys')).json.keys as { name: string; tokensLeft: number | null; requestsLeft: number | null }[]).find((k) => k.name === 'tina');
    assert.ok(tina !== undefined && tina.tokensLeft !== null && tina.tokensLeft < 1 && tina.tokensLeft > 100 - total - 5, JSON.stringify(tina));
    assert.equal(tina.requestsLeft, null, 'no requests_per_minute');
    // Another key is not held back by tina's.
    assert.equal((await chat(BOB)).status, 200);
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
    const text = await stack.metrics();
    assert.equal(sample(text, 'edge_key_requests_total', { key: 'tina', status: '429' }), 3);
    // The gauges an operator alerts on: tina's debt, uma's untouched minutes, nothing for bob (no limits).
    const tinaLeft = sample(text, 'edge_key_tokens_left', { key: 'tina' });
    assert.ok(tinaLeft !== undefined && tinaLeft < 1, `edge_key_tokens_left{key="tina"} ${tinaLeft}`);
    assert.equal(sample(text, 'edge_key_tokens_left', { key: 'uma' }), 100);
    assert.equal(sample(text, 'edge_key_requests_left', { key: 'uma' }), 1000);
    assert.equal(sample(text, 'edge_key_requests_left', { key: 'tina' }), undefined, 'tina has no requests_per_minute');
    assert.equal(sample(text, 'edge_key_tokens_left', { key: 'bob' }), undefined);
    assert.equal(sample(text, 'edge_key_requests_total', { key: 'tina', status: '200' }), served.length);
  });

  test('a stream is charged the usage its last chunk reports (include_usage), and refused in its format past the minute', async () => {
    const openai = new OpenAI({ baseURL: stack.baseURL, apiKey: UMA, maxRetries: 0 });
    let spent = 0;
    let streams = 0;
    for (;;) {
      const outcome = await openai.chat.completions
        .create({ model: ALIAS, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream' }] }, { headers: { 'x-mock-tokens': String(COMPLETION) } })
        .catch((err: unknown) => err);
      if (outcome instanceof OpenAI.RateLimitError) {
        assert.equal(outcome.code, 'rate_limit_exceeded');
        assert.match(outcome.message, /this API key is at its limit of 100 tokens per minute; retry in \d+ s/);
        break;
      }
      assert.ok(!(outcome instanceof Error), String(outcome));
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of outcome as AsyncIterable<OpenAI.ChatCompletionChunk>) usage = chunk.usage ?? usage;
      assert.ok(usage !== undefined, 'the stream reported its usage');
      streams++;
      spent += usage.prompt_tokens + usage.completion_tokens;
      assert.ok(streams < 10, 'refused within 10 streams');
    }
    assert.ok(spent >= 99 && spent - spent / streams < 101, `${streams} streams spent ${spent} of 100`);
  });

  test('a request refused after admission (api_not_served) gives its reservation back', async () => {
    // No provider here serves /v1/messages: the scheduler refuses each after the key's admission reserved ~2,000 of vic's 3,000.
    const long = 'x'.repeat(8000);
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${stack.edge.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': VIC, 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: ALIAS, max_tokens: 16, messages: [{ role: 'user', content: long }] }),
      });
      const body = await res.text();
      // Kept, the reservations would leave 1,000, then -1,000: the third would be a 429.
      assert.equal(res.status, 400, `request ${i + 1}: ${body}`);
      assert.match(body, /api_not_served/);
    }
    assert.equal((await chat(VIC)).status, 200);
  });

  test('a refresh raising the limit applies on the running edge; /admin/keys shows it', async () => {
    // In debt, whatever the minute refilled since the first test (a debt of a token or two is paid in a second):
    // each request served puts it deeper (its prompt and completion charged).
    let answered = 200;
    for (let i = 0; i < 10 && answered === 200; i++) answered = (await chat(TINA)).status;
    assert.equal(answered, 429, 'in debt');
    const { status, json } = await applyApiKeys(stack, [{ ...apiKeys[0], tokens_per_minute: 6_000_000 }, ...apiKeys.slice(1)]);
    assert.equal(status, 200, JSON.stringify(json));
    assert.ok((json.changes as { path: string; mutable: boolean }[]).some((c) => c.path === 'auth.api_keys[tina].tokens_per_minute' && c.mutable), JSON.stringify(json.changes));
    // 100,000 a second now: the debt is paid within ms, on every worker's admission.
    await waitFor(async () => (await chat(TINA)).status === 200, 'tina served at the new limit');
    const keys = (await stack.admin('/admin/keys')).json.keys as { name: string; tokensPerMinute: number | null }[];
    assert.equal(keys.find((k) => k.name === 'tina')?.tokensPerMinute, 6_000_000);
    assert.equal(keys.find((k) => k.name === 'bob')?.tokensPerMinute, null);
  });
});
