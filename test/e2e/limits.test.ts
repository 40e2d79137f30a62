// Limits through the real stack, each with a clear OpenAI-format error:
// header size (431), JSON depth (400), time to first byte / idle / total
// (504 before headers, an SSE error event after; CANCEL reaches the
// provider every time) and max tunnels per node (503 node_overloaded).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { after, describe, test } from 'node:test';
import { pino } from 'pino';
import { Agent, fetch as undiciFetch } from 'undici';
import { ALIAS, inFlight, PROVIDER_ID, startStack, testWorkers, waitFor, waitUntil, type Stack, type StackOptions } from '../helpers/stack.js';
import { sample } from '../main/admin/ops-stack.js';

const stacks: Stack[] = [];
async function stackWith(limits: Record<string, number>, options: StackOptions = {}): Promise<Stack> {
  const stack = await startStack({
    mock: { ttftMs: 0, tokens: 3, intervalMs: 1 },
    ...options,
    configure(raw) {
      raw.limits = { ...(raw.limits as Record<string, unknown>), ...limits };
    },
  });
  stacks.push(stack);
  return stack;
}
after(async () => {
  await Promise.all(stacks.map((s) => s.close()));
});

function chat(stack: Stack, body: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }], ...body }),
  });
}

async function errorOf(res: Response): Promise<{ status: number; code: string }> {
  const body = (await res.json()) as { error: { code: string; message: string; type: string } };
  assert.equal(typeof body.error.message, 'string');
  return { status: res.status, code: body.error.code };
}

/** The error event an SSE stream ended with (the last `data:` line). */
async function sseError(res: Response): Promise<string> {
  const text = await res.text();
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  const last = JSON.parse(events.at(-1)?.slice(6) ?? 'null') as { error?: { code: string } } | null;
  return last?.error?.code ?? `no error event in ${JSON.stringify(text.slice(-200))}`;
}

async function settled(stack: Stack, abortedBefore: number): Promise<void> {
  await waitUntil(() => inFlight(stack.edge) === 0, 'the lease to be released');
  await stack.mock.waitFor(() => stack.mock.stats.aborted > abortedBefore && stack.mock.stats.inFlight === 0, 3_000);
  assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
}

describe('request limits', () => {
  test('an oversized request head gets 431 request_headers_too_large in OpenAI format, and the edge keeps serving', async () => {
    const stack = await stackWith({ max_header_bytes: 2048 });
    const status = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'x-junk': 'a'.repeat(4096) } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end('{}');
    });
    assert.equal(status.status, 431);
    assert.equal((JSON.parse(status.body) as { error: { code: string } }).error.code, 'request_headers_too_large');
    const ok = await chat(stack, {}, { 'x-fine': 'a'.repeat(512) });
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
  });

  test('a request whose body does not all come within request_timeout_ms gets 408 request_timeout, on the lean path and through node:http', async () => {
    const stack = await stackWith({ request_timeout_ms: 500 });
    const url = new URL(stack.baseURL);
    /** Sends the head and part of the body, never the rest; resolves with what the edge answered once it closed. */
    const stall = async (framing: string, partial: string, path = '/v1/chat/completions'): Promise<{ text: string; afterMs: number }> => {
      const socket = connect(Number(url.port), url.hostname);
      await once(socket, 'connect');
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      const started = Date.now();
      socket.write(`POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n${framing}\r\n${partial}`);
      await once(socket, 'close');
      return { text, afterMs: Date.now() - started };
    };
    // Content-Length: read by the lean connection; chunked: handed to node:http (its requestTimeout).
    const [lean, chunked, anthropic, anthropicChunked] = await Promise.all([
      stall('Content-Length: 100\r\n', '{"model":'),
      stall('Transfer-Encoding: chunked\r\n', '9\r\n{"model":\r\n'),
      stall('Content-Length: 100\r\n', '{"model":', '/v1/messages'),
      stall('Transfer-Encoding: chunked\r\n', '9\r\n{"model":\r\n', '/v1/messages'),
    ]);
    for (const [path, answer] of [['lean', lean], ['node:http', chunked]] as const) {
      assert.match(answer.text, /^HTTP\/1\.1 408 /, `${path}: ${answer.text}`);
      assert.equal((JSON.parse(answer.text.split('\r\n\r\n')[1]) as { error: { code: string } }).error.code, 'request_timeout', path);
      assert.ok(answer.afterMs >= 500 && answer.afterMs < 5_000, `${path}: answered ${answer.afterMs} ms after the head`);
    }
    // Once the head was read its path is known, on the lean path and through node:http: an Anthropic client's 408 is in Anthropic's shape.
    for (const [path, answer] of [['lean', anthropic], ['node:http', anthropicChunked]] as const) {
      assert.match(answer.text, /^HTTP\/1\.1 408 /, `${path}: ${answer.text}`);
      const anthropicBody = JSON.parse(answer.text.split('\r\n\r\n')[1]) as { type: string; error: { type: string; message: string } };
      assert.equal(anthropicBody.type, 'error', `${path}: ${answer.text}`);
      assert.equal(anthropicBody.error.type, 'timeout_error');
      assert.match(anthropicBody.error.message, /request_timeout/);
    }
    // A request that arrives whole is served as before, and nothing was dispatched for the stalled ones.
    const ok = await chat(stack);
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
    assert.equal(stack.mock.requestLog.filter((r) => r.path === '/v1/chat/completions').length, 1);
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease to be released');
  });

  test('JSON nested deeper than max_json_depth gets 400 json_too_deep; at the limit it passes', async () => {
    const stack = await stackWith({ max_json_depth: 8 });
    const nest = (levels: number): unknown => (levels === 0 ? 1 : [nest(levels - 1)]);
    // The request object itself is level 1.
    assert.deepEqual(await errorOf(await chat(stack, { extra: nest(8) })), { status: 400, code: 'json_too_deep' });
    const ok = await chat(stack, { extra: nest(7) });
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
  });
});

describe('tunnel timeouts fire in every phase and cancel upstream', () => {
  test('no response headers within ttfb_timeout_ms: 504 first_byte_timeout, CANCEL reaches the provider', async () => {
    const stack = await stackWith({ ttfb_timeout_ms: 150 });
    const aborted = stack.mock.stats.aborted;
    const started = performance.now();
    const res = await chat(stack, {}, { 'x-mock-fail': 'slow-headers:5000' });
    assert.deepEqual(await errorOf(res), { status: 504, code: 'first_byte_timeout' });
    assert.ok(performance.now() - started < 2_000);
    await settled(stack, aborted);
  });

  test('a silence mid-stream longer than idle_timeout_ms ends the stream with an idle_timeout event', async () => {
    const stack = await stackWith({ idle_timeout_ms: 200 });
    const aborted = stack.mock.stats.aborted;
    const res = await chat(stack, { stream: true }, { 'x-mock-tokens': '5', 'x-mock-interval-ms': '2000' });
    assert.equal(res.status, 200);
    assert.equal(await sseError(res), 'idle_timeout');
    await settled(stack, aborted);
  });

  test('a stream that keeps sending is not cut by the idle timeout, however long it runs', async () => {
    const stack = await stackWith({ idle_timeout_ms: 250, ttfb_timeout_ms: 250 });
    const res = await chat(stack, { stream: true }, { 'x-mock-tokens': '12', 'x-mock-interval-ms': '60' });
    const text = await res.text();
    assert.equal(res.status, 200);
    assert.ok(text.includes('data: [DONE]'), 'complete stream');
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released (with workers the release record trails the response)');
  });

  test('the total tunnel timeout fires while waiting for headers (504 gateway_timeout) and mid-stream (error event)', async () => {
    const stack = await stackWith({ tunnel_timeout_ms: 300, ttfb_timeout_ms: 0, idle_timeout_ms: 0 });
    let aborted = stack.mock.stats.aborted;
    assert.deepEqual(await errorOf(await chat(stack, {}, { 'x-mock-fail': 'slow-headers:5000' })), { status: 504, code: 'gateway_timeout' });
    await settled(stack, aborted);
    aborted = stack.mock.stats.aborted;
    const res = await chat(stack, { stream: true }, { 'x-mock-tokens': '40', 'x-mock-interval-ms': '50' });
    assert.equal(res.status, 200);
    assert.equal(await sseError(res), 'gateway_timeout');
    await settled(stack, aborted);
  });
});

describe('max tunnels per node', () => {
  test('past max_tunnels_per_node the request is not sent there: 503 node_overloaded, and the lease is not leaked', async () => {
    const stack = await stackWith({ max_tunnels_per_node: 1 }, { capacity: 4 });
    const slow = chat(stack, {}, { 'x-mock-tokens': '2', 'x-mock-interval-ms': '400' });
    // The provider seeing it proves the tunnel is open on the node's worker, not just granted.
    await waitUntil(() => inFlight(stack.edge) === 1 && stack.mock.stats.requests >= 1, 'the first tunnel to open');
    const requestsBefore = stack.mock.stats.requests;
    const refused = await chat(stack);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.deepEqual(await errorOf(refused), { status: 503, code: 'node_overloaded' });
    assert.equal(stack.mock.stats.requests, requestsBefore, 'nothing reached the provider');
    assert.equal(inFlight(stack.edge), 1);
    assert.equal((await slow).status, 200);
    await waitUntil(() => inFlight(stack.edge) === 0, 'release');
    assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
    const again = await chat(stack);
    assert.equal(again.status, 200, 'served once the tunnel closed');
    await again.arrayBuffer();
    // The refused run's record and the request counter name the same provider.
    await waitUntil(() => stack.edge.runs.list({ state: 'finished' }).some((r) => r.status === 503), 'the refused run in the records');
    const record = stack.edge.runs.list({ state: 'finished' }).find((r) => r.status === 503);
    assert.equal(record?.provider, PROVIDER_ID, JSON.stringify(record));
    assert.equal(sample(await stack.edge.scrapeMetrics(), 'edge_requests_total', { model: ALIAS, provider: record?.provider ?? '', status: '503' }), 1);
  });

  test('a send the node refuses is not counted in edge_tunnel_bytes_total{to_node}: it never reached the node', async () => {
    const stack = await stackWith({ max_tunnels_per_node: 1 }, { capacity: 4 });
    const slow = chat(stack, {}, { 'x-mock-tokens': '2', 'x-mock-interval-ms': '600' });
    await waitUntil(() => inFlight(stack.edge) === 1 && stack.mock.stats.requests >= 1, 'the first tunnel to open');
    // Each on a connection of its own: with I/O workers most land on a worker other than the node's, whose refusal crosses back.
    for (let i = 0; i < 6; i++) {
      const dispatcher = new Agent({ connections: 1, pipelining: 0 });
      const res = await undiciFetch(`${stack.baseURL}/chat/completions`, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: `refused ${i}` }] }) });
      assert.equal(res.status, 503);
      await res.arrayBuffer();
      await dispatcher.close();
    }
    assert.equal((await slow).status, 200);
    await waitUntil(() => inFlight(stack.edge) === 0, 'release');
    const received = stack.mock.requestLog.reduce((sum, r) => sum + (r.body?.length ?? 0), 0);
    await waitFor(async () => sample(await stack.edge.scrapeMetrics(), 'edge_tunnel_bytes_total', { direction: 'to_node' }) === received, `to_node to read the ${received} bytes the provider received`);
  });

  test('a node whose capacity is over the limit is named once at registration; refusals under load log one line, not one each', { skip: testWorkers() > 0 ? 'I/O worker threads log to stdout, not to the test logger' : false }, async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (text: string) => void lines.push(JSON.parse(text) as Record<string, unknown>) });
    const stack = await stackWith({ max_tunnels_per_node: 1 }, { capacity: 4, logger });
    const named = lines.filter((l) => String(l.msg).includes('limits.max_tunnels_per_node'));
    assert.equal(named.length, 1);
    assert.deepEqual([named[0].capacity, named[0].maxTunnelsPerNode], [4, 1]);
    const slow = chat(stack, {}, { 'x-mock-tokens': '2', 'x-mock-interval-ms': '300' });
    await waitUntil(() => inFlight(stack.edge) === 1 && stack.mock.stats.requests >= 1, 'the first tunnel to open');
    const refused = await Promise.all(Array.from({ length: 5 }, () => chat(stack)));
    assert.deepEqual(refused.map((r) => r.status), [503, 503, 503, 503, 503]);
    await Promise.all(refused.map((r) => r.arrayBuffer()));
    assert.equal((await slow).status, 200);
    const atLimit = lines.filter((l) => String(l.msg).startsWith('node at its tunnel limit'));
    assert.equal(atLimit.length, 1, 'one line for the burst');
    assert.equal(atLimit[0].refusals, 1, 'the first refusal is logged at once');
  });
});
