// /metrics after real traffic (official openai SDK and raw HTTP), the
// x-edge-overhead-ms, x-edge-hop-ms and x-edge-upstream-ms headers, and the request id carried into the agent's logs.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { pino, type Logger } from 'pino';
import { ALIAS, NODE_ID, PROVIDER_ID, queueDepth, sample, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const MODEL = { model: ALIAS };
const SLOT = { provider: PROVIDER_ID, node: NODE_ID };

function memoryLogger(lines: Record<string, unknown>[]): Logger {
  return pino<never>({ level: 'debug' }, { write: (text: string) => void lines.push(JSON.parse(text) as Record<string, unknown>) });
}

function chat(stack: OpsStack, headers: Record<string, string> = {}, stream = false): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

describe('metrics and request ids', () => {
  let stack: OpsStack;
  const agentLogs: Record<string, unknown>[] = [];
  before(async () => {
    stack = await startOpsStack({ capacity: 1, maxQueue: 1, mock: { ttftMs: 5, tokens: 4, intervalMs: 2 }, agentLogger: memoryLogger(agentLogs) });
  });
  after(async () => {
    await stack.close();
  });

  test('proxied responses carry x-edge-overhead-ms: a small non-negative number below the total time', async () => {
    const started = performance.now();
    const res = await chat(stack);
    const totalMs = performance.now() - started;
    await res.text();
    const overhead = Number(res.headers.get('x-edge-overhead-ms'));
    assert.ok(res.headers.has('x-edge-overhead-ms'));
    assert.ok(Number.isFinite(overhead) && overhead >= 0, `overhead ${res.headers.get('x-edge-overhead-ms')}`);
    assert.ok(overhead < totalMs, `overhead ${overhead} ms vs total ${totalMs} ms`);
  });

  test('x-edge-hop-ms and x-edge-upstream-ms split the wait for the provider: its own time, measured on the node, from the hop', async () => {
    // The provider holds its answer 200 ms: that is upstream time, not the hop's.
    const started = performance.now();
    const res = await chat(stack, { 'x-mock-ttft-ms': '200', 'x-mock-tokens': '1' });
    const headMs = performance.now() - started;
    await res.text();
    assert.equal(res.status, 200);
    const hop = Number(res.headers.get('x-edge-hop-ms'));
    const upstream = Number(res.headers.get('x-edge-upstream-ms'));
    const queue = Number(res.headers.get('x-edge-queue-ms'));
    const overhead = Number(res.headers.get('x-edge-overhead-ms'));
    assert.ok(upstream >= 200, `upstream ${res.headers.get('x-edge-upstream-ms')} ms`);
    assert.ok(Number.isFinite(hop) && hop >= 0 && hop < 150, `hop ${res.headers.get('x-edge-hop-ms')} ms`);
    // Queue wait, the edge's own time, the hop and the provider add up to the edge's time to the head, which the client's wait contains.
    assert.ok(queue + overhead + hop + upstream <= headMs + 1, `${queue} + ${overhead} + ${hop} + ${upstream} ms against the client's ${headMs.toFixed(3)} ms`);
    // A stream's head comes before its first token: the provider's time to the head is short.
    const stream = await chat(stack, { 'x-mock-ttft-ms': '200' }, true);
    await stream.text();
    assert.ok(Number(stream.headers.get('x-edge-upstream-ms')) < 200, `stream head upstream ${stream.headers.get('x-edge-upstream-ms')} ms`);
    assert.ok(Number(stream.headers.get('x-edge-hop-ms')) >= 0);
  });

  test('the request id reaches the node and its tunnel logs', async () => {
    const res = await chat(stack, { 'x-request-id': 'req-abc-123' });
    await res.text();
    const runId = res.headers.get('x-edge-run-id');
    await waitUntil(() => agentLogs.some((l) => l.requestId === 'req-abc-123' && l.msg === 'tunnel finished'), 'the agent to log the tunnel');
    const started = agentLogs.find((l) => l.requestId === 'req-abc-123' && l.msg === 'tunnel started');
    assert.equal(started?.runId, runId);
    // Without a client id, the run id is the request id.
    const plain = await chat(stack);
    await plain.text();
    const plainRun = plain.headers.get('x-edge-run-id');
    await waitUntil(() => agentLogs.some((l) => l.runId === plainRun && l.msg === 'tunnel finished'), 'the second tunnel log');
    assert.equal(agentLogs.find((l) => l.runId === plainRun)?.requestId, plainRun);
  });

  test('/metrics after traffic has every series with sane values', async () => {
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'sk-not-checked', maxRetries: 0 });
    const before = await stack.metrics();
    const okBefore = sample(before, 'edge_requests_total', { ...MODEL, provider: PROVIDER_ID, status: '200' }) ?? 0;
    const leanBefore = sample(before, 'edge_http_lean_requests_total') ?? 0;
    await sdk.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'a' }] });
    const stream = await sdk.chat.completions.create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'b' }] });
    for await (const _chunk of stream);

    // One long stream holds the only slot, one request queues behind it, a third finds the queue full.
    const long = await chat(stack, { 'x-mock-tokens': '30', 'x-mock-interval-ms': '20' }, true);
    const queued = chat(stack);
    await waitUntil(() => queueDepth(stack.edge) === 1, 'a queued request');
    const full = await sdk.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'c' }] }).catch((err: unknown) => err);
    assert.ok(full instanceof OpenAI.RateLimitError);
    const during = await stack.metrics();
    assert.equal(sample(during, 'edge_provider_in_flight', SLOT), 1);
    assert.equal(sample(during, 'edge_queue_depth', MODEL), 1);
    assert.equal(sample(during, 'edge_open_requests'), 2);
    await long.text();
    await (await queued).text();
    const unknown = await sdk.chat.completions.create({ model: 'no-such-model', messages: [] }).catch((err: unknown) => err);
    assert.ok(unknown instanceof OpenAI.NotFoundError);

    // With worker threads the release reaches the scheduler just after the client's last byte.
    await waitUntil(() => stack.edge.driver.status().providers.every((p) => p.inFlight === 0), 'every lease released');
    const text = await stack.metrics();
    const ok = (sample(text, 'edge_requests_total', { ...MODEL, provider: PROVIDER_ID, status: '200' }) ?? 0) - okBefore;
    assert.equal(ok, 4, 'sdk chat, sdk stream, long stream, queued request');
    assert.equal(sample(text, 'edge_requests_total', { ...MODEL, provider: '', status: '429' }), 1);
    assert.equal(sample(text, 'edge_rejects_total', { reason: 'queue_full' }), 1);
    assert.equal(sample(text, 'edge_rejects_total', { reason: 'model_not_found' }), 1);
    assert.ok(!text.includes('no-such-model'), 'a client-chosen model name never becomes a label');
    // Six API POSTs since `before`, each a plain head the lean connection reads (one split by the kernel would go to node:http).
    const lean = (sample(text, 'edge_http_lean_requests_total') ?? 0) - leanBefore;
    assert.ok(lean > 0 && lean <= 6, `lean requests ${lean}`);
    assert.ok(sample(text, 'edge_http_lean_handovers_total') !== undefined, 'the hand-over counter is exported');

    const served = sample(text, 'edge_requests_total', { ...MODEL, provider: PROVIDER_ID, status: '200' }) as number;
    const total = { count: sample(text, 'edge_request_duration_seconds_count', MODEL), sum: sample(text, 'edge_request_duration_seconds_sum', MODEL) as number };
    assert.equal(total.count, served, 'one latency sample per served request');
    assert.equal(sample(text, 'edge_time_to_first_byte_seconds_count', MODEL), served);
    assert.equal(sample(text, 'edge_queue_wait_seconds_count', MODEL), served);
    assert.equal(sample(text, 'edge_gateway_overhead_seconds_count', MODEL), served);
    const ttfbSum = sample(text, 'edge_time_to_first_byte_seconds_sum', MODEL) as number;
    const queueSum = sample(text, 'edge_queue_wait_seconds_sum', MODEL) as number;
    const overheadSum = sample(text, 'edge_gateway_overhead_seconds_sum', MODEL) as number;
    assert.ok(total.sum > 0.3, `the long stream alone took > 0.3 s (sum ${total.sum})`);
    assert.ok(ttfbSum > 0 && ttfbSum < total.sum);
    assert.ok(queueSum > 0.1, `the queued request waited for the long stream (queue sum ${queueSum})`);
    assert.ok(overheadSum >= 0 && overheadSum < total.sum - queueSum, `overhead ${overheadSum} s`);
    // Every served request came from an agent that measures the provider's own time.
    assert.equal(sample(text, 'edge_node_hop_seconds_count', MODEL), served);
    assert.equal(sample(text, 'edge_upstream_duration_seconds_count', MODEL), served);
    const upstreamSum = sample(text, 'edge_upstream_duration_seconds_sum', MODEL) as number;
    const hopSum = sample(text, 'edge_node_hop_seconds_sum', MODEL) as number;
    assert.ok(upstreamSum > 0.5, `the long stream's 30 tokens 20 ms apart are the provider's time (upstream sum ${upstreamSum} s)`);
    assert.ok(hopSum >= 0 && hopSum < upstreamSum, `hop sum ${hopSum} s`);
    assert.ok(hopSum + upstreamSum <= total.sum - queueSum, 'hop + upstream fit in the provider time, which fits in the total');
    assert.equal(sample(text, 'edge_request_duration_seconds_bucket', { ...MODEL, le: '+Inf' }), served);

    assert.equal(sample(text, 'edge_queue_depth', MODEL), 0);
    assert.equal(sample(text, 'edge_queue_max', MODEL), 1);
    assert.equal(sample(text, 'edge_provider_in_flight', SLOT), 0);
    assert.equal(sample(text, 'edge_provider_capacity', SLOT), 1);
    assert.equal(sample(text, 'edge_provider_available', SLOT), 1);
    assert.equal(sample(text, 'edge_nodes_connected'), 1);
    assert.equal(sample(text, 'edge_open_requests'), 0);
    assert.ok((sample(text, 'edge_tunnel_bytes_total', { direction: 'to_client' }) ?? 0) > 1_000);
    assert.ok((sample(text, 'edge_tunnel_bytes_total', { direction: 'to_node' }) ?? 0) > 100);
    // Usage comes from the final SSE chunk of each stream; the long one alone reported 30 completion tokens.
    assert.ok((sample(text, 'edge_stream_tokens_total', { ...MODEL, kind: 'completion' }) ?? 0) >= 30);
    assert.ok((sample(text, 'edge_stream_tokens_total', { ...MODEL, kind: 'prompt' }) ?? 0) > 0);
    const workers = Number(process.env.EDGE_TEST_WORKERS ?? 0);
    assert.equal(sample(text, 'edge_workers'), workers);
    const occupancy = sample(text, 'edge_worker_ring_occupancy_ratio') ?? -1;
    assert.ok(workers === 0 ? occupancy === 0 : occupancy >= 0 && occupancy < 1, `ring occupancy ${occupancy}`);
    assert.equal(sample(text, 'edge_config_version'), 1);
    assert.equal(sample(text, 'edge_shutting_down'), 0);
    const lag = sample(text, 'nodejs_eventloop_lag_p99_seconds');
    assert.ok(lag !== undefined && lag >= 0 && lag < 1, `event-loop lag p99 ${lag}`);
    assert.ok((sample(text, 'process_resident_memory_bytes') ?? 0) > 0);
    assert.ok(sample(text, 'process_cpu_user_seconds_total') !== undefined);
    // A running total is a counter (rate() over a gauge would not see a restart).
    assert.match(text, /^# TYPE edge_main_thread_cpu_seconds_total counter$/m);
    assert.ok((sample(text, 'edge_main_thread_cpu_seconds_total') ?? 0) > 0);
  });

  test('a provider error that ended with END is timed in the upstream, hop and overhead histograms too', async () => {
    const count = async (name: string): Promise<number> => sample(await stack.metrics(), name, MODEL) ?? 0;
    const before = { upstream: await count('edge_upstream_duration_seconds_count'), overhead: await count('edge_gateway_overhead_seconds_count') };
    const upstreamSum = sample(await stack.metrics(), 'edge_upstream_duration_seconds_sum', MODEL) ?? 0;
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-fail': 'slow-headers:300,status:500' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'slow failure' }] }),
    });
    assert.equal(res.status, 500);
    await res.text();
    await waitUntil(() => stack.edge.driver.status().providers.every((p) => p.inFlight === 0), 'the lease released');
    // A slow failing provider is what an operator must tell apart from a slow edge.
    assert.equal((await count('edge_upstream_duration_seconds_count')) - before.upstream, 1);
    assert.equal((await count('edge_gateway_overhead_seconds_count')) - before.overhead, 1);
    assert.ok((sample(await stack.metrics(), 'edge_upstream_duration_seconds_sum', MODEL) ?? 0) - upstreamSum >= 0.29, 'its 300 ms are the provider\'s');
  });
});
