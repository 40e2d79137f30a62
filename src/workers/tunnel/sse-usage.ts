// Token usage of a streamed completion, for metrics, without parsing every
// chunk: OpenAI-compatible providers put `usage` in the last data event, so
// only the tail of the stream is scanned, once, at END. The relay keeps
// references to the last DATA frames (no copies) and hands them here.
// The other APIs name the counts differently and are read the same way:
// the Responses API's `response.completed` carries `usage` with
// input_tokens / output_tokens; the Messages API's `message_delta` carries
// output_tokens (and, from newer servers, input_tokens), while its input
// count otherwise sits in `message_start` at the head of the stream.

export interface TokenUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

const USAGE_KEY = Buffer.from('"usage"');
const PROMPT = /"(?:prompt|input)_tokens"\s*:\s*(\d+)/;
const COMPLETION = /"(?:completion|output)_tokens"\s*:\s*(\d+)/;
/** Longest `usage` object read; usage objects are a few hundred bytes. */
const USAGE_OBJECT_BYTES = 1024;
/** Enough for a usage object and the [DONE] event after it. */
export const USAGE_TAIL_BYTES = 2048;

/** Finds the last `"usage":{...}` in the tail frames (oldest first); undefined when absent. */
export function usageFromTail(frames: readonly Uint8Array[]): TokenUsage | undefined {
  const tail = frames.length === 1 ? Buffer.from(frames[0].buffer, frames[0].byteOffset, frames[0].byteLength) : Buffer.concat(frames);
  const at = tail.lastIndexOf(USAGE_KEY);
  if (at < 0) return undefined;
  const text = tail.toString('latin1', at, objectEnd(tail, at));
  const prompt = PROMPT.exec(text);
  const completion = COMPLETION.exec(text);
  if (!prompt && !completion) return undefined;
  return { promptTokens: prompt ? Number(prompt[1]) : 0, completionTokens: completion ? Number(completion[1]) : 0 };
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

/** The Messages stream's input count from its head (`message_start`), when message_delta left it out. */
export function inputTokensFromHead(head: Uint8Array): number | undefined {
  const text = Buffer.from(head.buffer, head.byteOffset, head.byteLength).toString('latin1');
  const match = /"input_tokens"\s*:\s*(\d+)/.exec(text);
  return match === null ? undefined : Number(match[1]);
}

/** Keeps references to the newest frames covering at least USAGE_TAIL_BYTES. */
export class StreamTail {
  #frames: Uint8Array[] = [];
  #bytes = 0;

  push(frame: Uint8Array): void {
    this.#frames.push(frame);
    this.#bytes += frame.byteLength;
    while (this.#frames.length > 1 && this.#bytes - this.#frames[0].byteLength >= USAGE_TAIL_BYTES) {
      this.#bytes -= this.#frames[0].byteLength;
      this.#frames.shift();
    }
  }

  /** Frames currently kept (tests check the tail stays bounded). */
  get keptFrames(): number {
    return this.#frames.length;
  }

  usage(): TokenUsage | undefined {
    return this.#frames.length === 0 ? undefined : usageFromTail(this.#frames);
  }
}
