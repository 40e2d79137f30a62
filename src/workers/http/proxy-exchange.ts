// One client request on its way through the edge: admission, the tunnel to
// the chosen provider, and the relay of the provider's frames back to the
// client socket as they arrive. It is the tunnel's consumer; its lease is
// released exactly once (the scheduler enforces it; we call release on
// every terminal path and let the scheduler say which call counted).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Header } from '../../gen/edge/v1/tunnel_pb.js';
import { Errors, specForNodeErrorCode, type GatewayErrorSpec } from '../../shared/errors.js';
import { Api } from '../../shared/endpoints.js';
import { isJsonContentType, MESSAGES, RESPONSES, type ApiRoute } from './api-routes.js';
import { responseIdFromHead, storedResponseIdOf } from './response-affinity.js';
import type { Grant, KeyLevels, ReleaseReason } from '../../contract/scheduler.js';
import type { ApiKeyState } from './client-auth.js';
import { RATE_LIMIT_PREFIX, rateLimitHeaders } from './rate-limit-headers.js';
import type { TunnelHost } from '../tunnel/tunnel-host.js';
import type { TunnelConsumer } from '../tunnel/tunnel-consumer.js';
import { isRelayedDownstream } from '../tunnel/hop-by-hop.js';
import { ResponseWindow } from '../tunnel/response-window.js';
import { holdsField, SseEvents } from '../tunnel/sse-events.js';
import { beforeTrailers, lastEventError, type InBandError } from '../tunnel/sse-terminal.js';
import { contentEncodingOf, decodedErrorBody, PROVIDER_ERROR_BYTES, providerErrorMessage, providerErrorSpec, readProviderError } from '../tunnel/provider-error.js';
import { inputTokensFromHead, StreamTail, type TokenUsage } from '../tunnel/sse-usage.js';
import { ANONYMOUS_FAIRNESS, type RequestFairness } from './fairness-headers.js';
import { queueDoneComment, queuePositionComment } from './queue-updates.js';
import { FIELD_NOT_STORED, type InspectOk } from './inspect.js';
import { KEEPALIVE_DUE, type ExchangeDeadlines } from './exchange-deadlines.js';
import { formatMs3, nodeHopMs, overheadAtHeadersMs } from '../observe/exchange-observer.js';
import { LeanResponse } from './lean-http1.js';
import { isEventStreamType } from '../../shared/media-type.js';

export const kExchange = Symbol('edge.exchange');

/** What an exchange's owner may be told besides its response (DataPlane.begin's `watcher`). */
export interface DispatchWatcher {
  dispatched(): void;
}

type ExchangeState = 'admitting' | 'dispatched' | 'streaming' | 'done';

/** How much of a response's head is kept for what it says (a stored response's id, a Messages stream's input count). */
const HEAD_BYTES = 16 * 1024;
const SSE_KEEPALIVE = ': keepalive\n\n';

/**
 * What an exchange needs from the data plane that owns it (DataPlane
 * implements it); declared here so the exchange does not import its owner.
 */
export interface ExchangeOwner {
  /** A pre-first-byte failure: true when the request was re-admitted elsewhere (the exchange waits for a new grant). */
  retryBeforeFirstByte(exchange: ProxyExchange, code: string, message: string): boolean;
  /** The provider answered 429/503 before the first byte: true when the request went back to the queue (a new grant follows). */
  overloadedBeforeFirstByte(exchange: ProxyExchange, retryAfterMs: number | undefined): boolean;
  /** The node's worker refused the tunnel (cross-worker only). */
  tunnelRefused(exchange: ProxyExchange, code: 'stale' | 'overloaded', open: number): void;
  /** The client left while queued: the admission is withdrawn. */
  cancelAdmission(exchange: ProxyExchange): void;
  /**
   * `usedTokens`: prompt + completion tokens the response reported (0 = none), to correct the tenant's fair-queuing charge;
   * `retryAfterMs`: with reason 'overloaded', the provider's Retry-After.
   */
  releaseLease(leaseId: number, providerId: string, reason: ReleaseReason, usedTokens?: number, retryAfterMs?: number): void;
  exchangeFinished(exchange: ProxyExchange, outcome: string): void;
  /** Its first response body byte went to the client. */
  firstByte(exchange: ProxyExchange): void;
  forget(exchange: ProxyExchange): void;
  /** Its API key's concurrency slot goes back ahead of forget(): the client holds the whole response (exactly once either way). */
  releaseKeyOf(exchange: ProxyExchange): void;
  /** The client has the provider's whole answer, just before its last byte is written (once; not for an answer that failed). */
  answerRelayed(exchange: ProxyExchange): void;
  /** A Responses API body named its response id: later requests for it go to this exchange's provider. */
  rememberResponse(exchange: ProxyExchange, responseId: string): void;
}

export class ProxyExchange implements TunnelConsumer {
  state: ExchangeState = 'admitting';
  leaseId = 0;
  tunnelId = 0;
  session: TunnelHost | undefined;
  grant: Grant | undefined;
  triedProviderId = '';
  triedNodeId = '';
  timeout: NodeJS.Timeout | undefined;
  /** Total, time-to-first-byte and idle deadlines on the one `timeout` timer; set at dispatch. */
  deadlines: ExchangeDeadlines | undefined;
  /** Already re-queued once after a failure before the first byte. */
  retried = false;
  /** Times it went back to the queue after a 429/503 (resilience.overload.max_requeues bounds it). */
  overloadRequeues = 0;
  /** A relayed 429/503's Retry-After (ms), told to the scheduler with the release. */
  #retryAfterMs: number | undefined;
  /** Flow control for the response body; undefined when the window is unlimited. */
  window: ResponseWindow | undefined;
  #onChunkFlushed: (() => void) | undefined;
  /**
   * Once the head and a first chunk went out through the response on a
   * chunked (HTTP/1.1) response that owns its socket: each later DATA frame is
   * one framed write straight to the socket. The response's own write() costs
   * a cork, three buffered pieces, a nextTick uncork and a writev per chunk,
   * which per relayed token of a slow stream is most of the edge's user time.
   * end() still goes through the response (the last chunk, 'finish', keep-alive).
   */
  #socket: Socket | undefined;
  #isEventStream = false;
  /**
   * The content-encoding, lower-cased, when the provider compressed its body though the agent asked for
   * identity (undefined: not compressed); a created Response's id is still read from its head, decoded.
   */
  #encoding: string | undefined;
  /**
   * Body bytes of a relayed content-length still to come (-1: no length).
   * At 0 the client holds a whole response and may send its next request
   * before the node's END arrives: the lease goes back and the response
   * ends then, not at END. The node must keep its length: a byte past it
   * would be read by a keep-alive client as its next response's, and is
   * never written; a body cut short is a cut connection.
   */
  #bodyLeft = -1;
  /** The client's response ended whole at the body's last byte, its lease released; what the tunnel still does only ends the exchange. */
  #relayed = false;
  /** An event stream's relay in whole events (see sse-events.ts); undefined for other bodies. */
  #events: SseEvents | undefined;
  /** After keepalives, the provider answered 2xx but not as an event stream: its body is held for the error (#heldError). */
  #notAStream = false;
  /** An event stream wrote some of the provider's events to the client (not only held a half one, nor only comments). */
  #wroteEvents = false;
  /** Responses streams: the sequence_number of the last event relayed (-1: none), so an in-band error numbers on from it. */
  #lastSequence = -1;
  /** Newest SSE frames, kept (by reference) to read `usage` at END. */
  #tail: StreamTail | undefined;
  /** Token usage reported by the provider's final SSE chunk, once the stream ended. */
  usage: TokenUsage | undefined;
  /** Tokens reserved of its API key's tokens_per_minute at admission (workers.count 0; main keeps them with I/O workers). */
  keyTokens = 0;
  /** Its API key when that has a requests_per_minute or tokens_per_minute: the answer carries x-ratelimit-*. */
  limitedKey: ApiKeyState | undefined = undefined;
  /** What that key had left when the request was granted (rate-limit-headers.ts). */
  keyLevels: KeyLevels | undefined = undefined;
  /** The session the client named ("" = none; the node gets "default"). */
  sessionId = '';
  /** The session the node is told when it is not the client's own: scoped by the API key ("" = none). */
  nodeSession = '';
  /** The API key's name (undefined: auth off): a stored response it makes is that key's alone. */
  keyName: string | undefined = undefined;
  /** Fair queuing: band, tenant and weight (fairness-headers.ts). */
  fairness: RequestFairness = ANONYMOUS_FAIRNESS;
  /** x-edge-queue-updates: the timer asking for its queue position while it waits (queue-updates.ts). */
  queueUpdates: NodeJS.Timeout | undefined = undefined;
  /** A queue position comment was sent: the head is committed, the stream follows. */
  queueReported = false;
  /** `http` or `cli`: how the node serves the granted provider. */
  adapter = 'http';
  /** Grants it got (2 after a retry elsewhere). */
  attempts = 0;
  /** The message of the error it ended with (run records). */
  errorMessage: string | undefined;
  /** The code of the error fail() ended it with, when the response could only be cut (an A2A run tells a cancel from a failure by it). */
  cutWith: string | undefined;
  /** First bytes of the body, while a route still reads them (see captureHead). */
  #head: Buffer | undefined;
  #capturing = false;
  /** A provider's error answer after keepalives committed the head: its body, kept for the in-band error's message. */
  #heldError: Buffer[] | undefined;
  #heldErrorBytes = 0;
  /** The held error body's content-encoding (a provider that compressed it though the agent asked for identity). */
  #heldErrorEncoding: string | undefined;
  /** The error is held before any head went to the client: its answer is still a status and a body of ours. */
  #heldBeforeHead = false;
  /** The held error's head says JSON with no length: relayed (#relayHead) once a byte of its body comes. */
  #jsonHeadHeld: { readonly headers: readonly Header[]; readonly upstreamUs: number } | undefined;
  /** That held error's head said `x-should-retry: false`: our answer in its place says so too. */
  #heldNoRetry = false;
  /**
   * The API's last event was relayed (route.endsAnswer): a failure after it adds no error, and what a
   * provider writes after it (a ping, a comment, vLLM's [DONE]) does not undo that.
   */
  #endSeen = false;
  /** The stored response's id (Responses API), once read from the body's head, or named by the path (GET /v1/responses/{id}). */
  responseId: string | undefined;
  /**
   * The request makes an answer (every POST route). A call on a stored response (GET, DELETE, cancel,
   * input_items: a path under the route's) only repeats the `usage` of the response that made it, counted
   * then: read again, each retrieve or poll would count those tokens and charge the tenant for them again.
   */
  readonly #generates: boolean;
  // Observability (read through ExchangeView): performance.now() marks, 0 = not yet.
  requestTag = '';
  startedAt = 0;
  /** Where the current attempt's wait began: startedAt, then each retry's requeue. */
  attemptFrom = 0;
  retryWaitMs = 0;
  sentAt = 0;
  /** Body bytes sent to nodes, summed over every send (a retry sends it again). */
  bytesToNode = 0;
  /** The last send's body bytes: taken back when the node's worker refuses that send. */
  lastSentBytes = 0;
  headersAt = 0;
  firstByteAt = 0;
  endAt = 0;
  status = 0;
  bytesOut = 0;
  upstreamHeadUs = 0;
  upstreamEndUs = 0;

  constructor(
    readonly plane: ExchangeOwner,
    readonly requestId: number,
    readonly runId: string,
    readonly path: string,
    readonly request: IncomingMessage,
    readonly response: ServerResponse,
    readonly body: Buffer,
    readonly info: InspectOk,
    readonly route: ApiRoute,
    /** The provider this request must go to (it holds the state the request names); undefined = any. */
    readonly pinnedProviderId: string | undefined = undefined,
  ) {
    // A resumed stream (?stream=true) has no body head of ours to read: its in-band failure names the response it resumed.
    if (route === RESPONSES && request.method === 'GET') this.responseId = storedResponseIdOf(path);
    this.#generates = path === route.path;
  }

  /** Told each time a provider takes the request (its tunnel sent): an A2A task is working from then, not from the first output. */
  dispatchWatcher: DispatchWatcher | undefined = undefined;

  // --- tunnel frames -------------------------------------------------------

  onHeaders(status: number, headers: readonly Header[], upstreamUs: number): void {
    if (this.state !== 'dispatched') return;
    this.upstreamHeadUs = upstreamUs;
    if (isOverloadStatus(status)) {
      // Overload is not failure: back to the queue while another attempt is allowed, else relayed.
      this.#retryAfterMs = retryAfterMsOf(headers);
      // Also after keepalives committed a 200 head: only comments went out, nothing of this provider's.
      // Not when the provider says no retry helps (OpenAI's 429 insufficient_quota): relayed at once, as sent.
      if (!saysNoRetry(headers) && this.plane.overloadedBeforeFirstByte(this, this.#retryAfterMs)) return;
    }
    this.state = 'streaming';
    this.deadlines?.onHeaders(this);
    if (this.response.headersSent) {
      // Keepalives already sent a 200 event-stream head: the provider's head
      // can only be taken as is when it agrees; otherwise it becomes an error event.
      this.#markHeaders(status);
      const encoding = contentEncodingOf(headers);
      if (encoding !== undefined && status >= 200 && status < 300) {
        // Compressed bytes cannot go inside the plain event stream already begun (its head said no coding):
        // the client would read binary garbage as events. Its answer is lost either way; the error says why.
        this.session?.cancelTunnel(this.tunnelId, 'compressed answer after the edge had begun the stream');
        this.fail(
          Errors.upstreamError,
          `the provider compressed its answer (content-encoding: ${encoding}) though the edge asked for none, after the edge had begun the stream (it waited past limits.sse_keepalive_ms); retry, send stream: false, or turn the provider's compression off`,
          endReason(status),
        );
        return;
      }
      this.#heldErrorEncoding = encoding;
      if (this.#generates) this.#tail = new StreamTail(this.route === RESPONSES);
      this.#startCapture(status);
      // That head is a chunked event stream: its body goes out in whole events too.
      this.#events = new SseEvents(this.window);
      // Its status can no longer reach the client; its body says why (a context too long, a bad tool schema):
      // kept until its end, then one in-band error with that message.
      if (status < 200 || status >= 300) this.#heldError = [];
      // A 2xx that is not an event stream (a server that ignored stream: true) cannot go inside this one:
      // written raw, the SDKs would skip it and end with an empty answer. Held, then an in-band error.
      else if (!isEventStreamHead(headers)) {
        this.#heldError = [];
        this.#notAStream = true;
      }
      return;
    }
    // Error heads only: a 2xx head is not scanned again here.
    const json = status >= 400 && isJsonHead(headers);
    const length = json ? declaredLengthField(headers) : undefined;
    if (status >= 400 && (!json || length === '0' || length === undefined)) {
      // An error whose body is not JSON (a proxy's HTML 502, Ollama's plain-text 404 for a route it lacks),
      // or is none at all though its head says JSON (`content-length: 0`, or a chunked body that ends at once:
      // node:http's writeHead then end()): relayed, the SDKs would find no error object in it. Held, then
      // answered in the route's error format with the provider's status and its text as the message
      // (#failWithHeldError). A JSON one of unknown length is relayed as it came from its first byte (#holdError).
      this.#markHeaders(status);
      this.#heldErrorEncoding = contentEncodingOf(headers);
      this.#heldError = [];
      this.#heldBeforeHead = true;
      this.#heldNoRetry = saysNoRetry(headers);
      if (json && length === undefined) this.#jsonHeadHeld = { headers, upstreamUs };
      return;
    }
    this.#relayHead(status, headers, upstreamUs);
  }

  /** The provider's head written to the client, and its body relayed from now on. */
  #relayHead(status: number, headers: readonly Header[], upstreamUs: number): void {
    const grant = this.grant as Grant;
    const response = this.response;
    // setHeader ran before on a lean response (rare): writeHead merges those fields.
    if (response instanceof LeanResponse && !response.hasFields) this.#writeLeanHead(response, status, headers, grant, upstreamUs);
    else if (!this.#writeHead(status, headers, grant, upstreamUs)) return;
    this.#startCapture(status);
    // `content-length: 0`: whole with its head (neither response has sent the head yet).
    if (this.#bodyLeft === 0) this.#relayWhole(undefined);
  }

  /**
   * The relayed head on a lean connection, serialized here in one pass
   * (names lower-cased once, node:http's per-header checks skipped: the frame
   * guard checked the node's headers, config the ids, the rest are ours).
   */
  #writeLeanHead(response: LeanResponse, status: number, headers: readonly Header[], grant: Grant, upstreamUs: number): void {
    let lines = '';
    let json = false;
    let hasLength = false;
    let hasDate = false;
    let ids = 0;
    const limits = this.keyLevels === undefined ? undefined : rateLimitHeaders(this.limitedKey as ApiKeyState, this.keyLevels);
    for (let i = 0; i < headers.length; i++) {
      const name = headers[i].name.toLowerCase();
      // A provider's own x-edge-* would pass ahead of the edge's and could forge them.
      if (!isRelayedDownstream(name)) continue;
      if (limits !== undefined && name.startsWith(RATE_LIMIT_PREFIX)) continue;
      const value = headers[i].value;
      if (this.#readsJson(name, value, status)) json = true;
      else if (name === 'content-length') hasLength = true;
      else if (name === 'date') hasDate = true;
      else ids |= requestIdBit(name);
      lines += `${name}: ${value}\r\n`;
    }
    if (isOverloadStatus(status)) for (const [name, value] of missingRetryHints(headers, this.#retryAfterMs)) lines += `${name}: ${value}\r\n`;
    if ((ids & X_REQUEST_ID) === 0) lines += `x-request-id: ${this.runId}\r\n`;
    if ((ids & REQUEST_ID) === 0) lines += `request-id: ${this.runId}\r\n`;
    lines += `x-edge-run-id: ${this.runId}\r\nx-edge-node: ${grant.nodeId}\r\nx-edge-provider: ${grant.providerId}\r\nx-edge-queue-ms: ${Math.round(grant.queuedMs + this.retryWaitMs)}\r\nx-edge-overhead-ms: ${this.#markHeaders(status)}\r\n`;
    if (grant.sessionMovedFrom !== undefined) lines += `x-edge-session-moved-from: ${grant.sessionMovedFrom}\r\n`;
    if (limits !== undefined) for (let i = 0; i < limits.length; i += 2) lines += `${limits[i]}: ${limits[i + 1]}\r\n`;
    const hopMs = nodeHopMs(this, false);
    if (hopMs >= 0) lines += `x-edge-hop-ms: ${formatMs3(hopMs)}\r\nx-edge-upstream-ms: ${formatMs3(upstreamUs / 1000)}\r\n`;
    response.writeHeadLines(status, lines, hasLength, hasDate);
    this.#startBody(json);
  }

  /** After the relayed head: the readers its body needs. */
  #startBody(json: boolean): void {
    if (this.#encoding !== undefined) {
      // Compressed bytes are opaque here: relayed as they come (an event held for its blank line would never
      // find one), no usage read, and a failure cuts the connection (an in-band event would be plain text inside the stream).
      this.#isEventStream = false;
      return;
    }
    // A whole JSON answer ends with its `usage` as a stream's last event does: the same tail reads both.
    if ((this.#isEventStream || json) && this.#generates) this.#tail = new StreamTail(!this.#isEventStream || this.route === RESPONSES);
    // A stream without a length can end in an in-band error: it goes out in whole events.
    if (this.#isEventStream && this.#bodyLeft < 0) this.#events = new SseEvents(this.window);
    // An event stream's head goes out as the provider sent it, not with the first event: held, the client
    // would get no byte until the first token, past keepalives (they stop at the provider's head) and
    // inside its SDK's timeout, which runs until the head arrives.
    if (this.#isEventStream) sendHead(this.response);
  }

  /**
   * What the exchange reads of a relayed header (a lower-cased name): an
   * event stream, the declared body length. True for a JSON content-type.
   */
  #readsJson(name: string, value: string, status: number): boolean {
    if (name === 'content-type') {
      // Media types are case-insensitive: the value as sent is tried first, lower-casing only paid on a miss.
      if (value.startsWith('application/json')) return true;
      if (isEventStreamType(value)) this.#isEventStream = true;
      else return value.toLowerCase().startsWith('application/json');
    } else if (name === 'content-length') this.#bodyLeft = declaredLength(value, status, this.request.method);
    else if (name === 'content-encoding') {
      // Codings are case-insensitive: `Identity` is no coding (its body's usage and id are read as a plain one's).
      const coding = value.trim().toLowerCase();
      if (coding !== '' && coding !== 'identity') this.#encoding = coding;
    }
    return false;
  }

  /** The relayed head through writeHead (node:http's response, or a lean one with headers set before). */
  #writeHead(status: number, headers: readonly Header[], grant: Grant, upstreamUs: number): boolean {
    const flat: string[] = [];
    let json = false;
    let ids = 0;
    let varies = false;
    const limits = this.keyLevels === undefined ? undefined : rateLimitHeaders(this.limitedKey as ApiKeyState, this.keyLevels);
    for (let i = 0; i < headers.length; i++) {
      const name = headers[i].name.toLowerCase();
      // A provider's own x-edge-* would pass ahead of the edge's and could forge them.
      if (!isRelayedDownstream(name)) continue;
      if (limits !== undefined && name.startsWith(RATE_LIMIT_PREFIX)) continue;
      if (this.#readsJson(name, headers[i].value, status)) json = true;
      else if (name === 'vary') varies = true;
      else ids |= requestIdBit(name);
      flat.push(name, headers[i].value);
    }
    // writeHead drops a field set before (CORS's `Vary: Origin`) that the relayed head names too: both are kept.
    if (varies) {
      const own = this.response.getHeader('vary');
      if (own !== undefined) flat.push('vary', String(own));
    }
    if (isOverloadStatus(status)) for (const pair of missingRetryHints(headers, this.#retryAfterMs)) flat.push(pair[0], pair[1]);
    if ((ids & X_REQUEST_ID) === 0) flat.push('x-request-id', this.runId);
    if ((ids & REQUEST_ID) === 0) flat.push('request-id', this.runId);
    flat.push(
      'x-edge-run-id', this.runId,
      'x-edge-node', grant.nodeId,
      'x-edge-provider', grant.providerId,
      'x-edge-queue-ms', String(Math.round(grant.queuedMs + this.retryWaitMs)),
      'x-edge-overhead-ms', this.#markHeaders(status),
    );
    if (grant.sessionMovedFrom !== undefined) flat.push('x-edge-session-moved-from', grant.sessionMovedFrom);
    if (limits !== undefined) for (let i = 0; i < limits.length; i++) flat.push(limits[i]);
    const hopMs = nodeHopMs(this, false);
    if (hopMs >= 0) flat.push('x-edge-hop-ms', formatMs3(hopMs), 'x-edge-upstream-ms', formatMs3(upstreamUs / 1000));
    try {
      this.response.writeHead(status, flat);
    } catch (err) {
      // The frame guard validates heads; this only backs it up, so a node can never crash the edge.
      this.state = 'dispatched';
      this.session?.cancelTunnel(this.tunnelId, 'invalid response head');
      this.fail(Errors.protocolError, `the node sent a response head Node refuses to write: ${(err as Error).message}`, 'error');
      return false;
    }
    this.#startBody(json);
    return true;
  }

  /** A created Response's id, or a Messages stream's message_start, is read from the body's head. */
  #startCapture(status: number): void {
    if (status < 200 || status >= 300) return;
    // Only a created Response is stored (compact and input_tokens answer other objects). A cancel (POST
    // /v1/responses/{id}/cancel) answers a Response too, but makes none: remembered from its answer, an id
    // a DELETE on another connection forgot meanwhile would come back, sent to its provider for days.
    if (this.route === RESPONSES) this.#capturing = this.request.method === 'POST' && this.#generates;
    else this.#capturing = this.route === MESSAGES && this.#isEventStream;
  }

  #captureHead(bytes: Uint8Array): void {
    const chunk = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const head = this.#head === undefined ? Buffer.from(chunk) : Buffer.concat([this.#head, chunk]);
    this.#head = head;
    if (this.route.api === Api.responses) {
      // Compressed anyway (a gzip proxy before the provider): its stored response is as real, so its id is
      // read from the head decoded as far as it goes; unread, each follow-up got previous_response_not_found.
      const text = this.#encoding === undefined ? head : decodedErrorBody(head, this.#encoding);
      const id = text === undefined ? undefined : responseIdFromHead(text);
      if (id !== undefined) {
        this.responseId = id;
        this.#capturing = false;
        this.#head = undefined;
        // `store: false` (as Codex-style clients send): the provider keeps nothing to continue, so the id
        // would only take a slot a stored response needs. Still read: an in-band failure names it.
        if ((this.info.fields & FIELD_NOT_STORED) === 0) this.plane.rememberResponse(this, id);
        return;
      }
    }
    if (head.length >= HEAD_BYTES) this.#capturing = false;
  }

  onData(bytes: Uint8Array): void {
    if (this.state !== 'streaming') return;
    if (this.#heldError !== undefined) {
      this.#holdError(bytes);
      return;
    }
    if (this.#relayed) {
      if (bytes.length > 0) this.#overran();
      return;
    }
    this.deadlines?.onFrame();
    this.#markData(bytes.length);
    this.#tail?.push(bytes);
    if (this.#capturing) this.#captureHead(bytes);
    // An empty chunk would read as the body's end in chunked framing: nothing to write, and
    // nothing for the window either (a write it tracked would be credited for an older one's flush).
    if (bytes.length === 0) return;
    const window = this.window;
    if (window !== undefined && !window.receive(bytes.length)) {
      this.session?.cancelTunnel(this.tunnelId, 'flow-control window overrun');
      this.fail(Errors.protocolError, `the node sent more than the ${window.size}-byte window`, 'error');
      return;
    }
    if (this.#bodyLeft >= 0 && bytes.length >= this.#bodyLeft) {
      const overrun = bytes.length > this.#bodyLeft;
      this.#relayWhole(overrun ? bytes.subarray(0, this.#bodyLeft) : bytes);
      if (overrun) this.#overran();
      return;
    }
    if (this.#bodyLeft > 0) this.#bodyLeft -= bytes.length;
    let out: Uint8Array | undefined = bytes;
    const events = this.#events;
    if (events !== undefined) {
      out = events.take(bytes);
      const released = events.releasedBytes;
      if (window !== undefined && (out !== bytes || released > 0)) window.wroteLast(out === undefined ? 0 : released + out.length);
      if (out === undefined) return;
      if (this.route === RESPONSES) this.#noteSequence(out, events.released);
      // A comment (a provider's keepalive) opens nothing: a Responses error after it must still open the stream.
      if (!this.#wroteEvents) this.#wroteEvents = holdsField(events.released, out);
      const endsAnswer = this.route.endsAnswer;
      if (endsAnswer !== undefined && !this.#endSeen && !events.midEvent) {
        // The last event may have begun before `out` (held, or relayed past the hold bound): judged whole.
        const start = events.startOfLastEvent(out);
        this.#endSeen = endsAnswer(start === undefined ? out : Buffer.concat([start, out]));
        // A ping, comment or [DONE] behind the API's last event in the same chunk: that event still ends it.
        const cut = this.#endSeen || this.route.requiresEnd !== true ? undefined : beforeTrailers(out);
        if (cut !== undefined && cut.length > 0) {
          const cutStart = events.startOfLastEvent(cut);
          this.#endSeen = endsAnswer(cutStart === undefined ? cut : Buffer.concat([cutStart, cut]));
        }
      }
      if (released > 0) {
        this.#writeAfterHeld(events.released, out);
        return;
      }
    }
    const socket = this.#socket;
    if (socket !== undefined) {
      socket.write(chunkFrame(out), this.#onChunkFlushed);
      return;
    }
    const response = this.response;
    response.write(out, this.#onChunkFlushed);
    // Everything the response wrote is on its socket (no pipelined response ahead holding it).
    const own = response.socket;
    if (response.chunkedEncoding && own !== null && own.writable && response.writableLength === own.writableLength) this.#socket = own;
  }

  /**
   * The last `"sequence_number":N` in what is about to be written (whole
   * events), for a Responses stream: one native search from the end of
   * each chunk, the held pieces only when the chunk has none.
   */
  #noteSequence(out: Uint8Array, held: readonly Uint8Array[]): void {
    let seq = sequenceIn(out);
    for (let i = held.length - 1; seq < 0 && i >= 0; i--) seq = sequenceIn(held[i]);
    if (seq >= 0) this.#lastSequence = seq;
  }

  /** Held pieces of an event and the rest of it, as one write for the window (one chunk on the socket path). */
  #writeAfterHeld(held: readonly Uint8Array[], rest: Uint8Array): void {
    const socket = this.#socket;
    if (socket !== undefined) {
      socket.write(chunkFrameOf(held, rest), this.#onChunkFlushed);
      return;
    }
    // A lean response joins writes of one turn in one socket write; node:http sends each as a chunk.
    const response = this.response;
    for (let i = 0; i < held.length; i++) response.write(held[i]);
    response.write(rest, this.#onChunkFlushed);
  }

  /** Starts flow control with a window of `size` bytes (0 = none). */
  useWindow(size: number): void {
    if (size <= 0) return;
    this.window = new ResponseWindow(size);
    // One callback per exchange, not per chunk: flushes complete in write order.
    this.#onChunkFlushed = this.#chunkFlushed.bind(this);
  }

  #chunkFlushed(): void {
    const credit = this.window?.flushed() ?? 0;
    if (credit > 0 && this.state === 'streaming') this.session?.grantCredit(this.tunnelId, credit);
  }

  onEnd(upstreamUs: number): void {
    // The session's frame guard only lets END through after HEADERS.
    if (this.state !== 'streaming') return;
    this.endAt = performance.now();
    this.upstreamEndUs = upstreamUs;
    if (this.#heldError !== undefined) {
      this.#failWithHeldError(false);
      return;
    }
    if (this.#bodyLeft > 0) {
      // The client would wait for the rest, then read the next response's bytes as this body's.
      this.fail(Errors.protocolError, `the node ended the body ${this.#bodyLeft} bytes short of its content-length`, 'error');
      return;
    }
    if (this.#relayed) {
      // Released at its last byte already (#relayWhole judged the in-band error then): it only says how the run ended.
      this.#finish(endReason(this.status), this.#inBandError() === undefined ? undefined : 'error');
      return;
    }
    if (this.route.requiresEnd === true && !this.#endSeen && this.#isEventStream && this.status >= 200 && this.status < 300) {
      // Ended before the API's last event: a cut answer, which the client must not take for a whole one.
      this.fail(Errors.upstreamReset, 'the provider ended the stream before its last event', nodeErrorReason('upstream_reset', this.adapter));
      return;
    }
    this.#readUsage();
    const error = this.#inBandError();
    this.#finish(releaseReasonOf(this.status, error), error === undefined ? undefined : 'error');
    this.plane.answerRelayed(this);
    // A provider that ended inside an event gets its bytes relayed as they are.
    const held = this.#events?.flush();
    if (held === undefined) this.response.end();
    else this.response.end(held);
  }

  /** A byte of the provider's held error body: kept up to its cap (never more than the window lets the node send). */
  #holdError(bytes: Uint8Array): void {
    const json = this.#jsonHeadHeld;
    if (json !== undefined && bytes.length > 0) {
      // A JSON error's first byte: it has a body, relayed untouched as any JSON error.
      this.#jsonHeadHeld = undefined;
      this.#heldError = undefined;
      this.#heldBeforeHead = false;
      this.#heldNoRetry = false;
      this.#heldErrorEncoding = undefined;
      this.#relayHead(this.status, json.headers, json.upstreamUs);
      this.onData(bytes);
      return;
    }
    this.deadlines?.onFrame();
    const held = this.#heldError as Buffer[];
    const cap = Math.min(PROVIDER_ERROR_BYTES, this.window?.size ?? PROVIDER_ERROR_BYTES);
    const room = cap - this.#heldErrorBytes;
    if (room > 0) {
      const kept = bytes.length > room ? bytes.subarray(0, room) : bytes;
      held.push(Buffer.from(kept));
      this.#heldErrorBytes += kept.length;
    }
    if (this.#heldErrorBytes >= cap) this.#failWithHeldError(true);
  }

  /** The provider's error, in band, with its message; released as its status says, as a relayed one would be. */
  #failWithHeldError(cut: boolean): void {
    if (cut) this.session?.cancelTunnel(this.tunnelId, 'provider error body past its cap');
    const held = Buffer.concat(this.#heldError as Buffer[], this.#heldErrorBytes);
    this.#heldError = undefined;
    if (this.#notAStream) {
      // The provider answered, just not as a stream: not its failure (the lease ends as an answer would).
      const said = providerErrorMessage(held);
      const message = `the provider answered this stream: true request with a body that is not an event stream, after the edge had begun the stream (it waited past limits.sse_keepalive_ms)${said === undefined ? '' : `: ${said}`}; retry, or send stream: false`;
      this.fail(Errors.upstreamError, message, endReason(this.status));
      return;
    }
    const encoding = this.#heldErrorEncoding;
    const body = encoding === undefined ? held : decodedErrorBody(held, encoding);
    const said = body === undefined ? undefined : readProviderError(body);
    const spec = providerErrorSpec(this.status, said);
    // A 5xx counts toward ejection and a 429 lowers the limit, as without keepalives.
    this.fail(spec, said?.message === undefined ? spec.message : `${spec.message}: ${said.message}`, endReason(this.status));
  }

  /**
   * A 2xx event stream the provider ended with its own error event (chat's `data: {"error":...}`, Messages'
   * and Responses' `error`, Responses' `response.failed`): relayed untouched (the client's SDK raises it),
   * but the run ended in an error, not an answer. Its message becomes the run's (undefined: none).
   */
  #inBandError(): InBandError | undefined {
    if (!this.#isEventStream || this.status < 200 || this.status >= 300) return undefined;
    const tail = this.#tail?.newest();
    const error = tail === undefined ? undefined : lastEventError(tail);
    if (error !== undefined) this.errorMessage = error.message;
    return error;
  }

  #readUsage(): void {
    this.usage = this.#tail?.usage();
    if (this.usage !== undefined && this.usage.promptTokens === 0 && this.#head !== undefined) {
      // Messages: message_delta has only output_tokens; the input count is in message_start.
      const input = inputTokensFromHead(this.#head);
      if (input !== undefined) this.usage = { promptTokens: input, completionTokens: this.usage.completionTokens };
    }
  }

  /**
   * The declared body is all here with `last` (see #bodyLeft): the key's
   * slot and the lease end as they would at END, before the last byte is
   * written, and the response ends with it. The exchange stays the
   * tunnel's until END (or ERROR, or its deadline).
   */
  #relayWhole(last: Uint8Array | undefined): void {
    this.#bodyLeft = 0;
    this.#relayed = true;
    // Read first: the key is charged what the response reported.
    this.#readUsage();
    this.plane.releaseKeyOf(this);
    // A whole event stream (a Content-Length) that ended in the provider's in-band error is judged as a chunked one is at END.
    this.#releaseLease(releaseReasonOf(this.status, this.#inBandError()));
    this.plane.answerRelayed(this);
    if (last === undefined || last.length === 0) this.response.end();
    else this.response.end(last);
  }

  /** Body bytes past the declared length: never written (the response already ended whole); the tunnel is cut. */
  #overran(): void {
    this.session?.cancelTunnel(this.tunnelId, 'body longer than its content-length');
    this.errorMessage = 'the node sent more body bytes than its content-length';
    this.#finish('error');
  }

  #releaseLease(reason: ReleaseReason): void {
    this.plane.releaseLease(this.leaseId, this.grant?.providerId ?? '', reason, this.usage === undefined ? 0 : this.usage.promptTokens + this.usage.completionTokens, reason === 'overloaded' ? this.#retryAfterMs : undefined);
  }

  onError(code: string, message: string): void {
    if (this.state === 'done' || this.state === 'admitting') return;
    // Nothing reached the client yet: another provider may still serve it.
    if (this.state === 'dispatched' && this.plane.retryBeforeFirstByte(this, code, message)) return;
    this.fail(specForNodeErrorCode(code), message || undefined, nodeErrorReason(code, this.adapter));
  }

  /** The node's worker refused the tunnel (cross-worker only): see DataPlane.tunnelRefused. */
  onRefused(code: 'stale' | 'overloaded', open: number): void {
    this.plane.tunnelRefused(this, code, open);
  }

  // --- edge-side events ----------------------------------------------------

  /** The client went away before we finished: free everything at once. */
  onClientClosed(): void {
    switch (this.state) {
      case 'admitting':
        this.state = 'done';
        if (this.timeout !== undefined) clearTimeout(this.timeout);
        this.timeout = undefined;
        this.plane.cancelAdmission(this);
        this.plane.exchangeFinished(this, 'client_closed');
        return;
      case 'dispatched':
      case 'streaming':
        this.session?.cancelTunnel(this.tunnelId, 'client closed');
        this.#finish('client_closed');
        return;
      default:
    }
  }

  /**
   * Cancelled from outside (the admin API, an A2A cancel): a queued request
   * leaves the queue; a dispatched one has its tunnel cancelled, so the
   * upstream request is aborted or the cli process killed. The client gets
   * 499 run_cancelled, or the API's in-band error once its stream began.
   */
  cancel(): boolean {
    switch (this.state) {
      case 'admitting':
        this.plane.cancelAdmission(this);
        this.reject(Errors.runCancelled, 0);
        return true;
      case 'dispatched':
      case 'streaming':
        this.session?.cancelTunnel(this.tunnelId, Errors.runCancelled.code);
        this.fail(Errors.runCancelled, undefined, 'run_cancelled');
        return true;
      default:
        return false;
    }
  }

  onTimeout(): void {
    this.timeout = undefined;
    if (this.state === 'admitting') {
      // Sent back to the queue (a provider's 429/503, a retry) and still waiting at the total deadline,
      // which spans retries: 504 now, not a dispatch after it that is cut at once.
      if (this.deadlines === undefined) return;
      // A timer may fire a fraction of a millisecond early.
      if (!this.deadlines.totalExpired()) this.deadlines.armTotal(this);
      else {
        this.plane.cancelAdmission(this);
        this.reject(Errors.gatewayTimeout, 0);
      }
      return;
    }
    if (this.state !== 'dispatched' && this.state !== 'streaming') return;
    // Frames may have moved the idle deadline on: then fire() re-arms and nothing expired.
    const expired = this.deadlines === undefined ? Errors.gatewayTimeout : this.deadlines.fire(this, this.state === 'streaming');
    if (expired === undefined) return;
    if (expired === KEEPALIVE_DUE) {
      this.#sendKeepalive();
      return;
    }
    this.session?.cancelTunnel(this.tunnelId, expired.code);
    this.fail(expired, undefined, 'timeout');
  }

  /**
   * A streaming request is still waiting for its first byte: commit to a
   * 200 event stream and send an SSE comment, so proxies in between do not
   * cut the idle connection. Clients ignore comments.
   */
  #sendKeepalive(): void {
    const res = this.response;
    if (!res.headersSent) {
      const grant = this.grant as Grant;
      this.#isEventStream = true;
      // What the client got: an error from now on goes in band, and 0 would read as a client that left (499).
      this.status = 200;
      res.writeHead(200, [
        'content-type', 'text/event-stream',
        'cache-control', 'no-cache',
        'x-edge-run-id', this.runId,
        // The provider's own head (and its request id) can no longer reach the client: the run id stands in, as on an error.
        'x-request-id', this.runId,
        'request-id', this.runId,
        'x-edge-node', grant.nodeId,
        'x-edge-provider', grant.providerId,
        'x-edge-queue-ms', String(Math.round(grant.queuedMs + this.retryWaitMs)),
        ...(grant.sessionMovedFrom === undefined ? [] : ['x-edge-session-moved-from', grant.sessionMovedFrom]),
        ...(this.keyLevels === undefined ? [] : rateLimitHeaders(this.limitedKey as ApiKeyState, this.keyLevels)),
      ]);
    }
    res.write(SSE_KEEPALIVE);
  }

  /** Still waiting: commits the 200 event-stream head (the first time) and writes the position comment. */
  sendQueuePosition(position: number, etaMs: number | undefined): void {
    const res = this.response;
    if (res.destroyed) return;
    if (!res.headersSent) {
      this.#isEventStream = true;
      this.status = 200;
      res.writeHead(200, ['content-type', 'text/event-stream', 'cache-control', 'no-cache', 'x-edge-run-id', this.runId, 'x-request-id', this.runId, 'request-id', this.runId, 'x-edge-queue-updates', '1']);
    }
    this.queueReported = true;
    res.write(queuePositionComment(position, etaMs));
  }

  /**
   * A failure (before the first byte, or a stale grant) sent it back to the
   * queue for another provider: the attempt's time so far is queue wait, and
   * the next attempt's wait starts now. (An overloaded provider's requeue
   * keeps its place and its wait: the scheduler's queuedMs covers it.)
   */
  retriedAt(now: number): void {
    this.retryWaitMs += Math.max(0, now - this.attemptFrom);
    this.attemptFrom = now;
  }

  /** Granted after position comments: the wait it had, then the stream. */
  sendQueueDone(queuedMs: number): void {
    if (this.queueReported && !this.response.destroyed) this.response.write(queueDoneComment(queuedMs));
  }

  /** Admission refused or a failure before any tunnel was opened. */
  reject(spec: GatewayErrorSpec, retryAfterSec: number, message?: string, retryAfterMs?: number): void {
    if (this.state === 'done') return;
    this.state = 'done';
    // A request back in the queue has its total deadline armed (DataPlane.#undispatch).
    if (this.timeout !== undefined) clearTimeout(this.timeout);
    this.timeout = undefined;
    this.errorMessage = message ?? spec.message;
    this.plane.forget(this);
    if (this.response.headersSent && this.#isEventStream) {
      // Keepalives already committed a 200 event stream: the error goes in-band, the stream's first event.
      this.response.end(this.route.errors.streamError(spec, message, this.responseId, true));
    } else {
      this.status = this.route.errors.status(spec);
      this.#writeError(spec, message, retryAfterSec, retryAfterMs);
    }
    this.plane.exchangeFinished(this, spec.code);
  }

  /** Ends with an error at whatever point the exchange is, releasing the lease. */
  fail(spec: GatewayErrorSpec, message: string | undefined, reason: ReleaseReason): void {
    if (this.#relayed) {
      // The client already has its whole answer: the failure is the tunnel's alone.
      if (this.state !== 'done') this.errorMessage = message ?? spec.message;
      this.#finish(reason);
      return;
    }
    if (this.#endSeen && this.state === 'streaming') {
      // The client has the provider's last event (the stream's end; a ping or comment after it changes
      // nothing): the failure is the tunnel's alone, and the stream ends as the provider's would have (an
      // SDK would raise an error event even after it).
      this.errorMessage = message ?? spec.message;
      this.#readUsage();
      this.#finish(reason);
      this.response.end();
      return;
    }
    const wasStreaming = (this.state === 'streaming' && !this.#heldBeforeHead) || this.response.headersSent;
    if (!wasStreaming) this.status = this.route.errors.status(spec);
    if (this.state !== 'done') this.errorMessage = message ?? spec.message;
    this.#finish(reason);
    if (!wasStreaming) {
      // A held 429/503 of the provider's keeps its Retry-After.
      const retryAfterMs = this.#heldBeforeHead ? this.#retryAfterMs : undefined;
      this.#writeError(spec, message, retryAfterMs === undefined ? 0 : Math.ceil(retryAfterMs / 1000), retryAfterMs);
    } else if (this.#isEventStream && this.#bodyLeft < 0 && this.#events?.midEvent !== true) {
      // Mid-stream: headers are gone, so tell SSE clients in-band, in the
      // API's own events (the SDKs raise them), then end cleanly (never
      // past a relayed content-length: that body is cut below). A held
      // half event is dropped: the error must parse on its own.
      // "Opening" until an event of the provider's went out: bytes held as a half event never did (a Responses
      // stream must still get its response.created, or the SDK throws on the error before reading it).
      this.response.end(this.route.errors.streamError(spec, message, this.responseId, !this.#wroteEvents, this.#lastSequence + 1));
    } else {
      // A truncated JSON body must not look complete: cut the connection.
      this.cutWith = spec.code;
      cutAfterWritten(this.response);
    }
  }

  /** `outcome`: what the run record says, when not the lease's reason (a stream that ended in the provider's error event). */
  #finish(reason: ReleaseReason, outcome: string = reason): void {
    if (this.state === 'done') return;
    const hadLease = this.state === 'dispatched' || this.state === 'streaming';
    this.state = 'done';
    if (this.timeout) clearTimeout(this.timeout);
    this.timeout = undefined;
    this.plane.forget(this);
    // Relayed whole: released at the body's last byte already.
    if (hadLease && !this.#relayed) this.#releaseLease(reason);
    this.plane.exchangeFinished(this, outcome);
  }

  /** HEADERS arrived: stamps it and returns the x-edge-overhead-ms value. */
  #markHeaders(status: number): string {
    this.status = status;
    this.headersAt = performance.now();
    return formatMs3(overheadAtHeadersMs(this, this.headersAt));
  }

  #markData(length: number): void {
    if (this.firstByteAt === 0) {
      this.firstByteAt = performance.now();
      this.plane.firstByte(this);
    }
    this.bytesOut += length;
  }

  #writeError(spec: GatewayErrorSpec, message: string | undefined, retryAfterSec: number, retryAfterMs?: number): void {
    const res = this.response;
    if (res.headersSent || res.destroyed) {
      cutAfterWritten(res);
      return;
    }
    // The run id is also the request id the SDKs read from an error (openai: x-request-id, Anthropic: request-id).
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-edge-run-id': this.runId, 'x-request-id': this.runId, 'request-id': this.runId };
    // Every 429 and 503 says when to come back (README): a failure with no measured hint (a busy
    // session, a node leaving, the edge shutting down) asks for a second, as the drain's 503 does.
    if (retryAfterSec <= 0 && (spec.status === 429 || spec.status === 503)) retryAfterSec = 1;
    if (retryAfterSec > 0) {
      headers['retry-after'] = String(retryAfterSec);
      headers['retry-after-ms'] = String(Math.round(retryAfterMs ?? retryAfterSec * 1000));
    }
    // Retrying cannot help a request its own priority had shed, nor a cancelled run (it must stay cancelled);
    // a cli command that ran, or may have (cut, timed out), did so side effects and all: running it again
    // is the caller's decision, not the SDK's.
    if (spec.code === 'shed' || spec === Errors.runCancelled || spec === Errors.cliFailed || (this.adapter === 'cli' && this.grant !== undefined && CLI_MAY_HAVE_RUN.has(spec)) || this.#heldNoRetry) headers['x-should-retry'] = 'false';
    if (this.grant) {
      headers['x-edge-node'] = this.grant.nodeId;
      headers['x-edge-provider'] = this.grant.providerId;
      headers['x-edge-queue-ms'] = String(Math.round(this.grant.queuedMs + this.retryWaitMs));
      if (this.grant.sessionMovedFrom !== undefined) headers['x-edge-session-moved-from'] = this.grant.sessionMovedFrom;
    } else {
      // Refused without a grant: the time it spent waiting for one.
      headers['x-edge-queue-ms'] = String(Math.round(Math.max(0, performance.now() - this.startedAt)));
    }
    // Granted, or refused by the key's own limits (what it has left then: a client's retry library reads them).
    if (this.keyLevels !== undefined) {
      const limits = rateLimitHeaders(this.limitedKey as ApiKeyState, this.keyLevels);
      for (let i = 0; i < limits.length; i += 2) headers[limits[i]] = limits[i + 1];
    }
    res.writeHead(this.route.errors.status(spec), headers);
    res.end(this.route.errors.body(spec, message));
  }
}

/**
 * Cuts the client connection after what the response wrote. node:http
 * corks a response's socket on its first write of a turn and uncorks it on
 * the next tick: destroyed in that turn (a head, body and failure that
 * arrived in one batch), the socket dropped the head and body, and the
 * client saw a connection closed before any response, which the SDKs retry
 * as a connection error. Uncorked first, they reach the kernel before the
 * close. (A lean response sends its pending bytes in its own destroy().)
 * A head with no body written yet is sent too: HEADERS and then a failure
 * (a provider that reset after its head, an idle timeout) cut an answer
 * that nothing of had reached the client.
 */
function cutAfterWritten(res: ServerResponse): void {
  // No socket at all for a sink that is not a connection (an A2A task's RunSink).
  const socket = res.socket as ServerResponse['socket'] | undefined;
  if (socket != null && !socket.destroyed) {
    // A relayed head with no body byte yet is only stored (both responses send it with the first write):
    // cut now, the client would get nothing at all, the same connection error as above. The head goes first.
    if (res.headersSent && !res.destroyed) res.flushHeaders();
    while (socket.writableCorked > 0) socket.uncork();
  }
  res.destroy();
}

/**
 * The head writeHead stored, on the socket: the lean response's at the end of this turn, so a first
 * event relayed with it still shares its write; node:http's now. A sink that is not a connection has
 * nothing to send.
 */
function sendHead(res: ServerResponse): void {
  if (res instanceof LeanResponse) {
    res.flushHeaders();
    res.flushSoon();
    return;
  }
  if ((res.socket as ServerResponse['socket'] | undefined) == null) return;
  res.flushHeaders();
}

/** A dispatched cli run's failures that may follow its command's start. */
const CLI_MAY_HAVE_RUN: ReadonlySet<GatewayErrorSpec> = new Set([
  Errors.nodeDisconnected,
  Errors.upstreamTimeout,
  Errors.gatewayTimeout,
  Errors.firstByteTimeout,
  Errors.idleTimeout,
  Errors.upstreamError,
  Errors.upstreamReset,
  Errors.protocolError,
]);

/** One HTTP/1.1 chunk: size line, the bytes, CRLF, in one buffer (one write, one syscall). */
function chunkFrame(bytes: Uint8Array): Buffer {
  return chunkFrameOf(NO_PIECES, bytes);
}

const NO_PIECES: readonly Uint8Array[] = [];

/** One HTTP/1.1 chunk holding `pieces` then `last`, in one copy. */
function chunkFrameOf(pieces: readonly Uint8Array[], last: Uint8Array): Buffer {
  let length = last.length;
  for (let i = 0; i < pieces.length; i++) length += pieces[i].length;
  const size = length.toString(16);
  let at = size.length + 2;
  const frame = Buffer.allocUnsafe(at + length + 2);
  frame.write(size, 0, 'latin1');
  frame[at - 2] = 0x0d;
  frame[at - 1] = 0x0a;
  for (let i = 0; i < pieces.length; i++) {
    frame.set(pieces[i], at);
    at += pieces[i].length;
  }
  frame.set(last, at);
  frame[at + last.length] = 0x0d;
  frame[at + last.length + 1] = 0x0a;
  return frame;
}

/** 'close' listener on the ServerResponse (`this`); shared, not allocated per request. */
export function onResponseClose(this: ServerResponse & { [kExchange]?: ProxyExchange }): void {
  const exchange = this[kExchange];
  if (exchange && !this.writableFinished) exchange.onClientClosed();
}

const X_REQUEST_ID = 1;
const REQUEST_ID = 2;

/**
 * Which request-id header a relayed (lower-cased) name is: the SDKs read an
 * answer's request id from x-request-id (openai) and request-id (Anthropic);
 * where the provider sent none, the run id stands in, so that an error the
 * provider answered, or one in-band later, names something an operator can find.
 */
function requestIdBit(name: string): number {
  if (name.length === 12 && name === 'x-request-id') return X_REQUEST_ID;
  if (name.length === 10 && name === 'request-id') return REQUEST_ID;
  return 0;
}

/**
 * A relayed 429/503's retry hints that the provider left out: every 429
 * and 503 the client gets carries both (README), from the provider's own
 * hint (retryAfterMsOf) when it sent one, else 1 s.
 */
function missingRetryHints(headers: readonly Header[], retryAfterMs: number | undefined): [string, string][] {
  let seconds = false;
  let millis = false;
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i].name.toLowerCase();
    if (name === 'retry-after') seconds = true;
    else if (name === 'retry-after-ms') millis = true;
  }
  const ms = retryAfterMs ?? 1000;
  const missing: [string, string][] = [];
  if (!seconds) missing.push(['retry-after', String(Math.max(1, Math.ceil(ms / 1000)))]);
  if (!millis) missing.push(['retry-after-ms', String(Math.round(ms))]);
  return missing;
}

/** The provider said `x-should-retry: false`: retrying cannot help (the SDKs honour it too). */
function saysNoRetry(headers: readonly Header[]): boolean {
  for (let i = 0; i < headers.length; i++) {
    if (headers[i].name.toLowerCase() === 'x-should-retry') return headers[i].value.trim().toLowerCase() === 'false';
  }
  return false;
}

/** The head's content-length, trimmed; undefined when it has none (a chunked body, or one ended by the connection). */
function declaredLengthField(headers: readonly Header[]): string | undefined {
  for (let i = 0; i < headers.length; i++) {
    if (headers[i].name.toLowerCase() === 'content-length') return headers[i].value.trim();
  }
  return undefined;
}

/** The head declares a JSON body (application/json, application/*+json); unlike a client's, a provider's head must say so. */
function isJsonHead(headers: readonly Header[]): boolean {
  for (let i = 0; i < headers.length; i++) {
    if (headers[i].name.toLowerCase() === 'content-type') return headers[i].value.trim() !== '' && isJsonContentType(headers[i].value);
  }
  return false;
}

/** The head declares an event stream (content-type text/event-stream). */
function isEventStreamHead(headers: readonly Header[]): boolean {
  for (let i = 0; i < headers.length; i++) {
    if (headers[i].name.toLowerCase() === 'content-type') return isEventStreamType(headers[i].value);
  }
  return false;
}

/** The longest retry hint read, ms (2^31 - 1, a timer's longest): the retry-after-ms added from it stays a whole number. */
const RETRY_AFTER_MS_LIMIT = 0x7fffffff;

/**
 * The provider's retry hint as ms: `retry-after-ms` (OpenAI's, which the SDKs
 * read first) when it is a number, else Retry-After as delta-seconds
 * (fractions too, as the SDKs read them) or an HTTP date; undefined when
 * neither is there or readable (the scheduler then holds the provider for
 * its default).
 */
export function retryAfterMsOf(headers: readonly Header[]): number | undefined {
  let fromSeconds: number | undefined;
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i].name.toLowerCase();
    if (name === 'retry-after-ms') {
      const ms = Number(headers[i].value.trim());
      if (headers[i].value.trim() !== '' && Number.isFinite(ms) && ms >= 0) return Math.min(RETRY_AFTER_MS_LIMIT, Math.round(ms));
    } else if (name === 'retry-after' && fromSeconds === undefined) fromSeconds = retryAfterSecondsOrDate(headers[i].value.trim());
  }
  return fromSeconds;
}

function retryAfterSecondsOrDate(value: string): number | undefined {
  if (/^\d+(\.\d+)?$/.test(value)) return Math.min(RETRY_AFTER_MS_LIMIT, Math.round(Number(value) * 1000));
  // Every HTTP date names its month; Date.parse alone reads '1.5' or '-5' as a date in 2001 (a hold of 0).
  if (!/jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec/i.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.min(RETRY_AFTER_MS_LIMIT, Math.max(0, at - Date.now()));
}

/** A provider's answer that says it is overloaded, not failing: 429, 503, and Anthropic's 529 overloaded_error. */
function isOverloadStatus(status: number): boolean {
  return status === 429 || status === 503 || status === 529;
}

/** Tunnel error codes that blame the provider (outlier ejection counts them); node loss and timeouts do not. */
export function isProviderFailure(code: string): boolean {
  return code === 'upstream_connect_failed' || code === 'upstream_reset';
}

/**
 * How a run the node's error ended finishes: `fenced` for a lost node, `provider_failed` for the provider's own
 * failure. A cli run never resets on its own: its upstream_reset is an operator's restart_provider ending it, not
 * the provider failing (counted, a restart of 5 runs would eject the provider just restarted, as cli_failed is not
 * counted either).
 */
export function nodeErrorReason(code: string, adapter: string): ReleaseReason {
  return code === 'node_disconnected' ? 'fenced' : isProviderFailure(code) && adapter !== 'cli' ? 'provider_failed' : 'error';
}

/**
 * How a relayed answer's lease ends. A 5xx other than 503 and 529 (overload)
 * is the provider failing, relayed as is; it counts toward ejection. A relayed
 * 429/503/529 lowers the provider's limit (overload backoff); it is no failure.
 */
function endReason(status: number): ReleaseReason {
  return isOverloadStatus(status) ? 'overloaded' : status >= 500 ? 'provider_failed' : 'end';
}

/** How a relayed answer's lease ends when its last event may be the provider's in-band error: an overload lowers its limit, and a failure counts toward its ejection, as their statuses would. */
function releaseReasonOf(status: number, error: InBandError | undefined): ReleaseReason {
  return error === undefined || error.kind === 'request' ? endReason(status) : error.kind === 'overloaded' ? 'overloaded' : 'provider_failed';
}

/**
 * A relayed content-length as the body's byte count; -1 when it is not one,
 * or when the answer has no body whatever its length says (HEAD, 1xx, 204,
 * 304): such a body ends at END.
 */
function declaredLength(value: string, status: number, method: string | undefined): number {
  if (status < 200 || status === 204 || status === 304 || method === 'HEAD') return -1;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : -1;
}

const SEQUENCE_KEY = Buffer.from('"sequence_number":', 'latin1');

/** The value of the last `"sequence_number":` in `bytes`, or -1. */
function sequenceIn(bytes: Uint8Array): number {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const at = view.lastIndexOf(SEQUENCE_KEY);
  if (at < 0) return -1;
  let i = at + SEQUENCE_KEY.length;
  while (i < view.length && view[i] === 0x20) i++;
  let value = -1;
  for (; i < view.length && view[i] >= 0x30 && view[i] <= 0x39 && value < 1e12; i++) value = (value < 0 ? 0 : value * 10) + (view[i] - 0x30);
  return value;
}
