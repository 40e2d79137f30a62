import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StreamTail, usageFromTail } from '../../src/workers/tunnel/sse-usage.js';

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

test('the tail keeps only the newest frames it needs, however long the stream', () => {
  const tail = new StreamTail();
  for (let i = 0; i < 100_000; i++) tail.push(Buffer.from(chunk(i)));
  const kept = tail.keptFrames;
  assert.ok(kept < 50, `kept ${kept} frames`);
});
