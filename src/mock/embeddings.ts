// POST /v1/embeddings: deterministic vectors, so a test can compare two
// calls or check which input produced which vector.

import { errorBody } from './responses.js';

export interface EmbeddingsRequest {
  readonly model: string;
  readonly inputs: readonly (string | readonly number[])[];
  readonly base64: boolean;
  readonly dimensions: number | undefined;
}

/** Parses an embeddings request body; returns an OpenAI error body string on a bad request. */
export function parseEmbeddingsRequest(body: Buffer): EmbeddingsRequest | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (err) {
    return errorBody(`invalid JSON body: ${(err as Error).message}`, 'invalid_request_error', 'invalid_json');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return errorBody('the request body must be a JSON object', 'invalid_request_error', 'invalid_json');
  }
  const { model, input, encoding_format: format, dimensions } = parsed as Record<string, unknown>;
  if (typeof model !== 'string' || model === '') return errorBody('you must provide a model parameter', 'invalid_request_error', null, 'model');
  const inputs = embeddingInputs(input);
  if (inputs === undefined) return errorBody("'input' must be a string, an array of strings, or token arrays", 'invalid_request_error', null, 'input');
  if (format !== undefined && format !== 'float' && format !== 'base64') {
    return errorBody("'encoding_format' must be 'float' or 'base64'", 'invalid_request_error', null, 'encoding_format');
  }
  if (dimensions !== undefined && !(Number.isInteger(dimensions) && (dimensions as number) > 0)) {
    return errorBody("'dimensions' must be a positive integer", 'invalid_request_error', null, 'dimensions');
  }
  return { model, inputs, base64: format === 'base64', dimensions: dimensions as number | undefined };
}

function embeddingInputs(input: unknown): (string | readonly number[])[] | undefined {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input) || input.length === 0) return undefined;
  if (input.every((x) => typeof x === 'number')) return [input as number[]];
  if (input.every((x) => typeof x === 'string' || (Array.isArray(x) && x.every((t) => typeof t === 'number')))) {
    return input as (string | number[])[];
  }
  return undefined;
}

/** The vector for one input: float32 values in [-1, 1) from a hash of the input. */
export function embeddingVector(input: string | readonly number[], dim: number): Float32Array {
  let h = 0x811c9dc5; // FNV-1a over the input's text
  const text = typeof input === 'string' ? input : input.join(',');
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  const out = new Float32Array(dim);
  for (let j = 0; j < dim; j++) {
    h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) + 0x9e3779b9; // xorshift-multiply step
    out[j] = (h >>> 8) / 0x800000 - 1;
  }
  return out;
}

export function embeddingsBody(request: EmbeddingsRequest, modelDim: number): string {
  const dim = request.dimensions ?? modelDim;
  let data = '';
  let promptTokens = 0;
  for (let i = 0; i < request.inputs.length; i++) {
    const input = request.inputs[i];
    const vector = embeddingVector(input, dim);
    const embedding = request.base64 ? `"${Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64')}"` : `[${vector.join(',')}]`;
    if (i > 0) data += ',';
    data += `{"object":"embedding","index":${i},"embedding":${embedding}}`;
    promptTokens += typeof input === 'string' ? Math.max(1, Math.ceil(input.length / 4)) : input.length;
  }
  return `{"object":"list","data":[${data}],"model":${JSON.stringify(request.model)},"usage":{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens}}}`;
}
