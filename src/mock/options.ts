// Configuration of the mock provider: process-wide options and the
// per-request overrides a test or benchmark sends as x-mock-* headers.

import type { IncomingHttpHeaders } from 'node:http';

export interface MockProviderOptions {
  /** 0 = an ephemeral port. */
  readonly port?: number;
  readonly host?: string;
  /** Delay from the response headers to the first token, ms. */
  readonly ttftMs?: number;
  /** Tokens (content chunks) per completion. */
  readonly tokens?: number;
  /** Delay between consecutive tokens, ms (0 = as fast as the socket takes them). */
  readonly intervalMs?: number;
  /** Length of each embedding vector (a request's `dimensions` overrides it). */
  readonly embeddingDim?: number;
  /** Ids listed by GET /v1/models. */
  readonly models?: readonly string[];
  /** Entries kept in requestLog (oldest dropped first). */
  readonly logLimit?: number;
  /** The newest entries that keep their request body; older ones drop it, bounding memory. */
  readonly bodyLogLimit?: number;
  /**
   * Record when each event of a response was written (MockRequestRecord.emitTimes).
   * Off by default: it is an object per token of every stream, which a load test does not want.
   */
  readonly recordEmitTimes?: boolean;
  /** The largest request head it reads (node:http's maxHeaderSize; default 16 KiB). */
  readonly maxHeaderBytes?: number;
}

export interface ResolvedOptions {
  readonly port: number;
  readonly host: string;
  readonly ttftMs: number;
  readonly tokens: number;
  readonly intervalMs: number;
  readonly embeddingDim: number;
  readonly models: readonly string[];
  readonly logLimit: number;
  readonly bodyLogLimit: number;
  readonly recordEmitTimes: boolean;
  readonly maxHeaderBytes: number | undefined;
}

export function resolveOptions(opts: MockProviderOptions = {}): ResolvedOptions {
  return {
    port: nonNegative('port', opts.port ?? 0),
    host: opts.host ?? '127.0.0.1',
    ttftMs: nonNegative('ttftMs', opts.ttftMs ?? 0),
    tokens: nonNegative('tokens', opts.tokens ?? 8),
    intervalMs: nonNegative('intervalMs', opts.intervalMs ?? 0),
    embeddingDim: positive('embeddingDim', opts.embeddingDim ?? 16),
    models: opts.models ?? ['mock-model'],
    logLimit: positive('logLimit', opts.logLimit ?? 1000),
    bodyLogLimit: nonNegative('bodyLogLimit', opts.bodyLogLimit ?? 100),
    recordEmitTimes: opts.recordEmitTimes ?? false,
    maxHeaderBytes: opts.maxHeaderBytes === undefined ? undefined : positive('maxHeaderBytes', opts.maxHeaderBytes),
  };
}

/** An injected failure, from x-mock-fail. */
export type MockFailure =
  | { readonly kind: 'status'; readonly status: number; readonly retryAfterSec?: number; readonly noRetry?: boolean; readonly param?: string }
  | { readonly kind: 'reset-before-headers' }
  | { readonly kind: 'reset-mid-stream' }
  /** A stream's connection closed (FIN, no last chunk) after half an SSE event. */
  | { readonly kind: 'close-mid-event' };

/** What one request will do: the options with its header overrides applied. */
export interface RequestPlan {
  readonly ttftMs: number;
  readonly tokens: number;
  readonly intervalMs: number;
  /** Delay before the response headers (x-mock-fail: slow-headers:<ms>). */
  readonly headersDelayMs: number;
  readonly failure: MockFailure | undefined;
}

/**
 * The plan for a request. x-mock-fail takes a comma-separated list, e.g.
 * `slow-headers:200,status:503` (`retry-after:<s>` adds a Retry-After
 * header to a status failure, `no-retry` an `x-should-retry: false`, as
 * OpenAI answers a 429 insufficient_quota, `param:<name>` an OpenAI error
 * body naming that request field). Throws on a value it does not understand,
 * so a mistyped test fails loudly instead of passing without the failure.
 */
export function planRequest(options: ResolvedOptions, headers: IncomingHttpHeaders): RequestPlan {
  const ttft = headers['x-mock-ttft-ms'];
  const tokens = headers['x-mock-tokens'];
  const interval = headers['x-mock-interval-ms'];
  const fail = headers['x-mock-fail'];
  if (ttft === undefined && tokens === undefined && interval === undefined && fail === undefined) return defaultPlan(options);
  const { headersDelayMs, failure } = typeof fail === 'string' ? parseFailure(fail) : { headersDelayMs: 0, failure: undefined };
  return {
    ttftMs: ttft === undefined ? options.ttftMs : headerNumber('x-mock-ttft-ms', ttft),
    tokens: tokens === undefined ? options.tokens : headerNumber('x-mock-tokens', tokens),
    intervalMs: interval === undefined ? options.intervalMs : headerNumber('x-mock-interval-ms', interval),
    headersDelayMs,
    failure,
  };
}

/** An x-mock-fail value (also what a process-wide fault injects, see MockFault). */
export function parseFailure(fail: string): { headersDelayMs: number; failure: MockFailure | undefined } {
  let headersDelayMs = 0;
  let failure: MockFailure | undefined;
  let retryAfterSec: number | undefined;
  let noRetry = false;
  let param: string | undefined;
  for (const part of fail.split(',')) {
    const item = part.trim();
    if (item === 'reset-before-headers' || item === 'reset-mid-stream' || item === 'close-mid-event') failure = { kind: item };
    else if (item.startsWith('status:')) failure = { kind: 'status', status: statusCode(item.slice(7)) };
    else if (item.startsWith('slow-headers:')) headersDelayMs = headerNumber('x-mock-fail slow-headers', item.slice(13));
    else if (item.startsWith('retry-after:')) retryAfterSec = headerNumber('x-mock-fail retry-after', item.slice(12));
    else if (item === 'no-retry') noRetry = true;
    else if (item.startsWith('param:') && item.length > 6) param = item.slice(6);
    else throw new RangeError(`x-mock-fail: unknown failure '${item}'`);
  }
  if (retryAfterSec !== undefined) {
    if (failure?.kind !== 'status') throw new RangeError('x-mock-fail: retry-after needs a status failure');
    failure = { ...failure, retryAfterSec };
  }
  if (noRetry) {
    if (failure?.kind !== 'status') throw new RangeError('x-mock-fail: no-retry needs a status failure');
    failure = { ...failure, noRetry };
  }
  if (param !== undefined) {
    if (failure?.kind !== 'status') throw new RangeError('x-mock-fail: param needs a status failure');
    failure = { ...failure, param };
  }
  return { headersDelayMs, failure };
}

/**
 * A process-wide fault (MockProvider.misbehave, POST /mock/fault): every
 * request to `paths` (all API paths when absent) fails as `fail` says, in
 * x-mock-fail syntax, for the next `count` requests and/or `forMs` ms
 * (neither: until cleared). A request's own x-mock-fail still wins.
 */
export interface MockFault {
  readonly fail: string;
  readonly count?: number;
  readonly forMs?: number;
  readonly paths?: readonly string[];
}

/** A fault while it lasts: what it injects, and how much of it is left. */
export class ActiveFault {
  readonly failure: MockFailure | undefined;
  readonly headersDelayMs: number;
  readonly #paths: ReadonlySet<string> | undefined;
  #left: number;
  readonly #untilMs: number;

  constructor(fault: MockFault) {
    ({ failure: this.failure, headersDelayMs: this.headersDelayMs } = parseFailure(fault.fail));
    this.#paths = fault.paths === undefined ? undefined : new Set(fault.paths);
    this.#left = fault.count ?? Infinity;
    this.#untilMs = fault.forMs === undefined ? Infinity : performance.now() + fault.forMs;
  }

  /** Over: its count is spent or its time is up. */
  get over(): boolean {
    return this.#left <= 0 || performance.now() >= this.#untilMs;
  }

  /** The plan for a request to `path` with the fault applied (counting it), or undefined when it does not apply. */
  take(path: string, plan: RequestPlan): RequestPlan | undefined {
    if (this.over || (this.#paths !== undefined && !this.#paths.has(path))) return undefined;
    this.#left--;
    return { ...plan, headersDelayMs: Math.max(plan.headersDelayMs, this.headersDelayMs), failure: this.failure };
  }
}

// The plan without overrides is the same object every time.
const defaultPlans = new WeakMap<ResolvedOptions, RequestPlan>();
function defaultPlan(options: ResolvedOptions): RequestPlan {
  let plan = defaultPlans.get(options);
  if (plan === undefined) {
    plan = { ttftMs: options.ttftMs, tokens: options.tokens, intervalMs: options.intervalMs, headersDelayMs: 0, failure: undefined };
    defaultPlans.set(options, plan);
  }
  return plan;
}

function headerNumber(name: string, value: string | string[]): number {
  const n = Number(Array.isArray(value) ? value[0] : value);
  if (!Number.isFinite(n) || n < 0) throw new RangeError(`${name}: expected a non-negative number, got '${String(value)}'`);
  return n;
}

function statusCode(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 100 || n > 599) throw new RangeError(`x-mock-fail: bad status '${value}'`);
  return n;
}

function nonNegative(name: string, n: number): number {
  if (!Number.isFinite(n) || n < 0) throw new RangeError(`mock provider: ${name} must be a non-negative number, got ${n}`);
  return n;
}

function positive(name: string, n: number): number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`mock provider: ${name} must be a positive integer, got ${n}`);
  return n;
}
