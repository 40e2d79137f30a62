// Streaming client on raw `node:net` sockets: for each SSE stream it times the
// first body byte (time to first token: the mock sends the first token right
// after its headers), counts events ("\n\n"-terminated), tracks the longest
// silence between reads that carried body bytes, and checks the stream ended
// with `data: [DONE]` (in the last 32 bytes of the body). autocannon cannot
// time a first byte; this can.
//
// It is built to cost little per received event, because at 10,000 streams
// it shares two cores with the processes it measures: the request is one
// Buffer built once per run and written in one call; reads land in one
// shared buffer through `onread` (no stream machinery, no Buffer per read);
// a small HTTP/1.1 response parser made for this purpose reads the status
// line and headers once per stream, then walks the body (chunked, by
// content-length, or until close) in byte loops that only count newline
// pairs and keep a 32-byte tail. No strings are built per chunk.
//
// Two shapes: closed loop (`durationS` set: each of `concurrency` slots opens
// a new stream when its previous one ends, on the same keep-alive connection
// when the response allows) and a fixed set (`durationS` unset: `concurrency`
// streams, opened at `openPerSecond`, each once on its own connection).
// Streams still open at the deadline are cut and count as errors, as do
// resets, premature closes and malformed responses.
import net from 'node:net';
import { latencySummary, percentileSorted, sortedCopy } from '../harness/stats.js';
import type { LoadResult } from '../harness/types.js';

export interface StreamLoadOptions {
  readonly origin: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly concurrency: number;
  readonly durationS?: number;
  readonly openPerSecond?: number;
  /** A stream with fewer events is incomplete. */
  readonly minEvents: number;
  /** A silence this long between two chunks of a stream counts as a stall. */
  readonly stallMs: number;
  /** Streams still open this long after the start are cut and counted as errors. */
  readonly deadlineS: number;
}

const NL = 0x0a;
const CR = 0x0d;
const TAIL = 32;
const TAIL_MASK = TAIL - 1;
const DONE_LINE = Buffer.from('data: [DONE]');
const HEADER_END = Buffer.from('\r\n\r\n');
const MAX_HEADER_BYTES = 64 * 1024;
/** Every socket reads into this one buffer: reads are handled synchronously, one at a time. */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** Where the parser is within one response. */
const enum State {
  Idle,
  Headers,
  ChunkSize,
  ChunkExt,
  ChunkSizeLf,
  ChunkData,
  ChunkDataCr,
  ChunkDataLf,
  TrailerLineStart,
  TrailerLine,
  TrailerEndLf,
  Fixed,
  UntilClose,
  Done,
  /** The parser found bytes no valid response has: fails the stream (then Failed). */
  Malformed,
  /** The stream ended as an error and was counted. */
  Failed,
}

/** Hex digit value of a byte, or -1. */
function hexDigit(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  const lower = b | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

/** One connection and the stream it is currently carrying (one at a time). */
class StreamConn {
  readonly #run: StreamRun;
  readonly #socket: net.Socket;
  #state = State.Idle;
  #startedAt = 0;
  #status = 0;
  #keepAlive = false;
  #remaining = 0;
  #sizeDigits = 0;
  #firstAt = 0;
  #lastAt = 0;
  #maxGap = 0;
  #events = 0;
  #lastWasNl = false;
  #bodyBytes = 0;
  readonly #tail = new Uint8Array(TAIL);
  /** Header bytes of a response whose header block spans reads. */
  #pending: Buffer | undefined;

  constructor(run: StreamRun) {
    this.#run = run;
    this.#socket = net.connect({
      host: run.host,
      port: run.port,
      noDelay: true,
      onread: { buffer: READ_BUFFER, callback: (n: number) => this.#onRead(n, READ_BUFFER) },
    });
    this.#socket.on('error', noop);
    this.#socket.on('end', () => this.#onEnd());
    this.#socket.on('close', () => this.#fail());
  }

  /** Starts the next stream on this connection. */
  begin(request: Buffer): void {
    this.#state = State.Headers;
    this.#startedAt = performance.now();
    this.#status = 0;
    this.#keepAlive = false;
    this.#remaining = 0;
    this.#sizeDigits = 0;
    this.#firstAt = 0;
    this.#lastAt = 0;
    this.#maxGap = 0;
    this.#events = 0;
    this.#lastWasNl = false;
    this.#bodyBytes = 0;
    this.#pending = undefined;
    this.#socket.write(request);
  }

  /** Deadline: cut the stream in flight. */
  abort(): void {
    this.#fail();
    this.#socket.destroy();
  }

  destroy(): void {
    this.#socket.destroy();
  }

  get status(): number {
    return this.#status;
  }
  get startedAt(): number {
    return this.#startedAt;
  }
  get ttfbMs(): number {
    return this.#firstAt === 0 ? Number.NaN : this.#firstAt - this.#startedAt;
  }
  get maxGapMs(): number {
    return this.#maxGap;
  }

  #onRead(n: number, buf: Buffer): boolean {
    if (this.#state === State.Idle || this.#state === State.Failed) {
      // Bytes nobody asked for: the connection cannot be trusted for another stream.
      this.#socket.destroy();
      return false;
    }
    let data = buf;
    let at = 0;
    let end = n;
    if (this.#state === State.Headers) {
      // Once per stream: the header block, searched only in this read's bytes (the shared buffer holds stale ones past n).
      let from = 0;
      if (this.#pending !== undefined) {
        from = Math.max(0, this.#pending.length - 3);
        data = Buffer.concat([this.#pending, buf.subarray(0, n)]);
        this.#pending = undefined;
      } else data = buf.subarray(0, n);
      end = data.length;
      const h = data.indexOf(HEADER_END, from);
      if (h < 0) {
        if (end > MAX_HEADER_BYTES) return this.#bad();
        this.#pending = Buffer.from(data);
        return true;
      }
      if (!this.#headers(data, h)) return this.#bad();
      at = h + 4;
    }
    const bodyBefore = this.#bodyBytes;
    if (at < end) this.#body(data, at, end);
    const state = this.#state;
    if (state === State.Malformed) return this.#bad();
    if (this.#bodyBytes > bodyBefore || state === State.Done) {
      const now = performance.now();
      if (this.#bodyBytes > bodyBefore) {
        if (this.#firstAt === 0) this.#firstAt = now;
        else if (now - this.#lastAt > this.#maxGap) this.#maxGap = now - this.#lastAt;
        this.#lastAt = now;
      }
      if (state === State.Done) this.#complete(now);
    }
    return true;
  }

  /** Status line and headers (once per stream): status, body framing, keep-alive. */
  #headers(data: Buffer, headerEnd: number): boolean {
    if (headerEnd < 12 || data[0] !== 0x48 || data[4] !== 0x2f || data[5] !== 0x31 || data[6] !== 0x2e) return false; // "HTTP/1."
    const d0 = data[9] - 0x30;
    const d1 = data[10] - 0x30;
    const d2 = data[11] - 0x30;
    if (d0 < 1 || d0 > 5 || d1 < 0 || d1 > 9 || d2 < 0 || d2 > 9) return false;
    this.#status = d0 * 100 + d1 * 10 + d2;
    let keepAlive = data[7] === 0x31; // HTTP/1.1 keeps the connection unless told otherwise
    let chunked = false;
    let length = -1;
    const text = data.toString('latin1', 0, headerEnd);
    let line = text.indexOf('\r\n') + 2;
    while (line > 1 && line < text.length) {
      const next = text.indexOf('\r\n', line);
      const lineEnd = next < 0 ? text.length : next;
      const colon = text.indexOf(':', line);
      if (colon > line && colon < lineEnd) {
        const name = text.slice(line, colon).trim().toLowerCase();
        if (name === 'transfer-encoding' || name === 'content-length' || name === 'connection') {
          const value = text.slice(colon + 1, lineEnd).trim().toLowerCase();
          if (name === 'transfer-encoding') chunked = value.endsWith('chunked');
          else if (name === 'content-length') {
            length = /^\d+$/.test(value) ? Number(value) : Number.NaN;
            if (!Number.isSafeInteger(length)) return false;
          } else if (value.includes('close')) keepAlive = false;
          else if (value.includes('keep-alive')) keepAlive = true;
        }
      }
      line = lineEnd + 2;
    }
    const status = this.#status;
    if (chunked) this.#state = State.ChunkSize;
    else if (status === 204 || status === 304 || length === 0) this.#state = State.Done;
    else if (length > 0) {
      this.#state = State.Fixed;
      this.#remaining = length;
    } else {
      this.#state = State.UntilClose;
      keepAlive = false;
    }
    this.#keepAlive = keepAlive;
    return true;
  }

  /** Walks body bytes [at, end): chunk framing byte by byte, content in bulk. Stops at Done or Malformed. */
  #body(data: Buffer, at: number, end: number): void {
    let state = this.#state;
    while (at < end) {
      switch (state) {
        case State.ChunkData: {
          const stop = Math.min(end, at + this.#remaining);
          this.#content(data, at, stop);
          this.#remaining -= stop - at;
          at = stop;
          if (this.#remaining === 0) state = State.ChunkDataCr;
          break;
        }
        case State.ChunkSize: {
          const b = data[at++];
          const digit = hexDigit(b);
          if (digit >= 0) {
            this.#remaining = this.#remaining * 16 + digit;
            if (++this.#sizeDigits > 12) state = State.Malformed;
          } else if (this.#sizeDigits === 0) state = State.Malformed;
          else if (b === CR) state = State.ChunkSizeLf;
          else if (b === 0x3b || b === 0x20 || b === 0x09) state = State.ChunkExt; // ";", space, tab
          else state = State.Malformed;
          break;
        }
        case State.ChunkExt:
          if (data[at++] === CR) state = State.ChunkSizeLf;
          break;
        case State.ChunkSizeLf:
          if (data[at++] !== NL) state = State.Malformed;
          else if (this.#remaining === 0) state = State.TrailerLineStart;
          else state = State.ChunkData;
          break;
        case State.ChunkDataCr:
          state = data[at++] === CR ? State.ChunkDataLf : State.Malformed;
          break;
        case State.ChunkDataLf:
          if (data[at++] === NL) {
            state = State.ChunkSize;
            this.#sizeDigits = 0;
          } else state = State.Malformed;
          break;
        case State.TrailerLineStart:
          state = data[at++] === CR ? State.TrailerEndLf : State.TrailerLine;
          break;
        case State.TrailerLine:
          if (data[at++] === NL) state = State.TrailerLineStart;
          break;
        case State.TrailerEndLf:
          state = data[at++] === NL ? State.Done : State.Malformed;
          break;
        case State.Fixed: {
          const stop = Math.min(end, at + this.#remaining);
          this.#content(data, at, stop);
          this.#remaining -= stop - at;
          at = stop;
          if (this.#remaining === 0) state = State.Done;
          break;
        }
        case State.UntilClose:
          this.#content(data, at, end);
          at = end;
          break;
        default:
          // Done with bytes left over, or Malformed: either way the rest is not ours.
          this.#state = state;
          if (state === State.Done) this.#keepAlive = false;
          return;
      }
    }
    this.#state = state;
  }

  /** Body content [from, to): counts "\n\n" pairs (also across reads) and keeps the last TAIL bytes. */
  #content(data: Buffer, from: number, to: number): void {
    if (from >= to) return;
    // Every adjacent pair (j, j+1) has exactly one member at an odd offset from `from`: visit only those.
    let found = this.#lastWasNl && data[from] === NL ? 1 : 0;
    for (let i = from + 1; i < to; i += 2) {
      if (data[i] === NL) {
        if (data[i - 1] === NL) found++;
        if (i + 1 < to && data[i + 1] === NL) found++;
      }
    }
    this.#lastWasNl = data[to - 1] === NL;
    this.#events += found;
    this.#run.events += found;
    // Body byte k sits at tail[k % TAIL]: only the last TAIL bytes of the segment can still matter.
    const start = Math.max(from, to - TAIL);
    let k = this.#bodyBytes + (start - from);
    const tail = this.#tail;
    for (let i = start; i < to; i++) tail[k++ & TAIL_MASK] = data[i];
    this.#bodyBytes += to - from;
  }

  /** Whether the body's last TAIL bytes hold `data: [DONE]`. */
  #sawDone(): boolean {
    const length = Math.min(this.#bodyBytes, TAIL);
    const first = this.#bodyBytes - length;
    const tail = this.#tail;
    outer: for (let s = 0; s + DONE_LINE.length <= length; s++) {
      for (let k = 0; k < DONE_LINE.length; k++) if (tail[(first + s + k) & TAIL_MASK] !== DONE_LINE[k]) continue outer;
      return true;
    }
    return false;
  }

  #complete(now: number): void {
    this.#state = State.Idle;
    const ok = this.#status >= 200 && this.#status <= 299;
    const complete = ok && this.#events >= this.#run.minEvents && this.#sawDone();
    this.#run.finish(this, ok, complete, now, this.#keepAlive);
  }

  /** A malformed response: the stream fails and the connection goes. */
  #bad(): boolean {
    this.#fail();
    this.#socket.destroy();
    return false;
  }

  /** The peer ended the connection: the end of a close-delimited body, otherwise a premature close. */
  #onEnd(): void {
    if (this.#state === State.UntilClose) {
      this.#state = State.Done;
      this.#keepAlive = false;
      this.#complete(performance.now());
    } else this.#fail();
  }

  /** Ends the stream in flight, if any, as an error. */
  #fail(): void {
    const state = this.#state;
    if (state === State.Idle || state === State.Failed) return;
    this.#state = State.Failed;
    this.#run.finish(this, false, false, performance.now(), false);
  }
}

function noop(): void {}

/** The request as one Buffer: request line, headers with content-length, body. */
function requestBytes(options: StreamLoadOptions, url: URL): Buffer {
  const fixed = new Set(['host', 'content-type', 'accept', 'content-length', 'connection', 'transfer-encoding']);
  let head = `POST ${options.path} HTTP/1.1\r\nhost: ${url.host}\r\n`;
  for (const [name, value] of Object.entries(options.headers)) if (!fixed.has(name.toLowerCase())) head += `${name}: ${value}\r\n`;
  head += `content-type: application/json\r\naccept: text/event-stream\r\ncontent-length: ${options.body.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), options.body]);
}

class StreamRun {
  readonly open = new Set<StreamConn>();
  readonly minEvents: number;
  readonly host: string;
  readonly port: number;
  events = 0;
  readonly #options: StreamLoadOptions;
  readonly #request: Buffer;
  readonly #ttfb: number[] = [];
  readonly #durations: number[] = [];
  readonly #maxGaps: number[] = [];
  #started = 0;
  #finished = 0;
  #errors = 0;
  #non2xx = 0;
  #incomplete = 0;
  #stalls = 0;
  #t0 = 0;
  #endAt = Number.POSITIVE_INFINITY;
  #lastEnd = 0;
  #resolve: (() => void) | undefined;
  /** Results are final: late callbacks (from closing the sockets) are ignored. */
  #closed = false;
  #deadline: NodeJS.Timeout | undefined;

  constructor(options: StreamLoadOptions) {
    this.#options = options;
    this.minEvents = options.minEvents;
    const url = new URL(options.origin);
    if (url.protocol !== 'http:') throw new Error(`streamLoad: only http origins (${options.origin})`);
    this.host = url.hostname.replace(/^\[|\]$/g, '');
    this.port = url.port === '' ? 80 : Number(url.port);
    this.#request = requestBytes(options, url);
  }

  async run(): Promise<LoadResult> {
    const done = new Promise<void>((resolve) => {
      this.#resolve = resolve;
    });
    this.#t0 = performance.now();
    if (this.#options.durationS !== undefined) {
      this.#endAt = this.#t0 + this.#options.durationS * 1000;
      for (let i = 0; i < this.#options.concurrency; i++) this.#open(undefined);
    } else this.#ramp();
    this.#deadline = setTimeout(onDeadline, this.#options.deadlineS * 1000, this);
    await done;
    this.#closed = true;
    clearTimeout(this.#deadline);
    for (const conn of this.open) conn.destroy();
    this.open.clear();
    const wallS = Math.max(1e-3, (this.#lastEnd - this.#t0) / 1000);
    const ttfb = sortedCopy(this.#ttfb);
    const gaps = sortedCopy(this.#maxGaps);
    return {
      wallS,
      requests: this.#finished - this.#errors,
      errors: this.#errors,
      non2xx: this.#non2xx,
      latencyMs: latencySummary(this.#durations),
      metrics: {
        streams: this.#started,
        incomplete: this.#incomplete,
        ttfbP50Ms: percentileSorted(ttfb, 50),
        ttfbP99Ms: percentileSorted(ttfb, 99),
        eventsPerS: this.events / wallS,
        maxGapMs: gaps.length > 0 ? gaps[gaps.length - 1] : Number.NaN,
        gapP99Ms: percentileSorted(gaps, 99),
        stalls: this.#stalls,
      },
    };
  }

  /** Fixed set: opens the streams at openPerSecond, in 10 ms steps. */
  #ramp(): void {
    const total = this.#options.concurrency;
    const due = Math.min(total, Math.floor(((performance.now() - this.#t0) * (this.#options.openPerSecond ?? 1_000)) / 1000) + 1);
    while (this.#started < due) this.#open(undefined);
    if (this.#started < total) setTimeout(onRamp, 10, this);
  }

  ramp(): void {
    this.#ramp();
  }

  /** A new stream, on `conn` when it can carry another one, else on a new connection. */
  #open(conn: StreamConn | undefined): void {
    this.#started++;
    const carrier = conn ?? new StreamConn(this);
    this.open.add(carrier);
    carrier.begin(this.#request);
  }

  finish(conn: StreamConn, ok: boolean, complete: boolean, now: number, reusable: boolean): void {
    if (this.#closed) return;
    this.open.delete(conn);
    this.#finished++;
    this.#lastEnd = now;
    if (conn.status !== 0 && (conn.status < 200 || conn.status > 299)) this.#non2xx++;
    if (!complete) {
      this.#errors++;
      if (ok) this.#incomplete++;
    } else {
      this.#ttfb.push(conn.ttfbMs);
      this.#durations.push(now - conn.startedAt);
      this.#maxGaps.push(conn.maxGapMs);
      if (conn.maxGapMs > this.#options.stallMs) this.#stalls++;
    }
    const closedLoop = this.#options.durationS !== undefined;
    if (closedLoop && now < this.#endAt) {
      if (!reusable) conn.destroy();
      this.#open(reusable ? conn : undefined);
      return;
    }
    conn.destroy();
    if (this.#finished === this.#started && (closedLoop || this.#started === this.#options.concurrency)) this.#resolve?.();
  }

  /** Deadline: cut whatever is still open (each cut stream ends as an error); give up on the rest 2 s later. */
  cutOpenStreams(): void {
    this.#endAt = 0;
    for (const conn of [...this.open]) conn.abort();
    setTimeout(onGiveUp, 2_000, this).unref();
  }

  giveUp(): void {
    if (this.#closed) return;
    this.#errors += this.#started - this.#finished;
    this.#finished = this.#started;
    this.#lastEnd = performance.now();
    this.#resolve?.();
  }
}

function onRamp(run: StreamRun): void {
  run.ramp();
}

function onDeadline(run: StreamRun): void {
  run.cutOpenStreams();
}

function onGiveUp(run: StreamRun): void {
  run.giveUp();
}

export function streamLoad(options: StreamLoadOptions): Promise<LoadResult> {
  return new StreamRun(options).run();
}
