// Queue position and honest retry hints, through the real stack (edge, agent,
// mock provider over loopback) in every worker mode (EDGE_TEST_WORKERS):
//  - a streaming request sent with `x-edge-queue-updates: 1` by the openai SDK
//    (unmodified; its fetch only tees the raw bytes for the test to read) gets
//    `: queue position=N eta_ms=M` comments that never increase and do
//    decrease, then its stream, which the SDK parses to the end;
//  - while nothing is granted, the ETA it is told grows (the rate's window
//    runs to the time of asking, not to the scheduler's last event);
//  - 429 queue_full and 503 queue_timeout carry Retry-After and
//    retry-after-ms computed from the alias's measured drain rate (below the
//    constant the queue timeout would give), and every refusal x-edge-queue-ms.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, inFlight, startStack, waitUntil, type Stack } from '../helpers/stack.js';

/** A fetch for the SDK that hands it the response unchanged and keeps a copy of the raw body text. */
function teeingFetch(raw: string[]): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (response.body === null) return response;
    const [mine, theirs] = response.body.tee();
    raw.push('');
    const at = raw.length - 1;
    void (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of mine as unknown as AsyncIterable<Uint8Array>) raw[at] += decoder.decode(chunk, { stream: true });
    })();
    return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

async function chat(stack: Stack, headers: Record<string, string>, stream = false): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/** A few quick requests one after the other: the alias's drain rate becomes measurable. */
async function warmUp(stack: Stack, n: number, intervalMs: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await chat(stack, { 'x-mock-tokens': '2', 'x-mock-interval-ms': String(intervalMs) });
    await r.arrayBuffer();
  }
}

describe('queue position comments', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 1, maxQueue: 8, queueTimeoutMs: 20_000, mock: { ttftMs: 0, tokens: 2, intervalMs: 1 } });
  });
  after(async () => {
    await stack.close();
  });

  test('a waiting stream gets decreasing positions with an ETA, then its stream, and the openai SDK parses it', async () => {
    await warmUp(stack, 5, 20);
    // With I/O workers the warm-up's releases trail its responses: a stale lease must not pass for the first request's.
    await waitUntil(() => inFlight(stack.edge) === 0, 'the warm-up leases to be released');
    const slow = { 'x-mock-tokens': '3', 'x-mock-interval-ms': '450' };
    const first = chat(stack, slow);
    await waitUntil(() => inFlight(stack.edge) === 1, 'the first request to run');
    const second = chat(stack, slow);
    await new Promise((resolve) => setTimeout(resolve, 100)); // second queues ahead of the SDK's request
    const raw: string[] = [];
    const client = new OpenAI({ apiKey: 'unused', baseURL: stack.baseURL, maxRetries: 0, fetch: teeingFetch(raw) });
    const { data: stream, request_id: requestId } = await client.chat.completions
      .create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-edge-queue-updates': '1', 'x-mock-tokens': '4', 'x-mock-interval-ms': '5' } })
      .withResponse();
    assert.match(requestId ?? '', /^run-/, 'the head the queue committed carries the run id as the request id');
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    await Promise.all([(await first).arrayBuffer(), (await second).arrayBuffer()]);
    assert.ok(text.length > 0, 'the SDK read the content');
    assert.equal(finish, 'stop');
    const body = raw[0];
    const comments = [...body.matchAll(/^: queue position=(\d+)(?: eta_ms=(\d+))?$/gm)];
    const positions = comments.map((m) => Number(m[1]));
    assert.ok(positions.length >= 2, `several position comments, got ${JSON.stringify(positions)} in ${JSON.stringify(body.slice(0, 300))}`);
    assert.equal(positions[0], 2, 'it started behind the running and the queued request');
    for (let i = 1; i < positions.length; i++) assert.ok(positions[i] <= positions[i - 1], `positions never increase: ${positions.join(',')}`);
    assert.equal(positions.at(-1), 1, `it reached the head of the queue: ${positions.join(',')}`);
    const etas = comments.flatMap((m) => (m[2] === undefined ? [] : [Number(m[2])]));
    assert.ok(etas.length > 0 && etas.every((eta) => eta >= 0 && eta <= 20_000), `plausible ETAs from the measured rate: ${etas.join(',')}`);
    assert.match(body, /^: queue done queue_ms=\d+$/m);
    // Every comment comes before the first data line: the stream follows the queue.
    assert.ok(body.lastIndexOf(': queue') < body.indexOf('data:'));
  });

  test('while nothing is granted the ETA a waiter is told grows: a stalled queue reads as slow, not at its old pace', async () => {
    await warmUp(stack, 5, 20);
    await waitUntil(() => inFlight(stack.edge) === 0, 'the warm-up leases to be released');
    // The holder stalls the only slot: from here on the scheduler sees no event while the waiter is told its place.
    const holderGone = new AbortController();
    const holder = fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      signal: holderGone.signal,
      headers: { 'content-type': 'application/json', 'x-mock-tokens': '2', 'x-mock-interval-ms': '60000' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    }).catch(() => undefined);
    await waitUntil(() => inFlight(stack.edge) === 1, 'the holder to run');
    const waiter = await chat(stack, { 'x-edge-queue-updates': '1' }, true);
    const reader = (waiter.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    const etas: number[] = [];
    while (etas.length < 3) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const m of decoder.decode(value, { stream: true }).matchAll(/: queue position=1 eta_ms=(\d+)/g)) etas.push(Number(m[1]));
    }
    holderGone.abort();
    await holder;
    // The waiter runs once the holder's client left; its stream ends.
    while (!(await reader.read()).done);
    assert.equal(etas.length, 3, `three position comments with an ETA (got ${JSON.stringify(etas)})`);
    assert.ok(etas[1] > etas[0] && etas[2] > etas[1], `the ETA grows while the queue stands still: ${JSON.stringify(etas)}`);
  });
});

describe('Retry-After from the measured drain rate', () => {
  let stack: Stack;
  const QUEUE_TIMEOUT_MS = 1_500;
  before(async () => {
    stack = await startStack({ capacity: 1, maxQueue: 1, queueTimeoutMs: QUEUE_TIMEOUT_MS, mock: { ttftMs: 0, tokens: 2, intervalMs: 1 } });
  });
  after(async () => {
    await stack.close();
  });

  test('429 queue_full and 503 queue_timeout carry Retry-After and retry-after-ms from the drain rate', async () => {
    await warmUp(stack, 6, 40); // about one dispatch per 40-100 ms
    await waitUntil(() => inFlight(stack.edge) === 0, 'the warm-up leases to be released');
    const holder = chat(stack, { 'x-mock-tokens': '4', 'x-mock-interval-ms': '800' }); // outlasts the queue timeout
    await waitUntil(() => inFlight(stack.edge) === 1, 'the holder to run');
    const queued = chat(stack, {});
    await new Promise((resolve) => setTimeout(resolve, 100));
    const full = await chat(stack, {});
    assert.equal(full.status, 429);
    assert.equal(((await full.json()) as { error: { code: string } }).error.code, 'queue_full');
    const fullMs = Number(full.headers.get('retry-after-ms'));
    // The constant would be the queue timeout in whole seconds (2000 ms); one dispatch at the measured pace is far less.
    assert.ok(fullMs >= 100 && fullMs < 1_000, `retry-after-ms ${fullMs} comes from the drain rate`);
    assert.equal(full.headers.get('retry-after'), String(Math.max(1, Math.ceil(fullMs / 1000))));
    assert.ok(Number(full.headers.get('x-edge-queue-ms')) >= 0);

    const timedOut = await queued;
    assert.equal(timedOut.status, 503);
    assert.equal(((await timedOut.json()) as { error: { code: string } }).error.code, 'queue_timeout');
    const timeoutMs = Number(timedOut.headers.get('retry-after-ms'));
    assert.ok(timeoutMs >= 100 && timeoutMs <= QUEUE_TIMEOUT_MS, `retry-after-ms ${timeoutMs} within (0.1 s, queue timeout)`);
    assert.ok(Number(timedOut.headers.get('retry-after')) >= 1);
    assert.ok(Number(timedOut.headers.get('x-edge-queue-ms')) >= QUEUE_TIMEOUT_MS - 50, 'it waited out its queue timeout');
    await (await holder).arrayBuffer();
  });

  test('a stream whose head the queue updates committed, then timed out in the queue, is counted as the 200 it got, not as a client that left (499)', async () => {
    await waitUntil(() => inFlight(stack.edge) === 0, 'nothing running');
    const clientLeft = (text: string): number => Number(/^edge_requests_total\{model="llama3",provider="",status="499"\} (\d+)$/m.exec(text)?.[1] ?? 0);
    const before = clientLeft(await stack.edge.scrapeMetrics());
    const holder = chat(stack, { 'x-mock-tokens': '4', 'x-mock-interval-ms': '800' });
    await waitUntil(() => inFlight(stack.edge) === 1, 'the holder to run');
    const waiting = await chat(stack, { 'x-edge-queue-updates': '1' }, true);
    assert.equal(waiting.status, 200);
    assert.match(await waiting.text(), /"code":"queue_timeout"/);
    await (await holder).arrayBuffer();
    await waitUntil(() => inFlight(stack.edge) === 0, 'the holder released');
    // With I/O workers a request's counters reach the scrape with the next one.
    const after = clientLeft(await stack.edge.scrapeMetrics());
    assert.equal(after, before, 'the edge ended it, the client did not leave');
  });
});
