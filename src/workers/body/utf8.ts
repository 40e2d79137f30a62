// UTF-8 well-formedness for request bodies. The whole body is checked natively
// (simdutf behind buffer.isUtf8); only a body that fails pays for the JS walk
// that locates the first bad byte for the error message.

import { isUtf8 } from 'node:buffer';

/** Offset of the first byte that starts an ill-formed UTF-8 sequence, or -1. */
export function firstInvalidUtf8(buf: Uint8Array): number {
  if (isUtf8(buf)) return -1;
  return locateInvalidUtf8(buf);
}

// RFC 3629 table 3-7: the second byte's range depends on the lead byte
// (no overlongs, no surrogates, nothing above U+10FFFF).
function locateInvalidUtf8(buf: Uint8Array): number {
  const n = buf.length;
  let i = 0;
  while (i < n) {
    const b = buf[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    let len: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) len = 2;
    else if (b >= 0xe0 && b <= 0xef) {
      len = 3;
      if (b === 0xe0) lo = 0xa0;
      else if (b === 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      len = 4;
      if (b === 0xf0) lo = 0x90;
      else if (b === 0xf4) hi = 0x8f;
    } else return i;
    if (i + len > n) return i;
    const b1 = buf[i + 1];
    if (b1 < lo || b1 > hi) return i;
    for (let k = 2; k < len; k++) {
      const c = buf[i + k];
      if (c < 0x80 || c > 0xbf) return i;
    }
    i += len;
  }
  return -1;
}
