// Streaming client (undici dispatch handlers): for each SSE stream it times
// the first body byte (time to first token: the mock sends the first token
// right after its headers), counts events ("\n\n"-terminated), tracks the
// longest silence between chunks and checks the stream ended with
// `data: [DONE]`. autocannon cannot time a first byte; this can.
//
// Two shapes: closed loop (`durationS` set: each of `concurrency` slots opens
// a new stream when its previous one ends) and a fixed set (`durationS`
// unset: `concurrency` streams, opened at `openPerSecond`, each once).
import { Pool, type Dispatcher } from 'undici';
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
const DONE = '[DONE]';

class StreamProbe implements Dispatcher.DispatchHandler {
  readonly #run: StreamRun;
  readonly #startedAt: number;
  #status = 0;
  #firstAt = 0;
  #lastAt = 0;
  #maxGap = 0;
  #events = 0;
  #lastWasNl = false;
  #tail = '';
  #sawDone = false;
  #controller: Dispatcher.DispatchController | undefined;

  constructor(run: StreamRun) {
    this.#run = run;
    this.#startedAt = performance.now();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    this.#run.open.add(this);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    this.#status = statusCode;
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const now = performance.now();
    if (this.#firstAt === 0) this.#firstAt = now;
    else if (now - this.#lastAt > this.#maxGap) this.#maxGap = now - this.#lastAt;
    this.#lastAt = now;
    if (chunk.length === 0) return;
    let found = 0;
    let at = chunk.indexOf(NL);
    if (at === 0 && this.#lastWasNl) found++;
    while (at >= 0) {
      if (at + 1 < chunk.length && chunk[at + 1] === NL) found++;
      at = chunk.indexOf(NL, at + 1);
    }
    this.#lastWasNl = chunk[chunk.length - 1] === NL;
    this.#events += found;
    this.#run.events += found;
    if (!this.#sawDone) {
      // [DONE] may straddle two chunks: look across the boundary too.
      const head = chunk.toString('latin1', 0, Math.min(8, chunk.length));
      this.#sawDone = chunk.indexOf(DONE) >= 0 || (this.#tail + head).includes(DONE);
      this.#tail = (this.#tail + chunk.toString('latin1', Math.max(0, chunk.length - 8))).slice(-8);
    }
  }

  onResponseEnd(): void {
    this.#run.open.delete(this);
    const now = performance.now();
    const ok = this.#status >= 200 && this.#status <= 299;
    this.#run.finish(this, ok, ok && this.#sawDone && this.#events >= this.#run.minEvents, now);
  }

  onResponseError(): void {
    this.#run.open.delete(this);
    this.#run.finish(this, false, false, performance.now());
  }

  abort(): void {
    this.#controller?.abort(new Error('stream deadline'));
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
}

class StreamRun {
  readonly open = new Set<StreamProbe>();
  readonly minEvents: number;
  events = 0;
  readonly #options: StreamLoadOptions;
  readonly #pool: Pool;
  readonly #dispatch: Dispatcher.DispatchOptions;
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
  /** Results are final: late callbacks (from destroying the pool) are ignored. */
  #closed = false;
  #deadline: NodeJS.Timeout | undefined;

  constructor(options: StreamLoadOptions) {
    this.#options = options;
    this.minEvents = options.minEvents;
    this.#pool = new Pool(options.origin, { connections: options.concurrency, pipelining: 1, keepAliveTimeout: 30_000 });
    this.#dispatch = {
      method: 'POST',
      path: options.path,
      headers: { ...options.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: options.body,
      headersTimeout: options.deadlineS * 1000,
      bodyTimeout: 0,
    };
  }

  async run(): Promise<LoadResult> {
    const done = new Promise<void>((resolve) => {
      this.#resolve = resolve;
    });
    this.#t0 = performance.now();
    if (this.#options.durationS !== undefined) {
      this.#endAt = this.#t0 + this.#options.durationS * 1000;
      for (let i = 0; i < this.#options.concurrency; i++) this.#open();
    } else this.#ramp();
    this.#deadline = setTimeout(onDeadline, this.#options.deadlineS * 1000, this);
    await done;
    this.#closed = true;
    clearTimeout(this.#deadline);
    await this.#pool.destroy();
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
    while (this.#started < due) this.#open();
    if (this.#started < total) setTimeout(onRamp, 10, this);
  }

  ramp(): void {
    this.#ramp();
  }

  #open(): void {
    this.#started++;
    this.#pool.dispatch(this.#dispatch, new StreamProbe(this));
  }

  finish(probe: StreamProbe, ok: boolean, complete: boolean, now: number): void {
    if (this.#closed) return;
    this.#finished++;
    this.#lastEnd = now;
    if (probe.status !== 0 && (probe.status < 200 || probe.status > 299)) this.#non2xx++;
    if (!complete) {
      this.#errors++;
      if (ok) this.#incomplete++;
    } else {
      this.#ttfb.push(probe.ttfbMs);
      this.#durations.push(now - probe.startedAt);
      this.#maxGaps.push(probe.maxGapMs);
      if (probe.maxGapMs > this.#options.stallMs) this.#stalls++;
    }
    const closedLoop = this.#options.durationS !== undefined;
    if (closedLoop && now < this.#endAt) this.#open();
    else if (this.#finished === this.#started && (closedLoop || this.#started === this.#options.concurrency)) this.#resolve?.();
  }

  /** Deadline: cut whatever is still open (each cut stream ends through onResponseError); give up on the rest 2 s later. */
  cutOpenStreams(): void {
    this.#endAt = 0;
    for (const probe of [...this.open]) probe.abort();
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
