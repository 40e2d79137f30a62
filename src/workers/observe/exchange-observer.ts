// The data path's one observability hook: the edge sets an observer on the
// DataPlane, and every exchange reports itself when it is dispatched and
// when it is over. The exchange passes itself (no record is allocated);
// the observer reads the numbers synchronously and must not keep it.
import type { Grant } from '../../contract/scheduler.js';

export interface ExchangeView {
  readonly runId: string;
  /** The request id carried to the node (TunnelRequest.metadata.request_id) and logged on both sides. */
  readonly requestTag: string;
  readonly info: { readonly model: string; readonly stream: boolean };
  readonly grant: Grant | undefined;
  /** The provider it was last sent to, once a failure before its first byte took the grant back ("" = none). */
  readonly triedProviderId: string;
  /** That provider's node ("" = none). */
  readonly triedNodeId: string;
  /** The session the client named ("" = none). */
  readonly sessionId: string;
  /** The client API key's name (undefined: auth off). */
  readonly keyName: string | undefined;
  /** The adapter of the provider it was dispatched to: `http` or `cli`. */
  readonly adapter: string;
  /** The message of the error it ended with, if it did. */
  readonly errorMessage: string | undefined;
  /** How many times it was dispatched (2 after a retry elsewhere). */
  readonly attempts: number;
  readonly body: Uint8Array;
  // performance.now() marks in ms; 0 = did not happen.
  /** The request's body was in and it reached the data path. */
  readonly startedAt: number;
  /** Time its attempts before the last grant's queue spent, failed ones included (see queueWaitMs). */
  readonly retryWaitMs: number;
  /** The TunnelRequest was written to the node's stream (the last time, after a retry). */
  readonly sentAt: number;
  /** Request body bytes sent to nodes, every send counted (a retry or a requeue sends the body again). */
  readonly bytesToNode: number;
  /** HEADERS arrived from the node (and went to the client in the same turn). */
  readonly headersAt: number;
  /** The first body byte was written to the client. */
  readonly firstByteAt: number;
  /** END arrived from the node. */
  readonly endAt: number;
  /** HTTP status the client got (or was about to get); 0 = none. */
  readonly status: number;
  /** Response body bytes written to the client. */
  readonly bytesOut: number;
  /** The provider's own time as the node measured it, µs (TunnelFrame.upstream_us; 0 = not measured): to its head, to its last byte. */
  readonly upstreamHeadUs: number;
  readonly upstreamEndUs: number;
  /** Token usage from the final SSE chunk of a completed stream (undefined otherwise). */
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number } | undefined;
}

export interface ExchangeObserver {
  /** Reached the data path; admission begins. */
  exchangeQueued(exchange: ExchangeView): void;
  /** Its first response byte went to the client. */
  exchangeFirstByte(exchange: ExchangeView): void;
  /** Granted and sent to a node. */
  exchangeStarted(exchange: ExchangeView): void;
  /** Over, whatever the outcome: a ReleaseReason, or the rejection code. Called once. */
  exchangeFinished(exchange: ExchangeView, outcome: string): void;
  /** Refused before an exchange existed (unknown model, shutting down). */
  requestRefused(code: string): void;
  /** Failed before its first byte on `providerId` of `nodeId` (`code`: why) and re-queued: said once the scheduler took the requeue. */
  exchangeRetried(exchange: ExchangeView, code: string, providerId: string, nodeId: string | null): void;
  /** A client connection was cut: its response's bytes made no progress for idle_timeout_ms (it stopped reading). */
  clientStalled(): void;
}

export const NO_OBSERVER: ExchangeObserver = Object.freeze({
  exchangeQueued(): void {},
  exchangeFirstByte(): void {},
  exchangeStarted(): void {},
  exchangeFinished(): void {},
  requestRefused(): void {},
  exchangeRetried(): void {},
  clientStalled(): void {},
});

/**
 * The node hop's share of the wait for the provider's head (or, with `end`, its last byte): what the edge waited
 * since the TunnelRequest went out, less the provider's own time as the node measured it. Milliseconds; -1 when
 * the node did not measure it (an older agent).
 */
export function nodeHopMs(exchange: ExchangeView, end: boolean): number {
  const upstreamUs = end ? exchange.upstreamEndUs : exchange.upstreamHeadUs;
  if (upstreamUs === 0) return -1;
  return Math.max(0, (end ? exchange.endAt : exchange.headersAt) - exchange.sentAt - upstreamUs / 1000);
}

/**
 * The request's queue wait, ms: its last grant's time in queue, plus the
 * attempts before it that a failure sent back (their queue and provider
 * time alike: waiting for a provider that could answer, not the edge's work).
 */
export function queueWaitMs(exchange: ExchangeView): number {
  return (exchange.grant?.queuedMs ?? 0) + exchange.retryWaitMs;
}

/** Milliseconds the edge itself spent before the response headers went out (see docs/operations.md). */
export function overheadAtHeadersMs(exchange: ExchangeView, now: number): number {
  const queued = queueWaitMs(exchange);
  const nodeWait = exchange.headersAt - exchange.sentAt;
  return Math.max(0, now - exchange.startedAt - queued - nodeWait);
}

/**
 * `ms` as `toFixed(3)` writes a non-negative figure, for the timing headers every response carries: integer
 * arithmetic and a concatenation instead of V8's general double formatting (~0.6 % of the edge's closed-loop
 * profile for the three headers). Ties may round the other way in the last digit; the headers are diagnostics.
 */
export function formatMs3(ms: number): string {
  const us = Math.round(ms * 1000);
  if (!(us >= 0 && us < 1e15)) return ms.toFixed(3);
  const whole = Math.floor(us / 1000);
  const frac = us - whole * 1000;
  return whole + (frac >= 100 ? '.' : frac >= 10 ? '.0' : '.00') + frac;
}
