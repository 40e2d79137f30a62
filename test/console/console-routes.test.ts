// The console's server side without a browser: which admin routes are
// public (the page and its files) and which need the token, the try-it
// proxy taking the client listener's own admission path (client auth
// included), and the 15-minute series' arithmetic.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { EdgeSeries, quantileMs, readingOf } from '../../src/main/admin/series.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { GroupStatus } from '../../src/contract/scheduler.js';
import { ALIAS, edgeConfigObject, queueDepth } from '../helpers/stack.js';

const TOKEN = 'routes-admin-token';
const CLIENT_KEY = 'sk-console-client';

describe('console routes on the admin listener', () => {
  let edge: RunningEdge;
  let admin: string;

  before(async () => {
    const raw = edgeConfigObject();
    raw.admin = { host: '127.0.0.1', port: 0, token: TOKEN };
    raw.auth = { api_keys: [{ name: 'console', key_sha256: createHash('sha256').update(CLIENT_KEY).digest('hex') }] };
    edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger(), admin: true });
    admin = edge.adminUrl as string;
  });

  after(async () => {
    await edge?.close();
  });

  test("the console's readings leave /metrics' event-loop lag whole: a stall a tick saw is still in the next scrape", async () => {
    // The edge runs on this thread: stall it, let the lag monitor see it, then the console's tick, then a scrape.
    const until = performance.now() + 300;
    while (performance.now() < until) {
      // busy
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    await (edge as unknown as { series?: EdgeSeries }).series?.tick();
    const text = await (await fetch(`${admin}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    const max = Number(/^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1]);
    assert.ok(max >= 0.25, `nodejs_eventloop_lag_max_seconds ${max} after a 300 ms stall`);
  });

  test('the page and its files need no token and carry a strict CSP; data routes do', async () => {
    const root = await fetch(`${admin}/`, { redirect: 'manual' });
    assert.equal(root.status, 302);
    assert.equal(root.headers.get('location'), '/console');
    const page = await fetch(`${admin}/console`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    assert.match(await page.text(), /<meta name="edge-admin-auth" content="token">/, 'the page asks for the token (console-routes.ts)');
    const script = await fetch(`${admin}/console/app.js`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type') ?? '', /^text\/javascript/);
    assert.equal((await fetch(`${admin}/console/..%2Fpackage.json`)).status, 401, 'anything but an asset name needs the token');
    assert.equal((await fetch(`${admin}/console/nothing.js`)).status, 404);
    assert.equal((await fetch(`${admin}/admin/series`)).status, 401);
    assert.equal((await fetch(`${admin}/admin/try`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status, 401);
    const series = await fetch(`${admin}/admin/series`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(series.status, 200);
    const asked = Date.now();
    const body = (await series.json()) as { intervalMs: number; now: number; points: unknown[] };
    assert.equal(body.intervalMs, 5_000);
    assert.ok(Math.abs(body.now - asked) < 5_000, `the edge's clock comes with the points: ${body.now} vs ${asked}`);
    assert.ok(Array.isArray(body.points));
  });

  test('try-it goes through the client listener: its auth applies, errors come in the API format', async () => {
    // No node on this edge: past client auth, admission answers (model unknown, or no provider in time).
    const send = (headers: Record<string, string>, model = ALIAS): Promise<Response> =>
      fetch(`${admin}/admin/try`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
    const noKey = await send({});
    assert.equal(noKey.status, 401);
    assert.equal(((await noKey.json()) as { error: { code: string } }).error.code, 'invalid_api_key');
    // Not the admin's own refusal: the page must not take it for a rejected admin token.
    assert.doesNotMatch(noKey.headers.get('www-authenticate') ?? '', /edge-admin/);
    const unknown = await send({ 'x-edge-client-key': CLIENT_KEY }, 'no-such-model');
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as { error: { code: string } }).error.code, 'model_not_found');
    // The body's bytes go as typed, not parsed and written again: a duplicated model is refused as on /v1 (a
    // re-serialised body kept the last one, and would also turn 9007199254740993 into ...992 and 1e400 into null).
    const duplicated = await fetch(`${admin}/admin/try`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'x-edge-client-key': CLIENT_KEY },
      body: `{"model":"${ALIAS}","model":"no-such-model","seed":9007199254740993,"messages":[]}`,
    });
    assert.equal(duplicated.status, 400, await duplicated.clone().text());
    assert.equal(((await duplicated.json()) as { error: { code: string } }).error.code, 'invalid_json');
    const empty = await fetch(`${admin}/admin/try`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: '' });
    assert.equal(empty.status, 400);
  });

  test('Stop while the request still waits in the queue takes it out of the queue', async () => {
    const queued = (): number => queueDepth(edge);
    const stop = new AbortController();
    const answer = fetch(`${admin}/admin/try`, {
      method: 'POST',
      signal: stop.signal,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'x-edge-client-key': CLIENT_KEY },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    }).catch((err: Error) => err.name);
    // No node serves the alias: the request waits for a provider.
    for (let i = 0; queued() !== 1; i++) {
      assert.ok(i < 200, 'the request never queued');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    stop.abort();
    assert.equal(await answer, 'AbortError');
    for (let i = 0; queued() !== 0; i++) {
      assert.ok(i < 100, `still queued 1 s after Stop (depth ${queued()})`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  });
});

describe('the 15-minute series', () => {
  const buckets = (pairs: [number, number][]): Map<number, number> => new Map(pairs);

  test('quantiles interpolate inside the bucket between two readings', () => {
    const before = buckets([[0.01, 0], [0.1, 0], [1, 0], [Infinity, 0]]);
    const afterReading = buckets([[0.01, 0], [0.1, 100], [1, 100], [Infinity, 100]]);
    // 100 observations all in (10 ms, 100 ms]: p50 at the middle, p95 near the top.
    assert.equal(Math.round(quantileMs(before, afterReading, 0.5) ?? 0), 55);
    assert.equal(Math.round(quantileMs(before, afterReading, 0.95) ?? 0), 96);
    assert.equal(quantileMs(afterReading, afterReading, 0.5), null, 'nothing new observed');
  });

  test('a tick turns cumulative counters into req/s and per-interval quantiles; rejects per minute per alias', async () => {
    let requests = 0;
    let fast = 0;
    let rejected = 0;
    const histogram = (name: string, count: number): unknown => ({
      name,
      values: [
        { metricName: `${name}_bucket`, labels: { le: 0.05, model: 'a' }, value: count },
        { metricName: `${name}_bucket`, labels: { le: '+Inf', model: 'a' }, value: count },
        { metricName: `${name}_count`, labels: { model: 'a' }, value: count },
      ],
    });
    const series = new EdgeSeries({
      metricsParts: async () => [
        [{ name: 'edge_requests_total', values: [{ value: requests, labels: { model: 'a', status: '200' } }] }, histogram('edge_time_to_first_byte_seconds', fast)],
        [histogram('edge_queue_wait_seconds', fast)],
      ],
      groups: (): GroupStatus[] => [{ alias: 'a', queueDepth: 0, maxQueue: 1, queueTimeoutMs: 1, oldestWaitMs: 0, rejectedTotal: rejected }],
    });
    await series.tick(1_000_000);
    assert.equal(series.points.length, 0, 'the first reading is the baseline');
    requests = 50;
    fast = 50;
    rejected = 3;
    await series.tick(1_005_000);
    assert.equal(series.points.length, 1);
    const p = series.points[0];
    assert.equal(p.reqPerSec, 10);
    assert.equal(p.ttfbP50Ms, 25);
    assert.equal(p.queueP95Ms, 47.5);
    assert.equal(series.rejectsPerMinute('a', 3, 1_005_000), 3);
    assert.equal(readingOf([]).requests, 0);
  });
});

describe('console routes with the client listener on IPv6', () => {
  test('try-it reaches a client listener bound to ::1 (its URL has the address in brackets)', async (t) => {
    const raw = edgeConfigObject();
    (raw.listen as { http: { host: string } }).http.host = '::1';
    raw.admin = { host: '127.0.0.1', port: 0, token: TOKEN };
    let edge: RunningEdge;
    try {
      edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger(), admin: true });
    } catch (err) {
      // A host without IPv6 loopback cannot run this.
      if ((err as NodeJS.ErrnoException).code === 'EADDRNOTAVAIL' || (err as NodeJS.ErrnoException).code === 'EAFNOSUPPORT') return t.skip('no IPv6 loopback here');
      throw err;
    }
    try {
      assert.match(edge.url, /^http:\/\/\[::1\]:\d+$/);
      const res = await fetch(`${edge.adminUrl}/admin/try`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(res.status, 404, await res.clone().text());
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'model_not_found');
      // A relayed answer is never sniffed into a page (a provider picks its content type).
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    } finally {
      await edge.close();
    }
  });
});
