// Open-loop load: requests leave on a fixed schedule (rate per second, paced
// at timer granularity, ~1 ms) whether or not earlier ones were answered, so
// a slow target shows as latency instead of as a lower request rate.
// Latency is timed with performance.now() from the send to the last body
// byte, every sample kept (autocannon's overallRate releases each second's
// quota in a burst and rounds latency to whole milliseconds, too coarse for
// the sub-millisecond differences between proxies). The edge's timing
// headers, where a response has them, are kept too: x-edge-overhead-ms (the
// edge's own time before the head), x-edge-hop-ms (the node hop's share)
// and x-edge-upstream-ms (the provider's own time, measured on the node), so
// a report can say which part of the path a slow request spent its time in.
import { Pool, type Dispatcher } from 'undici';
import { latencySummary, percentileSorted, sortedCopy } from '../harness/stats.js';
import type { LoadResult } from '../harness/types.js';

export interface PacedOptions {
  readonly origin: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  /** Requests per second. */
  readonly rate: number;
  readonly durationS: number;
  readonly connections?: number;
  /** Beyond this many unanswered requests, a due request is shed (counted, not sent). */
  readonly maxInFlight?: number;
}

/** One request's callbacks (undici's dispatch handler): no stream objects, no closures. */
class PacedRequest implements Dispatcher.DispatchHandler {
  readonly #run: PacedRun;
  readonly #sentAt: number;
  #status = 0;

  constructor(run: PacedRun, sentAt: number) {
    this.#run = run;
    this.#sentAt = sentAt;
  }

  // Its presence marks the handler as undici's current (controller) kind.
  onRequestStart(): void {}

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    this.#status = statusCode;
    if (statusCode >= 200 && statusCode <= 299) this.#run.timing(headers['x-edge-overhead-ms'], headers['x-edge-hop-ms'], headers['x-edge-upstream-ms']);
  }

  onResponseData(): void {}

  onResponseEnd(): void {
    this.#run.done(this.#status, performance.now() - this.#sentAt);
  }

  onResponseError(): void {
    this.#run.failed();
  }
}

class PacedRun {
  readonly latencies: number[] = [];
  /** From the edge's timing headers, per answered request that had them (ms). */
  readonly #own: number[] = [];
  readonly #hop: number[] = [];
  readonly #upstream: number[] = [];
  errors = 0;
  non2xx = 0;
  shed = 0;
  inFlight = 0;
  readonly #options: PacedOptions;
  readonly #pool: Pool;
  readonly #total: number;
  readonly #maxInFlight: number;
  readonly #dispatch: Dispatcher.DispatchOptions;
  #sent = 0;
  #t0 = 0;
  #lastEnd = 0;
  #resolve: (() => void) | undefined;

  constructor(options: PacedOptions) {
    this.#options = options;
    this.#pool = new Pool(options.origin, { connections: options.connections ?? 64, pipelining: 1, keepAliveTimeout: 30_000 });
    this.#total = Math.max(1, Math.round(options.rate * options.durationS));
    this.#maxInFlight = options.maxInFlight ?? 512;
    this.#dispatch = {
      method: 'POST',
      path: options.path,
      headers: { ...options.headers, 'content-type': 'application/json' },
      body: options.body,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    };
  }

  async run(): Promise<LoadResult> {
    const finished = new Promise<void>((resolve) => {
      this.#resolve = resolve;
    });
    this.#t0 = performance.now();
    this.#tick();
    await finished;
    await this.#pool.close();
    const wallS = Math.max(this.#lastEnd - this.#t0, this.#options.durationS * 1000) / 1000;
    return {
      wallS,
      // 2xx answers; every one of them is a latency sample.
      requests: this.latencies.length,
      // A shed request is one the target left unanswered too long to send it: the slowest of the run, so
      // an error (which keeps the run out of every figure), never a gap in the percentiles (coordinated omission).
      errors: this.errors + this.shed,
      non2xx: this.non2xx,
      latencyMs: latencySummary(this.latencies),
      metrics: { targetRps: this.#options.rate, shed: this.shed, ...this.#timingMetrics() },
    };
  }

  #tick(): void {
    const now = performance.now();
    const due = Math.min(this.#total, Math.floor(((now - this.#t0) * this.#options.rate) / 1000) + 1);
    while (this.#sent < due) {
      this.#sent++;
      if (this.inFlight >= this.#maxInFlight) {
        this.shed++;
        continue;
      }
      this.inFlight++;
      this.#pool.dispatch(this.#dispatch, new PacedRequest(this, performance.now()));
    }
    if (this.#sent < this.#total) {
      const nextAt = this.#t0 + (this.#sent * 1000) / this.#options.rate;
      setTimeout(onTick, Math.max(0, nextAt - performance.now()), this);
    } else this.#maybeFinish();
  }

  tick(): void {
    this.#tick();
  }

  timing(own: unknown, hop: unknown, upstream: unknown): void {
    if (typeof own === 'string') this.#own.push(Number(own));
    if (typeof hop === 'string' && typeof upstream === 'string') {
      this.#hop.push(Number(hop));
      this.#upstream.push(Number(upstream));
    }
  }

  /** Percentiles of the edge's timing headers; none for a target that sends none. */
  #timingMetrics(): Record<string, number> {
    const out: Record<string, number> = {};
    if (this.#own.length > 0) out.ownP99Ms = percentileSorted(sortedCopy(this.#own), 99);
    if (this.#hop.length > 0) {
      const hop = sortedCopy(this.#hop);
      out.hopP50Ms = percentileSorted(hop, 50);
      out.hopP99Ms = percentileSorted(hop, 99);
      out.upstreamP99Ms = percentileSorted(sortedCopy(this.#upstream), 99);
    }
    return out;
  }

  done(status: number, latencyMs: number): void {
    this.inFlight--;
    this.#lastEnd = performance.now();
    // A non-2xx answer (an error page, often fast) is counted, not timed: it would pull the percentiles down.
    if (status < 200 || status > 299) this.non2xx++;
    else this.latencies.push(latencyMs);
    this.#maybeFinish();
  }

  failed(): void {
    this.inFlight--;
    this.errors++;
    this.#lastEnd = performance.now();
    this.#maybeFinish();
  }

  #maybeFinish(): void {
    if (this.#sent >= this.#total && this.inFlight === 0) this.#resolve?.();
  }
}

function onTick(run: PacedRun): void {
  run.tick();
}

export function pacedLoad(options: PacedOptions): Promise<LoadResult> {
  return new PacedRun(options).run();
}
