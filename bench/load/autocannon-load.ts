// Closed-loop load with autocannon, the tool users of the gateway reach for:
// `connections` clients, each sending its next request when the previous one
// is answered, as fast as the target allows. Its latency histogram counts
// whole milliseconds, so sub-millisecond latency comparisons use the paced
// client (paced-load.ts) instead.
import autocannon from 'autocannon';
import type { LoadResult } from '../harness/types.js';

export interface ClosedLoopOptions {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly connections: number;
  readonly durationS: number;
}

export async function closedLoop(options: ClosedLoopOptions): Promise<LoadResult> {
  const result = await autocannon({
    url: options.url,
    method: 'POST',
    headers: { ...options.headers, 'content-type': 'application/json' },
    body: options.body,
    connections: options.connections,
    pipelining: 1,
    duration: options.durationS,
    timeout: 30,
  });
  const wallS = result.duration > 0 ? result.duration : options.durationS;
  // autocannon's requests.total counts every answer, 2xx or not: a target that answers 503 fast would look fast.
  // Only 2xx answers count as requests; the rest stay visible as non2xx (and keep the measurement out of every ratio).
  const requests = result['2xx'];
  return {
    wallS,
    requests,
    errors: result.errors,
    non2xx: result.non2xx,
    latencyMs: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
    metrics: { mbPerS: result.throughput.total / wallS / 1e6 },
  };
}
