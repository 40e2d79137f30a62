// Client API keys through the real stack and the official openai SDK: 401
// without a valid key, 403 for a model the key may not use, 429 past the
// key's concurrency, the slot freed exactly when an exchange ends, and the
// client's key never reaching the provider.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, EMBED_ALIAS, inFlight, startStack, waitUntil, type Stack } from '../helpers/stack.js';
import { sample } from '../main/admin/ops-stack.js';

const ALICE = 'sk-alice-0123456789';
const BOB = 'sk-bob-9876543210';
const CAROL = 'sk-carol-5555555555';

function sdk(stack: Stack, apiKey: string): OpenAI {
  return new OpenAI({ baseURL: stack.baseURL, apiKey, maxRetries: 0, timeout: 10_000 });
}

function chat(stack: Stack, key: string | undefined, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { authorization: `Bearer ${key}` }), ...headers },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    signal,
  });
}

async function errorOf(res: Response): Promise<{ status: number; code: string; type: string }> {
  const body = (await res.json()) as { error: { code: string; type: string } };
  return { status: res.status, code: body.error.code, type: body.error.type };
}

describe('client API keys', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      capacity: 8,
      // vllm serves the Responses API too (stored responses and their owner).
      providerType: 'vllm',
      mock: { ttftMs: 0, tokens: 3, intervalMs: 1 },
      configure(raw) {
        raw.auth = {
          api_keys: [
            { name: 'alice', key_sha256: sha256Hex(ALICE), max_concurrent: 2 },
            { name: 'bob', key_sha256: sha256Hex(BOB).toUpperCase(), models: [EMBED_ALIAS] },
            { name: 'carol', key_sha256: sha256Hex(CAROL) },
          ],
        };
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('no key, a malformed header or an unknown key get 401 invalid_api_key', async () => {
    for (const auth of [undefined, 'Bearer', `Basic ${ALICE}`, 'Bearer sk-nobody', `Bearer ${ALICE}x`]) {
      const res = await fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(auth === undefined ? {} : { authorization: auth }) },
        body: JSON.stringify({ model: ALIAS, messages: [] }),
      });
      assert.equal(res.headers.get('www-authenticate'), 'Bearer');
      assert.deepEqual(await errorOf(res), { status: 401, code: 'invalid_api_key', type: 'authentication_error' }, `authorization ${auth}`);
    }
    const models = await fetch(`${stack.baseURL}/models`);
    assert.equal(models.status, 401);
    await models.arrayBuffer();
    const health = await fetch(`${stack.edge.url}/healthz`);
    assert.equal(health.status, 200, 'health checks need no key');
    await health.arrayBuffer();
    assert.equal(stack.mock.stats.requests, 0, 'nothing unauthenticated reached the provider');
  });

  test('a request without a valid key is refused from its head: its body is never waited for, nor asked for with 100 Continue', async () => {
    // Answers read off one raw connection: the head is sent, the 900 kB body never is.
    const exchange = (head: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = connect(Number(new URL(stack.baseURL).port), '127.0.0.1');
        let text = '';
        socket.setEncoding('latin1');
        socket.on('data', (chunk: string) => {
          text += chunk;
          // A final answer (not an interim 100) whose JSON body is whole.
          if (/^HTTP\/1\.1 [2-5]\d\d /m.test(text) && text.trimEnd().endsWith('}')) {
            socket.destroy();
            resolve(text);
          }
        });
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
        socket.setTimeout(10_000, () => {
          socket.destroy();
          resolve(`no answer in 10 s: ${text}`);
        });
        socket.write(head + '{"model":');
      });
    const head = (extra: string): string => `POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: 900000\r\n${extra}\r\n`;
    for (const [what, extra] of [['no key', ''], ['a wrong key', 'Authorization: Bearer sk-nobody\r\n'], ['no key, Expect: 100-continue', 'Expect: 100-continue\r\n']]) {
      const answer = await exchange(head(extra));
      assert.match(answer, /^HTTP\/1\.1 401 /, `${what}: ${answer.slice(0, 200)}`);
      assert.doesNotMatch(answer, /100 Continue/i, what);
      assert.match(answer, /invalid_api_key/, what);
      assert.match(answer, /\r\nconnection: close\r\n/i, `${what}: the unread body is not taken`);
    }
    // A good key with Expect: 100-continue is told to go on.
    const invited = await exchange(head(`Authorization: Bearer ${ALICE}\r\nExpect: 100-continue\r\n`).replace('Content-Length: 900000', 'Content-Length: 9'));
    assert.match(invited, /^HTTP\/1\.1 100 Continue/, invited.slice(0, 200));
    assert.equal(stack.mock.stats.requests, 0, 'nothing unauthenticated reached the provider');
  });

  test('a percent-encoded path reaches the same route, so it needs the same key', async () => {
    const before = stack.mock.stats.requests;
    const body = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    for (const path of ['/v1/%63hat/completions', '/v1/chat/%63ompletions']) {
      const res = await fetch(`${stack.edge.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      assert.equal(res.status, 401, `${path}: ${await res.clone().text()}`);
      await res.arrayBuffer();
    }
    const models = await fetch(`${stack.edge.url}/v1/model%73`);
    assert.equal(models.status, 401);
    await models.arrayBuffer();
    assert.equal(stack.mock.stats.requests, before, 'nothing unauthenticated reached the provider');
  });

  test('the openai SDK with a wrong key raises AuthenticationError', async () => {
    const err = await sdk(stack, 'sk-wrong').chat.completions.create({ model: ALIAS, messages: [] }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.AuthenticationError);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'invalid_api_key');
    assert.match(err.requestID ?? '', /^req-/, 'the SDK reads the refusal\'s request id');
  });

  test('the Anthropic SDK with a wrong key, and for an unknown model id, gets its error shape with a request id; both count as refusals', async () => {
    const client = (key: string): Anthropic => new Anthropic({ baseURL: stack.edge.url, apiKey: key, maxRetries: 0, timeout: 10_000 });
    const before = await stack.edge.scrapeMetrics();
    const unauthenticated = await client('sk-wrong').messages.create({ model: ALIAS, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    assert.ok(unauthenticated instanceof Anthropic.AuthenticationError, String(unauthenticated));
    assert.match(unauthenticated.requestID ?? '', /^req-/);
    const unknown = await client(CAROL).models.retrieve('no-such-model').catch((e: unknown) => e);
    assert.ok(unknown instanceof Anthropic.NotFoundError, String(unknown));
    assert.equal((unknown.error as { error?: { type?: string } }).error?.type, 'not_found_error');
    assert.match(unknown.requestID ?? '', /^req-/);
    assert.notEqual(unknown.requestID, unauthenticated.requestID);
    const after = await stack.edge.scrapeMetrics();
    const delta = (reason: string): number => (sample(after, 'edge_rejects_total', { reason }) ?? 0) - (sample(before, 'edge_rejects_total', { reason }) ?? 0);
    assert.equal(delta('invalid_api_key'), 1);
    assert.equal(delta('model_not_found'), 1, 'GET /v1/models/{id} for an unknown id is a refusal like any other');
  });

  test('a valid key is served and its value never reaches the provider', async () => {
    const completion = await sdk(stack, ALICE).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(completion.object, 'chat.completion');
    const headers = stack.mock.requestLog.at(-1)?.receivedHeaders ?? {};
    assert.equal(headers.authorization, undefined);
    assert.ok(!JSON.stringify(headers).includes(ALICE));
    // Nor may a client pick the account the provider's key bills (the openai SDK sends these from its options).
    await new OpenAI({ baseURL: stack.baseURL, apiKey: ALICE, organization: 'org-other', project: 'proj_other', maxRetries: 0 }).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    const picked = stack.mock.requestLog.at(-1)?.receivedHeaders ?? {};
    assert.deepEqual([picked['openai-organization'], picked['openai-project']], [undefined, undefined]);
    // Nor another API's credential header a client may send beside its edge key (Azure's, Gemini's).
    await new OpenAI({ baseURL: stack.baseURL, apiKey: ALICE, maxRetries: 0, defaultHeaders: { 'api-key': 'azure-secret-1', 'x-goog-api-key': 'gemini-secret-2' } }).chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    const foreign = stack.mock.requestLog.at(-1)?.receivedHeaders ?? {};
    assert.deepEqual([foreign['api-key'], foreign['x-goog-api-key']], [undefined, undefined]);
    const stream = await sdk(stack, ALICE).chat.completions.create({ model: ALIAS, stream: true, messages: [] });
    let chunks = 0;
    for await (const _ of stream) chunks++;
    assert.ok(chunks > 0);
  });

  test('a key limited to some models gets 403 model_not_allowed for others and sees only its own in /v1/models', async () => {
    const bob = sdk(stack, BOB);
    const err = await bob.chat.completions.create({ model: ALIAS, messages: [] }).catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.PermissionDeniedError);
    assert.equal(err.status, 403);
    assert.equal(err.code, 'model_not_allowed');
    const embedding = await bob.embeddings.create({ model: EMBED_ALIAS, input: 'x' });
    assert.equal(embedding.data.length, 1);
    const ids: string[] = [];
    for await (const m of bob.models.list()) ids.push(m.id);
    assert.deepEqual(ids, [EMBED_ALIAS]);
    assert.equal((await bob.models.retrieve(EMBED_ALIAS)).id, EMBED_ALIAS);
    // One it may not use is not in its list, so not retrievable either.
    assert.ok((await bob.models.retrieve(ALIAS).catch((e: unknown) => e)) instanceof OpenAI.NotFoundError);
    assert.ok((await new OpenAI({ baseURL: (bob as unknown as { baseURL: string }).baseURL, apiKey: 'sk-wrong', maxRetries: 0 }).models.retrieve(EMBED_ALIAS).catch((e: unknown) => e)) instanceof OpenAI.AuthenticationError);
    const all: string[] = [];
    for await (const m of sdk(stack, ALICE).models.list()) all.push(m.id);
    assert.deepEqual(all.sort(), [ALIAS, EMBED_ALIAS].sort());
    // The Anthropic SDK (x-api-key): the same keys, its own shapes, and its own error for a bad key.
    const anthropic = (apiKey: string): Anthropic => new Anthropic({ baseURL: stack.edge.url, apiKey, maxRetries: 0, timeout: 10_000 });
    const bobsOwn: string[] = [];
    for await (const m of anthropic(BOB).models.list()) bobsOwn.push(m.id);
    assert.deepEqual(bobsOwn, [EMBED_ALIAS]);
    const refused = await anthropic('sk-wrong').models.list().catch((e: unknown) => e);
    assert.ok(refused instanceof Anthropic.AuthenticationError, String(refused));
    assert.equal((refused.error as { type?: string; error?: { type?: string } }).type, 'error', 'an Anthropic-format error body');
    assert.equal((refused.error as { error?: { type?: string } }).error?.type, 'authentication_error');
  });

  test('past max_concurrent a key gets 429 too_many_concurrent_requests; the slot frees when an exchange ends', async () => {
    const slow = { 'x-mock-tokens': '2', 'x-mock-interval-ms': '1500' };
    const first = chat(stack, ALICE, slow);
    const aborter = new AbortController();
    const second = chat(stack, ALICE, { 'x-mock-tokens': '50', 'x-mock-interval-ms': '100' }, aborter.signal).catch((e: unknown) => e);
    await waitUntil(() => inFlight(stack.edge) === 2, 'both requests to hold a slot');
    const third = await chat(stack, ALICE);
    assert.equal(third.headers.get('retry-after'), '1');
    assert.deepEqual(await errorOf(third), { status: 429, code: 'too_many_concurrent_requests', type: 'rate_limit_error' });
    // Another key is not affected by alice's limit.
    const bobEmbed = await sdk(stack, BOB).embeddings.create({ model: EMBED_ALIAS, input: 'x' });
    assert.equal(bobEmbed.data.length, 1);
    // A client abort (while the provider is still generating) frees alice's slot at once.
    aborter.abort();
    assert.ok((await second) instanceof Error);
    await waitUntil(() => inFlight(stack.edge) === 1, 'the aborted request to release its lease');
    const fourth = await chat(stack, ALICE);
    assert.equal(fourth.status, 200, 'the aborted request gave its key slot back');
    await fourth.arrayBuffer();
    assert.equal((await first).status, 200);
    // Rejections and errors give the slot back too: two more at once fit again.
    const both = await Promise.all([chat(stack, ALICE), chat(stack, ALICE)]);
    assert.deepEqual(both.map((r) => r.status), [200, 200]);
    await Promise.all(both.map((r) => r.arrayBuffer()));
  });

  test('an error reply before dispatch (unknown model) does not leak a key slot', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}` },
        body: JSON.stringify({ model: 'nope', messages: [] }),
      });
      assert.equal(res.status, 404);
      await res.arrayBuffer();
    }
    const both = await Promise.all([chat(stack, ALICE), chat(stack, ALICE)]);
    assert.deepEqual(both.map((r) => r.status), [200, 200]);
    await Promise.all(both.map((r) => r.arrayBuffer()));
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released (with workers the release record trails the response)');
    assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
  });

  test('refusals before the data path (401, 403, a bad body, an unknown route or response id, an oversized head) are counted in edge_rejects_total under their code', async () => {
    const codes = ['invalid_api_key', 'model_not_allowed', 'invalid_json', 'unknown_url', 'response_not_found', 'request_headers_too_large'];
    const before = await stack.edge.scrapeMetrics();
    const seen: string[] = [];
    const ids: string[] = [];
    const refuse = async (path: string, init: RequestInit): Promise<void> => {
      const res = await fetch(`${stack.baseURL}${path}`, init);
      seen.push(((await res.json()) as { error: { code: string } }).error.code);
      // No run names a refusal, yet the SDKs read x-request-id (openai) and request-id (Anthropic) from every error.
      assert.equal(res.headers.get('request-id'), res.headers.get('x-request-id'), path);
      ids.push(res.headers.get('x-request-id') ?? '');
    };
    const json = (key: string | undefined, body: string): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) }, body });
    await refuse('/chat/completions', json(undefined, JSON.stringify({ model: ALIAS, messages: [] })));
    await refuse('/chat/completions', json('sk-nobody', JSON.stringify({ model: ALIAS, messages: [] })));
    await refuse('/chat/completions', json(BOB, JSON.stringify({ model: ALIAS, messages: [] })));
    await refuse('/chat/completions', json(ALICE, '{"model":'));
    await refuse('/nowhere', { headers: { authorization: `Bearer ${ALICE}` } });
    await refuse('/responses/resp_nobody0000', { headers: { authorization: `Bearer ${ALICE}` } });
    // A head over limits.max_header_bytes: node:http's parser refuses it, answered on the raw socket.
    seen.push(
      await new Promise<string>((resolve) => {
        const socket = connect(Number(new URL(stack.baseURL).port), '127.0.0.1');
        let text = '';
        socket.setEncoding('latin1');
        socket.on('data', (chunk: string) => (text += chunk));
        socket.on('close', () => {
          ids.push(/^x-request-id: (\S+)\r$/im.exec(text)?.[1] ?? '');
          resolve((JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: { code: string } }).error.code);
        });
        // The edge answers and closes while the head is still being written: a reset here is expected.
        socket.on('error', () => {});
        socket.write(`GET /v1/models HTTP/1.1\r\nhost: t\r\nx-big: ${'a'.repeat(200 * 1024)}\r\n\r\n`);
      }),
    );
    assert.deepEqual([...new Set(seen)].sort(), [...codes].sort(), `the codes answered: ${seen.join(', ')}`);
    assert.ok(ids.every((id) => /^req-[0-9a-f]+-[0-9a-z]+$/.test(id)), `every refusal names itself: ${ids.join(', ')}`);
    assert.equal(new Set(ids).size, ids.length, 'each refusal its own id');
    const after = await stack.edge.scrapeMetrics();
    for (const code of codes) {
      const expected = seen.filter((c) => c === code).length;
      assert.equal((sample(after, 'edge_rejects_total', { reason: code }) ?? 0) - (sample(before, 'edge_rejects_total', { reason: code }) ?? 0), expected, code);
    }
  });

  test("a stored response is its key's own: another key can neither read, delete, cancel nor continue it, nor learn it exists", async () => {
    const first = await sdk(stack, ALICE).responses.create({ model: ALIAS, input: 'my secret turn' });
    const carol = sdk(stack, CAROL);
    const seen = stack.mock.stats.requests;
    const statusOf = async (call: () => Promise<unknown>): Promise<string> => {
      try {
        await call();
        return 'served';
      } catch (err) {
        const e = err as { status?: number; code?: string };
        return `${e.status} ${e.code}`;
      }
    };
    assert.equal(await statusOf(() => carol.responses.retrieve(first.id)), '404 response_not_found');
    assert.equal(await statusOf(() => carol.responses.cancel(first.id)), '404 response_not_found');
    assert.equal(await statusOf(() => carol.responses.delete(first.id)), '404 response_not_found');
    assert.equal(await statusOf(() => carol.responses.create({ model: ALIAS, input: 'repeat it', previous_response_id: first.id })), '400 previous_response_not_found');
    // As for an id no one made: the answer says nothing of whose it is.
    assert.equal(await statusOf(() => carol.responses.retrieve('resp_nobody0000')), '404 response_not_found');
    assert.equal(stack.mock.stats.requests, seen, "none of another key's calls reached the provider");
    // Its own key still has it, whole.
    const mine = await sdk(stack, ALICE).responses.retrieve(first.id);
    assert.equal(mine.id, first.id);
    const next = await sdk(stack, ALICE).responses.create({ model: ALIAS, input: 'and then', previous_response_id: first.id });
    assert.equal(next.previous_response_id, first.id);
  });
});
