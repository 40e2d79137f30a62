// The two ends of an A2A task's chat-completions exchange inside the edge.
// An A2A task is dispatched through DataPlane.begin like any HTTP request
// (admission, scheduler, lease, tunnel, run records), but no client socket
// carries it: RunRequest stands in for the IncomingMessage (method, headers)
// and RunSink for the ServerResponse the exchange writes the provider's
// answer to. The sink reads the OpenAI chat stream as it arrives and hands
// text deltas and the outcome to the task; cancel() is what a client
// disconnect is to an HTTP request: the exchange releases its lease at once
// and sends CANCEL to the node (upstream request aborted, cli process killed).
import { EventEmitter } from 'node:events';
import { StringDecoder } from 'node:string_decoder';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Errors } from '../../shared/errors.js';
import { kExchange, type DispatchWatcher, type ProxyExchange } from '../http/proxy-exchange.js';
import { isEventStreamType } from '../../shared/media-type.js';

/** What the task hears from its run. */
export interface RunListener {
  /** A provider took the run (its tunnel was sent), or answered 2xx: the task is working. Called more than once. */
  onStarted(): void;
  onDelta(text: string): void;
  /** Exactly once: ok, or why not; `cancelled`: the run was cancelled (an operator's cancel of its run), not failed. */
  onFinished(error: string | undefined, cancelled?: boolean): void;
}

/** The headers an exchange reads from its request: session (contextId), content type, the client's request id and fair-queuing headers. */
export function runRequest(sessionId: string, requestTag: string | undefined, fairnessHeaders: Readonly<Record<string, string>> = {}): IncomingMessage {
  const headers: Record<string, string> = { ...fairnessHeaders, 'content-type': 'application/json', accept: 'text/event-stream', 'x-edge-session': sessionId };
  if (requestTag !== undefined) headers['x-request-id'] = requestTag;
  const rawHeaders: string[] = [];
  for (const [name, value] of Object.entries(headers)) rawHeaders.push(name, value);
  // The data path reads only method, headers and rawHeaders of a request (data-plane.ts, proxy-exchange.ts).
  return { method: 'POST', url: '/v1/chat/completions', headers, rawHeaders } as unknown as IncomingMessage;
}

/** Why a run failed: the text the task shows, and the error's code when its body or event had one. */
interface RunError {
  readonly text: string;
  readonly code: string | undefined;
}

/** A failure of the sink's own finding, with no code. */
function noted(text: string): RunError {
  return { text, code: undefined };
}

/** The error of an OpenAI error body or event (its message and code), else the raw text. */
function errorOf(status: number, body: string): RunError {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown; code?: unknown } };
    const message = parsed.error?.message;
    const code = parsed.error?.code;
    if (typeof message === 'string') return typeof code === 'string' ? { text: `${message} (${code})`, code } : noted(message);
  } catch {
    // not JSON: the text itself
  }
  const text = body.trim();
  return noted(status > 0 ? `the provider answered HTTP ${status}${text === '' ? '' : `: ${text.slice(0, 500)}`}` : text);
}

/**
 * A ServerResponse as far as ProxyExchange uses one: writeHead, write (with
 * the flush callback its flow-control window waits for), end, destroy, and
 * the 'close' event by which a client leaving is noticed.
 */
export class RunSink extends EventEmitter implements DispatchWatcher {
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  /** Set by a drain; meaningless here. */
  shouldKeepAlive = true;
  readonly #listener: RunListener;
  #status = 0;
  #eventStream = false;
  /** An SSE line not yet complete. */
  #partial = '';
  /** The data lines of the event being read, joined by LF (an SSE event's data is all of its data lines). */
  #data: string | undefined;
  /** The last text ended with CR: an LF that starts the next is the same line end. */
  #afterCR = false;
  /** Some text of the body was read (a BOM before it is not part of the stream). */
  #sawText = false;
  readonly #utf8 = new StringDecoder('utf8');
  /** A non-stream (or error) body, whole. */
  #body = '';
  #streamError: RunError | undefined;
  /** The event stream said it was over ([DONE], or a chunk's finish_reason): without it the answer may be cut short. */
  #ended = false;
  #done = false;
  /** cancel() was called: the task is finished by its caller, not by what the exchange writes after. */
  #cancelled = false;
  /** The task's bound on its answer: what it was given plus what the sink holds unread (a line, an event, a body). */
  readonly #maxChars: number;
  /** Characters of answer given to the listener so far. */
  #answered = 0;

  constructor(listener: RunListener, maxChars = Number.MAX_SAFE_INTEGER) {
    super();
    this.#listener = listener;
    this.#maxChars = maxChars;
  }

  /** As a ServerResponse for DataPlane.begin. */
  asResponse(): ServerResponse {
    return this as unknown as ServerResponse;
  }

  /**
   * DispatchWatcher: a provider took the run; a cli command may be silent for
   * minutes before its first output. On the next turn: with a free provider
   * the grant comes inside DataPlane.begin, before the task's caller has
   * taken its first snapshot, and the stream would open WORKING with no
   * WORKING update (unlike with I/O workers and docs/a2a.md).
   */
  dispatched(): void {
    setImmediate(startedLater, this);
  }

  /** @internal setImmediate callback of dispatched() */
  startedLater(): void {
    if (!this.#done) this.#listener.onStarted();
  }

  writeHead(status: number, headers?: readonly string[] | Record<string, string>): this {
    this.#status = status;
    this.headersSent = true;
    let contentType = '';
    if (Array.isArray(headers)) {
      for (let i = 0; i + 1 < headers.length; i += 2) if (String(headers[i]).toLowerCase() === 'content-type') contentType = String(headers[i + 1]);
    } else if (headers !== undefined) {
      contentType = (headers as Record<string, string>)['content-type'] ?? '';
    }
    this.#eventStream = isEventStreamType(contentType);
    if (status >= 200 && status < 300) this.#listener.onStarted();
    return this;
  }

  write(chunk: Uint8Array | string, callback?: () => void): boolean {
    // One decoder for the whole body: a character split between two chunks is not two U+FFFD.
    if (!this.#done) this.#take(typeof chunk === 'string' ? chunk : this.#utf8.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)));
    // The exchange's window grants the node more credit once a chunk "flushed": at once, here.
    if (callback !== undefined) queueMicrotask(callback);
    return true;
  }

  end(chunk?: Uint8Array | string): this {
    if (chunk !== undefined && chunk.length > 0) this.write(chunk);
    if (this.#done) return this;
    this.writableFinished = true;
    this.#finish();
    this.emit('close');
    return this;
  }

  /** The exchange cut the response (a truncated JSON body): the run failed. */
  destroy(): this {
    if (this.#done) return this;
    this.destroyed = true;
    // Cut mid-event (an in-band error could not follow half an event): an operator's cancel is still a cancel.
    const exchange = (this as { [kExchange]?: ProxyExchange })[kExchange];
    if (exchange?.cutWith === Errors.runCancelled.code) this.#streamError ??= { text: exchange.errorMessage ?? Errors.runCancelled.message, code: Errors.runCancelled.code };
    this.#streamError ??= noted('the answer was cut off before it was complete');
    this.#finish();
    this.emit('close');
    return this;
  }

  /**
   * The task was cancelled (its caller finishes it). `asked`: by CancelTask,
   * which the exchange takes as an operator's cancel (outcome run_cancelled,
   * docs/operations.md); else (the caller left) it hears what a client
   * disconnect sounds like ('close' before the response finished).
   */
  cancel(asked: boolean): void {
    if (this.#done) return;
    this.#cancelled = true;
    const exchange = (this as { [kExchange]?: ProxyExchange })[kExchange];
    if (asked && exchange?.cancel() === true) return;
    this.#done = true;
    this.destroyed = true;
    this.emit('close');
  }

  #take(text: string): void {
    const ok = this.#status >= 200 && this.#status < 300;
    if (!ok || !this.#eventStream) {
      if (this.#overBound(this.#body.length + text.length)) return;
      this.#body += text;
      return;
    }
    // As the SSE spec reads a stream (and the SDKs do): a leading BOM is dropped, and a line ends at
    // CRLF, LF or CR alone (a CRLF may be split between two chunks).
    if (!this.#sawText && text.length > 0) {
      this.#sawText = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.#afterCR && text.startsWith('\n')) {
      // The LF of a CRLF split between chunks: the line ended already, and an LF after it is a line end of its own.
      this.#afterCR = false;
      text = text.slice(1);
    }
    if (text === '') return;
    // A chunk that ends no line only grows the partial one: splitting partial + chunk on every chunk
    // rescanned the whole line each time, quadratic in a long event (16 MB held the event loop ~50 s).
    if (!text.includes('\n') && !text.includes('\r')) {
      this.#afterCR = false;
      if (this.#overBound(this.#partial.length + text.length)) return;
      this.#partial += text;
      return;
    }
    this.#afterCR = text.endsWith('\r');
    const lines = (this.#partial + text).split(LINE_END);
    this.#partial = lines.pop() ?? '';
    for (const line of lines) this.#line(line);
  }

  /** One line of the event stream: a blank one ends an event, whose data lines join (multi-line `data:`). */
  #line(line: string): void {
    if (line === '') {
      this.#dispatch();
      return;
    }
    if (!line.startsWith('data:')) return; // comments (keepalives), event names, ids
    const value = line.slice(line[5] === ' ' ? 6 : 5);
    if (this.#data !== undefined && this.#overBound(this.#data.length + 1 + value.length)) return;
    this.#data = this.#data === undefined ? value : `${this.#data}\n${value}`;
  }

  /**
   * An answer past the task's bound, given or still held here (one SSE line or event, a JSON or
   * error body): the run fails now and is stopped on the next turn, as a caller that left (this is
   * the exchange's own write). Else it grew until V8's string limit threw inside the node's frame
   * handler, which exits the edge (or its I/O worker).
   */
  #overBound(chars: number): boolean {
    if (chars <= this.#maxChars) return false;
    const why = `the provider's answer passed ${this.#maxChars} characters, the most one task holds (a2a.max_task_bytes); the run was stopped`;
    // Past the end already (#finish reading what the body ended with): its report says so.
    if (this.#done) {
      this.#streamError ??= noted(why);
      return true;
    }
    this.#done = true;
    this.#partial = '';
    this.#data = undefined;
    this.#body = '';
    this.#listener.onFinished(why);
    setImmediate(() => {
      this.destroyed = true;
      this.emit('close');
    });
    return true;
  }

  #dispatch(): void {
    const data = this.#data;
    if (data === undefined) return;
    this.#data = undefined;
    if (data === '[DONE]') {
      this.#ended = true;
      return;
    }
    let parsed: { error?: unknown; choices?: { delta?: { content?: unknown }; finish_reason?: unknown }[] } | null;
    try {
      parsed = JSON.parse(data) as typeof parsed;
    } catch {
      return;
    }
    // `data: null` (or a number, a string) is JSON but no chunk: skipped like text that is not JSON. Read as
    // one, it threw here, inside the node's frame handler: with workers.count 0 the edge process exited.
    if (parsed === null || typeof parsed !== 'object') return;
    if (parsed.error !== undefined) {
      this.#streamError = errorOf(0, data);
      return;
    }
    const choice = parsed.choices?.[0];
    const content = choice?.delta?.content;
    if (typeof content === 'string' && content.length > 0) this.#give(content);
    if (typeof choice?.finish_reason === 'string') this.#ended = true;
  }

  /** A piece of the answer to the listener, within the task's bound. */
  #give(content: string): void {
    if (this.#overBound(this.#answered + content.length)) return;
    this.#answered += content.length;
    this.#listener.onDelta(content);
  }

  #finish(): void {
    // A body that ended inside a character: its bytes as U+FFFD, as a one-shot decode gave them.
    const rest = this.#utf8.end();
    if (rest !== '') this.#take(rest);
    this.#done = true;
    if (this.#partial !== '') this.#line(this.#partial);
    this.#partial = '';
    // An event the body ended before its blank line: read as it is.
    this.#dispatch();
    const ok = this.#status >= 200 && this.#status < 300;
    if (!ok) {
      this.#report(this.#status === 0 ? (this.#streamError ?? noted('the run ended without an answer')) : errorOf(this.#status, this.#body));
      return;
    }
    if (!this.#eventStream && this.#body !== '') {
      // A provider that ignored stream:true answered with one JSON body.
      try {
        const content = (JSON.parse(this.#body) as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
        if (typeof content === 'string' && content.length > 0) this.#give(content);
      } catch {
        this.#streamError ??= noted('the provider answered with a body that is not a chat completion');
      }
    }
    // A stream that stopped before saying so (a provider that died mid-answer, its connection closed as if
    // the body were whole): its text may be cut anywhere, and a completed task would pass it off as the answer.
    if (this.#eventStream && !this.#ended) this.#streamError ??= noted('the provider\'s stream ended before its last event ([DONE] or a finish_reason): the answer may be cut short');
    this.#report(this.#streamError);
  }

  /** An operator's cancel of the run reaches the exchange as the edge's run_cancelled error: told apart from a failure. */
  #report(error: RunError | undefined): void {
    if (this.#cancelled) return;
    this.#listener.onFinished(error?.text, error?.code === Errors.runCancelled.code);
  }
}

/** An SSE line end: CRLF, LF or CR. */
const LINE_END = /\r\n|\r|\n/;

function startedLater(sink: RunSink): void {
  sink.startedLater();
}
