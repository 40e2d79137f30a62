// Prompt token counts for the long-context class, run in the offload pool
// only. gpt-tokenizer is pure JS with its vocabularies bundled: no native
// build, no download. o200k_base is the GPT-4o family's encoding; other
// families' tokenizers differ by some 10-20 % on English, far closer than
// bytes / 4 on code, CJK text or JSON-escaped content.
//
// Exact up to EXACT_CHARS of prompt text; past that, from evenly spread
// samples. Tokenizing costs ~20 µs per KB on one core (a 1 MB prompt took
// 21 ms, most of the edge's CPU for such a request), and BPE counts are
// local (pre-tokenized word by word), so 128 samples of up to 1 KB put a
// long prompt within a few percent of its exact count at a tenth of the
// cost or less, inside the spread between model families above.
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
/** Prompts up to this many characters are counted whole. */
export const EXACT_CHARS = 128 * 1024;
/** Longer ones: this many slices of up to SLICE_CHARS bytes, one in each equal stretch of the text. */
const SAMPLES = 128;
/** Past this much tokenizing per body the rest is extrapolated from the rate so far (1 MB of random punctuation: ~1.7 s). */
const BUDGET_MS = 100;
/**
 * A prompt's `<|endoftext|>` is text the user wrote, counted as text, as a
 * provider's tokenizer counts it. gpt-tokenizer's default throws on it
 * (meant for code that builds prompts), which would refuse the request.
 */
const AS_TEXT = { disallowedSpecial: new Set<string>() };
/**
 * An image part's tokens, whatever its size: its base64 is no text, and
 * models charge a few hundred to ~1,600 tokens an image (Anthropic's cap for
 * one image; OpenAI's high-detail 1024x1024 is 765). The upper end, so an
 * image-heavy prompt is not taken for a short one.
 */
export const IMAGE_TOKENS = 1_600;
/** The parts that carry an image: chat's image_url, Anthropic's image, the Responses API's input_image. */
const IMAGE_PARTS: ReadonlySet<unknown> = new Set(['image_url', 'image', 'input_image']);

/** A count, and how it was reached. */
export interface PromptTokens {
  readonly tokens: number;
  /** Characters of prompt text. */
  readonly totalChars: number;
  /** 0: every character tokenized (or until the time budget ran out); else the UTF-8 bytes of the samples that were. */
  readonly sampledBytes: number;
}

/**
 * Tokens of the prompt text of an already-validated request body:
 * `messages[].content` (a string, text parts, nested tool results) for
 * chat and Anthropic messages, `system`, `prompt` for completions, `input`
 * for embeddings and the Responses API (strings or input items), and
 * `instructions`, and the JSON text of `tools` (and chat's older
 * `functions`); an image part is IMAGE_TOKENS, not its base64. -1 when the
 * body has no prompt at all, so the caller keeps
 * its byte estimate.
 */
export function countPromptTokens(body: Buffer, budgetMs: number = BUDGET_MS): number {
  return promptTokensOf(JSON.parse(body.toString('utf8')), budgetMs, EXACT_CHARS)?.tokens ?? -1;
}

/**
 * An embeddings or completions body's tokens as the scheduler takes them:
 * a list `input` / `prompt` (strings or token arrays) is a batch whose
 * items are sequences of their own, each within the model's window, so its
 * longest one sets the long-context class, not their sum (2,048 short
 * inputs are no long prompt). A long batch is its longest item (the window
 * it needs). A short one is all its items together, as far as that keeps it
 * under `longThreshold`: the same number is the key's tokens_per_minute
 * reservation and the fair-queuing charge, which the provider will count
 * for every item (the longest alone, a 2,000-input batch reserved a few
 * dozen tokens where a smaller one, estimated by its bytes, reserved
 * thousands). A single string or token array: countPromptTokens. -1 as
 * there. A completion's `suffix` (the text after the insertion point)
 * reaches the model with every prompt of the batch: its tokens count on top
 * of each.
 */
export function batchInputTokens(body: Buffer, longThreshold: number, budgetMs: number = BUDGET_MS): number {
  const request: unknown = JSON.parse(body.toString('utf8'));
  if (request === null || typeof request !== 'object') return -1;
  const items = batchItemTokens(request, budgetMs);
  if (items === undefined) return -1;
  const { suffix } = request as Record<string, unknown>;
  const extra = typeof suffix !== 'string' ? 0 : countTexts([suffix], suffix.length, budgetMs, EXACT_CHARS).tokens;
  const longest = items.longest + extra;
  if (longest >= longThreshold) return longest;
  return Math.min(items.total + extra * items.count, longThreshold - 1);
}

/** The prompt (or input) list's longest item, all its items together, and how many there are; undefined when the body has no prompt. */
function batchItemTokens(request: object, budgetMs: number): { longest: number; total: number; count: number } | undefined {
  const { prompt, input } = request as Record<string, unknown>;
  const list = input ?? prompt;
  if (!Array.isArray(list) || list.length === 0 || list.some((item) => typeof item !== 'string' && !Array.isArray(item))) {
    const tokens = promptTokensOf(request, budgetMs, EXACT_CHARS)?.tokens;
    return tokens === undefined ? undefined : { longest: tokens, total: tokens, count: 1 };
  }
  let longestText = '';
  let longestIds = 0;
  let ids = 0;
  let textChars = 0;
  const texts: string[] = [];
  for (const item of list) {
    if (typeof item === 'string') {
      textChars += item.length;
      texts.push(item);
      if (item.length > longestText.length) longestText = item;
    } else {
      ids += item.length;
      if (item.length > longestIds) longestIds = item.length;
    }
  }
  if (textChars <= EXACT_CHARS) {
    // Every string is counted, no dearer than one prompt of that size: tokens per character differ several-fold
    // (prose ~5 characters a token, digits and CJK text ~1.5), so the longest string need not be the longest item.
    const deadline = performance.now() + budgetMs;
    let longest = longestIds;
    let total = ids;
    for (const text of texts) {
      const tokens = countWhole([text], text.length, Math.max(0, deadline - performance.now())).tokens;
      total += tokens;
      if (tokens > longest) longest = tokens;
    }
    return { longest, total, count: list.length };
  }
  // Past that, the longest string by characters stands for the batch's longest (tokenizing every one would cost
  // the whole body), and samples of them all for their sum.
  const longest = Math.max(countTexts([longestText], longestText.length, budgetMs, EXACT_CHARS).tokens, longestIds);
  return { longest, total: countSampled(texts, budgetMs).tokens + ids, count: list.length };
}

/** countPromptTokens with how it was reached; undefined when the body has no prompt. exactChars: counted whole up to this. */
export function promptTokens(body: Buffer, budgetMs: number = BUDGET_MS, exactChars: number = EXACT_CHARS): PromptTokens | undefined {
  return promptTokensOf(JSON.parse(body.toString('utf8')), budgetMs, exactChars);
}

function promptTokensOf(request: unknown, budgetMs: number, exactChars: number): PromptTokens | undefined {
  if (request === null || typeof request !== 'object') return undefined;
  const { messages, prompt, input, system, instructions } = request as Record<string, unknown>;
  const texts: string[] = [];
  let fixed = 0;
  let found = false;
  if (Array.isArray(messages)) {
    found = true;
    fixed += TOKENS_PER_REPLY + TOKENS_PER_MESSAGE * messages.length;
    for (const message of messages) fixed += collectContent(message, texts, 0);
  }
  for (const value of [prompt, input]) {
    if (value === undefined) continue;
    found = true;
    fixed += collectTextOrList(value, texts);
  }
  // Anthropic's `system` (a string or text blocks), the Responses API's `instructions`.
  for (const value of [system, instructions]) {
    if (value === undefined) continue;
    found = true;
    fixed += TOKENS_PER_MESSAGE;
    fixed += collectContent(value, texts, 0);
  }
  if (!found) return undefined;
  // Tool definitions reach the model too (the chat template renders them into its prompt), and an
  // agent's can be most of a body: left out, such a request would be taken for a short one.
  const { tools, functions } = request as Record<string, unknown>;
  for (const value of [tools, functions]) if (Array.isArray(value) && value.length > 0) texts.push(JSON.stringify(value));
  let totalChars = 0;
  for (const text of texts) totalChars += text.length;
  const counted = countTexts(texts, totalChars, budgetMs, exactChars);
  return { tokens: fixed + counted.tokens, totalChars, sampledBytes: counted.sampledBytes };
}

/** Tokens of `texts`: whole up to exactChars of them, else from samples. */
function countTexts(texts: readonly string[], totalChars: number, budgetMs: number, exactChars: number): Counted {
  return totalChars <= exactChars ? countWhole(texts, totalChars, budgetMs) : countSampled(texts, budgetMs);
}

interface Counted {
  readonly tokens: number;
  readonly sampledBytes: number;
}

/** Tokens of `texts`, slice by slice; extrapolated once budgetMs is spent. */
function countWhole(texts: readonly string[], totalChars: number, budgetMs: number): Counted {
  const deadline = performance.now() + budgetMs;
  let tokens = 0;
  let doneChars = 0;
  for (const text of texts) {
    for (let i = 0; i < text.length; ) {
      if (doneChars > 0 && performance.now() > deadline) return { tokens: tokens + Math.ceil((tokens / doneChars) * (totalChars - doneChars)), sampledBytes: 0 };
      const end = sliceEnd(text, i, i + SLICE_CHARS);
      tokens += countTokens(text.slice(i, end), AS_TEXT);
      doneChars += end - i;
      i = end;
    }
  }
  return { tokens, sampledBytes: 0 };
}

/**
 * Tokens of `texts` from one slice in each of SAMPLES equal stretches of
 * their UTF-8 bytes, at a pseudo-random place in it (even strides alias
 * with repeating structure, such as turns of a conversation), each scaled
 * to its stretch by bytes: tokens per byte varies far less between prose,
 * code and CJK text than tokens per character does.
 */
function countSampled(texts: readonly string[], budgetMs: number): Counted {
  const deadline = performance.now() + budgetMs;
  const utf8 = Buffer.from(texts.length === 1 ? texts[0] : texts.join(''), 'utf8');
  const stretch = utf8.length / SAMPLES;
  let seed = utf8.length | 1;
  let estimate = 0;
  let sampled = 0;
  for (let k = 0; k < SAMPLES; k++) {
    const from = Math.floor(k * stretch);
    const to = k === SAMPLES - 1 ? utf8.length : Math.floor((k + 1) * stretch);
    if (sampled > 0 && performance.now() > deadline) {
      estimate += ((to - from) * estimate) / from; // out of budget: the rest at the rate so far
      continue;
    }
    seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
    let i = charStart(utf8, from + Math.floor((seed / 2 ** 32) * Math.max(0, to - from - SLICE_CHARS)));
    // Start on a word (a space within 64 bytes), end before one: searched within the slice only,
    // as text without spaces would otherwise have every search run to the buffer's end.
    const space = utf8.subarray(i, Math.min(i + 64, to)).indexOf(SPACE);
    if (space > 0) i += space;
    let end = Math.min(i + SLICE_CHARS, to);
    if (end < to) {
      const last = utf8.subarray(i + 1, end).lastIndexOf(SPACE);
      end = last >= 0 ? i + 1 + last : charStart(utf8, end);
    }
    if (end <= i) continue;
    estimate += (countTokens(utf8.toString('utf8', i, end), AS_TEXT) * (to - from)) / (end - i);
    sampled += end - i;
  }
  return { tokens: Math.ceil(estimate), sampledBytes: sampled };
}

const SPACE = 0x20;

/** The first byte at or after `at` that starts a UTF-8 character. */
function charStart(utf8: Buffer, at: number): number {
  while (at < utf8.length && (utf8[at] & 0xc0) === 0x80) at++;
  return at;
}

/** Where a slice from `from` ends: `limit`, pulled back to a space after `from` if there is one, or the text's end. */
function sliceEnd(text: string, from: number, limit: number): number {
  if (limit >= text.length) return text.length;
  const space = text.lastIndexOf(' ', limit);
  return space > from ? space : limit;
}

/** Past this nesting, content is not looked into (a body's depth is bounded by inspection already). */
const MAX_CONTENT_DEPTH = 8;

/**
 * The text of a message or content value, in any of the APIs' shapes: a
 * string; a list of parts; a part's `text` (text, input_text, output_text
 * blocks); a message's or a tool result's `content`, which nests; the
 * arguments of earlier tool calls, pushed onto `texts`. Returns the tokens
 * of its image parts (IMAGE_TOKENS each: their base64 is no prompt text);
 * audio is skipped.
 */
function collectContent(value: unknown, texts: string[], depth: number): number {
  if (typeof value === 'string') {
    texts.push(value);
    return 0;
  }
  if (value === null || typeof value !== 'object' || depth >= MAX_CONTENT_DEPTH) return 0;
  let tokens = 0;
  if (Array.isArray(value)) {
    for (const item of value) tokens += collectContent(item, texts, depth + 1);
    return tokens;
  }
  const part = value as Record<string, unknown>;
  if (IMAGE_PARTS.has(part.type)) return IMAGE_TOKENS;
  const { text, content } = part;
  if (typeof text === 'string') texts.push(text);
  if (content !== undefined) tokens += collectContent(content, texts, depth + 1);
  // Earlier tool calls are prompt too, and an agent's arguments can be most of a conversation: chat's
  // tool_calls[].function and function_call, the Responses API's function_call item, Anthropic's tool_use input.
  if (typeof part.arguments === 'string') texts.push(part.arguments);
  const call = part.function ?? part.function_call;
  if (call !== null && typeof call === 'object' && typeof (call as Record<string, unknown>).arguments === 'string') texts.push((call as Record<string, string>).arguments);
  if (Array.isArray(part.tool_calls)) tokens += collectContent(part.tool_calls, texts, depth + 1);
  if (part.type === 'tool_use' && part.input !== undefined) texts.push(JSON.stringify(part.input));
  return tokens;
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
    else if (item !== null && typeof item === 'object') {
      // A Responses input item (a message with content, or a tool output).
      tokens += TOKENS_PER_MESSAGE;
      tokens += collectContent(item, texts, 1);
      const output = (item as Record<string, unknown>).output;
      if (typeof output === 'string') texts.push(output);
    }
  }
  return tokens;
}
