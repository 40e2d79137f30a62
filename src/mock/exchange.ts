// One API request to the mock provider, from its first body byte to the end
// of its response: read the body, apply the plan (delays, injected failures),
// then answer whole or as an SSE stream that respects backpressure.
//
// Listeners and timers are module functions that find their Exchange through
// a symbol or a timer argument, so a request allocates no closures.
//
// The streaming path is the mock's cost per token in the many-streams
// benchmark, so it is lean: streams wait on the shared Pacer, not a timer
// each; an event of a chat/text stream is one concatenation of a per-stream
// cached prefix, the seq and a constant tail; and once the SSE headers are on
// the socket, events go to the socket as one write each with their chunked
// framing added here (the response's own write() costs a cork, four buffered
// pieces, a nextTick and a writev per event). res.end() still writes the last
// chunk, so 'finish', keep-alive and the abort accounting are Node's.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { DelayQueue, PacedStream } from './pacer.js';
import { inspectBody } from '../workers/http/inspect.js';
import { embeddingsBody, parseEmbeddingsRequest } from './embeddings.js';
import type { RequestPlan, ResolvedOptions } from './options.js';
import {
  chunkHead,
  completionBody,
  completionText,
  DONE_EVENT,
  errorBody,
  anthropicErrorTypeFor,
  errorTypeFor,
  finalEvent,
  identityPrefix,
  modelsBody,
  TOKEN_EVENT_TAIL,
  tokenEventPrefix,
  tokenText,
  type CompletionKind,
  type Usage,
} from './responses.js';
import type { MockState, MutableRecord } from './state.js';
import {
  anthropicError,
  countTokensBody,
  messageBody,
  messageClosing,
  messageDelta,
  messagePreamble,
  responseObject,
  ResponseEvents,
  type ResponseIds,
} from './api-formats.js';
import { argumentPieces, chatToolChoice, chatToolMessage, toolCallFor, type ToolCall } from './tool-calls.js';

export type Route = 'chat' | 'text' | 'embeddings' | 'models' | 'messages' | 'count_tokens' | 'responses' | StoredResponseRoute;
/** The routes of one stored response: GET, DELETE, POST …/cancel, GET …/input_items. */
export type StoredResponseRoute = 'response_get' | 'response_delete' | 'response_cancel' | 'response_input_items';

function isStoredResponseRoute(route: Route): route is StoredResponseRoute {
  return route === 'response_get' || route === 'response_delete' || route === 'response_cancel' || route === 'response_input_items';
}

const EXCHANGE = Symbol('mockExchange');
type Carrier = { [EXCHANGE]?: Exchange };
/** A keep-alive socket gets one 'drain' listener for all the streams it carries. */
const DRAIN_LISTENING = Symbol('mockDrainListening');
type DrainCarrier = { [DRAIN_LISTENING]?: boolean };

/** Events written in one go before yielding to other connections (intervalMs 0). */
const BURST = 64;
const CACHE_CONTROL = Buffer.from('"cache_control"');

const SSE_HEADERS = ['content-type', 'text/event-stream; charset=utf-8', 'cache-control', 'no-cache', 'x-accel-buffering', 'no'];

export class Exchange implements PacedStream {
  readonly #state: MockState;
  readonly #options: ResolvedOptions;
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  readonly #record: MutableRecord;
  readonly #route: Route;
  readonly #plan: RequestPlan;
  #first: Buffer | undefined;
  #more: Buffer[] | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** The pacer queue this stream waits in (ttft, interval), to cancel on close. */
  #paced: DelayQueue | undefined;
  #immediate: NodeJS.Immediate | undefined;
  /** Response ended by us on purpose (an injected failure): not an abort. */
  #endedByMock = false;
  #closed = false;
  // streaming state
  #kind: CompletionKind | 'messages' | 'responses' = 'chat';
  #model = '';
  #head = '';
  /** identityPrefix() of this request, built once. */
  #identity = '';
  #usage: Usage = { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };
  #tokens = 0;
  #event = 0;
  #waitingDrain = false;
  /** Set once the SSE headers are on it: events are written to it directly, chunk-framed here. */
  #socket: Socket | undefined;
  /** The stream's text is ASCII (its model name is): byte length = string length, written as latin1. */
  #ascii = true;
  /** tokenEventPrefix() by tokenText's period: [k % 3 for k > 0..., k = 0 at 3]. */
  readonly #prefixes: (string | undefined)[] = [undefined, undefined, undefined, undefined];
  #embeddingsJson = '';
  /** Responses API: ids of the response being made, and its event numbering when streamed. */
  #responseIds: ResponseIds | undefined;
  #responseEvents: ResponseEvents | undefined;
  /** The request offered tools: the answer is a call (tool-calls.ts), its arguments in one piece per token. */
  #tool: ToolCall | undefined;
  #toolPieces: string[] = [];

  constructor(state: MockState, options: ResolvedOptions, req: IncomingMessage, res: ServerResponse, record: MutableRecord, route: Route, plan: RequestPlan) {
    this.#state = state;
    this.#options = options;
    this.#req = req;
    this.#res = res;
    this.#record = record;
    this.#route = route;
    this.#plan = plan;
    this.#tokens = Math.floor(plan.tokens);
    record.tokens = this.#tokens;
    (req as Carrier)[EXCHANGE] = this;
    (res as Carrier)[EXCHANGE] = this;
    res.on('close', onResClose);
    res.on('finish', onResFinish);
    req.on('data', onReqData);
    req.on('end', onReqEnd);
  }

  onData(chunk: Buffer): void {
    if (this.#first === undefined) this.#first = chunk;
    else (this.#more ??= [this.#first]).push(chunk);
  }

  onEnd(): void {
    if (this.#closed) return;
    const body = this.#more !== undefined ? Buffer.concat(this.#more) : (this.#first ?? Buffer.alloc(0));
    this.#first = undefined;
    this.#more = undefined;
    const record = this.#record;
    if (this.#req.method !== 'GET') this.#state.keepBody(record, body);
    if (!this.#parse(body)) return;
    this.#state.emit('request', record);
    if (this.#plan.headersDelayMs > 0) this.#timer = setTimeout(onStartTimer, this.#plan.headersDelayMs, this);
    else this.start();
  }

  /** Reads model/stream (and the embeddings input); answers 400 and returns false on a bad body. */
  #parse(body: Buffer): boolean {
    const route = this.#route;
    if (route === 'models') return true;
    if (isStoredResponseRoute(route)) return this.#storedResponse(route);
    if (route === 'embeddings') {
      const parsed = parseEmbeddingsRequest(body);
      if (typeof parsed === 'string') {
        this.#sendJson(400, parsed);
        return false;
      }
      this.#record.model = parsed.model;
      this.#embeddingsJson = embeddingsBody(parsed, this.#options.embeddingDim);
      return true;
    }
    const info = inspectBody(body);
    if (!info.ok) {
      const param = info.kind === 'invalid_json' || info.kind === 'not_object' || info.kind === 'too_deep' ? null : 'model';
      if (route === 'messages' || route === 'count_tokens') this.#sendJson(400, anthropicError('invalid_request_error', info.message));
      else this.#sendJson(400, errorBody(info.message, 'invalid_request_error', info.kind, param));
      return false;
    }
    if (route === 'chat' || route === 'messages' || route === 'responses') {
      try {
        this.#tool = toolCallFor(route, body, this.#req.headers['x-mock-tool-arguments']);
      } catch (err) {
        const message = `mock: ${(err as Error).message}`;
        this.#sendJson(400, route === 'messages' ? anthropicError('invalid_request_error', message) : errorBody(message, 'invalid_request_error', 'invalid_mock_header'));
        return false;
      }
      if (this.#tool !== undefined) {
        // Every call has arguments: at least one piece.
        this.#tokens = Math.max(1, this.#tokens);
        this.#record.tokens = this.#tokens;
        this.#toolPieces = argumentPieces(this.#tool.arguments, this.#tokens);
      }
    }
    if (route === 'responses') {
      const previous = info.previousResponseId;
      if (previous !== undefined && !this.#state.storedResponses.has(previous)) {
        // As OpenAI answers: the state lives here or nowhere.
        this.#sendJson(404, errorBody(`Previous response with id '${previous}' not found.`, 'invalid_request_error', 'previous_response_not_found', 'previous_response_id'));
        return false;
      }
      const n = this.#record.id;
      this.#responseIds = { id: `resp_${this.#state.instanceTag}${n}`, itemId: `msg_mock${n}`, createdAt: nowSeconds(), modelJson: JSON.stringify(info.model), previousResponseId: previous, ...(this.#tool !== undefined ? { tool: this.#tool } : {}) };
    }
    this.#kind = route === 'count_tokens' ? 'messages' : route;
    this.#model = info.model;
    this.#record.model = info.model;
    this.#record.stream = info.stream;
    const promptTokens = Math.max(1, Math.ceil(body.length / 4));
    // A prompt-cache breakpoint: as a warm cache would, all but the last prompt token are read from it.
    const cachedTokens = route === 'messages' && body.includes(CACHE_CONTROL) ? promptTokens - 1 : 0;
    this.#usage = { promptTokens, completionTokens: this.#tokens, cachedTokens };
    this.#identity = identityPrefix({ request: this.#record.id, requestId: this.#record.requestId, tokens: this.#tokens });
    return true;
  }

  /** After the headers delay: fail as planned, or answer. */
  start(): void {
    this.#timer = undefined;
    if (this.#closed) return;
    const failure = this.#plan.failure;
    if (failure !== undefined && failure.kind === 'status') {
      this.#fail('status:' + failure.status);
      const message = `mock failure: status ${failure.status}`;
      // In the route's own error format, as the real provider would answer.
      const body = this.#kind === 'messages' ? anthropicError(anthropicErrorTypeFor(failure.status), message) : errorBody(message, errorTypeFor(failure.status), 'mock_failure', failure.param ?? null);
      this.#sendJson(failure.status, body, failure.retryAfterSec, failure.noRetry);
      return;
    }
    if (failure !== undefined && failure.kind === 'reset-before-headers') {
      this.#reset('reset-before-headers');
      return;
    }
    const route = this.#route;
    if (route === 'models') {
      this.#sendJson(200, modelsBody(this.#options.models));
      return;
    }
    if (route === 'count_tokens') {
      this.#sendJson(200, countTokensBody(this.#usage.promptTokens));
      return;
    }
    if (isStoredResponseRoute(route)) return; // answered by #parse
    if (route !== 'embeddings' && this.#record.stream) {
      this.#beginStream();
      return;
    }
    // A whole response arrives when generation would have finished.
    const plan = this.#plan;
    const delay = route === 'embeddings' ? plan.ttftMs : plan.ttftMs + plan.intervalMs * Math.max(0, this.#tokens - 1);
    if (delay > 0) this.#timer = setTimeout(onWholeTimer, delay, this);
    else this.sendWhole();
  }

  sendWhole(): void {
    this.#timer = undefined;
    if (this.#closed) return;
    let body: string;
    if (this.#route === 'embeddings') body = this.#embeddingsJson;
    else if (this.#kind === 'messages') body = messageBody(`msg_mock${this.#record.id}`, JSON.stringify(this.#model), completionText(this.#model, this.#tokens), this.#usage, this.#tool);
    else if (this.#responseIds !== undefined) {
      body = responseObject(this.#responseIds, completionText(this.#model, this.#tokens), this.#usage);
      this.#state.storedResponses.set(this.#responseIds.id, body);
    } else {
      const id = `${this.#kind === 'chat' ? 'chatcmpl' : 'cmpl'}-mock-${this.#record.id}`;
      const tool = this.#tool === undefined ? undefined : chatToolMessage(`call_${id}`, this.#tool);
      body = completionBody(this.#kind as CompletionKind, id, nowSeconds(), JSON.stringify(this.#model), completionText(this.#model, this.#tokens), this.#usage, this.#identity, tool);
    }
    const midway = this.#midwayReset();
    if (midway !== undefined) {
      // Half the body, then a reset: the client sees a truncated response.
      const bytes = Buffer.from(body);
      this.#res.writeHead(200, ['content-type', 'application/json', 'content-length', String(bytes.length)]);
      this.#record.status = 200;
      this.#state.emitted(this.#record, 0);
      this.#res.write(bytes.subarray(0, bytes.length >> 1), () => this.resetSocket());
      this.#fail(midway);
      return;
    }
    this.#state.emitted(this.#record, 0);
    this.#sendJson(200, body);
  }

  #beginStream(): void {
    const res = this.#res;
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();
    this.#record.status = 200;
    const socket = res.socket;
    // Direct writes need the headers already on the socket (this response is its current one) and
    // chunked framing (HTTP/1.1); otherwise, e.g. for an HTTP/1.0 client, the response writes.
    if (socket !== null && res.chunkedEncoding && res.writableLength === socket.writableLength && socket.writable) {
      this.#socket = socket;
      (socket as Carrier)[EXCHANGE] = this;
      if ((socket as DrainCarrier)[DRAIN_LISTENING] !== true) {
        (socket as DrainCarrier)[DRAIN_LISTENING] = true;
        socket.on('drain', onSocketDrain);
      }
    } else res.on('drain', onResDrain);
    this.#ascii = Buffer.byteLength(this.#model) === this.#model.length && (this.#tool === undefined || Buffer.byteLength(this.#tool.arguments) === this.#tool.arguments.length);
    if (this.#responseIds !== undefined) this.#responseEvents = new ResponseEvents(this.#responseIds);
    if (this.#kind === 'chat' || this.#kind === 'text') {
      this.#head = chunkHead(this.#kind, `${this.#kind === 'chat' ? 'chatcmpl' : 'cmpl'}-mock-${this.#record.id}`, nowSeconds(), JSON.stringify(this.#model));
    }
    const midway = this.#midwayReset();
    if (this.#tokens === 0 && midway !== undefined) {
      this.#reset(midway);
      return;
    }
    if (this.#plan.ttftMs > 0) this.#paced = this.#state.pacer.after(this.#plan.ttftMs, this);
    else this.pump();
  }

  get pacedClosed(): boolean {
    return this.#closed;
  }

  onPaced(): void {
    this.#paced = undefined;
    this.pump();
  }

  /** One SSE event: through the socket with its chunk framing, or through the response. */
  #write(text: string, done?: () => void): boolean {
    const socket = this.#socket;
    if (socket === undefined) return done === undefined ? this.#res.write(text) : this.#res.write(text, done);
    // No event (the Messages and Responses streams end without [DONE]): a zero-size chunk would end the body.
    if (text.length === 0) return done === undefined ? true : socket.write(text, 'latin1', done);
    const ascii = this.#ascii;
    const length = ascii ? text.length : Buffer.byteLength(text);
    return socket.write(length.toString(16) + '\r\n' + text + '\r\n', ascii ? 'latin1' : 'utf8', done);
  }

  /** Writes SSE events until the next one is due later, the socket pushes back, or the stream ends. */
  pump(): void {
    this.#timer = undefined;
    this.#immediate = undefined;
    if (this.#closed) return;
    // Several events in one go (back to back, or the last token, the final chunk, [DONE] and the
    // end) leave in one writev, as they did through res.write's cork; a lone paced token needs none.
    const socket = this.#socket;
    const cork = socket !== undefined && (this.#plan.intervalMs === 0 || this.#event + 1 >= this.#tokens);
    if (cork) socket.cork();
    this.#burst();
    if (cork) socket.uncork();
  }

  #burst(): void {
    const res = this.#res;
    const tokens = this.#tokens;
    const midway = this.#midwayReset();
    const resetAfter = midway !== undefined ? Math.max(1, tokens >> 1) : -1;
    for (let burst = 1; ; burst++) {
      const e = this.#event++;
      const text = this.#streamEvent(e, tokens);
      if (e + 1 === resetAfter) {
        this.#state.emitted(this.#record, e);
        if (midway === 'close-mid-event') this.#write(text.slice(0, text.length >> 1), () => this.closeSocket());
        else this.#write(text, () => this.resetSocket());
        this.#fail(midway ?? 'reset-mid-stream');
        return;
      }
      const ok = this.#write(text);
      this.#state.emitted(this.#record, e);
      if (e === tokens + 1) {
        res.end();
        return;
      }
      if (!ok) {
        this.#waitingDrain = true;
        this.#record.backpressureWaits++;
        this.#state.stats.backpressureWaits++;
        return;
      }
      if (e + 1 < tokens && this.#plan.intervalMs > 0) {
        this.#paced = this.#state.pacer.after(this.#plan.intervalMs, this);
        return;
      }
      if (burst === BURST) {
        this.#immediate = setImmediate(onPumpTimer, this);
        return;
      }
    }
  }

  /** Event e of a stream of `tokens` tokens: e < tokens carries token e, then the closing events, then the terminator. */
  #streamEvent(e: number, tokens: number): string {
    const kind = this.#kind;
    const tool = this.#tool;
    if (kind === 'chat' && tool !== undefined) {
      if (e < tokens) return `${this.#head}${chatToolChoice(`call_chatcmpl-mock-${this.#record.id}`, tool, this.#toolPieces[e], e)}]${this.#identity},"seq":${e}${TOKEN_EVENT_TAIL}`;
      return e === tokens ? finalEvent(kind, this.#head, this.#usage, e, this.#identity, 'tool_calls') : DONE_EVENT;
    }
    if (kind === 'chat' || kind === 'text') {
      if (e < tokens) {
        // tokenText(model, k) repeats with period 3 after k = 0, and so does the prefix.
        const slot = e === 0 ? 3 : e % 3;
        const prefix = (this.#prefixes[slot] ??= tokenEventPrefix(kind, this.#head, tokenText(this.#model, e), e, this.#identity));
        return prefix + e + TOKEN_EVENT_TAIL;
      }
      return e === tokens ? finalEvent(kind, this.#head, this.#usage, e, this.#identity) : DONE_EVENT;
    }
    const responses = this.#responseEvents;
    let text = '';
    if (e === 0) text = responses !== undefined ? responses.preamble(this.#usage) : messagePreamble(`msg_mock${this.#record.id}`, JSON.stringify(this.#model), this.#usage, tool);
    if (e < tokens) {
      const token = tool !== undefined ? this.#toolPieces[e] : tokenText(this.#model, e);
      return text + (responses !== undefined ? responses.delta(token) : messageDelta(token, tool));
    }
    if (e > tokens) return text; // these APIs have no [DONE]
    if (responses === undefined) return text + messageClosing(this.#usage, tool);
    const whole = completionText(this.#model, tokens);
    this.#state.storedResponses.set(responses.ids.id, responseObject(responses.ids, whole, this.#usage));
    return text + responses.closing(whole, this.#usage);
  }

  /** GET returns the stored response; DELETE removes it. Both 404 for an unknown id, as OpenAI does. */
  #storedResponse(route: StoredResponseRoute): boolean {
    const path = (this.#req.url ?? '').split('?')[0];
    const rest = path.slice('/v1/responses/'.length);
    const id = decodeURIComponent(route === 'response_cancel' || route === 'response_input_items' ? rest.slice(0, rest.indexOf('/')) : rest);
    const stored = this.#state.storedResponses.get(id);
    if (stored === undefined) {
      this.#sendJson(404, errorBody(`Response with id '${id}' not found.`, 'invalid_request_error', null, 'response_id'));
      return false;
    }
    if (route === 'response_get') {
      this.#sendJson(200, stored);
      return false;
    }
    if (route === 'response_cancel') {
      // Every stored response here has finished: cancelling it changes nothing and returns it.
      this.#sendJson(200, stored);
      return false;
    }
    if (route === 'response_input_items') {
      this.#sendJson(200, '{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}');
      return false;
    }
    this.#state.storedResponses.delete(id);
    this.#sendJson(200, `{"id":${JSON.stringify(id)},"object":"response.deleted","deleted":true}`);
    return false;
  }

  onDrain(): void {
    if (!this.#waitingDrain || this.#closed) return;
    this.#waitingDrain = false;
    if (this.#event < this.#tokens && this.#plan.intervalMs > 0) this.#paced = this.#state.pacer.after(this.#plan.intervalMs, this);
    else this.pump();
  }

  onFinish(): void {
    const record = this.#record;
    record.completed = true;
    this.#state.stats.completed++;
    this.#state.emit('complete', record);
  }

  onClose(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#immediate !== undefined) clearImmediate(this.#immediate);
    this.#timer = undefined;
    this.#immediate = undefined;
    if (this.#paced !== undefined) this.#paced.cancel();
    this.#paced = undefined;
    const socket = this.#socket;
    if (socket !== undefined && (socket as Carrier)[EXCHANGE] === this) (socket as Carrier)[EXCHANGE] = undefined;
    const record = this.#record;
    record.endedAtMs = performance.now();
    const state = this.#state;
    state.stats.inFlight--;
    if (!this.#res.writableFinished && !this.#endedByMock && !state.closing) {
      record.aborted = true;
      state.stats.aborted++;
      state.emit('abort', record);
    }
  }

  /** The failure's name when it resets the response after part of its body. */
  #midwayReset(): 'reset-mid-stream' | 'close-mid-event' | undefined {
    const kind = this.#plan.failure?.kind;
    return kind === 'reset-mid-stream' || kind === 'close-mid-event' ? kind : undefined;
  }

  /** A FIN without the body's end: unlike a reset, every byte written before it arrives. */
  closeSocket(): void {
    (this.#res.socket ?? this.#req.socket).end();
  }

  resetSocket(): void {
    const socket = this.#res.socket ?? this.#req.socket;
    destroyHard(socket);
  }

  #reset(failure: string): void {
    this.#fail(failure);
    this.resetSocket();
  }

  #fail(failure: string): void {
    this.#endedByMock = true;
    this.#record.failure = failure;
    this.#state.stats.failuresInjected++;
    this.#state.emit('fail', this.#record);
  }

  #sendJson(status: number, body: string, retryAfterSec?: number, noRetry = false): void {
    const res = this.#res;
    if (res.headersSent) {
      res.end();
      return;
    }
    this.#record.status = status;
    const head = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body))];
    if (retryAfterSec !== undefined) head.push('retry-after', String(retryAfterSec));
    if (noRetry) head.push('x-should-retry', 'false');
    res.writeHead(status, head);
    res.end(body);
  }
}

/** A reset (RST), as a crashed or killed provider would leave the client with. */
function destroyHard(socket: Socket | null): void {
  if (socket === null || socket.destroyed) return;
  if (typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
  else socket.destroy();
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

function exchangeOf(target: unknown): Exchange | undefined {
  return (target as Carrier)[EXCHANGE];
}

function onReqData(this: IncomingMessage, chunk: Buffer): void {
  exchangeOf(this)?.onData(chunk);
}
function onReqEnd(this: IncomingMessage): void {
  exchangeOf(this)?.onEnd();
}
function onResClose(this: ServerResponse): void {
  exchangeOf(this)?.onClose();
}
function onResFinish(this: ServerResponse): void {
  exchangeOf(this)?.onFinish();
}
function onResDrain(this: ServerResponse): void {
  exchangeOf(this)?.onDrain();
}
function onSocketDrain(this: Socket): void {
  exchangeOf(this)?.onDrain();
}
function onStartTimer(exchange: Exchange): void {
  exchange.start();
}
function onWholeTimer(exchange: Exchange): void {
  exchange.sendWhole();
}
function onPumpTimer(exchange: Exchange): void {
  exchange.pump();
}
