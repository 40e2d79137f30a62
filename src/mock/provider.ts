// A mock OpenAI-compatible provider for tests, the demo and benchmarks.
// Raw node:http (no framework, keep-alive) so that it is never the
// bottleneck of a benchmark. Endpoints:
//   POST /v1/chat/completions, POST /v1/completions  (stream or not)
//   POST /v1/embeddings, GET /v1/models
//   POST /v1/messages (stream or not), POST /v1/messages/count_tokens  (Anthropic)
//   POST /v1/responses (stream or not), GET / DELETE /v1/responses/{id},
//   POST …/{id}/cancel, GET …/{id}/input_items  (OpenAI Responses; responses
//   are stored, and previous_response_id must name one)
//   GET /mock/stats (counters as JSON), POST /mock/reset (zero them),
//   GET /mock/log (the request log's identities and outcomes, oldest first)
// Every completion chunk (and a whole body) carries a top-level `mock` field
// naming its request: {"request": log id, "request_id": the x-request-id or
// mock-<id>, "tokens": planned count, "seq": event index (streams only)}.
// Per-request overrides: x-mock-ttft-ms, x-mock-tokens, x-mock-interval-ms,
// x-mock-fail (status:<code> | reset-before-headers | reset-mid-stream |
// close-mid-event (a stream's connection closed inside an event) |
// slow-headers:<ms>, retry-after:<s>, no-retry, param:<name>, comma-separated),
// x-mock-tool-arguments (percent-encoded JSON: a tool call's arguments).
// A chat, Messages or Responses request with a non-empty `tools` array is
// answered with a call to its first tool, streamed in each API's format
// (tool-calls.ts), unless it ends with a tool result. A process-wide fault
// (misbehave(), POST /mock/fault with {fail, count, for_ms, paths}, DELETE
// /mock/fault) makes requests fail without headers: a chaos test's flaps.
// GET /api/tags (the ollama health probe's path) answers as /v1/models does.
// A non-streaming completion is answered after ttft + interval * (tokens - 1),
// when a streaming one would have finished; embeddings after ttft.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Exchange, type Route } from './exchange.js';
import { ActiveFault, planRequest, resolveOptions, type MockFault, type MockProviderOptions, type RequestPlan, type ResolvedOptions } from './options.js';
import { errorBody } from './responses.js';
import { MockState, type LastRequest, type MockEvent, type MockRequestRecord, type MockStats, type MutableRecord } from './state.js';
import { urlHost } from '../shared/url-host.js';

/** Capped by net.core.somaxconn. */
const LISTEN_BACKLOG = 4096;

export type { MockFault, MockProviderOptions } from './options.js';
export type { EmitTime, LastRequest, MockEvent, MockRequestRecord, MockStats } from './state.js';

export interface MockProvider {
  /** Origin, e.g. http://127.0.0.1:9000 (what a node agent's base_url takes). */
  readonly url: string;
  /** url + '/v1' (what the OpenAI SDK's baseURL takes). */
  readonly baseURL: string;
  readonly port: number;
  readonly stats: MockStats;
  /** The last logLimit requests, oldest first; entries update live while a response runs. */
  readonly requestLog: readonly MockRequestRecord[];
  /** Headers and body of the last request to `path` (e.g. '/v1/chat/completions'). */
  lastRequest(path: string): LastRequest | undefined;
  /** Resolves once predicate() holds (checked on every event and every 10 ms); rejects after timeoutMs. */
  waitFor(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  /** Zeroes the counters and empties the log. */
  resetStats(): void;
  /** Every matching request fails as `fault` says until it is spent or cleared (see MockFault). */
  misbehave(fault: MockFault): void;
  /** Clears the process-wide fault. */
  behave(): void;
  /** 'request': body read; 'complete': response written; 'abort': peer closed early; 'fail': failure injected. */
  on(event: MockEvent, listener: (record: MockRequestRecord) => void): this;
  once(event: MockEvent, listener: (record: MockRequestRecord) => void): this;
  off(event: MockEvent, listener: (record: MockRequestRecord) => void): this;
  /** Stops listening and ends every open connection. */
  close(): Promise<void>;
}

const ROUTES: ReadonlyMap<string, readonly [method: string, route: Route]> = new Map([
  ['/v1/chat/completions', ['POST', 'chat']],
  ['/v1/completions', ['POST', 'text']],
  ['/v1/embeddings', ['POST', 'embeddings']],
  ['/v1/models', ['GET', 'models']],
  ['/api/tags', ['GET', 'models']],
  ['/v1/messages', ['POST', 'messages']],
  ['/v1/messages/count_tokens', ['POST', 'count_tokens']],
  ['/v1/responses', ['POST', 'responses']],
]);

/** GET or DELETE /v1/responses/{id}, POST /v1/responses/{id}/cancel, GET /v1/responses/{id}/input_items. */
function storedResponseRoute(path: string, method: string | undefined): readonly [string, Route] | undefined {
  if (!path.startsWith('/v1/responses/') || path.length === '/v1/responses/'.length) return undefined;
  const rest = path.slice('/v1/responses/'.length);
  const slash = rest.indexOf('/');
  if (slash > 0) {
    const action = rest.slice(slash + 1);
    if (action === 'cancel') return ['POST', 'response_cancel'];
    if (action === 'input_items') return ['GET', 'response_input_items'];
    return undefined;
  }
  return method === 'DELETE' ? ['DELETE', 'response_delete'] : ['GET', 'response_get'];
}

export async function startMockProvider(opts: MockProviderOptions = {}): Promise<MockProvider> {
  const provider = new MockProviderServer(resolveOptions(opts));
  await provider.listen();
  return provider;
}

class MockProviderServer extends MockState implements MockProvider {
  readonly #options: ResolvedOptions;
  readonly #server: Server;
  #port = 0;
  #fault: ActiveFault | undefined;

  constructor(options: ResolvedOptions) {
    super(options.logLimit, options.bodyLogLimit, options.recordEmitTimes);
    this.#options = options;
    this.#server = createServer({ keepAliveTimeout: 30_000, noDelay: true, maxHeaderSize: options.maxHeaderBytes }, (req, res) => this.#handle(req, res));
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `http://${urlHost(this.#options.host)}:${this.#port}`;
  }

  get baseURL(): string {
    return `${this.url}/v1`;
  }

  async listen(): Promise<void> {
    const server = this.#server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      // A deep accept queue: benchmarks open 1,000 streams a second through it, and
      // Node's default (511) overflows under load, turning into connect timeouts.
      server.listen({ port: this.#options.port, host: this.#options.host, backlog: LISTEN_BACKLOG }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.#port = (server.address() as AddressInfo).port;
  }

  lastRequest(path: string): LastRequest | undefined {
    return this.lastRequests.get(path);
  }

  resetStats(): void {
    this.reset();
  }

  misbehave(fault: MockFault): void {
    this.#fault = new ActiveFault(fault);
  }

  behave(): void {
    this.#fault = undefined;
  }

  waitFor(predicate: () => boolean, timeoutMs = 5_000): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (!predicate()) return;
        cleanup();
        resolve();
      };
      const poll = setInterval(check, 10);
      const timeout = setTimeout(() => {
        cleanup();
        reject(new Error(`mock provider: condition not met within ${timeoutMs} ms (stats ${JSON.stringify(this.stats)})`));
      }, timeoutMs);
      const events: MockEvent[] = ['request', 'complete', 'abort', 'fail'];
      const cleanup = (): void => {
        clearInterval(poll);
        clearTimeout(timeout);
        for (const event of events) this.off(event, check);
      };
      for (const event of events) this.on(event, check);
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    await closed;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (path.startsWith('/mock/')) {
      this.#handleControl(req, res, path);
      return;
    }
    const record = this.open(req.method ?? 'GET', path, req.headers);
    const entry = ROUTES.get(path) ?? storedResponseRoute(path, req.method);
    let plan: RequestPlan | undefined;
    let problem: [number, string] | undefined;
    if (entry === undefined) problem = [404, errorBody(`Unknown request URL: ${req.method} ${path}`, 'invalid_request_error', 'unknown_url')];
    else if (entry[0] !== req.method) problem = [405, errorBody(`Method ${req.method} not allowed on ${path}`, 'invalid_request_error', 'method_not_allowed')];
    else {
      try {
        plan = planRequest(this.#options, req.headers);
        const fault = this.#fault;
        if (fault !== undefined && plan.failure === undefined) {
          plan = fault.take(path, plan) ?? plan;
          if (fault.over) this.#fault = undefined;
        }
      } catch (err) {
        problem = [400, errorBody((err as Error).message, 'invalid_request_error', 'invalid_mock_header')];
      }
    }
    if (problem !== undefined || plan === undefined || entry === undefined) {
      this.#answerDirectly(req, res, record, problem ?? [500, errorBody('mock: no plan', 'server_error', null)]);
      return;
    }
    new Exchange(this, this.#options, req, res, record, entry[1], plan);
  }

  /** Errors found from the request line and headers alone. */
  #answerDirectly(req: IncomingMessage, res: ServerResponse, record: MutableRecord, [status, body]: [number, string]): void {
    req.resume();
    record.status = status;
    res.writeHead(status, ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body))]);
    res.end(body);
    record.completed = true;
    record.endedAtMs = performance.now();
    this.stats.completed++;
    this.stats.inFlight--;
    this.emit('complete', record);
  }

  #handleControl(req: IncomingMessage, res: ServerResponse, path: string): void {
    if (path === '/mock/fault' && req.method === 'POST') {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => this.#setFault(res, Buffer.concat(chunks).toString('utf8')));
      return;
    }
    req.resume();
    if (path === '/mock/fault' && req.method === 'DELETE') {
      this.behave();
      res.writeHead(204);
      res.end();
      return;
    }
    let status = 200;
    let body: string;
    if (path === '/mock/stats' && req.method === 'GET') body = JSON.stringify({ ...this.stats, logSize: this.requestLog.length });
    else if (path === '/mock/log' && req.method === 'GET') body = JSON.stringify(this.requestLog.map(logEntry));
    else if (path === '/mock/reset' && req.method === 'POST') {
      this.reset();
      body = JSON.stringify({ ...this.stats, logSize: 0 });
    } else {
      status = 404;
      body = errorBody(`Unknown mock control URL: ${req.method} ${path}`, 'invalid_request_error', 'unknown_url');
    }
    sendControl(res, status, body);
  }

  /** POST /mock/fault: {fail, count?, for_ms?, paths?}. */
  #setFault(res: ServerResponse, text: string): void {
    try {
      const raw = JSON.parse(text) as { fail?: unknown; count?: unknown; for_ms?: unknown; paths?: unknown };
      if (typeof raw.fail !== 'string') throw new RangeError('fail: expected an x-mock-fail string');
      this.misbehave({
        fail: raw.fail,
        ...(typeof raw.count === 'number' ? { count: raw.count } : {}),
        ...(typeof raw.for_ms === 'number' ? { forMs: raw.for_ms } : {}),
        ...(Array.isArray(raw.paths) ? { paths: raw.paths.map(String) } : {}),
      });
      sendControl(res, 200, JSON.stringify({ fault: raw }));
    } catch (err) {
      sendControl(res, 400, errorBody((err as Error).message, 'invalid_request_error', 'invalid_mock_fault'));
    }
  }
}

function sendControl(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body))]);
  res.end(body);
}

/** A request log entry as GET /mock/log returns it (no headers, no body: small for a 1,000-entry log). */
export interface MockLogEntry {
  readonly id: number;
  readonly requestId: string;
  readonly tokens: number;
  readonly stream: boolean;
  readonly status: number | null;
  readonly failure: string | null;
  readonly completed: boolean;
  readonly aborted: boolean;
}

function logEntry(r: MockRequestRecord): MockLogEntry {
  return { id: r.id, requestId: r.requestId, tokens: r.tokens, stream: r.stream, status: r.status ?? null, failure: r.failure ?? null, completed: r.completed, aborted: r.aborted };
}
