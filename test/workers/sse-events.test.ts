// The relay's whole-event cut: whatever way a provider's bytes are split,
// the client gets the same bytes, each write ending at an event's end, and
// a held half event never grows past its bound.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lastEventEnd, MAX_HELD_EVENT_BYTES, SseEvents } from '../../src/workers/tunnel/sse-events.js';

const text = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString());

test('lastEventEnd finds the end of the last blank line, LF and CRLF alike', () => {
  assert.equal(lastEventEnd(Buffer.from('data: a\n\ndata: b')), 9);
  assert.equal(lastEventEnd(Buffer.from('data: a\r\n\r\ndata: b')), 11);
  assert.equal(lastEventEnd(Buffer.from('data: a\n\n')), 9);
  assert.equal(lastEventEnd(Buffer.from('data: a\ndata: b\n')), 0, 'line ends without a blank line end no event');
  assert.equal(lastEventEnd(Buffer.from('data: a\r\n')), 0);
  assert.equal(lastEventEnd(Buffer.from('\n')), 0);
});

test('every split of a stream comes out as the same bytes, each write at an event end', () => {
  const stream = 'data: {"a":1}\n\n: keepalive\n\nevent: x\r\ndata: {"b":2}\r\n\r\ndata: [DONE]\n\n';
  for (let cut1 = 0; cut1 <= stream.length; cut1++) {
    for (let cut2 = cut1; cut2 <= stream.length; cut2 += 3) {
      const events = new SseEvents();
      const out: string[] = [];
      for (const piece of [stream.slice(0, cut1), stream.slice(cut1, cut2), stream.slice(cut2)]) {
        if (piece === '') continue;
        const written = text(events.take(Buffer.from(piece)));
        if (written === undefined) continue;
        assert.ok(lastEventEnd(Buffer.from(written)) === written.length, `a write ends mid-event: ${JSON.stringify(written)}`);
        out.push(written);
      }
      assert.equal(events.flush(), undefined, 'a stream that ends at an event end leaves nothing held');
      assert.equal(out.join(''), stream);
      assert.equal(events.midEvent, false);
    }
  }
});

test('a stream that ends inside an event keeps its bytes: flush hands the rest over', () => {
  const events = new SseEvents();
  assert.equal(text(events.take(Buffer.from('data: a\n\ndata: b'))), 'data: a\n\n');
  assert.equal(events.midEvent, false, 'the half event is held, not written');
  assert.equal(text(events.flush()), 'data: b');
  assert.equal(events.flush(), undefined);
});

test('a held event past the bound is written as it is, and the client is then mid-event until one ends', () => {
  const events = new SseEvents();
  const big = `data: ${'x'.repeat(MAX_HELD_EVENT_BYTES)}`;
  assert.equal(events.take(Buffer.from(big.slice(0, 100))), undefined);
  assert.equal(text(events.take(Buffer.from(big.slice(100)))), big, 'the bound passed: all of it goes');
  assert.equal(events.midEvent, true);
  assert.equal(events.take(Buffer.from('xx')), undefined, 'the rest of the event is held again');
  assert.equal(events.midEvent, true, 'what the client has still ends mid-event');
  assert.equal(text(events.take(Buffer.from('\n\ndata: c'))), 'xx\n\n');
  assert.equal(events.midEvent, false);
});

test('a chunk that is whole events passes through as the same bytes, no copy', () => {
  const events = new SseEvents();
  const chunk = Buffer.from('data: a\n\ndata: b\n\n');
  assert.equal(events.take(chunk), chunk);
});
