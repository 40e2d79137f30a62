// The A2A run sink reads a chat stream the data path writes into it: the
// text it hands the task is the provider's, whatever way the bytes were cut.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RunSink } from '../../src/workers/a2a/run-sink.js';

function sink(): { sink: RunSink; deltas: string[]; finished: (string | undefined)[] } {
  const deltas: string[] = [];
  const finished: (string | undefined)[] = [];
  const s = new RunSink({ onStarted() {}, onDelta: (t) => deltas.push(t), onFinished: (e) => finished.push(e) });
  return { sink: s, deltas, finished };
}

test('a character split between two chunks arrives whole, in a stream and in a JSON body', () => {
  const text = 'naïve 日本語 🙂';
  const event = Buffer.from(`data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\n`);
  const emoji = event.indexOf(Buffer.from('🙂'));
  for (const cut of [emoji + 1, emoji + 2, emoji + 3, event.indexOf(Buffer.from('本')) + 1]) {
    const s = sink();
    s.sink.writeHead(200, ['content-type', 'text/event-stream']);
    s.sink.write(event.subarray(0, cut));
    s.sink.write(event.subarray(cut));
    s.sink.end('data: [DONE]\n\n');
    assert.deepEqual(s.deltas, [text], `cut at byte ${cut}`);
    assert.deepEqual(s.finished, [undefined]);
  }
  const body = Buffer.from(JSON.stringify({ choices: [{ message: { content: text } }] }));
  const s = sink();
  s.sink.writeHead(200, ['content-type', 'application/json']);
  const cut = body.indexOf(Buffer.from('🙂')) + 2;
  s.sink.write(body.subarray(0, cut));
  s.sink.end(body.subarray(cut));
  assert.deepEqual(s.deltas, [text]);
});

test('a stream that stops before its last event ([DONE] or a finish_reason) fails: its text may be cut short', () => {
  const chunk = (content: string, finish: string | null = null) => `data: ${JSON.stringify({ choices: [{ delta: { content }, finish_reason: finish }] })}\n\n`;
  const cases: [string, string, boolean][] = [
    ['[DONE]', chunk('Hello') + 'data: [DONE]\n\n', true],
    ['a finish_reason alone', chunk('Hello', 'stop'), true],
    ['neither: cut mid-answer', chunk('Hel'), false],
    ['a half event at the cut', `${chunk('Hel')}data: {"choices":[{"delta":{"content":"lo`, false],
  ];
  for (const [label, body, complete] of cases) {
    const s = sink();
    s.sink.writeHead(200, ['content-type', 'text/event-stream']);
    s.sink.end(body);
    if (complete) assert.deepEqual(s.finished, [undefined], label);
    else assert.match(s.finished[0] ?? '', /ended before its last event/, label);
  }
});

test('data events that are JSON but no chunk (null, a number, a string, an array) are skipped, never thrown on', () => {
  const chunk = (content: string, finish: string | null = null) => `data: ${JSON.stringify({ choices: [{ delta: { content }, finish_reason: finish }] })}\n\n`;
  const s = sink();
  s.sink.writeHead(200, ['content-type', 'text/event-stream']);
  for (const odd of ['null', '42', '"text"', '[]', '[null]', '{"choices":null}', '{"choices":[null]}']) s.sink.write(`data: ${odd}\n\n`);
  s.sink.end(chunk('Hello', 'stop') + 'data: [DONE]\n\n');
  assert.deepEqual(s.deltas, ['Hello']);
  assert.deepEqual(s.finished, [undefined]);
});

test('a long event cut into many chunks is scanned for line ends once, not once per chunk', () => {
  // A provider's 4 MB event in 16 KiB frames (the agent's coalescing size): rescanning the partial line on each
  // chunk read ~512 MB of text and held the event loop (every other client's requests) for seconds.
  const content = 'y'.repeat(4 * 1024 * 1024);
  const event = Buffer.from(`data: ${JSON.stringify({ choices: [{ delta: { content }, finish_reason: 'stop' }] })}\n\n`);
  const s = sink();
  s.sink.writeHead(200, ['content-type', 'text/event-stream']);
  const split = String.prototype.split;
  let scanned = 0;
  String.prototype.split = function (this: string, ...args: Parameters<typeof split>) {
    scanned += this.length;
    return split.apply(this, args);
  } as typeof split;
  try {
    for (let at = 0; at < event.length; at += 16 * 1024) s.sink.write(event.subarray(at, at + 16 * 1024));
  } finally {
    String.prototype.split = split;
  }
  s.sink.end('data: [DONE]\n\n');
  assert.ok(scanned <= 2 * event.length, `scanned ${scanned} characters for a ${event.length}-byte event`);
  assert.deepEqual(s.deltas, [content]);
  assert.deepEqual(s.finished, [undefined]);
});

test('a CRLF split between chunks, then an LF alone in the next: each is its own line end', () => {
  const chunk = (content: string) => JSON.stringify({ choices: [{ delta: { content } }] });
  const s = sink();
  s.sink.writeHead(200, ['content-type', 'text/event-stream']);
  // "data: A\r\n\n" cut as "...\r" | "\n" | "\n": the last LF ends the event.
  for (const piece of [`data: ${chunk('A')}\r`, '\n', '\n', `data: ${chunk('B')}\n\n`]) s.sink.write(piece);
  s.sink.end('data: [DONE]\n\n');
  assert.deepEqual(s.deltas, ['A', 'B']);
  assert.deepEqual(s.finished, [undefined]);
});

test("an answer past the task's bound fails the run, whether given in events, in the event the body ends with, or in one JSON body", () => {
  const chunk = (content: string) => `data: ${JSON.stringify({ choices: [{ delta: { content } }] })}\n\n`;
  const bounded = (): { sink: RunSink; deltas: string[]; finished: (string | undefined)[] } => {
    const deltas: string[] = [];
    const finished: (string | undefined)[] = [];
    return { sink: new RunSink({ onStarted() {}, onDelta: (t) => deltas.push(t), onFinished: (e) => finished.push(e) }, 10), deltas, finished };
  };
  const cases: [string, string, string][] = [
    ['events', 'text/event-stream', chunk('12345678') + chunk('90abc') + 'data: [DONE]\n\n'],
    // The last event has no blank line after it: read at the body's end, past the bound as well.
    ['the event the body ends with', 'text/event-stream', `${chunk('12345678')}data: ${JSON.stringify({ choices: [{ delta: { content: '90abc' }, finish_reason: 'stop' }] })}`],
    ['one JSON body', 'application/json', JSON.stringify({ choices: [{ message: { content: '1234567890abc' } }] }).slice(0, 60)],
  ];
  for (const [label, type, body] of cases) {
    const s = bounded();
    s.sink.writeHead(200, ['content-type', type]);
    s.sink.end(body);
    assert.equal(s.finished.length, 1, label);
    assert.match(s.finished[0] ?? '', /a2a\.max_task_bytes/, label);
    assert.ok(s.deltas.join('').length <= 10, `${label}: the task got no more than its bound`);
  }
});
