// One catalogue of every error the gateway returns to a client: HTTP status,
// OpenAI error `type`, stable `code`, and the message. Handlers, docs and
// tests all use these entries, so a code never drifts between them.

export interface GatewayErrorSpec {
  readonly status: number;
  readonly type: 'invalid_request_error' | 'authentication_error' | 'permission_error' | 'rate_limit_error' | 'server_error';
  readonly code: string;
  /** Default message; call sites may give a more specific one. */
  readonly message: string;
  /** Names the request field at fault, when there is one. */
  readonly param: string | null;
}

function spec(status: number, type: GatewayErrorSpec['type'], code: string, message: string, param: string | null = null): GatewayErrorSpec {
  return Object.freeze({ status, type, code, message, param });
}

export const Errors = Object.freeze({
  // Client mistakes
  invalidJson: spec(400, 'invalid_request_error', 'invalid_json', 'request body is not valid JSON'),
  notObject: spec(400, 'invalid_request_error', 'invalid_json', 'request body must be a JSON object'),
  tooDeep: spec(400, 'invalid_request_error', 'json_too_deep', 'request body nests too deeply'),
  missingModel: spec(400, 'invalid_request_error', 'missing_model', 'you must provide a model parameter', 'model'),
  modelNotString: spec(400, 'invalid_request_error', 'invalid_model', '`model` must be a non-empty string', 'model'),
  modelNotFound: spec(404, 'invalid_request_error', 'model_not_found', 'the model does not exist', 'model'),
  nodeNotFound: spec(404, 'invalid_request_error', 'node_not_found', 'the node named in x-edge-node serves no provider for this model'),
  bodyTooLarge: spec(413, 'invalid_request_error', 'request_too_large', 'request body is larger than the configured limit'),
  routeNotFound: spec(404, 'invalid_request_error', 'unknown_url', 'unknown route'),
  methodNotAllowed: spec(405, 'invalid_request_error', 'method_not_allowed', 'this route does not take that method'),
  headersTooLarge: spec(431, 'invalid_request_error', 'request_headers_too_large', 'request headers are larger than the configured limit'),
  invalidSession: spec(400, 'invalid_request_error', 'invalid_session', 'x-edge-session is 1 to 256 printable ASCII characters; a body session_id or metadata.session_id is a string'),
  badRequest: spec(400, 'invalid_request_error', 'invalid_request', 'the request is malformed'),
  expectationFailed: spec(417, 'invalid_request_error', 'expectation_failed', 'the edge meets no expectation but 100-continue'),
  unsupportedMediaType: spec(415, 'invalid_request_error', 'unsupported_media_type', 'the request body must be JSON (content-type: application/json)'),
  missingField: spec(400, 'invalid_request_error', 'missing_required_field', 'a required field is missing'),
  invalidField: spec(400, 'invalid_request_error', 'invalid_field', 'a field has the wrong type'),
  apiNotServed: spec(400, 'invalid_request_error', 'api_not_served', 'no provider of this model serves this API', 'model'),
  responseNotFound: spec(404, 'invalid_request_error', 'response_not_found', 'this edge has no record of that response id'),
  // As OpenAI answers an unknown previous_response_id: a 400 that clients match by its code to resend the whole turn.
  previousResponseNotFound: spec(400, 'invalid_request_error', 'previous_response_not_found', 'this edge has no record of the previous response', 'previous_response_id'),
  previousResponseModelMismatch: spec(400, 'invalid_request_error', 'previous_response_model_mismatch', 'the provider that stored the previous response does not serve this model'),
  responseProviderGone: spec(409, 'invalid_request_error', 'response_provider_unavailable', 'the provider that stored this response is not serving now; it is never answered elsewhere'),
  // Client auth
  invalidApiKey: spec(401, 'authentication_error', 'invalid_api_key', 'missing or invalid API key; send it as `Authorization: Bearer <key>`'),
  originNotAllowed: spec(403, 'permission_error', 'origin_not_allowed', 'this origin may not call the API from a browser; the edge lists the origins that may in cors.allowed_origins'),
  modelNotAllowed: spec(403, 'permission_error', 'model_not_allowed', 'this API key may not use the requested model', 'model'),
  keyRateLimited: spec(429, 'rate_limit_error', 'rate_limit_exceeded', 'this API key is over its requests per minute; retry after the time Retry-After gives'),
  tooManyConcurrent: spec(429, 'rate_limit_error', 'too_many_concurrent_requests', 'this API key has too many requests open at once; retry when one finishes'),
  // Admission
  queueFull: spec(429, 'rate_limit_error', 'queue_full', 'too many requests are waiting for this model; retry later'),
  queueTimeout: spec(503, 'server_error', 'queue_timeout', 'no provider slot became free in time; retry later'),
  // Fair queuing (docs/scheduling.md)
  shed: spec(429, 'rate_limit_error', 'shed', 'this model is saturated and the request is sheddable (negative priority); it was not queued'),
  contextLengthExceeded: spec(400, 'invalid_request_error', 'context_length_exceeded', 'the prompt is longer than any provider of this model takes', 'messages'),
  displaced: spec(429, 'rate_limit_error', 'displaced', 'a request of a higher priority took this request\'s place in the full queue; retry later'),
  noProviderAvailable: spec(503, 'server_error', 'no_provider_available', 'no provider for this model is available (none connected, or each drained, disabled, unhealthy or ejected); retry later'),
  shuttingDown: spec(503, 'server_error', 'shutting_down', 'the edge is shutting down and takes no new requests; retry on another instance'),
  // Tunnel and upstream failures
  nodeDisconnected: spec(502, 'server_error', 'node_disconnected', 'the node serving this request disconnected'),
  upstreamConnectFailed: spec(502, 'server_error', 'upstream_connect_failed', 'the provider refused the connection'),
  upstreamReset: spec(502, 'server_error', 'upstream_reset', 'the provider closed the connection mid-response'),
  upstreamError: spec(502, 'server_error', 'upstream_error', 'the provider request failed'),
  upstreamTimeout: spec(504, 'server_error', 'upstream_timeout', 'the provider did not answer in time'),
  gatewayTimeout: spec(504, 'server_error', 'gateway_timeout', 'the request exceeded the tunnel timeout'),
  firstByteTimeout: spec(504, 'server_error', 'first_byte_timeout', 'the provider sent no response headers within the time-to-first-byte limit'),
  idleTimeout: spec(504, 'server_error', 'idle_timeout', 'the provider went silent mid-response for longer than the idle limit'),
  providerOverloaded: spec(503, 'server_error', 'provider_overloaded', 'the provider is overloaded and no other could take the request; retry later'),
  nodeOverloaded: spec(503, 'server_error', 'node_overloaded', 'the chosen node has reached its limit of open tunnels; retry later'),
  cliFailed: spec(502, 'server_error', 'cli_failed', 'the cli provider\'s command failed'),
  cliBadRequest: spec(400, 'invalid_request_error', 'invalid_messages', 'the messages hold nothing to give the command', 'messages'),
  sessionBusy: spec(429, 'rate_limit_error', 'session_busy', 'the session still has a run in progress; retry when it finishes'),
  runCancelled: spec(499, 'server_error', 'run_cancelled', 'this run was cancelled (by an operator, POST /admin/runs/{id}/cancel, or by an A2A CancelTask of its task); it is not retried'),
  protocolError: spec(502, 'server_error', 'node_protocol_error', 'the node sent an invalid frame sequence'),
  internal: spec(500, 'server_error', 'internal_error', 'internal gateway error'),
});

/** Maps an ERROR frame's code from the node onto the catalogue. */
export function specForNodeErrorCode(code: string): GatewayErrorSpec {
  switch (code) {
    case 'upstream_connect_failed': return Errors.upstreamConnectFailed;
    case 'upstream_reset': return Errors.upstreamReset;
    case 'upstream_timeout': return Errors.upstreamTimeout;
    case 'node_disconnected': return Errors.nodeDisconnected;
    case 'node_protocol_error': return Errors.protocolError;
    case 'gateway_timeout': return Errors.gatewayTimeout;
    case 'cli_failed': return Errors.cliFailed;
    case 'cli_bad_request': return Errors.cliBadRequest;
    case 'session_busy': return Errors.sessionBusy;
    // The node is going away: as for a client, nothing could serve it here.
    case 'node_leaving': return Errors.noProviderAvailable;
    // unknown_provider, adapter_not_supported, upstream_error and anything newer.
    default: return Errors.upstreamError;
  }
}

/** OpenAI's error body: {"error":{"message","type","param","code"}}; `param` overrides the spec's (a field named at run time). */
export function errorBody(spec: GatewayErrorSpec, message?: string, param?: string): string {
  return JSON.stringify({ error: { message: message ?? spec.message, type: spec.type, param: param ?? spec.param, code: spec.code } });
}

/** Anthropic's error types and the status each goes with. */
export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'timeout_error'
  | 'overloaded_error';

/**
 * The catalogue entry as Anthropic's API would say it. Statuses keep their
 * meaning, except every 503 (queue_timeout, no_provider_available,
 * node_overloaded, shutting_down): Anthropic says "try again later" with
 * 529 overloaded_error, which its SDK retries. queue_full stays 429
 * rate_limit_error (with Retry-After), as Anthropic answers a client that
 * must slow down.
 */
export function anthropicErrorOf(spec: GatewayErrorSpec): { status: number; type: AnthropicErrorType } {
  switch (spec.status) {
    case 400: case 405: case 409: case 415: case 417: case 431: return { status: spec.status, type: 'invalid_request_error' };
    case 401: return { status: 401, type: 'authentication_error' };
    case 403: return { status: 403, type: 'permission_error' };
    case 404: return { status: 404, type: 'not_found_error' };
    // The request itself was not all received in time (request_timeout_ms): 408 stays 408, which the SDK retries.
    case 408: return { status: 408, type: 'timeout_error' };
    case 413: return { status: 413, type: 'request_too_large' };
    case 429: return { status: 429, type: 'rate_limit_error' };
    case 499: return { status: 499, type: 'api_error' };
    // 529 too: a provider's own overloaded, told in band or with a body not in Anthropic's format.
    case 503:
    case 529: return { status: 529, type: 'overloaded_error' };
    case 504: return { status: 504, type: 'timeout_error' };
    default: return { status: spec.status >= 500 ? spec.status : 400, type: spec.status >= 500 ? 'api_error' : 'invalid_request_error' };
  }
}

/** Anthropic's error body: {"type":"error","error":{"type","message"}}; the edge's own code rides along in the message. */
export function anthropicErrorBody(spec: GatewayErrorSpec, message?: string): string {
  return JSON.stringify({ type: 'error', error: { type: anthropicErrorOf(spec).type, message: `${message ?? spec.message} (${spec.code})` } });
}
