// Token usage of a streamed completion, for metrics, without parsing every
// chunk: OpenAI-compatible providers put `usage` in the last data event, so
// only the tail of the stream is scanned, once, at END. The relay keeps
// references to the last DATA frames (no copies) and hands them here.

export interface TokenUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
}

const USAGE_KEY = Buffer.from('"usage"');
const PROMPT = /"prompt_tokens"\s*:\s*(\d+)/;
const COMPLETION = /"completion_tokens"\s*:\s*(\d+)/;
/** Enough for a usage object and the [DONE] event after it. */
export const USAGE_TAIL_BYTES = 2048;

/** Finds the last `"usage":{...}` in the tail frames (oldest first); undefined when absent. */
export function usageFromTail(frames: readonly Uint8Array[]): TokenUsage | undefined {
  const tail = frames.length === 1 ? Buffer.from(frames[0].buffer, frames[0].byteOffset, frames[0].byteLength) : Buffer.concat(frames);
  const at = tail.lastIndexOf(USAGE_KEY);
  if (at < 0) return undefined;
  const end = tail.indexOf(0x7d /* } */, at);
  const text = tail.toString('latin1', at, end < 0 ? tail.length : end + 1);
  const prompt = PROMPT.exec(text);
  const completion = COMPLETION.exec(text);
  if (!prompt && !completion) return undefined;
  return { promptTokens: prompt ? Number(prompt[1]) : 0, completionTokens: completion ? Number(completion[1]) : 0 };
}

/** Keeps references to the newest frames covering at least USAGE_TAIL_BYTES. */
export class StreamTail {
  private frames: Uint8Array[] = [];
  private bytes = 0;

  push(frame: Uint8Array): void {
    this.frames.push(frame);
    this.bytes += frame.byteLength;
    while (this.frames.length > 1 && this.bytes - this.frames[0].byteLength >= USAGE_TAIL_BYTES) {
      this.bytes -= this.frames[0].byteLength;
      this.frames.shift();
    }
  }

  usage(): TokenUsage | undefined {
    return this.frames.length === 0 ? undefined : usageFromTail(this.frames);
  }
}
