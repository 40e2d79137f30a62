// Decodes the contents of a JSON string literal that the scanner has already
// validated. Used only for the top-level `model` value and keys that contain
// escapes, so clarity beats speed here.

const ESCAPES: Record<number, string> = {
  0x22: '"',
  0x5c: '\\',
  0x2f: '/',
  0x62: '\b',
  0x66: '\f',
  0x6e: '\n',
  0x72: '\r',
  0x74: '\t',
};

/**
 * Decodes buf[start, end) (between the quotes; escapes already validated)
 * to the string JSON.parse would produce, lone surrogates included.
 */
export function decodeJsonString(buf: Buffer, start: number, end: number): string {
  let out = '';
  let i = start;
  for (;;) {
    let bs = buf.indexOf(0x5c, i);
    if (bs < 0 || bs >= end) bs = end;
    if (bs > i) out += buf.toString('utf8', i, bs);
    if (bs === end) return out;
    const c = buf[bs + 1];
    if (c === 0x75 /* u */) {
      out += String.fromCharCode(parseInt(buf.toString('latin1', bs + 2, bs + 6), 16));
      i = bs + 6;
    } else {
      out += ESCAPES[c];
      i = bs + 2;
    }
  }
}

/** True when buf[start, end) holds exactly the ASCII bytes of `word`. */
export function bytesEqualAscii(buf: Uint8Array, start: number, end: number, word: string): boolean {
  if (end - start !== word.length) return false;
  for (let k = 0; k < word.length; k++) {
    if (buf[start + k] !== word.charCodeAt(k)) return false;
  }
  return true;
}
