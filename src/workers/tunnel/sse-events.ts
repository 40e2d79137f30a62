// Whole SSE events only. A provider's bytes arrive cut wherever its socket
// reads fell; relayed as they come, a failure after half an event would glue
// the edge's in-band error onto that half, and the client's SDK would fail
// to parse both instead of raising the error. So the relay writes up to the
// last blank line and holds the rest until its event completes. The common
// chunk, one or more whole events, passes without a copy.

const LF = 10;
const CR = 13;

/** A held partial event past this is relayed as it is: the edge never buffers an unbounded event. */
export const MAX_HELD_EVENT_BYTES = 64 * 1024;

/** Index just past the last blank line (an event's end) in `bytes`, or 0 when it has none. LF and CRLF line ends. */
export function lastEventEnd(bytes: Uint8Array): number {
  for (let i = bytes.length - 1; i >= 1; i--) {
    if (bytes[i] !== LF) continue;
    const before = bytes[i - 1];
    if (before === LF || (before === CR && i >= 2 && bytes[i - 2] === LF)) return i + 1;
  }
  return 0;
}

export class SseEvents {
  /** The start of an event whose end has not arrived (a copy: the frame's bytes are not ours to keep). */
  #held: Buffer | undefined = undefined;
  /** What the client has ends inside an event (one held past MAX_HELD_EVENT_BYTES went out whole). */
  midEvent = false;

  /** The bytes to write now, ending at an event's end; undefined when all of them wait for the rest of their event. */
  take(bytes: Uint8Array): Uint8Array | undefined {
    const held = this.#held;
    const n = bytes.length;
    // The common case: nothing held and the chunk ends an event.
    if (held === undefined && n >= 2 && bytes[n - 1] === LF && (bytes[n - 2] === LF || (bytes[n - 2] === CR && n >= 3 && bytes[n - 3] === LF))) {
      this.midEvent = false;
      return bytes;
    }
    const all = held === undefined ? bytes : Buffer.concat([held, bytes]);
    const end = lastEventEnd(all);
    if (end === all.length) {
      this.#held = undefined;
      this.midEvent = false;
      return all;
    }
    if (all.length - end > MAX_HELD_EVENT_BYTES) {
      this.#held = undefined;
      this.midEvent = true;
      return all;
    }
    this.#held = Buffer.from(all.subarray(end));
    if (end === 0) return undefined;
    this.midEvent = false;
    return all.subarray(0, end);
  }

  /** What is held at the stream's end (an upstream that ended mid-event keeps its bytes: the relay adds nothing). */
  flush(): Uint8Array | undefined {
    const held = this.#held;
    this.#held = undefined;
    return held;
  }
}
