// The checks the relay runs on each chunk it writes, to know whether the
// client already has the event that ends its answer.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { endsWithDone, endsWithErrorEvent, endsWithMessageStop, endsWithResponseEnd, lastEventError } from '../../src/workers/tunnel/sse-terminal.js';

const b = (text: string): Buffer => Buffer.from(text);

test('[DONE]: only a data line that is exactly [DONE], with or without the space, any line ends', () => {
  for (const yes of ['data: [DONE]\n\n', 'data:[DONE]\n\n', 'data: {"x":1}\n\ndata: [DONE]\n\n', 'data: [DONE]\r\n\r\n', 'data: [DONE]\r\r']) assert.ok(endsWithDone(b(yes)), JSON.stringify(yes));
  for (const no of ['data: {"content":"[DONE]"}\n\n', 'data: [DONE]x\n\n', 'xdata: [DONE]\n\n', 'data: [DONE]\n\ndata: {"x":1}\n\n', '[DONE]\n\n', '\n\n', '']) assert.ok(!endsWithDone(b(no)), JSON.stringify(no));
  // A Uint8Array view into a larger buffer, as frames are.
  const whole = b('xxxxdata: [DONE]\n\nyyyy');
  assert.ok(endsWithDone(new Uint8Array(whole.buffer, whole.byteOffset + 4, 14)));
});

test('message_stop: the event line or the type value, never the words quoted in a text delta', () => {
  for (const yes of ['event: message_stop\ndata: {"type":"message_stop"}\n\n', 'data: {"type":"message_stop"}\n\n', 'data: {"type": "message_stop"}\r\n\r\n', 'event: message_delta\ndata: {}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'])
    assert.ok(endsWithMessageStop(b(yes)), JSON.stringify(yes));
  for (const no of [
    'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"say \\"message_stop\\""}}\n\n',
    'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"message_stop"}}\n\n',
    'event: message_stop\ndata: {"type":"message_stop"}\n\nevent: ping\ndata: {"type":"ping"}\n\n',
    '',
  ])
    assert.ok(!endsWithMessageStop(b(no)), JSON.stringify(no));
  // Named by its event line, however long its data (a gateway may add fields), any line ends.
  const long = `event: message_stop\ndata: ${JSON.stringify({ type: 'message_stop', 'amazon-bedrock-invocationMetrics': { inputTokenCount: 3, outputTokenCount: 2 } })}\n\n`;
  for (const yes of [long, long.replaceAll('\n', '\r\n'), long.replace('event: ', 'event:'), `id: 9\n${long}`]) assert.ok(endsWithMessageStop(b(yes)), JSON.stringify(yes));
  for (const no of [long.replace('message_stop\n', 'message_stopx\n'), `${long}event: ping\ndata: {"type":"ping","pad":"${'x'.repeat(40)}"}\n\n`]) assert.ok(!endsWithMessageStop(b(no)), JSON.stringify(no));
});

test('Responses: completed, failed or incomplete in the head of the last event, however long its body', () => {
  const big = JSON.stringify({ type: 'response.completed', sequence_number: 9, response: { output: [{ text: 'x'.repeat(100_000) }] } });
  for (const yes of [
    `event: response.completed\ndata: ${big}\n\n`,
    `data: ${big}\n\n`,
    'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"a"}\n\nevent: response.failed\ndata: {"type":"response.failed"}\n\n',
    'event: response.incomplete\ndata: {"type":"response.incomplete"}\n\n',
  ])
    assert.ok(endsWithResponseEnd(b(yes)), yes.slice(0, 60));
  for (const no of [
    'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"response.completed"}\n\n',
    `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","delta":"response.completed"}\n\n`,
    'event: response.completed\ndata: {}\n\nevent: response.output_text.delta\ndata: {"type":"response.output_text.delta"}\n\n',
    // No event line, keys in another order (a provider's own encoder): the name quoted in a delta's text, not its type.
    'data: {"delta":"{\\"event\\":\\"response.completed\\"}","type":"response.function_call_arguments.delta"}\n\n',
    'data: {"delta":"response.completed","type":"response.output_text.delta"}\n\n',
    '',
  ])
    assert.ok(!endsWithResponseEnd(b(no)), no.slice(0, 60));
});

test('Responses: the event line after an id: line or a comment in the same event (sse-starlette writes id: first), any line ends', () => {
  const data = `data: ${JSON.stringify({ type: 'response.completed', sequence_number: 41, response: { id: 'resp_1', status: 'completed' } })}`;
  const yes = [
    `id: 41\nevent: response.completed\n${data}\n\n`,
    `: keep-alive\nevent: response.completed\n${data}\n\n`,
    `id: resp_0123456789abcdef0123456789abcdef:41\nretry: 3000\nevent:response.failed\ndata: {}\n\n`,
    // No event line, an id long enough to push the data's type past the event's first 64 bytes.
    `id: resp_0123456789abcdef0123456789abcdef0123456789abcdef:41\n${data}\n\n`,
  ];
  for (const eol of ['\n', '\r\n', '\r']) for (const text of yes) assert.ok(endsWithResponseEnd(b(text.replaceAll('\n', eol))), JSON.stringify(text.replaceAll('\n', eol)).slice(0, 60));
  // An id line before a delta's event line is no terminal.
  assert.ok(!endsWithResponseEnd(b('id: 40\nevent: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"response.completed"}\n\n')));
});

test('Responses: events framed with CRLF or CR line ends (the SSE spec allows both; sse-starlette sends CRLF)', () => {
  const two = 'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","delta":"a"}\n\nevent: response.completed\ndata: {"type":"response.completed"}\n\n';
  const reversed = 'event: response.completed\ndata: {}\n\nevent: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1"}\n\n';
  for (const eol of ['\r\n', '\r']) {
    assert.ok(endsWithResponseEnd(b(two.replaceAll('\n', eol))), `completed after a delta, ${JSON.stringify(eol)}`);
    assert.ok(!endsWithResponseEnd(b(reversed.replaceAll('\n', eol))), `a delta after completed, ${JSON.stringify(eol)}`);
  }
});

test('message_stop: a chunk that does not name it (every delta) is judged without a look back, a view or a string', () => {
  const delta = b('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello there"}}\n\n');
  // The relay runs this on every chunk it writes: what it allocates there is per token.
  const proto = Buffer.prototype as unknown as Record<'subarray' | 'toString', (...args: unknown[]) => unknown>;
  const saved = { subarray: proto.subarray, toString: proto.toString };
  let calls = 0;
  for (const name of ['subarray', 'toString'] as const) {
    const original = saved[name];
    proto[name] = function (this: Buffer, ...args: unknown[]) {
      calls++;
      return original.apply(this, args);
    };
  }
  try {
    assert.equal(endsWithMessageStop(delta), false);
  } finally {
    proto.subarray = saved.subarray;
    proto.toString = saved.toString;
  }
  assert.equal(calls, 0, 'Buffer views or strings made for a chunk without message_stop');
});

test('error event: named by its event line, the space optional, as the SSE spec allows', () => {
  const event = 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"busy"}}\n\n';
  for (const yes of [event, event.replace('event: ', 'event:'), event.replaceAll('\n', '\r\n'), `id: 3\n${event}`, `event: ping\ndata: {}\n\n${event}`])
    assert.ok(endsWithErrorEvent(b(yes)), JSON.stringify(yes));
  for (const no of [
    `${event}event: ping\ndata: {"type":"ping"}\n\n`,
    'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"event: error"}}\n\n',
    'event: errors\ndata: {}\n\n',
    '',
  ])
    assert.ok(!endsWithErrorEvent(b(no)), JSON.stringify(no));
});

describe('lastEventError', () => {
  const of = (text: string): string | undefined => lastEventError(Buffer.from(text))?.message;
  test('reads the provider\'s own error as the last event, trailers aside', () => {
    assert.equal(of('data: {"choices":[]}\n\ndata: {"error":{"message":"model crashed"}}\n\n'), 'model crashed');
    assert.equal(of('data: {"choices":[]}\r\n\r\ndata: {"error":"plain"}\r\n\r\ndata: [DONE]\r\n\r\n'), 'plain');
    assert.equal(of('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\nevent: ping\ndata: {"type": "ping"}\n\n'), 'Overloaded');
    assert.equal(of('event:error\ndata:{"type":"error","code":"x","message":"stream broke"}\n\n'), 'stream broke');
    assert.equal(of('data: {"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"failed"}}}\n\n: bye\n\n'), 'failed');
    assert.equal(of('event: error\ndata: {"type":"error"}\n\n'), 'the provider ended its stream with an error event');
  });
  test('says whose fault it was: overloaded, the provider\'s failure, or the request\'s', () => {
    const kind = (text: string) => lastEventError(Buffer.from(text))?.kind;
    assert.equal(kind('event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'), 'overloaded', 'Anthropic overloaded');
    assert.equal(kind('event: error\ndata: {"type":"error","error":{"type":"api_error","message":"Internal"}}\n\n'), 'failed', 'Anthropic api_error');
    assert.equal(kind('event: error\ndata: {"type":"error","error":{"type":"invalid_request_error","message":"bad"}}\n\n'), 'request');
    assert.equal(kind('data: {"error":{"message":"slow down","type":"rate_limit_error"}}\n\n'), 'overloaded', 'chat chunk');
    assert.equal(kind('data: {"error":{"message":"boom","type":"server_error"}}\n\n'), 'failed', 'chat chunk');
    assert.equal(kind('data: {"error":"plain"}\n\n'), 'request', 'no type: unsaid');
    assert.equal(kind('event: error\ndata: {"type":"error","code":"rate_limit_exceeded","message":"slow"}\n\n'), 'overloaded', 'Responses error event');
    assert.equal(kind('data: {"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"failed"}}}\n\n'), 'failed', 'Responses failed');
    assert.equal(kind('data: {"type":"response.failed","response":{"status":"failed","error":{"code":"invalid_prompt","message":"no"}}}\n\n'), 'request');
  });
  test('an answer that only says the word, or an error event cut at the tail\'s start, is none', () => {
    assert.equal(of('data: {"choices":[{"delta":{"content":"\\"error\\": x"},"finish_reason":"error"}]}\n\ndata: [DONE]\n\n'), undefined);
    assert.equal(of('data: {"error":null,"choices":[]}\n\n'), undefined);
    assert.equal(of('data: {"error":{"message":"model crashed"}}\n\ndata: {"choices":[]}\n\n'), undefined, 'an error before the last event');
    assert.equal(of('age":"cut"}}\n\n'), undefined);
    assert.equal(of('event: message_stop\ndata: {"type":"message_stop"}\n\n'), undefined);
  });
});
