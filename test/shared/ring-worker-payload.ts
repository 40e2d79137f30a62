// Deterministic stress-test records shared by ring.test.ts and ring-worker.ts:
// both sides derive every record's size and bytes from (seed, seq), so the
// reader verifies each one independently of what the writer did.
//
// Payload of length L >= 8: u32 seq, u32 FNV-1a of bytes [8, L), then bytes
// from an xorshift32 stream seeded by (seed, seq). L < 8: stream bytes only
// (checked by length and content).
import { mulberry32 } from '../helpers/prng.js';

/** The size sequence (mulberry32), identical on both sides for one seed. */
export class SizeStream {
  private readonly random: () => number;
  constructor(seed: number) {
    this.random = mulberry32(seed);
  }
  /** Sizes 0-64 KiB, heavily skewed small, with every 4-byte alignment. */
  next(maxLength: number): number {
    const r = this.random();
    const s = this.random();
    let size: number;
    if (r < 0.9) size = Math.floor(s * 129); // 0..128
    else if (r < 0.99) size = 129 + Math.floor(s * 1920); // ..2048
    else if (r < 0.999) size = 2049 + Math.floor(s * 14336); // ..16384
    else size = 16385 + Math.floor(s * (maxLength - 16384)); // ..maxLength
    return size;
  }
}

function streamSeed(seed: number, seq: number): number {
  const s = Math.imul(seed ^ Math.imul(seq, 0x9e3779b1), 0x85ebca6b) ^ 0x5bd1e995;
  return s === 0 ? 1 : s;
}

/** Writes record `seq` of `length` bytes at bytes[offset..]; the absolute
 * byte offset must be 4-aligned (ring payloads are). `words` views the whole
 * buffer under `bytes`, from byte 0. */
export function fillPayload(bytes: Uint8Array, words: Uint32Array, offset: number, length: number, seed: number, seq: number): void {
  let x = streamSeed(seed, seq);
  const start = length >= 8 ? offset + 8 : offset;
  const end = offset + length;
  const base = bytes.byteOffset;
  let i = start;
  let w = (base + i) >> 2;
  for (; i + 4 <= end; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[w++] = x;
  }
  for (; i < end; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x;
  }
  if (length >= 8) {
    words[(base + offset) >> 2] = seq;
    words[(base + offset + 4) >> 2] = fnv1a(bytes, offset + 8, end);
  }
}

/** Returns undefined when record `seq` (expected `length` bytes) is intact,
 * else what is wrong with it. */
export function checkPayload(bytes: Uint8Array, words: Uint32Array, offset: number, length: number, expectedLength: number, seed: number, seq: number): string | undefined {
  if (length !== expectedLength) return `record ${seq}: length ${length}, expected ${expectedLength}`;
  const base = bytes.byteOffset;
  const end = offset + length;
  if (length >= 8) {
    const got = words[(base + offset) >> 2];
    if (got !== seq) return `record ${seq}: carries sequence number ${got} (lost or reordered)`;
    if (words[(base + offset + 4) >> 2] !== fnv1a(bytes, offset + 8, end)) return `record ${seq}: checksum mismatch`;
  }
  let x = streamSeed(seed, seq);
  let i = length >= 8 ? offset + 8 : offset;
  let w = (base + i) >> 2;
  for (; i + 4 <= end; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    if (words[w++] !== x >>> 0) return `record ${seq}: byte ${i - offset} differs from its seed`;
  }
  for (; i < end; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    if (bytes[i] !== (x & 0xff)) return `record ${seq}: byte ${i - offset} differs from its seed`;
  }
  return undefined;
}

export function fnv1a(bytes: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return h >>> 0;
}
