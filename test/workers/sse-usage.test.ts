import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StreamTail, USAGE_TAIL_BYTES, usageFromTail } from '../../src/workers/tunnel/sse-usage.js';

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
