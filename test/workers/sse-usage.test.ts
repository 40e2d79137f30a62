import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inputTokensFromHead, StreamTail, USAGE_TAIL_BYTES, usageFromTail } from '../../src/workers/tunnel/sse-usage.js';

const chunk = (i: number) => `data: {"id":"c","choices":[{"delta":{"content":"tok${i}"}}]}\n\n`;

test('usage of the final SSE chunk is found in the tail of the stream', () => {
  const tail = new StreamTail();
  for (let i = 0; i < 500; i++) tail.push(Buffer.from(chunk(i)));
  tail.push(Buffer.from('data: {"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":500,"total_tokens":512}}\n\n'));
  tail.push(Buffer.from('data: [DONE]\n\n'));
  assert.deepEqual(tail.usage(), { promptTokens: 12, completionTokens: 500 });
});

test('usage split across two frames is still found; a stream without usage gives none', () => {
  const final = Buffer.from('data: {"usage":{"prompt_tokens":3,"completion_tokens":4}}\n\n');
  assert.deepEqual(usageFromTail([final.subarray(0, 20), final.subarray(20)]), { promptTokens: 3, completionTokens: 4 });
  const tail = new StreamTail();
  for (let i = 0; i < 10; i++) tail.push(Buffer.from(chunk(i)));
  assert.equal(tail.usage(), undefined);
});

test('the tail keeps only the newest bytes it needs, however long the stream', () => {
  const tail = new StreamTail();
  for (let i = 0; i < 100_000; i++) tail.push(Buffer.from(chunk(i)));
  assert.equal(tail.keptBytes, USAGE_TAIL_BYTES);
});

test('past the first frame the tail holds copies: frames reused by the relay afterwards do not change what it reads', () => {
  // One buffer that the "relay" overwrites after every push, as a decoder reusing its memory would.
  const scratch = Buffer.alloc(256);
  const tail = new StreamTail();
  const events = [...Array.from({ length: 40 }, (_, i) => chunk(i)), 'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":40}}\n\n', 'data: [DONE]\n\n'];
  for (const event of events) {
    const n = scratch.write(event, 'latin1');
    tail.push(scratch.subarray(0, n));
    scratch.fill(0x20);
  }
  assert.deepEqual(tail.usage(), { promptTokens: 7, completionTokens: 40 });
});

test('usage is read across the point where the ring wraps, and from one frame larger than the ring', () => {
  const usageEvent = 'data: {"usage":{"prompt_tokens":5,"completion_tokens":6}}\n\n';
  // Filler that leaves the ring's write position a few bytes before its end, so the usage event wraps.
  for (let lead = 1; lead < usageEvent.length; lead += 7) {
    const tail = new StreamTail();
    tail.push(Buffer.from('data: {}\n\n'));
    const fill = USAGE_TAIL_BYTES - 'data: {}\n\n'.length - lead;
    tail.push(Buffer.alloc(fill, 0x20));
    tail.push(Buffer.from(usageEvent));
    tail.push(Buffer.from('data: [DONE]\n\n'));
    assert.deepEqual(tail.usage(), { promptTokens: 5, completionTokens: 6 }, `lead ${lead}`);
  }
  const big = new StreamTail();
  big.push(Buffer.from('data: {}\n\n'));
  big.push(Buffer.concat([Buffer.alloc(10_000, 0x20), Buffer.from(usageEvent)]));
  assert.deepEqual(big.usage(), { promptTokens: 5, completionTokens: 6 });
  assert.equal(big.keptBytes, USAGE_TAIL_BYTES);
});

test('a one-frame answer is read from the frame itself', () => {
  const tail = new StreamTail();
  tail.push(Buffer.from('{"id":"x","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}'));
  assert.deepEqual(tail.usage(), { promptTokens: 1, completionTokens: 2 });
});

test("a JSON answer whose usage is followed by tens of KiB (vLLM's prompt_logprobs, prompt_token_ids) is still read, at every frame cut", () => {
  const plp = [null, ...Array.from({ length: 300 }, (_, i) => ({ [String(900 + i)]: { logprob: -1.5, rank: 2, decoded_token: i % 7 === 0 ? 'usage' : 'tok' } }))];
  const body = Buffer.from(
    JSON.stringify({ id: 'c', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 301, total_tokens: 311, completion_tokens: 10, prompt_tokens_details: null }, prompt_logprobs: plp, prompt_token_ids: Array.from({ length: 301 }, (_, i) => 900 + i), kv_transfer_params: null }),
  );
  const key = body.indexOf('"usage"');
  // The first frame ends `cut` bytes into the key (or past it); the rest come in frames of `size`, down to single bytes.
  for (const size of [1, 2, 5, 7, 13, 4096]) {
    for (const cut of [0, 1, 3, 6, 7, 9, 500]) {
      const tail = new StreamTail(true);
      tail.push(body.subarray(0, key + cut));
      for (let at = key + cut; at < body.length; at += size) tail.push(body.subarray(at, Math.min(body.length, at + size)));
      assert.deepEqual(tail.usage(), { promptTokens: 301, completionTokens: 10 }, `frames of ${size}, cut ${cut}`);
    }
  }
  // One frame: the decoded token "usage" after the key is a value, not the key.
  const one = new StreamTail(true);
  one.push(body);
  assert.deepEqual(one.usage(), { promptTokens: 301, completionTokens: 10 });
});

// The regular expressions the byte scanner replaced: its results must be theirs on every usage object a
// provider sends (JSON whitespace, nested details, the Responses and Messages names, counts missing or null).
function usageByRegex(text: string): { promptTokens: number; completionTokens: number } | undefined {
  const at = text.lastIndexOf('"usage"');
  if (at < 0) return undefined;
  let depth = 0;
  let end = Math.min(text.length, at + 1024);
  for (let i = at + 7; i < end; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth <= 0) {
      end = i + 1;
      break;
    }
  }
  const obj = text.slice(at, end);
  const prompt = /"(prompt|input)_tokens"[ \t\r\n]*:[ \t\r\n]*(\d+)/.exec(obj);
  const completion = /"(?:completion|output)_tokens"[ \t\r\n]*:[ \t\r\n]*(\d+)/.exec(obj);
  // Anthropic's cache counts add to input_tokens; OpenAI's prompt_tokens already holds them.
  const cacheRead = /"cache_read_input_tokens"[ \t\r\n]*:[ \t\r\n]*(\d+)/.exec(obj);
  const cacheCreation = /"cache_creation_input_tokens"[ \t\r\n]*:[ \t\r\n]*(\d+)/.exec(obj);
  const cached = prompt?.[1] === 'prompt' ? 0 : Number(cacheRead?.[1] ?? 0) + Number(cacheCreation?.[1] ?? 0);
  if (!prompt && !completion && !cacheRead && !cacheCreation) return undefined;
  return { promptTokens: (prompt ? Number(prompt[2]) : 0) + cached, completionTokens: completion ? Number(completion[1]) : 0 };
}

test('the byte scanner reads the same counts as the regular expressions it replaced', () => {
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const ws = () => [' ', '', '\n  ', '\t', ''][rand(5)];
  const count = () => [String(rand(100_000)), 'null', '"12"', '0', '-3', String(rand(10))][rand(6)];
  const key = (names: string[]) => names[rand(names.length)];
  for (let i = 0; i < 5_000; i++) {
    const fields: string[] = [];
    const n = rand(6);
    for (let f = 0; f < n; f++) {
      const name = key(['prompt_tokens', 'input_tokens', 'completion_tokens', 'output_tokens', 'total_tokens', 'prompt_tokens_details', 'cache_read_input_tokens', 'cache_creation_input_tokens']);
      const value = name.endsWith('_details') ? `{${ws()}"cached_tokens"${ws()}:${ws()}${count()}${ws()}}` : count();
      fields.push(`${ws()}"${name}"${ws()}:${ws()}${value}`);
    }
    const body = `{"id":"x","choices":[],"usage":${ws()}{${fields.join(',')}${ws()}}${ws()}}`;
    const text = rand(2) === 0 ? body : `data: ${body}\n\ndata: [DONE]\n\n`;
    assert.deepEqual(usageFromTail([Buffer.from(text, 'latin1')]), usageByRegex(text), text);
  }
});

test('a count split across frames, or at the edge of the usage object, is read as the bytes say', () => {
  const text = '{"usage":{"prompt_tokens" : 123,"completion_tokens":\n45}}';
  for (let cut = 1; cut < text.length; cut++) {
    const b = Buffer.from(text);
    assert.deepEqual(usageFromTail([b.subarray(0, cut), b.subarray(cut)]), { promptTokens: 123, completionTokens: 45 }, `cut ${cut}`);
  }
  assert.equal(usageFromTail([Buffer.from('{"usage":{"prompt_tokens":}}')]), undefined);
  assert.deepEqual(usageFromTail([Buffer.from('{"usage":{"output_tokens":9')]), { promptTokens: 0, completionTokens: 9 });
});

test('a count no provider could mean (more than 12 digits) is not read: it would reach a counter as Infinity', () => {
  const huge = '9'.repeat(400);
  assert.equal(usageFromTail([Buffer.from(`data: {"usage":{"prompt_tokens":${huge},"completion_tokens":${huge}}}\n\n`)]), undefined);
  assert.deepEqual(usageFromTail([Buffer.from(`data: {"usage":{"prompt_tokens":${huge},"completion_tokens":7}}\n\n`)]), { promptTokens: 0, completionTokens: 7 });
  assert.deepEqual(usageFromTail([Buffer.from('data: {"usage":{"prompt_tokens":999999999999,"completion_tokens":1}}\n\n')]), { promptTokens: 999_999_999_999, completionTokens: 1 });
});

test('Messages usage: prompt-cache counts add to input_tokens; OpenAI prompt_tokens already includes its cached tokens', () => {
  const message = Buffer.from('{"type":"message","usage":{"input_tokens":4,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":0},"output_tokens":9,"service_tier":"standard"}}');
  assert.deepEqual(usageFromTail([message]), { promptTokens: 2104, completionTokens: 9 });
  // Newer servers repeat the counts in message_delta; the cache counts may follow output_tokens.
  const delta = Buffer.from('event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9,"input_tokens":4,"cache_read_input_tokens":50}}\n\n');
  assert.deepEqual(usageFromTail([delta]), { promptTokens: 54, completionTokens: 9 });
  const chat = Buffer.from('{"usage":{"prompt_tokens":2104,"completion_tokens":9,"total_tokens":2113,"prompt_tokens_details":{"cached_tokens":2000}}}');
  assert.deepEqual(usageFromTail([chat]), { promptTokens: 2104, completionTokens: 9 });
  const responses = Buffer.from('{"usage":{"input_tokens":2104,"input_tokens_details":{"cached_tokens":2000},"output_tokens":9,"total_tokens":2113}}');
  assert.deepEqual(usageFromTail([responses]), { promptTokens: 2104, completionTokens: 9 });
});

test('a stream\'s message_start gives the prompt count, cache counts included, when message_delta has output_tokens only', () => {
  const head = Buffer.from('event: message_start\ndata: {"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":40,"output_tokens":1}}}\n\n');
  assert.equal(inputTokensFromHead(head), 43);
  assert.equal(inputTokensFromHead(Buffer.from('event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":3,"output_tokens":1}}}\n\n')), 3);
  assert.equal(inputTokensFromHead(Buffer.from('event: ping\ndata: {"type":"ping"}\n\n')), undefined);
});

test('StreamTail.newest: the last bytes in order, whole or wrapped', () => {
  const tail = new StreamTail();
  assert.equal(tail.newest(), undefined);
  tail.push(Buffer.from('abc'));
  assert.equal(tail.newest()?.toString(), 'abc');
  tail.push(Buffer.from('def'));
  assert.equal(tail.newest()?.toString(), 'abcdef');
  // Wraps the ring: its oldest bytes now sit past its newest.
  const long = 'x'.repeat(USAGE_TAIL_BYTES - 7) + 'END';
  tail.push(Buffer.from(long));
  assert.equal(tail.newest()?.toString(), `cdef${long}`);
});
