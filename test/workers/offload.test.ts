import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { inspectBody } from '../../src/workers/http/inspect.js';
import { OffloadPool } from '../../src/workers/offload/offload-pool.js';
import { countPromptTokens } from '../../src/workers/offload/prompt-tokens.js';
import type { ClientServer } from '../../src/workers/http/client-server.js';
import { ALIAS, SERVED, startStack } from '../helpers/stack.js';

const MB = 1 << 20;
const pool = new OffloadPool(1);
after(() => pool.close());

/** A body that owns its ArrayBuffer, as fastify's parser hands over a large one. */
function owned(text: string): Buffer {
  const bytes = Buffer.from(text);
  const out = Buffer.from(new ArrayBuffer(bytes.length));
  bytes.copy(out);
  return out;
}

function chat(content: string): string {
  return JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content }] });
}

const VALID = chat(' hello'.repeat(50_000)); // 300 KB, 50,000 tokens of text
const INVALID = VALID.slice(0, -2); // truncated
const TOO_DEEP = `{"model":"m","pad":"${'x'.repeat(300_000)}","deep":${'['.repeat(100)}${']'.repeat(100)}}`;

test('large bodies get the same verdicts in the pool as inline, and the pool did the work', async () => {
  for (const [name, text] of [['valid', VALID], ['invalid', INVALID], ['too deep', TOO_DEEP]] as const) {
    const inline = inspectBody(Buffer.from(text), 64);
    const before = pool.completed;
    const body = owned(text);
    const done = await pool.inspect(body, 64);
    assert.equal(pool.completed, before + 1, `${name}: inspected in the pool`);
    const { inputTokens, ...verdict } = done.info as typeof done.info & { inputTokens?: number };
    assert.deepEqual(verdict, inline, name);
    assert.equal(done.body.toString(), text, `${name}: the bytes come back intact`);
    // Moved, not copied: the caller's Buffer lost its memory to the pool and got it back.
    assert.equal(body.length, 0, `${name}: body moved`);
    if (name === 'valid') assert.equal(inputTokens, 50_000 + 6, 'exact prompt tokens (+3 per message, +3 reply priming)');
    else assert.equal(inputTokens, undefined);
  }
  assert.equal(inspectBody(Buffer.from(TOO_DEEP), 64).ok, false);
  assert.equal((inspectBody(Buffer.from(TOO_DEEP), 64) as { kind: string }).kind, 'too_deep');
});

test('a body sharing its ArrayBuffer (a slice) is copied, and the caller keeps it', async () => {
  const backing = Buffer.from(`xx${VALID}yy`);
  const body = backing.subarray(2, backing.length - 2);
  const done = await pool.inspect(body, 64);
  assert.equal(done.info.ok, true);
  assert.equal(body.toString(), VALID);
  assert.equal(done.body.toString(), VALID);
});

test('token counting reads chat, completion and embedding prompts, and stays bounded on pathological text', () => {
  assert.equal(countPromptTokens(Buffer.from(JSON.stringify({ model: 'm', prompt: ' hello'.repeat(1000) }))), 1000);
  assert.equal(countPromptTokens(Buffer.from(JSON.stringify({ model: 'm', input: ['hello', [1, 2, 3]] }))), 4);
  assert.equal(countPromptTokens(Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }] }))), 1 + 6);
  assert.equal(countPromptTokens(Buffer.from(JSON.stringify({ model: 'm' }))), -1);
  // Long runs without a space make BPE quadratic (1 MB of '=' takes minutes whole); sliced and budgeted it stays short.
  const started = performance.now();
  const tokens = countPromptTokens(Buffer.from(JSON.stringify({ model: 'm', prompt: '=-+*#~^'.repeat(150_000) })), 50);
  assert.ok(performance.now() - started < 1_000, 'bounded time');
  assert.ok(tokens > 1_000, `an estimate, not zero: ${tokens}`);
});

test('after close the pool has no threads and inspects inline', async () => {
  const own = new OffloadPool(1);
  await own.inspect(owned(VALID), 64);
  assert.equal(own.threads, 1);
  await own.close();
  assert.equal(own.threads, 0);
  const done = await own.inspect(owned(VALID), 64);
  assert.equal(done.info.ok, true);
  assert.equal(own.completed, 1, 'only the inspection before close ran in the pool');
  assert.equal(own.threads, 0);
});

test('through the edge: 1 MB bodies are inspected in the pool; valid ones proxy, invalid ones get 400', async () => {
  const stack = await startStack({ bodyBytes: 4 * MB, configure: (raw) => { (raw.limits as Record<string, unknown>).offload_bytes = 64 * 1024; } });
  try {
    const post = (body: string) => fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    // ~1 MB, ~50k tokens: bytes / 4 (262k) would exceed the provider's max_context_tokens (131072).
    const big = chat(' internationalization'.repeat(50_000));
    const ok = await post(big);
    assert.equal(ok.status, 200, await ok.clone().text());
    assert.equal((await ok.json() as { object: string }).object, 'chat.completion');
    assert.equal(stack.mock.lastRequest('/v1/chat/completions')?.body.length, big.length - ALIAS.length + SERVED.length, 'model rewritten, body intact');
    const bad = await post(big.slice(0, -3));
    assert.equal(bad.status, 400);
    assert.equal((await bad.json() as { error: { code: string } }).error.code, 'invalid_json');
    const deep = await post(`{"model":"${ALIAS}","pad":"${'x'.repeat(MB)}","deep":${'['.repeat(100)}${']'.repeat(100)}}`);
    assert.equal(deep.status, 400);
    assert.equal((await deep.json() as { error: { code: string } }).error.code, 'json_too_deep');
  } finally {
    await stack.close();
  }
  // With workers.count 0 the listener is on this thread: its pool did the three inspections, and closed with the edge.
  const client = (stack.edge as unknown as { plane: { client?: ClientServer } }).plane.client;
  if (client !== undefined) {
    assert.equal(client.offload?.completed, 3);
    assert.equal(client.offload?.threads, 0);
  }
});
