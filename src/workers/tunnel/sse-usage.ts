// Token usage of a streamed completion, for metrics, without parsing every
// chunk: OpenAI-compatible providers put `usage` in the last data event, so
// only the tail of the stream is scanned, once, at END. The relay hands
// every DATA frame to a StreamTail, which keeps the newest bytes.
// The other APIs name the counts differently and are read the same way:
// the Responses API's `response.completed` carries `usage` with
// input_tokens / output_tokens; the Messages API's `message_delta` carries
// output_tokens (and, from newer servers, input_tokens), while its input
// count otherwise sits in `message_start` at the head of the stream.
// Anthropic counts prompt tokens read from or written to its prompt cache
// apart from input_tokens (cache_read_input_tokens,
// cache_creation_input_tokens); OpenAI's prompt_tokens and the Responses
// API's input_tokens include cached tokens. So a Messages prompt count is the
// sum of the three, or the edge's prompt-token metric and fair-queuing charge
// would drop every cached token.

export interface TokenUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

const USAGE_KEY = Buffer.from('"usage"');
// The count names, with their quotes (so `"prompt_tokens_details"` is another key).
const PROMPT_TOKENS = Buffer.from('"prompt_tokens"');
const INPUT_TOKENS = Buffer.from('"input_tokens"');
const COMPLETION_TOKENS = Buffer.from('"completion_tokens"');
const OUTPUT_TOKENS = Buffer.from('"output_tokens"');
const CACHE_CREATION_TOKENS = Buffer.from('"cache_creation_input_tokens"');
const CACHE_READ_TOKENS = Buffer.from('"cache_read_input_tokens"');
/** Longest `usage` object read; usage objects are a few hundred bytes. */
const USAGE_OBJECT_BYTES = 1024;
/** Enough for a usage object and the [DONE] event after it. */
export const USAGE_TAIL_BYTES = 2048;

/** Finds the last `"usage":{...}` with a count in the tail frames (oldest first); undefined when absent. */
export function usageFromTail(frames: readonly Uint8Array[]): TokenUsage | undefined {
  const tail = frames.length === 1 ? Buffer.from(frames[0].buffer, frames[0].byteOffset, frames[0].byteLength) : Buffer.concat(frames);
  // A value that reads "usage" (a logprob's decoded token) is not the key: the one before it is tried.
  for (let at = tail.lastIndexOf(USAGE_KEY); at >= 0; at = at === 0 ? -1 : tail.lastIndexOf(USAGE_KEY, at - 1)) {
    if (!isUsageKey(tail, at)) continue;
    const usage = usageAt(tail, at);
    if (usage !== undefined) return usage;
  }
  return undefined;
}

/** The counts of the usage object whose key is at `at`; undefined when it has none. */
function usageAt(tail: Buffer, at: number): TokenUsage | undefined {
  scanUsage(tail, at);
  if (scannedPrompt < 0 && scannedCompletion < 0) return undefined;
  return { promptTokens: scannedPrompt < 0 ? 0 : scannedPrompt, completionTokens: scannedCompletion < 0 ? 0 : scannedCompletion };
}

/** What scanUsage read: -1 for a count it did not find. */
let scannedPrompt = -1;
let scannedCompletion = -1;

/** Reads the counts of the usage object whose key is at `at` into scannedPrompt / scannedCompletion. */
function scanUsage(tail: Buffer, at: number): void {
  // One pass over the usage object's bytes: this runs at the end of every answer, and a latin1 copy plus
  // two regular expressions over it were ~2 % of the edge's closed-loop profile.
  const end = objectEnd(tail, at);
  let prompt = -1;
  let cacheCreation = -1;
  let cacheRead = -1;
  let completion = -1;
  /** prompt_tokens (OpenAI) includes cached tokens, and no cache count follows it. */
  let whole = false;
  for (let i = at + USAGE_KEY.length; i < end; i++) {
    if (tail[i] !== QUOTE) continue;
    const key = countKey(tail, i);
    if (key === undefined || !keyAt(tail, i, key, end)) continue;
    const n = digitsAfterColon(tail, i + key.length, end);
    if (n < 0) continue;
    // The first of each count counts, as a reader from the left would take it.
    if (key === PROMPT_TOKENS || key === INPUT_TOKENS) {
      if (prompt < 0) {
        prompt = n;
        whole = key === PROMPT_TOKENS;
      }
    } else if (key === COMPLETION_TOKENS || key === OUTPUT_TOKENS) {
      if (completion < 0) completion = n;
    } else if (key === CACHE_CREATION_TOKENS) {
      if (cacheCreation < 0) cacheCreation = n;
    } else if (cacheRead < 0) cacheRead = n;
    if (whole && completion >= 0) break;
    i += key.length - 1;
  }
  if (whole || (cacheCreation < 0 && cacheRead < 0)) scannedPrompt = prompt;
  else scannedPrompt = Math.max(prompt, 0) + Math.max(cacheCreation, 0) + Math.max(cacheRead, 0);
  scannedCompletion = completion;
}

const QUOTE = 0x22;

/** The `"usage"` at `at` is a key opening an object (`ws : ws {`), or may be: its bytes end first. */
function isUsageKey(buf: Buffer, at: number): boolean {
  let i = at + USAGE_KEY.length;
  while (i < buf.length && isJsonSpace(buf[i])) i++;
  if (i >= buf.length) return true;
  if (buf[i] !== 0x3a) return false;
  i++;
  while (i < buf.length && isJsonSpace(buf[i])) i++;
  return i >= buf.length || buf[i] === 0x7b;
}

/** The count name the quoted key at buf[at] could be (keyAt checks the rest). */
function countKey(buf: Buffer, at: number): Buffer | undefined {
  switch (buf[at + 1]) {
    case 0x70: return PROMPT_TOKENS; // p
    case 0x69: return INPUT_TOKENS; // i
    case 0x6f: return OUTPUT_TOKENS; // o
    case 0x63: // c: completion_tokens, cache_creation_input_tokens, cache_read_input_tokens
      if (buf[at + 2] === 0x6f) return COMPLETION_TOKENS;
      return buf[at + 7] === 0x63 ? CACHE_CREATION_TOKENS : buf[at + 7] === 0x72 ? CACHE_READ_TOKENS : undefined;
    default: return undefined;
  }
}

function keyAt(buf: Buffer, at: number, key: Buffer, end: number): boolean {
  if (at + key.length > end) return false;
  for (let k = 2; k < key.length; k++) if (buf[at + k] !== key[k]) return false;
  return true;
}

/** More digits than a token count has: a provider's nonsense, never a counter's increment (Infinity would break the scrape). */
const MAX_COUNT_DIGITS = 12;

/** The integer after `ws : ws` at buf[i], before `end`; -1 when the bytes are not that, or not a plausible count. */
function digitsAfterColon(buf: Buffer, i: number, end: number): number {
  while (i < end && isJsonSpace(buf[i])) i++;
  if (i >= end || buf[i] !== 0x3a) return -1;
  i++;
  while (i < end && isJsonSpace(buf[i])) i++;
  let n = -1;
  let digits = 0;
  for (; i < end; i++) {
    const d = buf[i] - 0x30;
    if (d < 0 || d > 9) break;
    if (++digits > MAX_COUNT_DIGITS) return -1;
    n = n < 0 ? d : n * 10 + d;
  }
  return n;
}

function isJsonSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** Past the `{...}` value that follows `"usage"` at `at` (nested details objects included), capped. */
function objectEnd(buf: Buffer, at: number): number {
  const limit = Math.min(buf.length, at + USAGE_OBJECT_BYTES);
  let depth = 0;
  for (let i = at + USAGE_KEY.length; i < limit; i++) {
    const c = buf[i];
    if (c === 0x7b) depth++;
    else if (c === 0x7d && --depth <= 0) return i + 1;
  }
  return limit;
}

/** The Messages stream's prompt count from its head (`message_start`, cache counts included), when message_delta left it out. */
export function inputTokensFromHead(head: Uint8Array): number | undefined {
  const bytes = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  for (let at = bytes.indexOf(USAGE_KEY); at >= 0; at = bytes.indexOf(USAGE_KEY, at + 1)) {
    if (!isUsageKey(bytes, at)) continue;
    scanUsage(bytes, at);
    if (scannedPrompt >= 0) return scannedPrompt;
  }
  return undefined;
}

/**
 * The newest USAGE_TAIL_BYTES bytes of a response. The first frame is kept by
 * reference, so a whole JSON answer (one frame, as a rule) costs no copy;
 * from the second frame on, the bytes are copied into a ring the tail owns.
 * Kept by reference, a slow stream's last frames (and the gRPC message
 * buffers under them) lived for seconds: at 5,000 streams the edge promoted
 * ~1.1 MB a scavenge and ran a full GC every ~2 s; copied, 0.2 MB and none
 * (docs/benchmarks.md, CPU budget, "Stream tails as copies").
 */
export class StreamTail {
  /**
   * The body's `usage` need not be last: vLLM puts `prompt_logprobs`,
   * `prompt_token_ids` and `kv_transfer_params` after it in a JSON answer
   * (tens of KiB with prompt_logprobs or return_token_ids), and a Response
   * (a JSON answer, or response.completed in a stream) ends with `user` and
   * `metadata` (up to 16 values of 512 characters). So each frame that
   * leaves the whole-frame path is searched for the key, and the bytes from
   * the last one are kept (#usageFound). Chat and Messages streams end with
   * their usage event: the ring alone reads them.
   */
  readonly #watching: boolean;
  #first: Uint8Array | undefined;
  #ring: Buffer | undefined;
  /** Where the next byte goes in the ring. */
  #end = 0;
  /** Bytes of the ring in use (it fills from 0 before it wraps). */
  #filled = 0;
  /** Watching: the bytes from the last `"usage"` key seen, up to USAGE_OBJECT_BYTES (#usageLength of them so far). */
  #usageFound: Buffer | undefined;
  #usageLength = 0;
  /** The usage read from the bytes #usageFound held before a later key took them (a key cut at a frame's end may be a value). */
  #usageBefore: TokenUsage | undefined;
  /** The previous frame's last bytes (#carryLength of them), for a key split across two frames. */
  #carry: Buffer | undefined;
  #carryLength = 0;

  constructor(usageMayNotBeLast = false) {
    this.#watching = usageMayNotBeLast;
  }

  push(frame: Uint8Array): void {
    if (this.#ring === undefined) {
      if (this.#first === undefined) {
        this.#first = frame;
        return;
      }
      // Not from the shared pool: the ring lives as long as the stream and would pin a pool slab.
      this.#ring = Buffer.allocUnsafeSlow(USAGE_TAIL_BYTES);
      if (this.#watching) this.#watch(this.#first);
      this.#copy(this.#first);
      this.#first = undefined;
    }
    if (this.#watching) this.#watch(frame);
    this.#copy(frame);
  }

  /** Bytes the tail holds: what a long stream costs it (a ring, no frames). */
  get keptBytes(): number {
    return this.#ring === undefined ? (this.#first?.byteLength ?? 0) : this.#filled;
  }

  usage(): TokenUsage | undefined {
    const ring = this.#ring;
    if (ring === undefined) return this.#first === undefined ? undefined : usageFromTail([this.#first]);
    const newest = this.#filled < ring.length ? usageFromTail([ring.subarray(0, this.#filled)]) : usageFromTail([ring.subarray(this.#end), ring.subarray(0, this.#end)]);
    if (newest !== undefined || this.#usageFound === undefined) return newest;
    return usageFromTail([this.#usageFound.subarray(0, this.#usageLength)]) ?? this.#usageBefore;
  }

  /** The newest bytes, oldest first, as one buffer (a copy only when the ring has wrapped): read once, at the stream's end. */
  newest(): Buffer | undefined {
    const ring = this.#ring;
    if (ring === undefined) return this.#first === undefined ? undefined : Buffer.from(this.#first.buffer, this.#first.byteOffset, this.#first.byteLength);
    return this.#filled < ring.length ? ring.subarray(0, this.#filled) : Buffer.concat([ring.subarray(this.#end), ring.subarray(0, this.#end)]);
  }

  /** A frame on its way through: the last `"usage"` key in it (or across its start) and the bytes after it are kept. */
  #watch(frame: Uint8Array): void {
    const bytes = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
    if (this.#usageFound !== undefined && this.#usageLength < USAGE_OBJECT_BYTES) this.#keep(bytes, 0);
    let at = bytes.lastIndexOf(USAGE_KEY);
    while (at >= 0 && !isUsageKey(bytes, at)) at = at === 0 ? -1 : bytes.lastIndexOf(USAGE_KEY, at - 1);
    if (at >= 0) {
      this.#restart();
      this.#keep(bytes, at);
    } else if (this.#carryLength > 0 && (this.#carry as Buffer).includes(QUOTE)) {
      const carry = (this.#carry as Buffer).subarray(0, this.#carryLength);
      const seam = Buffer.concat([carry, bytes.subarray(0, 64)]);
      const split = seam.indexOf(USAGE_KEY);
      if (split >= 0 && split < carry.length && isUsageKey(seam, split)) {
        this.#restart();
        this.#keep(carry, split);
        this.#keep(bytes, 0);
      }
    }
    // The last bytes of the body so far, however small its frames; copied: a frame's memory may be reused once relayed.
    const carry = (this.#carry ??= Buffer.allocUnsafeSlow(USAGE_KEY.length - 1));
    if (bytes.length >= carry.length) {
      bytes.copy(carry, 0, bytes.length - carry.length);
      this.#carryLength = carry.length;
    } else if (bytes.length > 0) {
      const old = Math.min(this.#carryLength, carry.length - bytes.length);
      carry.copy(carry, 0, this.#carryLength - old, this.#carryLength);
      bytes.copy(carry, old);
      this.#carryLength = old + bytes.length;
    }
  }

  /** A later key: the kept bytes make room for it, their usage (if they hold one) kept. */
  #restart(): void {
    if (this.#usageFound !== undefined) this.#usageBefore = usageFromTail([this.#usageFound.subarray(0, this.#usageLength)]) ?? this.#usageBefore;
    this.#usageLength = 0;
  }

  /** Appends bytes from `from` to the kept usage bytes, up to their cap. */
  #keep(bytes: Buffer, from: number): void {
    this.#usageFound ??= Buffer.allocUnsafeSlow(USAGE_OBJECT_BYTES);
    const n = Math.min(bytes.length - from, USAGE_OBJECT_BYTES - this.#usageLength);
    if (n <= 0) return;
    bytes.copy(this.#usageFound, this.#usageLength, from, from + n);
    this.#usageLength += n;
  }

  #copy(frame: Uint8Array): void {
    const ring = this.#ring as Buffer;
    const cap = ring.length;
    const n = frame.byteLength;
    if (n >= cap) {
      ring.set(frame.subarray(n - cap));
      this.#end = 0;
      this.#filled = cap;
      return;
    }
    const room = cap - this.#end;
    if (n <= room) ring.set(frame, this.#end);
    else {
      ring.set(frame.subarray(0, room), this.#end);
      ring.set(frame.subarray(room), 0);
    }
    this.#end = this.#end + n >= cap ? this.#end + n - cap : this.#end + n;
    this.#filled = Math.min(cap, this.#filled + n);
  }
}
