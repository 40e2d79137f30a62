// The client APIs the edge relays, one descriptor per route: which API it
// speaks (only providers serving it are candidates), how its errors look
// (OpenAI's body, Anthropic's, the Responses API's stream events), and which
// top-level fields it requires. Every route shares one path to a provider:
// admission, scheduler, leases, tunnel; a route adds framing, never a second
// path (docs/passthrough.md says why nothing is translated).
import { anthropicErrorBody, anthropicErrorOf, errorBody, Errors, type GatewayErrorSpec } from '../../shared/errors.js';
import { Api, type ApiKind } from '../../shared/endpoints.js';
import {
  FIELD_CONVERSATION,
  FIELD_INPUT,
  FIELD_MAX_TOKENS,
  FIELD_MAX_TOKENS_INTEGER,
  FIELD_MESSAGES,
  FIELD_MESSAGES_ARRAY,
  FIELD_PREVIOUS_RESPONSE_ID,
  FIELD_PREVIOUS_RESPONSE_ID_STRING,
  FIELD_PROMPT,
} from './inspect.js';
import { endsWithDone, endsWithErrorEvent, holdsDone, endsWithMessageStop, endsWithResponseEnd } from '../tunnel/sse-terminal.js';

/** How one API tells a client about an error. */
export interface ErrorFormat {
  /** The HTTP status this API uses for the catalogue entry. */
  status(spec: GatewayErrorSpec): number;
  /** The JSON body; `param` names the field at fault where the API has a place for it. */
  body(spec: GatewayErrorSpec, message?: string, param?: string): string;
  /**
   * The in-band error once a 200 event stream began (headers are gone).
   * `opening`: nothing of the provider's went out yet (keepalives or queue
   * updates committed the head), so the stream has no opening event.
   * `nextSequence`: the sequence_number the stream's next event takes
   * (Responses numbers its events; 0 when none went out).
   */
  streamError(spec: GatewayErrorSpec, message: string | undefined, responseId: string | undefined, opening?: boolean, nextSequence?: number): string;
}

export const OPENAI_ERRORS: ErrorFormat = {
  status: (spec) => spec.status,
  body: errorBody,
  // The OpenAI SDK raises on a data event carrying `error`.
  streamError: (spec, message) => `data: ${errorBody(spec, message)}\n\n`,
};

export const ANTHROPIC_ERRORS: ErrorFormat = {
  status: (spec) => anthropicErrorOf(spec).status,
  body: (spec, message, param) => anthropicErrorBody(spec, param === undefined || message !== undefined ? message : `${spec.message}: ${param}`),
  // Anthropic's stream error event; its SDK raises it as an APIError of that type.
  streamError: (spec, message) => `event: error\ndata: ${anthropicErrorBody(spec, message)}\n\n`,
};

/**
 * The Responses API: OpenAI's error body before the stream; after it began,
 * its own `error` event and then `response.failed`, so a client waiting for
 * a terminal event (completed / failed / incomplete) gets one.
 */
export const RESPONSES_ERRORS: ErrorFormat = {
  status: (spec) => spec.status,
  body: errorBody,
  streamError: (spec, message, responseId, opening = false, nextSequence = 0) => {
    const text = message ?? spec.message;
    // Numbered on from the provider's last event, as every Responses event is (opening: after our response.created, 0).
    const seq = opening ? 1 : nextSequence;
    const error = `event: error\ndata: ${JSON.stringify({ type: 'error', code: spec.code, message: text, param: null, sequence_number: seq })}\n\n`;
    // `output` (empty) and `created_at` as a Response object has them: the SDK's stream helper copies `output` from it.
    const created = Math.floor(Date.now() / 1000);
    const response = { id: responseId ?? null, object: 'response', created_at: created, status: 'failed', output: [], error: { code: 'server_error', message: `${text} (${spec.code})` } };
    const failed = `event: response.failed\ndata: ${JSON.stringify({ type: 'response.failed', sequence_number: seq + 1, response })}\n\n`;
    if (!opening) return error + failed;
    // The SDK's stream helper builds its snapshot from response.created and throws its own error for any event
    // before it: opened first, the gateway's error reaches the caller.
    const start = { ...response, status: 'in_progress', error: null };
    return `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: start })}\n\n${error}${failed}`;
  },
};

/**
 * The A2A endpoints (/a2a/...): refusals before the JSON-RPC handler ran
 * (401, 413, 404) keep their HTTP status with a JSON-RPC error body, which
 * the A2A SDK client raises as an error of its own.
 */
export const A2A_ERRORS: ErrorFormat = {
  status: (spec) => spec.status,
  body: (spec, message) => JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: spec.status >= 500 ? -32603 : -32600, message: `${message ?? spec.message} (${spec.code})` } }),
  streamError: (spec, message) => `data: ${JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: `${message ?? spec.message} (${spec.code})` } })}\n\n`,
};

/** A required field missing or of the wrong type: 400 naming it. */
export interface FieldProblem {
  readonly spec: GatewayErrorSpec;
  readonly param: string;
  readonly message: string;
}

export interface ApiRoute {
  readonly path: string;
  readonly api: ApiKind;
  readonly errors: ErrorFormat;
  /** Checks the inspector's FIELD_* bits (found in the same scan as `model`). */
  check(fields: number): FieldProblem | undefined;
  /** Whether relayed bytes (ending at an event's end) end with the event that ends this API's stream (sse-terminal.ts). */
  readonly endsAnswer?: (out: Uint8Array) => boolean;
  /**
   * A 2xx event stream the provider ended before that event (endsAnswer) is
   * cut short, not answered: the client gets the API's error event (a
   * provider with a close-delimited body that died mid-answer ends cleanly).
   */
  readonly requiresEnd?: boolean;
  /** A list `input` / `prompt` is a batch of sequences, each within the model's window: its longest one sets the context class. */
  readonly batchInputs?: boolean;
  /** The body field holding the prompt, which context_length_exceeded names; unset: `messages`. */
  readonly promptParam?: string;
  /**
   * The API answers `stream: true` with an event stream. Elsewhere (embeddings, count_tokens) a stray
   * `stream` asks for none: providers ignore it and answer JSON, so no keepalive or queue update may commit an SSE head.
   */
  readonly streams?: boolean;
}

function missing(param: string): FieldProblem {
  return { spec: Errors.missingField, param, message: `missing required field \`${param}\`` };
}

function invalid(param: string, what: string): FieldProblem {
  return { spec: Errors.invalidField, param, message: `\`${param}\` must be ${what}` };
}

function messagesArray(fields: number): FieldProblem | undefined {
  if ((fields & FIELD_MESSAGES) === 0) return missing('messages');
  if ((fields & FIELD_MESSAGES_ARRAY) === 0) return invalid('messages', 'an array');
  return undefined;
}

// [DONE] may have an event behind it in the same chunk (a usage chunk after it, a comment).
export const CHAT: ApiRoute = { path: '/v1/chat/completions', api: Api.chat, errors: OPENAI_ERRORS, check: messagesArray, endsAnswer: holdsDone, streams: true };

export const COMPLETIONS: ApiRoute = {
  path: '/v1/completions',
  api: Api.completions,
  errors: OPENAI_ERRORS,
  check: (fields) => ((fields & FIELD_PROMPT) === 0 ? missing('prompt') : undefined),
  endsAnswer: holdsDone,
  batchInputs: true,
  promptParam: 'prompt',
  streams: true,
};

export const EMBEDDINGS: ApiRoute = {
  path: '/v1/embeddings',
  api: Api.embeddings,
  errors: OPENAI_ERRORS,
  check: (fields) => ((fields & FIELD_INPUT) === 0 ? missing('input') : undefined),
  batchInputs: true,
  promptParam: 'input',
};

export const MESSAGES: ApiRoute = {
  path: '/v1/messages',
  api: Api.messages,
  errors: ANTHROPIC_ERRORS,
  // The provider's own `event: error` ends its stream too; vLLM's /v1/messages writes the chat API's
  // `data: [DONE]` after either (the SDK skips an event with no name).
  endsAnswer: (out) => endsWithMessageStop(out) || endsWithErrorEvent(out) || endsWithDone(out),
  requiresEnd: true,
  streams: true,
  check: (fields) => {
    const problem = messagesArray(fields);
    if (problem !== undefined) return problem;
    if ((fields & FIELD_MAX_TOKENS) === 0) return missing('max_tokens');
    if ((fields & FIELD_MAX_TOKENS_INTEGER) === 0) return invalid('max_tokens', 'an integer');
    return undefined;
  },
};

/** count_tokens: the Messages API's own endpoint; it needs `messages`, not max_tokens. */
export const COUNT_TOKENS: ApiRoute = { path: '/v1/messages/count_tokens', api: Api.messages, errors: ANTHROPIC_ERRORS, check: messagesArray };

/** A previous_response_id that is there (null is not) must be a string. */
function previousResponseId(fields: number): FieldProblem | undefined {
  return (fields & FIELD_PREVIOUS_RESPONSE_ID) !== 0 && (fields & FIELD_PREVIOUS_RESPONSE_ID_STRING) === 0 ? invalid('previous_response_id', 'a string') : undefined;
}

function responsesContext(fields: number): FieldProblem | undefined {
  // The context can also come from a stored prompt template or conversation.
  if ((fields & (FIELD_INPUT | FIELD_PREVIOUS_RESPONSE_ID | FIELD_PROMPT | FIELD_CONVERSATION)) === 0) return missing('input');
  return previousResponseId(fields);
}

export const RESPONSES: ApiRoute = {
  path: '/v1/responses',
  api: Api.responses,
  errors: RESPONSES_ERRORS,
  check: responsesContext,
  // The provider's own `error` event ends its stream too.
  endsAnswer: endsWithResponseEnd,
  requiresEnd: true,
  promptParam: 'input',
  streams: true,
};

/** client.responses.compact(): a long context compacted by the provider (no stream, so OpenAI's error body only). */
export const RESPONSES_COMPACT: ApiRoute = { path: '/v1/responses/compact', api: Api.responses, errors: OPENAI_ERRORS, check: responsesContext, promptParam: 'input' };

/** client.responses.inputTokens.count(): every field is optional. */
export const RESPONSES_INPUT_TOKENS: ApiRoute = { path: '/v1/responses/input_tokens', api: Api.responses, errors: OPENAI_ERRORS, check: previousResponseId, promptParam: 'input' };

/** Every POST route the edge proxies. */
export const API_ROUTES: readonly ApiRoute[] = [CHAT, COMPLETIONS, EMBEDDINGS, MESSAGES, COUNT_TOKENS, RESPONSES, RESPONSES_COMPACT, RESPONSES_INPUT_TOKENS];

/** GET / DELETE of a stored response: /v1/responses/{id}. */
export const RESPONSE_BY_ID = /^\/v1\/responses\/([^/?]+)$/;

/** The error format of whatever route a path belongs to (also for 401, 404, 405, 413 before any route ran). */
export function errorFormatForPath(path: string): ErrorFormat {
  if (path === '/v1/messages' || path.startsWith('/v1/messages/')) return ANTHROPIC_ERRORS;
  if (path.startsWith('/a2a/')) return A2A_ERRORS;
  return OPENAI_ERRORS;
}

/**
 * Why a request body is no JSON this edge reads, by its headers (the message
 * of a 415 unsupported_media_type), or undefined. Every route that reads a
 * body asks this one question: the /v1/ proxy routes and A2A.
 */
export function bodyMediaRefusal(contentType: string | undefined, contentEncoding: string | undefined, transferEncoding?: string): string | undefined {
  if (!isJsonContentType(contentType)) return `content-type ${JSON.stringify(contentType)} is not JSON; send the body as application/json`;
  // A transfer coding before chunked (`gzip, chunked`): node:http takes off the chunked framing only, so the body would
  // read as invalid JSON at its first byte; refused as a content coding is, naming it.
  if (transferEncoding !== undefined && transferEncoding.trim().toLowerCase() !== 'chunked') return `transfer-encoding ${JSON.stringify(transferEncoding)} is not supported; send the body uncompressed (chunked alone is read)`;
  // The edge reads the body (model, stream, session) and the provider gets it as JSON: a compressed one is refused
  // as RFC 7694 says, naming the coding it takes, rather than misread as invalid JSON.
  if (contentEncoding !== undefined && contentEncoding.trim().toLowerCase() !== 'identity') return `content-encoding ${JSON.stringify(contentEncoding)} is not supported; send the body uncompressed`;
  return undefined;
}

/**
 * A JSON media type: application/json or any application/...+json,
 * parameters aside. Absent (or empty) counts as JSON: only a client that
 * names another type is refused.
 */
export function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return true;
  const semi = value.indexOf(';');
  const type = (semi < 0 ? value : value.slice(0, semi)).trim().toLowerCase();
  if (type === '') return true;
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}
