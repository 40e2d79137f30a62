// The retry before the first response byte, through the real stack: a
// request is tried at most twice (once more on another provider), a node
// that says it is leaving (ERROR node_leaving) hands its request to another
// provider, and x-edge-overhead-ms counts a failed attempt's time (a known,
// injected delay) but never the provider's own time to answer (the mock's
// injected time to first byte).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, describe, test } from 'node:test';
import type { NodeAgent } from '../../src/agent/agent.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { assertOwnStream } from '../helpers/identity.js';
import { inFlight, openExchanges, queueDepth, startRegisteredAgent, testWorkers, waitUntil } from '../helpers/stack.js';
import { FakeNode } from '../workers/grpc/fake-node.js';
import { sample } from '../main/admin/ops-stack.js';
import type { Subscription } from '../../src/main/events/event-bus.js';

const ALIAS = 'llama3';

interface Fleet {
  readonly edge: RunningEdge;
  /** The config the edge started from (YAML-shaped), for refreshes. */
  readonly raw: Record<string, unknown>;
  readonly agents: NodeAgent[];
  close(): Promise<void>;
}

/**
 * An edge whose alias is served by one provider per entry of `urls` (ids in
 * order a, b, c: the scheduler's tie-break tries them in that order), all on
 * node-1 and its one real agent; `fakeNodes` adds node-2.. with one provider
 * each (0-fake-1, ...: sorted before a), for a FakeNode to drive.
 */
async function fleet(urls: string[], fakeNodes = 0, capacity = 4): Promise<Fleet> {
  const ids = urls.map((_, i) => String.fromCharCode(97 + i));
  const fakeIds = Array.from({ length: fakeNodes }, (_, i) => `0-fake-${i + 1}`);
  const raw: Record<string, unknown> = {
    listen: { http: { port: 0 }, grpc: { port: 0 } },
    heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
    workers: { count: testWorkers() },
    nodes: [
      { id: 'node-1', token: 't1', providers: ids.map((id) => ({ id, capacity })) },
      ...fakeIds.map((id, i) => ({ id: `node-${i + 2}`, token: `t${i + 2}`, providers: [{ id, capacity: 4 }] })),
    ],
    models: [{ alias: ALIAS, providers: Object.fromEntries([...fakeIds, ...ids].map((id) => [id, `served-${id}`])) }],
  };
  const edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
  const agent = await startRegisteredAgent({
    edge: { address: `127.0.0.1:${edge.grpcPort}` },
    node: { id: 'node-1', token: 't1' },
    providers: ids.map((id, i) => ({ id, type: 'openai_compat', base_url: urls[i] })),
    reconnect: { initial_ms: 50, max_ms: 200 },
  });
  return {
    edge,
    raw,
    agents: [agent],
    async close(): Promise<void> {
      await agent.stop();
      await edge.close();
    },
  };
}

/** Reads a request, waits `delayMs`, then resets the connection before any response byte. */
async function slowResettingServer(delayMs: number): Promise<{ server: Server; url: string; requests: () => number }> {
  let requests = 0;
  const server = createServer((socket: Socket) => {
    socket.on('error', () => {});
    socket.once('data', () => {
      requests++;
      setTimeout(() => socket.resetAndDestroy(), delayMs);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => requests };
}

function chat(edge: RunningEdge, headers: Record<string, string> = {}, stream = false, signal?: AbortSignal): Promise<Response> {
  return fetch(`${edge.url}/v1/chat/completions`, {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

async function settled(edge: RunningEdge): Promise<void> {
  await waitUntil(() => inFlight(edge) === 0, 'every lease released');
  assert.deepEqual(edge.driver.scheduler.checkInvariants(), []);
  assert.equal(await openExchanges(edge), 0);
}

describe('retry before the first byte', () => {
  const mocks: MockProvider[] = [];
  let current: Fleet | undefined;
  const servers: Server[] = [];
  before(async () => {
    for (let i = 0; i < 3; i++) mocks.push(await startMockProvider({ tokens: 3 }));
  });
  afterEach(async () => {
    await current?.close();
    current = undefined;
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });
  after(async () => {
    for (const mock of mocks) await mock.close();
  });

  test('with three failing providers the client gets the error after exactly two attempts; the third never sees the request', async () => {
    current = await fleet(mocks.map((m) => m.url));
    const seen = mocks.map((m) => m.stats.requests);
    const res = await chat(current.edge, { 'x-mock-fail': 'reset-before-headers', 'x-request-id': 'three-failing' });
    assert.equal(res.status, 502);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'upstream_reset');
    await settled(current.edge);
    assert.deepEqual(
      mocks.map((m, i) => m.stats.requests - seen[i]),
      [1, 1, 0],
      'a tried, then b (retried once), never c',
    );
    assert.deepEqual(mocks.slice(0, 2).map((m) => m.requestLog.at(-1)?.requestId), ['three-failing', 'three-failing']);
    // The body went to a node twice, and the byte counter says so.
    const sent = mocks.slice(0, 2).reduce((sum, m) => sum + (m.requestLog.at(-1)?.body?.length ?? 0), 0);
    assert.equal(sample(await current.edge.scrapeMetrics(), 'edge_tunnel_bytes_total', { direction: 'to_node' }), sent);
  });

  test('a retry is counted only when there was one: with no other provider the failure is the answer, no edge_retries_total, no run.requeued', async () => {
    // One request failing before its first byte on provider a; the bus's event types for it, and the edge's metrics.
    const failOnce = async (urls: string[]): Promise<{ events: string[]; metrics: string }> => {
      current = await fleet(urls);
      const edge = current.edge;
      const events: string[] = [];
      const subscription = edge.events.subscribe({
        readable(sub: Subscription) {
          for (let e = sub.shift(); e !== undefined; e = sub.shift()) events.push(e.event.type);
        },
      });
      try {
        const res = await chat(edge, { 'x-mock-fail': 'reset-before-headers' });
        assert.equal(res.status, 502);
        await res.arrayBuffer();
        await settled(edge);
        await waitUntil(() => events.includes('run.finished'), 'the run to finish');
        return { events, metrics: await edge.scrapeMetrics() };
      } finally {
        edge.events.unsubscribe(subscription);
      }
    };
    const alone = await failOnce([mocks[0].url]);
    assert.equal(alone.events.includes('run.requeued'), false, alone.events.join(' > '));
    assert.equal(sample(alone.metrics, 'edge_retries_total') ?? 0, 0, 'no retry was made, so none is counted');
    await current?.close();
    // Two providers: the one retry there was, counted once, and the run says it went back to the queue.
    const two = await failOnce([mocks[0].url, mocks[1].url]);
    assert.deepEqual(two.events.filter((e) => e === 'run.requeued' || e === 'run.dispatched'), ['run.dispatched', 'run.requeued', 'run.dispatched']);
    assert.equal(sample(two.metrics, 'edge_retries_total', { reason: 'upstream_reset', provider: 'a' }), 1);
  });

  test('a reset before the first byte ends the run provider_failed, with no other provider as after a failed retry', async () => {
    // Before, with no other candidate the run ended `error` (what a dashboard of outcomes does not count as the provider's failure).
    for (const urls of [[mocks[0].url], [mocks[0].url, mocks[1].url]]) {
      current = await fleet(urls);
      const edge = current.edge;
      const res = await chat(edge, { 'x-mock-fail': 'reset-before-headers' });
      assert.equal(res.status, 502);
      await res.arrayBuffer();
      await settled(edge);
      const runId = res.headers.get('x-edge-run-id');
      await waitUntil(() => edge.runs.list({ state: 'finished' }).some((r) => r.id === runId), 'the run to finish');
      const run = edge.runs.list({ state: 'finished' }).find((r) => r.id === runId);
      assert.deepEqual([run?.status, run?.outcome, run?.attempts], [502, 'provider_failed', urls.length], `${urls.length} provider(s)`);
      await current.close();
      current = undefined;
    }
  });

  test('resilience is a live change: a refresh lowering consecutive_failures ejects on the next failure', async () => {
    current = await fleet([mocks[0].url, mocks[1].url]);
    const edge = current.edge;
    const phase = (id: string): string | undefined => edge.driver.status().providers.find((p) => p.id === id)?.outlier?.phase;
    const applied = await edge.refresh({ mode: 'apply', config: { ...current.raw, resilience: { outliers: { consecutive_failures: 1 } } } });
    assert.equal(applied.status, 'applied', applied.reasons.join('\n'));
    assert.deepEqual(applied.changes.map((c) => [c.path, c.mutable]), [['resilience.outliers.consecutive_failures', true]]);
    const res = await chat(edge, { 'x-mock-fail': 'reset-before-headers' });
    await res.arrayBuffer();
    await settled(edge);
    assert.equal(phase('a'), 'ejected', 'one failure is enough now (the default is 5)');
  });

  test('a failure with no other provider to retry on adds no queue wait: its attempt was the provider\'s time', async () => {
    // Before, the attempt (200 ms of the provider's before its reset) was counted as queue wait on top of the grant's,
    // in edge_queue_wait_seconds, run.finished and x-edge-queue-ms, while the run record said 0.
    current = await fleet([mocks[0].url]);
    const edge = current.edge;
    const finished: { queueMs: number; totalMs: number }[] = [];
    const subscription = edge.events.subscribe({
      readable(sub: Subscription) {
        for (let e = sub.shift(); e !== undefined; e = sub.shift()) if (e.event.type === 'run.finished') finished.push(e.event);
      },
    });
    try {
      const res = await chat(edge, { 'x-mock-fail': 'slow-headers:200,reset-before-headers' });
      assert.equal(res.status, 502);
      await res.arrayBuffer();
      await settled(edge);
      await waitUntil(() => finished.length === 1, 'the run to finish');
      const [run] = edge.runs.list({ state: 'finished' });
      assert.ok(run.totalMs !== null && run.totalMs >= 200, `total ${run.totalMs} ms`);
      assert.ok(finished[0].queueMs < 100, `run.finished queueMs ${finished[0].queueMs} of ${finished[0].totalMs} ms`);
      assert.equal(finished[0].queueMs, run.queueMs, 'the event and the record agree');
      assert.ok(Number(res.headers.get('x-edge-queue-ms')) < 100, `x-edge-queue-ms ${res.headers.get('x-edge-queue-ms')}`);
      const queued = sample(await edge.scrapeMetrics(), 'edge_queue_wait_seconds_sum', { model: ALIAS }) as number;
      assert.ok(queued < 0.1, `edge_queue_wait_seconds_sum ${queued}`);
    } finally {
      edge.events.unsubscribe(subscription);
    }
  });

  test('a request a failure sent back to the queue, abandoned there, is counted under the provider its run record names', async () => {
    const resetting = await slowResettingServer(0);
    servers.push(resetting.server);
    current = await fleet([resetting.url, mocks[1].url], 0, 1);
    const edge = current.edge;
    // r1: reset by a, retried on b, which it then holds for 2 s.
    const r1 = new AbortController();
    const first = chat(edge, { 'x-mock-ttft-ms': '2000' }, false, r1.signal).catch((e: unknown) => e);
    await waitUntil(() => edge.runs.list({ state: 'running' }).some((r) => r.provider === 'b' && r.attempts === 2), 'the first request to hold b after its failure on a');
    // r2: reset by a too, then back in the queue behind b; its client gives up there.
    const r2 = new AbortController();
    const second = chat(edge, {}, false, r2.signal).catch((e: unknown) => e);
    await waitUntil(() => resetting.requests() === 2 && queueDepth(edge) === 1, 'the second request to wait in the queue after its failure');
    r2.abort();
    assert.ok((await second) instanceof Error);
    // Only once the edge has seen it leave: before that, b freed by r1 would be granted to it.
    const finished = () => edge.runs.list({ state: 'finished' });
    await waitUntil(() => finished().length === 1, 'the abandoned run to finish');
    assert.deepEqual([finished()[0].provider, finished()[0].status, finished()[0].attempts], ['a', 499, 1], 'the run record names the provider it last went to');
    r1.abort();
    await first;
    await settled(edge);
    const metrics = await edge.scrapeMetrics();
    assert.match(metrics, /^edge_requests_total\{model="llama3",provider="a",status="499"\} 1$/m);
    assert.match(metrics, /^edge_requests_total\{model="llama3",provider="b",status="499"\} 1$/m);
    assert.doesNotMatch(metrics, /^edge_requests_total\{model="llama3",provider="",/m, 'no request of these was refused before a grant');
  });

  test('a node answering ERROR node_leaving hands the request to another provider, invisibly to the client', async () => {
    // 0-fake-1 (on a fake node) sorts before a: the request goes there first.
    current = await fleet([mocks[0].url], 1);
    const leaving = new FakeNode(current.edge.grpcPort);
    try {
      leaving.register('node-2', 't2', ['0-fake-1']);
      await leaving.registered();
      await waitUntil(() => current?.edge.driver.status().providers.find((p) => p.id === '0-fake-1')?.connected === true, 'the fake node provider to be connected');
      const served = mocks[0].stats.completed;
      const response = chat(current.edge, { 'x-request-id': 'leaving-1', 'x-mock-tokens': '5' }, true);
      const tunnel = await leaving.nextTunnel();
      leaving.error(tunnel.tunnelId, 0, 'node_leaving', 'the node is shutting down');
      const res = await response;
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-edge-provider'), 'a');
      assertOwnStream(await res.text(), 'leaving-1', 5);
      assert.equal(mocks[0].stats.completed, served + 1);
      await settled(current.edge);
    } finally {
      leaving.close();
    }
  });

  test('a request retried after its node dropped goes to that node once it is back, not behind the busy other provider', async () => {
    // 0-fake-1 (node-2, a fake node) sorts before a: the request goes there first; a (capacity 1) then
    // holds a long stream. node-2 drops before answering and comes back at once, idle: the retry was
    // kept off the connection that failed it, not off the new one (it would wait for a, past its deadline).
    current = await fleet([mocks[0].url], 1, 1);
    const edge = current.edge;
    const dropped = new FakeNode(edge.grpcPort);
    dropped.register('node-2', 't2', ['0-fake-1']);
    await dropped.registered();
    await waitUntil(() => edge.driver.status().providers.find((p) => p.id === '0-fake-1')?.connected === true, 'the fake node provider to be connected');
    const response = chat(edge, { 'x-request-id': 'back-1', 'x-mock-tokens': '3' }, true);
    await dropped.nextTunnel();
    const busy = new AbortController();
    const holder = chat(edge, { 'x-mock-tokens': '1000', 'x-mock-interval-ms': '50' }, true, busy.signal).then((res) => res.text()).catch((e: unknown) => e);
    await waitUntil(() => edge.runs.list({ state: 'running' }).some((r) => r.provider === 'a'), 'a to hold the long stream');
    dropped.close();
    await waitUntil(() => queueDepth(edge) === 1, 'the retry to wait for a provider');
    const back = new FakeNode(edge.grpcPort);
    try {
      back.register('node-2', 't2', ['0-fake-1']);
      await back.registered();
      const tunnel = await back.nextTunnel();
      assert.equal(tunnel.metadata.request_id, 'back-1');
      back.answer(tunnel.tunnelId, ['{"ok":true}', '[DONE]']);
      const res = await response;
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-edge-provider'), '0-fake-1');
      assert.match(await res.text(), /\[DONE\]/);
      const run = () => edge.runs.list({ state: 'finished' }).find((r) => r.requestId === 'back-1');
      await waitUntil(() => run() !== undefined, 'the run record to finish');
      assert.equal(run()?.attempts, 2);
      busy.abort();
      await holder;
      await settled(edge);
    } finally {
      back.close();
    }
  });

  test('a failed attempt (a known delay) counts as queue wait, never as the edge\'s overhead; the serving provider\'s time (an injected time to first byte) as neither', async () => {
    const FAIL_AFTER_MS = 250;
    const PROVIDER_MS = 400;
    const resetting = await slowResettingServer(FAIL_AFTER_MS);
    servers.push(resetting.server);
    current = await fleet([resetting.url, mocks[1].url]);
    const started = performance.now();
    // a resets after FAIL_AFTER_MS; b sends its headers PROVIDER_MS after the request.
    const res = await chat(current.edge, { 'x-mock-fail': `slow-headers:${PROVIDER_MS}` });
    const headersMs = performance.now() - started;
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-edge-provider'), 'b');
    await res.arrayBuffer();
    assert.equal(resetting.requests(), 1);
    const overhead = Number(res.headers.get('x-edge-overhead-ms'));
    const queued = Number(res.headers.get('x-edge-queue-ms'));
    assert.ok(headersMs >= FAIL_AFTER_MS + PROVIDER_MS, `the client waited ${headersMs} ms`);
    // The failed attempt's FAIL_AFTER_MS was a wait for a provider that could answer; b's PROVIDER_MS is provider time.
    assert.ok(queued >= FAIL_AFTER_MS && queued < FAIL_AFTER_MS + PROVIDER_MS / 2, `x-edge-queue-ms ${queued}, expected ${FAIL_AFTER_MS} plus a little`);
    assert.ok(overhead < FAIL_AFTER_MS / 2, `x-edge-overhead-ms ${overhead}: the edge's own work, not the failed attempt`);
    // The run record and the histograms split it the same way.
    const runId = res.headers.get('x-edge-run-id') ?? '';
    await waitUntil(() => current?.edge.runs.get(runId)?.state === 'finished', 'the run finished');
    const run = current.edge.runs.get(runId);
    assert.ok((run?.queueMs ?? 0) >= FAIL_AFTER_MS, `run record queueMs ${run?.queueMs}`);
    const metrics = await current.edge.scrapeMetrics();
    const overheadSum = sample(metrics, 'edge_gateway_overhead_seconds_sum', { model: ALIAS }) ?? -1;
    const queueSum = sample(metrics, 'edge_queue_wait_seconds_sum', { model: ALIAS }) ?? -1;
    assert.ok(overheadSum >= 0 && overheadSum < FAIL_AFTER_MS / 2000, `edge_gateway_overhead_seconds_sum ${overheadSum}`);
    assert.ok(queueSum >= FAIL_AFTER_MS / 1000, `edge_queue_wait_seconds_sum ${queueSum}`);
    await settled(current.edge);
  });
});
