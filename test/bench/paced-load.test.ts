// The paced (open-loop) client against a real HTTP server on loopback: a
// request it sheds because too many are unanswered is the slowest of the run,
// so it must count against the measurement (an error: the run is flagged and
// kept out of every figure) rather than vanish from the percentiles, which
// would then describe only the requests that were answered fast
// (coordinated omission).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { Measurement } from '../../bench/harness/types.js';
import { pacedLoad } from '../../bench/load/paced-load.js';
import { FigureReader, summarize } from '../../bench/report/summary.js';

function measurement(target: string, load: Awaited<ReturnType<typeof pacedLoad>>): Measurement {
  return { ...load, scenario: 'open-loop', variant: 'rate-100', target, rep: 0, rps: load.requests / load.wallS, processes: [], edgeLagP99Ms: null, loadgenCpuS: 0 };
}

test('the paced client counts a shed request as an error, and the headline withholds a latency built on it', { timeout: 30_000 }, async () => {
  // Each answer takes 300 ms: with at most 2 requests in flight, those due meanwhile are shed.
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => setTimeout(() => res.end('{}'), 300));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const slow = await pacedLoad({ origin, path: '/', headers: {}, body: Buffer.from('{}'), rate: 100, durationS: 0.2, maxInFlight: 2 });
    assert.ok(slow.metrics.shed > 0, `requests shed: ${slow.metrics.shed}`);
    assert.equal(slow.requests + slow.errors + slow.non2xx, 20, 'every scheduled request is an answer or an error');
    assert.ok(slow.errors >= slow.metrics.shed, `shed ${slow.metrics.shed}, errors ${slow.errors}`);

    const direct: Measurement = measurement('direct', { wallS: 0.2, requests: 20, errors: 0, non2xx: 0, latencyMs: { p50: 0.3, p90: 0.4, p99: 0.5, max: 1 }, metrics: { shed: 0 } });
    const f = new FigureReader(summarize([measurement('edge-w0', slow), direct]));
    const added = f.diff(f.get('open-loop', 'rate-100', 'edge-w0', 'p50'), f.get('open-loop', 'rate-100', 'direct', 'p50'));
    assert.equal(added.value, undefined, `added p50 quoted from the answered requests alone: ${added.value}`);
    assert.match(added.withheld ?? '', /edge-w0: \d+ errors/);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
