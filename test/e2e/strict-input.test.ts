// Strict input at the door, for every proxied route: a body that is not
// JSON by content-type gets 415, and a missing or mistyped required field
// (found in the same byte scan as `model`) gets 400 naming it, in the
// route's own error format, before any queue slot is taken: the provider
// never sees the request. Valid bodies of each route still reach it. Also
// Anthropic clients' `x-api-key`: accepted as a Bearer key, never forwarded.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ALIAS, startStack, type Stack } from '../helpers/stack.js';

interface Case {
  readonly name: string;
  readonly body: string;
  readonly status: number;
  /** The field the error must name (undefined for a success or a non-field error). */
  readonly field?: string;
  readonly contentType?: string;
}

const M = `"model":"${ALIAS}"`;

const ROUTES: Record<string, { anthropic: boolean; cases: Case[] }> = {
  '/v1/chat/completions': {
    anthropic: false,
    cases: [
      { name: 'valid', body: `{${M},"messages":[{"role":"user","content":"hi"}]}`, status: 200 },
      { name: 'messages missing', body: `{${M}}`, status: 400, field: 'messages' },
      { name: 'messages is a string', body: `{${M},"messages":"hi"}`, status: 400, field: 'messages' },
      { name: 'messages only nested', body: `{${M},"extra":{"messages":[]}}`, status: 400, field: 'messages' },
      // Repeated, a member is what its last occurrence says (JSON.parse, Python's json, Go's encoding/json).
      { name: 'messages an array, then repeated as a string', body: `{${M},"messages":[{"role":"user","content":"hi"}],"messages":"hi"}`, status: 400, field: 'messages' },
      { name: 'messages a string, then repeated as an array', body: `{${M},"messages":"hi","messages":[{"role":"user","content":"hi"}]}`, status: 200 },
    ],
  },
  '/v1/completions': {
    anthropic: false,
    cases: [
      { name: 'valid', body: `{${M},"prompt":"Once upon"}`, status: 200 },
      { name: 'prompt missing', body: `{${M},"max_tokens":5}`, status: 400, field: 'prompt' },
    ],
  },
  '/v1/embeddings': {
    anthropic: false,
    cases: [
      { name: 'valid', body: `{${M},"input":"embed me"}`, status: 200 },
      { name: 'input missing', body: `{${M},"inputs":"typo"}`, status: 400, field: 'input' },
    ],
  },
  '/v1/messages': {
    anthropic: true,
    cases: [
      { name: 'valid', body: `{${M},"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, status: 200 },
      { name: 'an escaped key is still max_tokens', body: `{${M},"max\\u005ftokens":16,"messages":[]}`, status: 200 },
      { name: 'messages missing', body: `{${M},"max_tokens":16}`, status: 400, field: 'messages' },
      { name: 'messages is an object', body: `{${M},"max_tokens":16,"messages":{"role":"user"}}`, status: 400, field: 'messages' },
      { name: 'max_tokens missing', body: `{${M},"messages":[]}`, status: 400, field: 'max_tokens' },
      { name: 'max_tokens only nested', body: `{${M},"messages":[],"metadata":{"max_tokens":5}}`, status: 400, field: 'max_tokens' },
      { name: 'max_tokens is a fraction', body: `{${M},"max_tokens":1.5,"messages":[]}`, status: 400, field: 'max_tokens' },
      { name: 'max_tokens has an exponent', body: `{${M},"max_tokens":1e3,"messages":[]}`, status: 400, field: 'max_tokens' },
      { name: 'max_tokens is a string', body: `{${M},"max_tokens":"16","messages":[]}`, status: 400, field: 'max_tokens' },
      { name: 'max_tokens an integer, then repeated as a string', body: `{${M},"max_tokens":16,"messages":[],"max\\u005ftokens":"16"}`, status: 400, field: 'max_tokens' },
    ],
  },
  '/v1/messages/count_tokens': {
    anthropic: true,
    cases: [
      { name: 'valid', body: `{${M},"messages":[{"role":"user","content":"count me"}]}`, status: 200 },
      { name: 'messages missing', body: `{${M},"system":"x"}`, status: 400, field: 'messages' },
      { name: 'messages is null', body: `{${M},"messages":null}`, status: 400, field: 'messages' },
    ],
  },
  '/v1/responses': {
    anthropic: false,
    cases: [
      { name: 'valid', body: `{${M},"input":"hello"}`, status: 200 },
      { name: 'input as a list is fine', body: `{${M},"input":[{"role":"user","content":"hello"}]}`, status: 200 },
      { name: 'neither input nor previous_response_id', body: `{${M},"instructions":"x"}`, status: 400, field: 'input' },
      { name: 'previous_response_id is a number', body: `{${M},"previous_response_id":42}`, status: 400, field: 'previous_response_id' },
      // null is "none" (the SDK types it string | null): a first turn written as `previous_response_id: last?.id ?? null`.
      { name: 'previous_response_id null beside input', body: `{${M},"input":"hello","previous_response_id":null}`, status: 200 },
      { name: 'previous_response_id null alone is no input', body: `{${M},"previous_response_id":null}`, status: 400, field: 'input' },
      // The context may come from a stored prompt template or conversation instead of input.
      { name: 'a prompt template instead of input', body: `{${M},"prompt":{"id":"pmpt_1","variables":{}}}`, status: 200 },
      { name: 'a conversation instead of input', body: `{${M},"conversation":"conv_1"}`, status: 200 },
      { name: 'a conversation, then repeated as null, is no input', body: `{${M},"conversation":"conv_1","conversation":null}`, status: 400, field: 'input' },
    ],
  },
};

// Shared by every route: the content-type and the model come first.
const COMMON: Case[] = [
  { name: 'JSON sent as text/plain', body: `{${M}}`, status: 415, contentType: 'text/plain' },
  { name: 'form-encoded', body: 'model=llama3', status: 415, contentType: 'application/x-www-form-urlencoded' },
  { name: 'missing model', body: '{"messages":[],"max_tokens":1,"prompt":"x","input":"x"}', status: 400, field: 'model' },
];

function assertErrorFormat(body: string, anthropic: boolean, status: number, field: string | undefined, context: string): void {
  const parsed = JSON.parse(body) as { type?: string; error: { type: string; message: string; param?: string | null; code?: string } };
  if (anthropic) {
    assert.equal(parsed.type, 'error', `${context}: Anthropic body`);
    assert.equal(parsed.error.type, 'invalid_request_error', context);
    assert.equal(parsed.error.code, undefined, `${context}: no OpenAI fields`);
    if (field !== undefined) assert.match(parsed.error.message, new RegExp(`\`?${field}\`?`), `${context}: names ${field}`);
  } else {
    assert.equal(parsed.type, undefined, `${context}: OpenAI body`);
    assert.equal(parsed.error.type, 'invalid_request_error', context);
    if (field !== undefined) assert.equal(parsed.error.param, field, `${context}: param`);
    if (status === 415) assert.equal(parsed.error.code, 'unsupported_media_type');
  }
  if (field !== undefined) assert.ok(parsed.error.message.includes(field), `${context}: message names ${field}: ${parsed.error.message}`);
}

describe('strict input at the door, every route', () => {
  let stack: Stack;
  before(async () => {
    // vllm serves every API, so each route's valid body reaches the provider.
    stack = await startStack({ providerType: 'vllm', mock: { ttftMs: 0, tokens: 2, intervalMs: 0 } });
  });
  after(async () => {
    await stack.close();
  });

  for (const [path, { anthropic, cases }] of Object.entries(ROUTES)) {
    for (const c of [...COMMON, ...cases]) {
      test(`${path}: ${c.name} -> ${c.status}`, async () => {
        const before = stack.mock.stats.requests;
        const res = await fetch(`${stack.edge.url}${path}`, { method: 'POST', headers: { 'content-type': c.contentType ?? 'application/json' }, body: c.body });
        const body = await res.text();
        assert.equal(res.status, c.status, `${c.name}: ${body.slice(0, 300)}`);
        if (c.status === 200) {
          assert.equal(stack.mock.stats.requests, before + 1, 'a valid body reaches the provider');
          return;
        }
        assertErrorFormat(body, anthropic, c.status, c.field, `${path} ${c.name}`);
        assert.equal(stack.mock.stats.requests, before, 'the provider never saw it');
      });
    }
  }
});

describe('x-api-key (Anthropic clients) with auth on', () => {
  const KEY = 'sk-ant-edge-key';
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      providerType: 'vllm',
      mock: { ttftMs: 0, tokens: 2, intervalMs: 0 },
      configure: (raw) => void (raw.auth = { api_keys: [{ name: 'ant', key_sha256: createHash('sha256').update(KEY).digest('hex') }] }),
    });
  });
  after(async () => {
    await stack.close();
  });

  test('the SDK sends x-api-key: accepted, and neither it nor Authorization reaches the provider', async () => {
    const message = await new Anthropic({ baseURL: stack.edge.url, apiKey: KEY, maxRetries: 0 }).messages.create({ model: ALIAS, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(message.type, 'message');
    const headers = stack.mock.lastRequest('/v1/messages')?.headers ?? {};
    assert.equal(headers['x-api-key'], undefined);
    assert.equal(headers.authorization, undefined);
    assert.ok(!JSON.stringify(headers).includes(KEY));
  });

  test('a wrong x-api-key is an Anthropic-format 401 authentication_error', async () => {
    await assert.rejects(new Anthropic({ baseURL: stack.edge.url, apiKey: 'sk-wrong', maxRetries: 0 }).messages.create({ model: ALIAS, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }), (err: unknown) => {
      assert.ok(err instanceof Anthropic.AuthenticationError, String(err));
      const body = err.error as { type?: string; error?: { type?: string; message?: string } };
      assert.equal(body.type, 'error');
      assert.equal(body.error?.type, 'authentication_error');
      assert.match(body.error?.message ?? '', /x-api-key/);
      return true;
    });
  });

  test('x-api-key also works on the OpenAI routes', async () => {
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: `{"model":"${ALIAS}","messages":[{"role":"user","content":"hi"}]}`,
    });
    assert.equal(res.status, 200);
    await res.text();
  });
});
