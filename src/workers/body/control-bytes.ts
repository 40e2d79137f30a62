// Word-at-a-time searches over string contents. JSON forbids raw control
// bytes (< 0x20) in strings and there is no native Buffer search for a byte
// class, so these read four bytes at a time through an Int32 view using the
// "has a byte less than n" / "has a zero byte" bit tricks (exact for "is
// there any"; which byte is settled bytewise afterwards).

const ONES = 0x01010101;
const LOW = 0x20202020; // 0x20 in every byte lane
const QUOTES = 0x22222222;
const BACKSLASHES = 0x5c5c5c5c;
const HIGH = 0x80808080 | 0; // top bit of every byte lane, as an int32

// One Int32 view per ArrayBuffer, cached for the body being scanned and
// dropped by forgetWords() so a large body is not kept alive.
let viewSource: ArrayBufferLike | undefined;
let words: Int32Array | undefined;

/** Index of the first byte < 0x20 in buf[start, end), or -1. */
export function findControlByte(buf: Uint8Array, start: number, end: number): number {
  if (end - start < 32) return findControlByteSlow(buf, start, end);
  const base = buf.byteOffset;
  let i = start;
  while (((base + i) & 3) !== 0) {
    if (buf[i] < 0x20) return i;
    i++;
  }
  const w32 = wordsOf(buf);
  let w = (base + i) >> 2;
  const wEnd = (base + end) >> 2;
  for (; w + 4 <= wEnd; w += 4) {
    const a = w32[w];
    const b = w32[w + 1];
    const c = w32[w + 2];
    const d = w32[w + 3];
    if ((((a - LOW) & ~a) | ((b - LOW) & ~b) | ((c - LOW) & ~c) | ((d - LOW) & ~d)) & HIGH) break;
  }
  return findControlByteSlow(buf, w * 4 - base, end);
}

export function findControlByteSlow(buf: Uint8Array, start: number, end: number): number {
  for (let i = start; i < end; i++) {
    if (buf[i] < 0x20) return i;
  }
  return -1;
}

/**
 * Index of the first '"', '\\' or control byte in buf[start, end), or -1.
 * For runs between dense escapes, where a native indexOf per escape would
 * cost more in call overhead than this loop costs in bytes.
 */
export function findStringStop(buf: Uint8Array, start: number, end: number): number {
  const base = buf.byteOffset;
  let i = start;
  while (i < end && ((base + i) & 3) !== 0) {
    const c = buf[i];
    if (c === 0x22 || c === 0x5c || c < 0x20) return i;
    i++;
  }
  const w32 = wordsOf(buf);
  let w = (base + i) >> 2;
  const wEnd = (base + end) >> 2;
  for (; w < wEnd; w++) {
    const x = w32[w];
    const q = x ^ QUOTES;
    const s = x ^ BACKSLASHES;
    if ((((x - LOW) & ~x) | ((q - ONES) & ~q) | ((s - ONES) & ~s)) & HIGH) break;
  }
  for (i = w * 4 - base > i ? w * 4 - base : i; i < end; i++) {
    const c = buf[i];
    if (c === 0x22 || c === 0x5c || c < 0x20) return i;
  }
  return -1;
}

/** Releases the cached word view (call when done with a body). */
export function forgetWords(): void {
  viewSource = undefined;
  words = undefined;
}

function wordsOf(buf: Uint8Array): Int32Array {
  const ab = buf.buffer;
  if (viewSource !== ab || words === undefined) {
    viewSource = ab;
    words = new Int32Array(ab, 0, ab.byteLength >> 2);
  }
  return words;
}
