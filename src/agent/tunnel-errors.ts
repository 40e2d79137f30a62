// The catalogue of ERROR frame codes the agent sends, and how an upstream
// failure maps onto them. The edge turns each into the client's error, so the
// codes are stable API.
import { UPSTREAM_BODY_TIMEOUT, UPSTREAM_CLOSED, UPSTREAM_CONNECT_TIMEOUT, UPSTREAM_HEADERS_TIMEOUT, UPSTREAM_TLS_FAILED, UpstreamHttpError } from './http1-client.js';

export type TunnelErrorCode =
  /** No provider with the request's provider_id on this node. */
  | 'unknown_provider'
  /** The provider's type has no executor yet (cli). */
  | 'adapter_not_supported'
  /** The agent is shutting down and takes no new tunnels. */
  | 'node_leaving'
  /** The provider could not be reached (refused, unresolvable, unreachable, connect timeout, TLS handshake failed). */
  | 'upstream_connect_failed'
  /** The provider closed or reset the connection before the response was complete. */
  | 'upstream_reset'
  /** The tunnel deadline, or the upstream client's headers/body timeout, passed. */
  | 'upstream_timeout'
  /** Anything else. */
  | 'upstream_error'
  /** A cli provider's command exited non-zero, could not start, or wrote more than max_output_bytes. */
  | 'cli_failed'
  /** The request gives a cli provider's command nothing to run (no user message). */
  | 'cli_bad_request'
  /** The session's previous request still ran after session_wait_ms. */
  | 'session_busy';

/** A failure the agent itself names (cli runs): its code goes to the edge as is. */
export class AgentRunError extends Error {
  constructor(
    readonly tunnelCode: TunnelErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'AgentRunError';
  }
}

// Failures that mean "never got a working connection" when they happen before
// the request was handed a socket. The codes are the socket's (errno) and
// Http1Client's own.
const CONNECT_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'EADDRNOTAVAIL',
  'ETIMEDOUT',
  UPSTREAM_CONNECT_TIMEOUT,
  UPSTREAM_TLS_FAILED,
]);
const RESET_CODES: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ETIMEDOUT', UPSTREAM_CLOSED]);
const TIMEOUT_CODES: ReadonlySet<string> = new Set([UPSTREAM_HEADERS_TIMEOUT, UPSTREAM_BODY_TIMEOUT]);

/** Raised by the agent itself when a tunnel's timeout_ms passes. */
export class TunnelDeadlineError extends Error {
  readonly code = 'AGENT_TUNNEL_DEADLINE';
  constructor(timeoutMs: number) {
    super(`no complete response within the tunnel timeout of ${timeoutMs} ms`);
    this.name = 'TunnelDeadlineError';
  }
}

/**
 * @param started whether the upstream client had handed the request a
 *   connected socket (onRequestStart ran) when it failed.
 */
export function classifyUpstreamError(err: unknown, started: boolean): TunnelErrorCode {
  if (err instanceof TunnelDeadlineError) return 'upstream_timeout';
  if (err instanceof AgentRunError) return err.tunnelCode;
  const code = errorCode(err);
  if (code === undefined) return 'upstream_error';
  if (TIMEOUT_CODES.has(code)) return 'upstream_timeout';
  if (code === UPSTREAM_CONNECT_TIMEOUT) return 'upstream_connect_failed';
  if (!started && CONNECT_CODES.has(code)) return 'upstream_connect_failed';
  if (RESET_CODES.has(code)) return 'upstream_reset';
  return 'upstream_error';
}

function errorCode(err: unknown): string | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  // Happy-eyeballs connects fail with an AggregateError of per-address errors.
  if (err instanceof AggregateError && err.errors.length > 0) return errorCode(err.errors[0]);
  return undefined;
}

/**
 * The ERROR frame's message, which the edge hands the client as is. The
 * agent's own errors already say what happened; a bare socket error ("read
 * ECONNRESET", "connect ECONNREFUSED 10.0.0.5:8000") says it in a sentence,
 * the system's words kept in brackets for the operator.
 * @param answered whether the provider's response head was relayed already.
 */
export function upstreamErrorMessage(err: Error, code: TunnelErrorCode, answered: boolean): string {
  if (err instanceof UpstreamHttpError || err instanceof AgentRunError || err instanceof TunnelDeadlineError) return err.message;
  const raw = err.message !== '' ? err.message : (errorCode(err) ?? err.name);
  if (code === 'upstream_reset') return `${answered ? 'the provider closed the connection before the response was complete' : 'the provider closed the connection before answering'} (${raw})`;
  if (code === 'upstream_connect_failed') return `the provider could not be reached (${raw})`;
  return raw;
}
