// A provider's error answer read for its reason, when the client's head has
// already gone out as a 200 event stream (keepalives or queue updates
// committed it) and the provider's own status and body can no longer be
// relayed: the in-band error then carries the provider's message and an
// error type that says whose mistake it was, as the relayed answer would.
import { brotliDecompressSync, constants, gunzipSync, inflateSync } from 'node:zlib';
import type { Header } from '../../gen/edge/v1/tunnel_pb.js';
import type { GatewayErrorSpec } from '../../shared/errors.js';

/** Bytes of the provider's error body kept for its message: an error body is small; more is cut. */
export const PROVIDER_ERROR_BYTES = 16 * 1024;
/** The longest provider message carried, in characters. */
const MESSAGE_CHARS = 1_000;

/**
 * The in-band error's catalogue entry for a provider's HTTP status. A 4xx
 * other than 429 is the request's fault: the provider's own `code` and
 * `param` say what to fix, so they are kept, as the relayed answer had them.
 */
export function providerErrorSpec(status: number, said?: ProviderErrorText): GatewayErrorSpec {
  const type: GatewayErrorSpec['type'] =
    status === 401 ? 'authentication_error'
      : status === 403 ? 'permission_error'
        : status === 429 ? 'rate_limit_error'
          : status >= 400 && status < 500 ? 'invalid_request_error'
            : 'server_error';
  const fixable = status >= 400 && status < 500 && status !== 429;
  return { status, type, code: (fixable ? said?.code : undefined) ?? 'upstream_error', message: `the provider answered HTTP ${status}`, param: (fixable ? said?.param : undefined) ?? null };
}

/**
 * The message an error body gives: OpenAI's and Anthropic's `error.message`,
 * Ollama's `error` string, vLLM's `message` or FastAPI's `detail`; else the
 * body's text when it is short readable text; else undefined.
 */
export function providerErrorMessage(body: Buffer): string | undefined {
  return readProviderError(body).message;
}

/** What a provider's error body says: its message, and OpenAI's `error.code` and `error.param` when it names them. */
export interface ProviderErrorText {
  readonly message?: string;
  readonly code?: string;
  readonly param?: string;
}

const NONE: ProviderErrorText = {};

export function readProviderError(body: Buffer): ProviderErrorText {
  const text = body.toString('utf8').trim();
  if (text === '') return NONE;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // An HTML error page (a proxy's 502): its title, else its text without the markup.
    if (text.startsWith('<')) return { message: htmlText(text) };
    // Not JSON (or cut at the byte cap): plain text says it as well as anything.
    return /^[\x20-\x7e\s]+$/.test(text.slice(0, 200)) ? { message: clip(text) } : NONE;
  }
  if (parsed === null || typeof parsed !== 'object') return typeof parsed === 'string' ? { message: clip(parsed) } : NONE;
  const error = (parsed as { error?: unknown }).error;
  const named = error !== null && typeof error === 'object' ? (error as { code?: unknown; param?: unknown }) : undefined;
  return { message: errorObjectMessage(parsed), code: name(named?.code), param: name(named?.param) };
}

/** A code or param as a provider names it (`invalid_value`, `messages[0].content`); anything else is not carried. */
function name(value: unknown): string | undefined {
  return typeof value === 'string' && /^[\x21-\x7e]{1,200}$/.test(value) ? value : undefined;
}

/** The message a parsed error object gives (an error body's, or an in-band error event's data), clipped; undefined when it names none. */
export function errorObjectMessage(parsed: object): string | undefined {
  const record = parsed as { error?: unknown; message?: unknown; detail?: unknown };
  const error = record.error;
  if (typeof error === 'string') return clip(error);
  if (error !== null && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') return clip((error as { message: string }).message);
  if (typeof record.message === 'string') return clip(record.message);
  if (typeof record.detail === 'string') return clip(record.detail);
  if (record.detail !== undefined) return clip(JSON.stringify(record.detail));
  return undefined;
}

function htmlText(html: string): string | undefined {
  const title = /<title[^>]*>([^<]*)</i.exec(html)?.[1].trim();
  const text = title !== undefined && title !== '' ? title : html.replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, ' ').replace(/<[^>]*>?/g, ' ');
  const plain = text.replace(/\s+/g, ' ').trim();
  return plain === '' || !/^[\x20-\x7e]+$/.test(plain.slice(0, 200)) ? undefined : clip(plain);
}

function clip(text: string): string {
  return text.length > MESSAGE_CHARS ? `${text.slice(0, MESSAGE_CHARS)}…` : text;
}

/** The content-encoding a provider's head names, lower-cased, when it names one other than identity. */
export function contentEncodingOf(headers: readonly Header[]): string | undefined {
  for (let i = 0; i < headers.length; i++) {
    if (headers[i].name.toLowerCase() !== 'content-encoding') continue;
    const value = headers[i].value.trim().toLowerCase();
    if (value !== '' && value !== 'identity') return value;
  }
  return undefined;
}

/**
 * What a compressed error body may decode to: zlib's maxOutputLength throws rather than stopping, so a
 * cap of PROVIDER_ERROR_BYTES would leave no message for any body longer than that decoded (which a
 * compressed body cut at the cap always is); this bounds a decompression bomb, and the first
 * PROVIDER_ERROR_BYTES are kept, as of a plain body.
 */
const DECODED_ERROR_BYTES = 64 * PROVIDER_ERROR_BYTES;

/**
 * A compressed error body (gzip, deflate, br), or the head of a created Response, as text bytes, at most
 * PROVIDER_ERROR_BYTES of them (the first, as a plain body is cut), so its
 * message can be read; a body cut at the cap decodes as far as it goes.
 * Undefined for another coding or bytes that do not decode.
 */
export function decodedErrorBody(body: Buffer, encoding: string): Buffer | undefined {
  const options = { maxOutputLength: DECODED_ERROR_BYTES, finishFlush: constants.Z_SYNC_FLUSH };
  let decoded: Buffer | undefined;
  try {
    if (encoding === 'gzip' || encoding === 'x-gzip') decoded = gunzipSync(body, options);
    else if (encoding === 'deflate') decoded = inflateSync(body, options);
    else if (encoding === 'br') decoded = brotliDecompressSync(body, { maxOutputLength: DECODED_ERROR_BYTES, finishFlush: constants.BROTLI_OPERATION_FLUSH });
  } catch {
    // Corrupt, or a bomb past DECODED_ERROR_BYTES: no message rather than a wrong one.
  }
  return decoded === undefined || decoded.length <= PROVIDER_ERROR_BYTES ? decoded : decoded.subarray(0, PROVIDER_ERROR_BYTES);
}
