// The relay's whole-event cut: whatever way a provider's bytes are split,
// the client gets the same bytes, each write ending at an event's end, and
// a held half event never grows past its bound.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { holdsField, lastEventEnd, MAX_HELD_EVENT_BYTES, SseEvents } from '../../src/workers/tunnel/sse-events.js';
import { ResponseWindow } from '../../src/workers/tunnel/response-window.js';

const text = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString());

/** What one take() writes: the held pieces it releases, then the part of the chunk it returns. */
function write(events: SseEvents, bytes: Uint8Array): Uint8Array | undefined {
  const now = events.take(bytes);
  if (now === undefined) return undefined;
  return events.releasedBytes === 0 ? now : Buffer.concat([...events.released, now]);
}

test('lastEventEnd finds the end of the last blank line, LF and CRLF alike', () => {
  assert.equal(lastEventEnd(Buffer.from('data: a\n\ndata: b')), 9);
  assert.equal(lastEventEnd(Buffer.from('data: a\r\n\r\ndata: b')), 11);
  assert.equal(lastEventEnd(Buffer.from('data: a\n\n')), 9);
  assert.equal(lastEventEnd(Buffer.from('data: a\ndata: b\n')), 0, 'line ends without a blank line end no event');
  assert.equal(lastEventEnd(Buffer.from('data: a\r\n')), 0);
  assert.equal(lastEventEnd(Buffer.from('\n')), 0);
  assert.equal(lastEventEnd(Buffer.from('data: a\r\rdata: b')), 9, 'CR line ends');
  assert.equal(lastEventEnd(Buffer.from('data: a\r\r\ndata: b')), 10, 'CR then CRLF ends at the LF');
  assert.equal(lastEventEnd(Buffer.from('\ndata: b'), 10), 1, 'a blank line split across chunks');
  assert.equal(lastEventEnd(Buffer.from('\ndata: b'), 13, 10), 1, 'a CRLF CRLF split after the CR');
  assert.equal(lastEventEnd(Buffer.from('\ndata: b'), 13, 0x61), 0, 'a lone CRLF is one line end');
});

test('every split of a stream comes out as the same bytes, each write at an event end', () => {
  const stream = 'data: {"a":1}\n\n: keepalive\n\nevent: x\r\ndata: {"b":2}\r\n\r\nevent: y\rdata: {"c":3}\r\rdata: [DONE]\n\n';
  for (let cut1 = 0; cut1 <= stream.length; cut1++) {
    for (let cut2 = cut1; cut2 <= stream.length; cut2 += 3) {
      const events = new SseEvents();
      const out: string[] = [];
      for (const piece of [stream.slice(0, cut1), stream.slice(cut1, cut2), stream.slice(cut2)]) {
        if (piece === '') continue;
        const written = text(write(events, Buffer.from(piece)));
        if (written === undefined) continue;
        out.push(written);
        const sent = out.join('');
        assert.equal(lastEventEnd(Buffer.from(sent)), sent.length, `a write ends mid-event: ${JSON.stringify(written)} (cuts ${cut1}, ${cut2})`);
      }
      assert.equal(events.flush(), undefined, 'a stream that ends at an event end leaves nothing held');
      assert.equal(out.join(''), stream);
      assert.equal(events.midEvent, false);
    }
  }
});

test('a stream that ends inside an event keeps its bytes: flush hands the rest over', () => {
  const events = new SseEvents();
  assert.equal(text(write(events, Buffer.from('data: a\n\ndata: b'))), 'data: a\n\n');
  assert.equal(events.midEvent, false, 'the half event is held, not written');
  assert.equal(text(events.flush()), 'data: b');
  assert.equal(events.flush(), undefined);
});

test('a held event past the bound is written as it is, and the client is then mid-event until one ends', () => {
  const events = new SseEvents();
  const big = `data: ${'x'.repeat(MAX_HELD_EVENT_BYTES)}`;
  assert.equal(events.take(Buffer.from(big.slice(0, 100))), undefined);
  assert.equal(text(write(events, Buffer.from(big.slice(100)))), big, 'the bound passed: all of it goes');
  assert.equal(events.midEvent, true);
  assert.equal(write(events, Buffer.from('xx')), undefined, 'the rest of the event is held again');
  assert.equal(events.midEvent, true, 'what the client has still ends mid-event');
  assert.equal(text(write(events, Buffer.from('\n\ndata: c'))), 'xx\n\n');
  assert.equal(events.midEvent, false);
  // Past the bound again, the write ending in a line's LF: the next chunk's LF ends that event.
  assert.equal(text(write(events, Buffer.from(`${'y'.repeat(MAX_HELD_EVENT_BYTES)}\n`)))?.length, 'data: c'.length + MAX_HELD_EVENT_BYTES + 1);
  assert.equal(events.midEvent, true);
  assert.equal(text(write(events, Buffer.from('\ndata: d'))), '\n');
  assert.equal(events.midEvent, false);
  assert.equal(text(events.flush()), 'data: d');
});

test('a chunk that is whole events passes through as the same bytes, no copy', () => {
  const events = new SseEvents();
  const chunk = Buffer.from('data: a\n\ndata: b\n\n');
  assert.equal(events.take(chunk), chunk);
  assert.equal(events.releasedBytes, 0);
});

test('with flow control: held bytes keep their credit until written and flushed; a stalled client bounds the node to its window', () => {
  const window = new ResponseWindow(1_000);
  const events = new SseEvents(window);
  let credit = window.size;
  let received = 0;
  let writes = 0;
  // Whole events and events cut in two, alternately, to a client that reads nothing.
  const pieces = ['data: whole-event-of-some-length\n\n', 'data: cut-', 'event\n\n'];
  for (let i = 0; i < 10_000; i++) {
    const piece = Buffer.from(pieces[i % pieces.length]);
    if (piece.length > credit) break;
    credit -= piece.length;
    received += piece.length;
    assert.ok(window.receive(piece.length), 'never past the window');
    const now = events.take(piece);
    const out = now === undefined ? undefined : now.length + events.releasedBytes;
    if (now !== piece || events.releasedBytes > 0) window.wroteLast(out ?? 0);
    if (out !== undefined) writes++;
  }
  assert.ok(received <= window.size, `the node sent ${received} bytes to a client that read none`);
  assert.equal(window.outstanding, received);
  // The client reads everything: all the credit comes back, for exactly what was written.
  for (let w = 0; w < writes; w++) credit += window.flushed();
  const held = events.flush()?.length ?? 0;
  assert.equal(window.buffered, 0);
  assert.ok(window.outstanding - held < window.size / 4, 'what is left uncredited is the held bytes and one partial batch');
});

test('the hold bound is under half the window, so a held event cannot starve its own tunnel of credit', () => {
  const events = new SseEvents(new ResponseWindow(1_000));
  assert.equal(events.take(Buffer.from(`data: ${'x'.repeat(400)}`)), undefined, 'held: under half the window');
  assert.equal(write(events, Buffer.from('x'.repeat(200)))?.length, 606, 'past half the window it goes out as it is');
  assert.equal(events.midEvent, true);
});

test('startOfLastEvent: the start of an event that began before the chunk ending it, held or relayed past the bound', () => {
  const events = new SseEvents();
  const whole = events.take(Buffer.from('data: a\n\n')) as Uint8Array;
  assert.equal(events.startOfLastEvent(whole), undefined, 'the whole event is in the chunk');
  assert.equal(events.take(Buffer.from('event: message_stop\ndata: {"type":"mess')), undefined);
  let out = events.take(Buffer.from('age_stop"}\n\n')) as Uint8Array;
  assert.equal(text(events.startOfLastEvent(out)), 'event: message_stop\ndata: {"type":"mess');
  assert.equal(events.take(Buffer.from('data: [DONE]\n')), undefined);
  out = events.take(Buffer.from('\n')) as Uint8Array;
  assert.equal(text(events.startOfLastEvent(out)), 'data: [DONE]\n', 'a blank line split across chunks');
  // A chunk that ends an event begun before it and holds another whole: the last one is its own.
  assert.equal(events.take(Buffer.from('data: b')), undefined);
  out = events.take(Buffer.from('\n\ndata: c\n\n')) as Uint8Array;
  assert.equal(events.startOfLastEvent(out), undefined);
  // An event past the hold bound goes out as it comes; its first bytes are kept to name it at its end.
  const big = `event: response.completed\ndata: ${'z'.repeat(MAX_HELD_EVENT_BYTES)}`;
  assert.equal(events.take(Buffer.from(big.slice(0, 100))), undefined);
  assert.ok(write(events, Buffer.from(big.slice(100))));
  assert.equal(events.midEvent, true);
  out = events.take(Buffer.from('zz\n\n')) as Uint8Array;
  assert.equal(events.midEvent, false);
  assert.equal(text(events.startOfLastEvent(out)), big.slice(0, 64));
});

test('holdsField: comments and blank lines are no event, a field line is, across held pieces and any line end', () => {
  const b = (s: string) => Buffer.from(s);
  assert.equal(holdsField([], b(': ping\n\n')), false);
  assert.equal(holdsField([], b(':\r\n\r\n: keepalive\r\r')), false);
  assert.equal(holdsField([], b(': ping\n\nevent: response.created\n')), true);
  assert.equal(holdsField([], b('data: {}\n\n')), true);
  // A comment cut across a held piece and the chunk stays a comment; a field after its line end counts.
  assert.equal(holdsField([b(': pi')], b('ng\n\n')), false);
  assert.equal(holdsField([b(': ping\n')], b('data: {}\n\n')), true);
});
