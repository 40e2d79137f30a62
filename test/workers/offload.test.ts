import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { inspectBody } from '../../src/workers/http/inspect.js';
import { OffloadPool } from '../../src/workers/offload/offload-pool.js';
import { readFileSync, readdirSync } from 'node:fs';
import { countPromptTokens, EXACT_CHARS, promptTokens } from '../../src/workers/offload/prompt-tokens.js';
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
    if (name === 'valid') assert.equal(inputTokens, 50_000 + 6, 'prompt tokens (+3 per message, +3 reply priming); sampled, and exact on uniform text');
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
  // The other APIs' shapes: each finds the same 1,000 tokens of text (plus its per-message fixed cost).
  const text = ' hello'.repeat(1000);
  const shapes: Record<string, { body: Record<string, unknown>; fixed: number }> = {
    'Responses input items': { body: { model: 'm', input: [{ role: 'user', content: [{ type: 'input_text', text }] }] }, fixed: 3 },
    'Responses instructions': { body: { model: 'm', instructions: text, input: [] }, fixed: 3 },
    'Anthropic system blocks': { body: { model: 'm', system: [{ type: 'text', text }], messages: [] }, fixed: 3 + 3 },
    'Anthropic tool_result': {
      body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text }] }] }] },
      fixed: 3 + 3,
    },
  };
  for (const [name, { body, fixed }] of Object.entries(shapes)) assert.equal(countPromptTokens(Buffer.from(JSON.stringify(body))), 1000 + fixed, name);
  // Long runs without a space make BPE quadratic (1 MB of '=' takes minutes whole); sliced and budgeted it stays short.
  const started = performance.now();
  const tokens = countPromptTokens(Buffer.from(JSON.stringify({ model: 'm', prompt: '=-+*#~^'.repeat(150_000) })), 50);
  assert.ok(performance.now() - started < 1_000, 'bounded time');
  assert.ok(tokens > 1_000, `an estimate, not zero: ${tokens}`);
});

/** Text of this repository: prose (docs/), TypeScript (src/), and minified JSON (package-lock.json). */
function repoText(): { prose: string; code: string; json: string } {
  const root = new URL('../../../', import.meta.url);
  const read = (dir: string, ext: string): string =>
    readdirSync(new URL(dir, root))
      .filter((f) => f.endsWith(ext))
      .sort()
      .map((f) => readFileSync(new URL(`${dir}${f}`, root), 'utf8'))
      .join('\n');
  return { prose: read('docs/', '.md'), code: read('src/workers/', '.ts'), json: JSON.stringify(JSON.parse(readFileSync(new URL('package-lock.json', root), 'utf8'))) };
}

test('long prompts are counted from samples: a bounded amount of tokenizing, within a few percent of the exact count', () => {
  const { prose, code, json } = repoText();
  const cjk = '日本語のテキストはトークン化が異なります。中文文本也是如此，每个字符可能是一个或多个标记。';
  const cases: Record<string, Record<string, unknown>> = {
    '1 MB of prose': { model: 'm', messages: [{ role: 'user', content: prose.repeat(Math.ceil(MB / prose.length)).slice(0, MB) }] },
    'code, with a system prompt': { model: 'm', messages: [{ role: 'system', content: 'Review this.' }, { role: 'user', content: code.repeat(3) }] },
    'CJK completion prompt': { model: 'm', prompt: cjk.repeat(6_000) },
    // No space anywhere: every slice ends mid-run, and no search for one runs past its slice.
    'base64, no spaces': { model: 'm', messages: [{ role: 'user', content: Buffer.from(prose).toString('base64').repeat(2) }] },
    // Turns cycling through four kinds of text: a stride that matched the cycle would see one kind only.
    '400 turns of mixed text': {
      model: 'm',
      messages: Array.from({ length: 400 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: [prose, code, cjk.repeat(40), json][i % 4].slice((i * 997) % 20_000, ((i * 997) % 20_000) + 3_000) })),
    },
  };
  for (const [name, request] of Object.entries(cases)) {
    const body = Buffer.from(JSON.stringify(request));
    const exact = promptTokens(body, 60_000, Infinity);
    const sampled = promptTokens(body);
    assert.ok(exact !== undefined && sampled !== undefined, name);
    assert.ok(sampled.totalChars > EXACT_CHARS, `${name}: long enough to be sampled (${sampled.totalChars} chars)`);
    assert.equal(exact.sampledBytes, 0, `${name}: the reference counted every character`);
    assert.ok(sampled.sampledBytes > 0 && sampled.sampledBytes <= 128 * (1024 + 3), `${name}: ${sampled.sampledBytes} bytes tokenized (128 slices of 1 KB, each ending on a whole character)`);
    const error = sampled.tokens / exact.tokens - 1;
    assert.ok(Math.abs(error) < 0.06, `${name}: ${sampled.tokens} against exactly ${exact.tokens} (${(error * 100).toFixed(2)} %)`);
  }
  // Up to EXACT_CHARS every character is tokenized (within the time budget: a long one, so that a busy
  // machine, where the default 100 ms runs out and the rest is extrapolated, cannot change the count).
  const short = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: prose.slice(0, EXACT_CHARS) }] }));
  assert.equal(promptTokens(short, 60_000)?.sampledBytes, 0);
  assert.equal(promptTokens(short, 60_000)?.tokens, promptTokens(short, 60_000, Infinity)?.tokens);
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

test('tool definitions are counted with the prompt: a short message with huge tools is a long request', () => {
  const description = ' hello'.repeat(1000);
  const tool = { type: 'function', function: { name: 'lookup', description, parameters: { type: 'object', properties: {} } } };
  const messages = [{ role: 'user', content: 'hi' }];
  const bare = countPromptTokens(Buffer.from(JSON.stringify({ model: 'm', messages })));
  for (const [name, body] of Object.entries({
    'chat tools': { model: 'm', messages, tools: [tool] },
    'chat functions': { model: 'm', messages, functions: [tool.function] },
    'Anthropic tools': { model: 'm', messages, tools: [{ name: 'lookup', description, input_schema: { type: 'object' } }] },
    'Responses tools': { model: 'm', input: 'hi', tools: [{ type: 'function', name: 'lookup', description, parameters: { type: 'object' } }] },
  })) {
    const tokens = countPromptTokens(Buffer.from(JSON.stringify(body)));
    assert.ok(tokens >= bare + 1000, `${name}: ${tokens} counts the 1,000-token description`);
  }
  // Sampled past EXACT_CHARS too: 400 such tools (~2.4 MB of JSON) stay a long request.
  const many = countPromptTokens(Buffer.from(JSON.stringify({ model: 'm', messages, tools: Array.from({ length: 400 }, () => tool) })));
  assert.ok(many > 300_000, `sampled: ${many}`);
});

test('the arguments of earlier tool calls are counted: an agent conversation made of tool calls is not a short one', () => {
  const args = JSON.stringify({ query: ' hello'.repeat(1000) });
  const bare = countPromptTokens(Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })));
  for (const [name, body] of Object.entries({
    'chat tool_calls': { model: 'm', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'lookup', arguments: args } }] }] },
    'chat function_call': { model: 'm', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, function_call: { name: 'lookup', arguments: args } }] },
    'Anthropic tool_use': { model: 'm', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'lookup', input: JSON.parse(args) as unknown }] }] },
    'Responses function_call': { model: 'm', input: [{ role: 'user', content: 'hi' }, { type: 'function_call', call_id: 'c1', name: 'lookup', arguments: args }] },
  })) {
    const tokens = countPromptTokens(Buffer.from(JSON.stringify(body)));
    assert.ok(tokens >= bare + 1000, `${name}: ${tokens} counts the 1,000-token arguments`);
  }
});

test('a prompt that mentions a special token (<|endoftext|>) is counted as text', () => {
  const plain = countPromptTokens(Buffer.from(chat('the end of text marker ends here')));
  const marked = countPromptTokens(Buffer.from(chat('the <|endoftext|> marker ends here')));
  assert.ok(marked > plain - 3, `counted as its characters (${marked} tokens), not refused nor dropped`);
  // Long enough to be sampled: every slice may hold one.
  const long = promptTokens(Buffer.from(chat('see <|endoftext|> and <|endofprompt|> here '.repeat(40_000))));
  assert.ok(long !== undefined && long.sampledBytes > 0 && long.tokens > 40_000 * 10, `sampled count ${long?.tokens}`);
});

test('through the edge: large bodies that mention <|endoftext|> are served on every API, not refused', async () => {
  // vllm serves the Anthropic and Responses APIs too.
  const stack = await startStack({ providerType: 'vllm', bodyBytes: 4 * MB, configure: (raw) => { (raw.limits as Record<string, unknown>).offload_bytes = 64 * 1024; } });
  try {
    const text = 'the tokenizer splits <|endoftext|> here; ' + ' word'.repeat(20_000);
    const cases: [string, Record<string, unknown>][] = [
      ['/chat/completions', { model: ALIAS, messages: [{ role: 'user', content: text }] }],
      ['/messages', { model: ALIAS, max_tokens: 16, messages: [{ role: 'user', content: text }] }],
      ['/responses', { model: ALIAS, input: text }],
    ];
    for (const [path, body] of cases) {
      const res = await fetch(`${stack.baseURL}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body) });
      assert.equal(res.status, 200, `${path}: ${await res.clone().text()}`);
      await res.arrayBuffer();
      assert.ok((stack.mock.lastRequest(`/v1${path}`)?.body.length ?? 0) > 100_000, `${path}: the provider got the body`);
    }
  } finally {
    await stack.close();
  }
});
