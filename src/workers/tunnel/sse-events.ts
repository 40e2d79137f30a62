// Whole SSE events only. A provider's bytes arrive cut wherever its socket
// reads fell; relayed as they come, a failure after half an event would glue
// the edge's in-band error onto that half, and the client's SDK would fail
// to parse both instead of raising the error. So the relay writes up to the
// last blank line and holds the rest until its event completes. The common
// chunk, one or more whole events, passes without a copy.

const LF = 10;
const CR = 13;
/** No byte before the stream's first. */
const NONE = -1;

/** A held partial event past this is relayed as it is: the edge never buffers an unbounded event. */
export const MAX_HELD_EVENT_BYTES = 64 * 1024;
/** How much of an event's start is kept while it is incomplete: enough to name it (`event: response.incomplete`, `data: [DONE]`). */
const EVENT_START_BYTES = 64;
const EMPTY = Buffer.alloc(0);

/**
 * Index just past the last blank line (an event's end) in `bytes`, or 0
 * when it has none; `before1` / `before2` are the two bytes that preceded
 * `bytes` in the stream (NONE at its start), so a blank line split across
 * chunks is found. Line ends are LF, CRLF or CR, as the SSE spec allows.
 */
export function lastEventEnd(bytes: Uint8Array, before1 = NONE, before2 = NONE): number {
  for (let i = bytes.length - 1; i >= 0; i--) {
    const c = bytes[i];
    if (c !== LF && c !== CR) continue;
    const b1 = i >= 1 ? bytes[i - 1] : before1;
    if (c === LF) {
      if (b1 === LF) return i + 1;
      const b2 = i >= 2 ? bytes[i - 2] : i === 1 ? before1 : before2;
      if (b1 === CR && (b2 === LF || b2 === CR)) return i + 1;
    } else if (b1 === CR && (i + 1 >= bytes.length || bytes[i + 1] !== LF)) {
      // CR CR; a CR CR LF ends at its LF, found first (the scan runs backwards).
      return i + 1;
    }
  }
  return 0;
}

const COLON = 0x3a;

/**
 * Whether `bytes`, after the held `pieces` that go out ahead of them, hold a
 * line other than a comment (`: ping`) or a blank one: an event a client's
 * SSE parser dispatches, not a provider's keepalive alone.
 */
export function holdsField(pieces: readonly Uint8Array[], bytes: Uint8Array): boolean {
  let lineStart = true;
  for (let p = 0; p <= pieces.length; p++) {
    const piece = p < pieces.length ? pieces[p] : bytes;
    for (let i = 0; i < piece.length; i++) {
      const c = piece[i];
      if (c === LF || c === CR) lineStart = true;
      else if (lineStart && c !== COLON) return true;
      else lineStart = false;
    }
  }
  return false;
}

export class SseEvents {
  /** What may be held: MAX_HELD_EVENT_BYTES, and under half the tunnel's window, whose credit held bytes keep. */
  readonly #maxHeld: number;
  /** The start of an event whose end has not arrived: copies (a frame's bytes are not ours to keep). */
  #held: Uint8Array[] = [];
  /** Held pieces that go out ahead of what take() returned; empty unless releasedBytes > 0. */
  released: Uint8Array[] = [];
  releasedBytes = 0;
  #heldBytes = 0;
  /** The last two bytes taken (written or held), to find a blank line split across chunks. */
  #last1 = NONE;
  #last2 = NONE;
  /** What the client has ends inside an event (one held past the bound went out whole). */
  midEvent = false;
  /** The first EVENT_START_BYTES bytes of the event the bytes taken so far end inside, held or written (empty at an event's end). */
  #start: Buffer = EMPTY;
  /** #start when the last take() began, and the two bytes before that chunk: see startOfLastEvent. */
  #startBefore: Buffer = EMPTY;
  #chunkBefore1 = NONE;
  #chunkBefore2 = NONE;

  /**
   * `window`: the tunnel's flow control. Held bytes are not credited back
   * until written; held past half the window, with a quarter-window credit
   * batch pending, the node could be left without credit to finish the
   * event: a stall.
   */
  constructor(window?: { readonly size: number }) {
    this.#maxHeld = window === undefined ? MAX_HELD_EVENT_BYTES : Math.min(MAX_HELD_EVENT_BYTES, window.size >> 1);
  }

  /**
   * The part of `bytes` to write now, so that what is written ends at an
   * event's end; undefined when all of it waits for the rest of its event.
   * Bytes held from earlier chunks go ahead of it: `released` (copies, in
   * order) until the next take(). Pieces, not one concatenated buffer: the
   * writer frames them in one copy, or its own write queue joins them.
   */
  take(bytes: Uint8Array): Uint8Array | undefined {
    if (this.releasedBytes > 0) {
      this.released.length = 0;
      this.releasedBytes = 0;
    }
    const n = bytes.length;
    if (n === 0) return undefined;
    const before1 = this.#last1;
    const before2 = this.#last2;
    this.#last1 = bytes[n - 1];
    this.#last2 = n >= 2 ? bytes[n - 2] : before1;
    this.#startBefore = this.#start;
    this.#chunkBefore1 = before1;
    this.#chunkBefore2 = before2;
    // The common case: nothing held and the chunk ends an event.
    if (this.#heldBytes === 0 && n >= 2 && bytes[n - 1] === LF && bytes[n - 2] === LF) {
      this.midEvent = false;
      this.#start = EMPTY;
      return bytes;
    }
    const end = lastEventEnd(bytes, before1, before2);
    this.#start = end === 0 ? grown(this.#start, bytes) : end === n ? EMPTY : Buffer.from(bytes.subarray(end, Math.min(n, end + EVENT_START_BYTES)));
    if (end === 0) {
      if (this.#heldBytes + n <= this.#maxHeld) {
        this.#hold(bytes);
        return undefined;
      }
      this.midEvent = true;
      this.#release();
      return bytes;
    }
    this.#release();
    if (n - end > this.#maxHeld) {
      this.midEvent = true;
      return bytes;
    }
    this.midEvent = false;
    if (end === n) return bytes;
    this.#hold(bytes.subarray(end));
    return bytes.subarray(0, end);
  }

  /**
   * The first bytes of the last event of `out` (what take() just returned,
   * ending at an event's end) when that event began before `out`: its start
   * was held and goes out ahead of it (`released`), or went out earlier (an
   * event past the hold bound). Undefined when `out` holds the whole event.
   * What names an event (`event: message_stop`, `data: [DONE]`, a Responses
   * event's type) may lie in that start: a terminal event that reached the
   * edge in two pieces is still the answer's end.
   */
  startOfLastEvent(out: Uint8Array): Uint8Array | undefined {
    if (this.#startBefore.length === 0) return undefined;
    let end = out.length;
    while (end > 0 && (out[end - 1] === LF || out[end - 1] === CR)) end--;
    // A blank line inside `out` before its last event: that event began in `out`.
    return lastEventEnd(out.subarray(0, end), this.#chunkBefore1, this.#chunkBefore2) === 0 ? this.#startBefore : undefined;
  }

  /** What is held at the stream's end (an upstream that ended mid-event keeps its bytes: the relay adds nothing). */
  flush(): Uint8Array | undefined {
    if (this.#heldBytes === 0) return undefined;
    const out = Buffer.concat(this.#held, this.#heldBytes);
    this.#held.length = 0;
    this.#heldBytes = 0;
    return out;
  }

  #hold(bytes: Uint8Array): void {
    this.#held.push(Buffer.from(bytes));
    this.#heldBytes += bytes.length;
  }

  /** What is held moves to `released` (the two lists swap: no array per release). */
  #release(): void {
    if (this.#heldBytes === 0) return;
    const held = this.#held;
    this.#held = this.released;
    this.released = held;
    this.releasedBytes = this.#heldBytes;
    this.#heldBytes = 0;
  }
}

/** `start` with the head of `bytes` after it, up to EVENT_START_BYTES in all (a copy: frames are not ours to keep). */
function grown(start: Buffer, bytes: Uint8Array): Buffer {
  if (start.length >= EVENT_START_BYTES) return start;
  return Buffer.concat([start, bytes.subarray(0, EVENT_START_BYTES - start.length)]);
}
