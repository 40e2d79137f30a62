// Exact prompt token counts for the long-context class, run in the offload
// pool only (a 1 MB English prompt takes ~15-40 ms to tokenize; capped, below). gpt-tokenizer is
// pure JS with its vocabularies bundled: no native build, no download.
// o200k_base is the GPT-4o family's encoding; other families' tokenizers
// differ by some 10-20 % on English, far closer than bytes / 4 on code,
// CJK text or JSON-escaped content.
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';

/** Per message: role and separators (OpenAI's counting recipe for chat models). */
const TOKENS_PER_MESSAGE = 3;
/** The assistant reply's priming. */
const TOKENS_PER_REPLY = 3;
/**
 * BPE merging is quadratic in the length of one pre-tokenized piece: 16 KB
 * of '=' takes ~330 ms, 1 MB of it minutes. Text is cut into slices of at
 * most this many characters (at a space when there is one), which bounds a
 * piece; a cut inside a word may change the count by a token.
 */
const SLICE_CHARS = 1024;
/** Past this much tokenizing per body the rest is extrapolated from the rate so far (1 MB of random punctuation: ~1.7 s). */
const BUDGET_MS = 100;

/**
 * Tokens of the prompt text of an already-validated OpenAI request body:
 * `messages[].content` (a string or text parts) for chat, `prompt` for
 * completions, `input` for embeddings. -1 when the body has none of them,
 * so the caller keeps its byte estimate.
 */
export function countPromptTokens(body: Buffer, budgetMs: number = BUDGET_MS): number {
  const request: unknown = JSON.parse(body.toString('utf8'));
  if (request === null || typeof request !== 'object') return -1;
  const { messages, prompt, input } = request as Record<string, unknown>;
  const texts: string[] = [];
  let fixed = 0;
  let found = false;
  if (Array.isArray(messages)) {
    found = true;
    fixed += TOKENS_PER_REPLY + TOKENS_PER_MESSAGE * messages.length;
    for (const message of messages) {
      if (message !== null && typeof message === 'object') collectContent((message as Record<string, unknown>).content, texts);
    }
  }
  for (const value of [prompt, input]) {
    if (value === undefined) continue;
    found = true;
    fixed += collectTextOrList(value, texts);
  }
  return found ? fixed + countTexts(texts, budgetMs) : -1;
}

/** Tokens of `texts`, slice by slice; extrapolated once budgetMs is spent. */
function countTexts(texts: readonly string[], budgetMs: number): number {
  let totalChars = 0;
  for (const text of texts) totalChars += text.length;
  const deadline = performance.now() + budgetMs;
  let tokens = 0;
  let doneChars = 0;
  for (const text of texts) {
    for (let i = 0; i < text.length; ) {
      if (doneChars > 0 && performance.now() > deadline) return tokens + Math.ceil((tokens / doneChars) * (totalChars - doneChars));
      let end = i + SLICE_CHARS;
      if (end < text.length) {
        const space = text.lastIndexOf(' ', end);
        if (space > i) end = space;
      } else end = text.length;
      tokens += countTokens(text.slice(i, end));
      doneChars += end - i;
      i = end;
    }
  }
  return tokens;
}

/** A chat message's content: a string, or parts of which the `text` ones count. */
function collectContent(content: unknown, texts: string[]): void {
  if (typeof content === 'string') texts.push(content);
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (part !== null && typeof part === 'object') {
        const text = (part as Record<string, unknown>).text;
        if (typeof text === 'string') texts.push(text);
      }
    }
  }
}

/** `prompt` / `input`: a string or list of strings (collected), or already tokens (returned as a count). */
function collectTextOrList(value: unknown, texts: string[]): number {
  if (typeof value === 'string') {
    texts.push(value);
    return 0;
  }
  if (!Array.isArray(value)) return 0;
  let tokens = 0;
  for (const item of value) {
    if (typeof item === 'string') texts.push(item);
    else if (typeof item === 'number') tokens += 1;
    else if (Array.isArray(item)) tokens += item.length;
  }
  return tokens;
}
