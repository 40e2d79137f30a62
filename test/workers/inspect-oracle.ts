// The reference verdict for inspectBody, built on JSON.parse, shared by the
// corpus and fuzz tests. JSON.parse only sees decoded text, so bytes that are
// not well-formed UTF-8 are decided here the way the inspector documents:
// invalid_json (a gateway must not forward what the decoder would replace
// with U+FFFD).

import { isUtf8 } from 'node:buffer';
import type { InspectResult } from '../../src/workers/http/inspect.js';

export type Verdict =
  | { readonly kind: 'ok'; readonly model: string; readonly stream: boolean }
  | { readonly kind: 'invalid_json' | 'not_object' | 'missing_model' | 'model_not_string' | 'empty_model' };

export function expectedVerdict(bytes: Uint8Array): Verdict {
  if (!isUtf8(bytes)) return { kind: 'invalid_json' };
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch {
    return { kind: 'invalid_json' };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { kind: 'not_object' };
  const body = value as Record<string, unknown>;
  if (!Object.hasOwn(body, 'model')) return { kind: 'missing_model' };
  if (typeof body.model !== 'string') return { kind: 'model_not_string' };
  if (body.model === '') return { kind: 'empty_model' };
  return { kind: 'ok', model: body.model, stream: body.stream === true };
}

export function actualVerdict(result: InspectResult): Verdict | { readonly kind: 'too_deep' } {
  if (result.ok) return { kind: 'ok', model: result.model, stream: result.stream };
  return { kind: result.kind };
}

/**
 * True when the inspector rejected the body for a duplicated top-level
 * "model" or "previous_response_id" (its deliberate disagreements with
 * JSON.parse on valid JSON), checked independently: the bytes at the
 * reported offset start a string literal that decodes to that name.
 */
export function isDuplicateMemberRejection(bytes: Uint8Array, result: InspectResult): boolean {
  if (result.ok || result.kind !== 'invalid_json' || !/duplicate/.test(result.message)) return false;
  const rest = Buffer.from(bytes.buffer, bytes.byteOffset + result.offset, bytes.byteLength - result.offset).toString('utf8');
  const literal = /^"(?:[^"\\]|\\.)*"/.exec(rest);
  return literal !== null && ['model', 'previous_response_id'].includes(JSON.parse(literal[0]) as string);
}
