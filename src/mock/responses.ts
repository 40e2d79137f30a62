// Response bodies in exactly the shapes the OpenAI API (and so the official
// SDK) uses: chat.completion(.chunk), text_completion, embeddings, models,
// errors. Built by string concatenation: the mock must stay cheap enough
// that a benchmark measures the edge, not the mock.

/** The kind of completion endpoint a request hit. */
export type CompletionKind = 'chat' | 'text';

/**
 * The text of token k of a completion for `model`: "hello from <model>"
 * repeated, so a test can see which served name reached the provider.
 * It depends only on k % 3 and on k = 0: a stream caches its events by that.
 */
export function tokenText(model: string, k: number): string {
  const word = k % 3;
  const lead = k === 0 ? '' : ' ';
  return lead + (word === 0 ? 'hello' : word === 1 ? 'from' : model);
}

export function completionText(model: string, tokens: number): string {
  let text = '';
  for (let k = 0; k < tokens; k++) text += tokenText(model, k);
  return text;
}

/**
 * What every chunk of a response says about the request it answers, so a
 * test can tell a crossed or spliced stream from its own: the mock's request
 * number (its requestLog id), the request id (the x-request-id the request
 * carried, else mock-<number>) and the token count the request planned.
 * An extra top-level field `mock`, which OpenAI clients (the SDK included)
 * ignore; built once per response as a JSON prefix.
 */
export interface RequestIdentity {
  readonly request: number;
  readonly requestId: string;
  readonly tokens: number;
}

/** `,"mock":{...` without its closing brace: a stream appends `"seq":k}` per event, a whole body just `}`. */
export function identityPrefix(identity: RequestIdentity): string {
  return `,"mock":{"request":${identity.request},"request_id":${JSON.stringify(identity.requestId)},"tokens":${identity.tokens}`;
}

export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Of promptTokens, those read from the prompt cache (the request marked a `cache_control` breakpoint). */
  readonly cachedTokens: number;
}

function usageJson(usage: Usage): string {
  const { promptTokens, completionTokens } = usage;
  return `{"prompt_tokens":${promptTokens},"completion_tokens":${completionTokens},"total_tokens":${promptTokens + completionTokens}}`;
}

/** Non-streaming response body. */
export function completionBody(kind: CompletionKind, id: string, created: number, modelJson: string, content: string, usage: Usage, identity: string, toolMessage?: string): string {
  const text = JSON.stringify(content);
  const choice =
    toolMessage !== undefined
      ? `{"index":0,"message":${toolMessage},"logprobs":null,"finish_reason":"tool_calls"}`
      : kind === 'chat'
      ? `{"index":0,"message":{"role":"assistant","content":${text},"refusal":null},"logprobs":null,"finish_reason":"stop"}`
      : `{"text":${text},"index":0,"logprobs":null,"finish_reason":"stop"}`;
  const object = kind === 'chat' ? 'chat.completion' : 'text_completion';
  return `{"id":"${id}","object":"${object}","created":${created},"model":${modelJson},"choices":[${choice}],"usage":${usageJson(usage)},"system_fingerprint":"mock"${identity}}}`;
}

/**
 * The constant head of every SSE event of one streaming response, up to the
 * choice: `data: {"id":...,"model":...,"choices":[`.
 */
export function chunkHead(kind: CompletionKind, id: string, created: number, modelJson: string): string {
  const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  return `data: {"id":"${id}","object":"${object}","created":${created},"model":${modelJson},"system_fingerprint":"mock","choices":[`;
}

/**
 * SSE event carrying token k (the first chat chunk also carries the role),
 * up to its seq value: the event is this + k + TOKEN_EVENT_TAIL, `identity`
 * being identityPrefix(). The same for every token of a stream with the same
 * text and role, so a stream builds it once per distinct token.
 */
export function tokenEventPrefix(kind: CompletionKind, head: string, text: string, k: number, identity: string): string {
  const json = JSON.stringify(text);
  if (kind === 'text') return `${head}{"text":${json},"index":0,"logprobs":null,"finish_reason":null}]${identity},"seq":`;
  const delta = k === 0 ? `{"role":"assistant","content":${json}}` : `{"content":${json}}`;
  return `${head}{"index":0,"delta":${delta},"logprobs":null,"finish_reason":null}]${identity},"seq":`;
}

/** What follows the seq value of a token event. */
export const TOKEN_EVENT_TAIL = '}}\n\n';

/** The last data event: finish_reason "stop", the usage, and seq = the token count. */
export function finalEvent(kind: CompletionKind, head: string, usage: Usage, seq: number, identity: string, finishReason = 'stop'): string {
  const choice =
    kind === 'chat'
      ? `{"index":0,"delta":{},"logprobs":null,"finish_reason":"${finishReason}"}`
      : '{"text":"","index":0,"logprobs":null,"finish_reason":"stop"}';
  return `${head}${choice}],"usage":${usageJson(usage)}${identity},"seq":${seq}}}\n\n`;
}

export const DONE_EVENT = 'data: [DONE]\n\n';

export function modelsBody(models: readonly string[]): string {
  const data = models.map((id) => `{"id":${JSON.stringify(id)},"object":"model","created":1700000000,"owned_by":"mock"}`);
  return `{"object":"list","data":[${data.join(',')}]}`;
}

/** OpenAI's error body. */
export function errorBody(message: string, type: string, code: string | null, param: string | null = null): string {
  return JSON.stringify({ error: { message, type, param, code } });
}

/** Anthropic's error type for an HTTP status (docs.anthropic.com, "Errors"). */
export function anthropicErrorTypeFor(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

/** An OpenAI error `type` for an HTTP status, as the API uses them. */
export function errorTypeFor(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}
