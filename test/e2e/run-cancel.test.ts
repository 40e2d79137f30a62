// Cancelling a run from outside the client (the admin API, the console's
// button, an A2A cancel): a queued request leaves the queue with 499
// run_cancelled and `x-should-retry: false` (so the SDKs do not send it
// again); a streaming one has its upstream request aborted at the provider,
// its client told in-band, and its lease returned. The cli flavour (the
// process group killed) is in cli-provider.test.ts. Runs in every worker
// mode (EDGE_TEST_WORKERS): the run's client connection may live in any
// I/O worker.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, inFlight, openExchanges, startStack, waitFor, type Stack } from '../helpers/stack.js';

let stack: Stack;
let client: OpenAI;

before(async () => {
  stack = await startStack({ capacity: 1 });
  client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 2 });
});

after(async () => {
  await stack.close();
});

test('a streaming run cancelled mid-stream: the SDK raises run_cancelled, the provider sees the request aborted, the lease returns', async () => {
  const { data: stream, response } = await client.chat.completions
    .create({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'long' }] }, { headers: { 'x-mock-tokens': '400', 'x-mock-interval-ms': '20' } })
    .withResponse();
  const runId = response.headers.get('x-edge-run-id') as string;
  const chunks: string[] = [];
  const aborted = stack.mock.stats.aborted;
  let raised: unknown;
  try {
    for await (const chunk of stream) {
      chunks.push(chunk.choices[0]?.delta?.content ?? '');
      if (chunks.length === 3) assert.equal(await stack.edge.cancelRun(runId), 'cancelled');
    }
  } catch (err) {
    raised = err;
  }
  assert.ok(raised instanceof OpenAI.APIError, `the stream ends with an error, got ${String(raised)}`);
  assert.match(raised.message, /cancelled/);
  assert.ok(chunks.length < 100, `the stream stopped early (${chunks.length} chunks)`);
  await waitFor(async () => stack.mock.stats.aborted === aborted + 1, 'the provider to see its request aborted');
  await waitFor(async () => inFlight(stack.edge) === 0 && (await openExchanges(stack.edge)) === 0, 'the lease and the exchange to be released');
  await waitFor(async () => stack.edge.runs.get(runId)?.outcome === 'run_cancelled', 'the run record to say run_cancelled');
  assert.equal(await stack.edge.cancelRun(runId), 'finished', 'a second cancel finds it finished');
});

test('a queued run cancelled: 499 run_cancelled with x-should-retry false, so the SDK does not retry it; the queue moves on', async () => {
  // The only slot is held by a slow stream; the next request waits in the queue.
  const holder = await fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-mock-tokens': '20', 'x-mock-interval-ms': '50' },
    body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hold' }] }),
  });
  assert.equal(holder.status, 200);
  const requestsBefore = stack.mock.stats.requests;
  // Its outcome is taken at once: with I/O workers the 499 may land before cancelRun's answer does.
  const queued = client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'queued' }] }).then(() => undefined, (e: unknown) => e);
  let runId: string | undefined;
  // Not the holder's: with I/O workers its record may still say queued for a moment (reports come every 2 ms).
  const holderRunId = holder.headers.get('x-edge-run-id');
  await waitFor(async () => {
    runId = stack.edge.runs.list({ state: 'queued' }).find((run) => run.id !== holderRunId)?.id;
    return runId !== undefined;
  }, 'the second request to queue');
  assert.equal(await stack.edge.cancelRun(runId as string), 'cancelled');
  const err = await queued;
  assert.ok(err instanceof OpenAI.APIError, String(err));
  assert.equal(err.status, 499);
  assert.equal((err.error as { code?: string }).code, 'run_cancelled');
  assert.equal(err.headers?.get('x-should-retry'), 'false');
  await holder.text();
  // Only the holder reached the provider: the cancelled request was neither sent nor retried.
  assert.equal(stack.mock.stats.requests, requestsBefore);
  // The run records follow the data path by up to 2 ms with I/O workers (docs/operations.md, Runs).
  await waitFor(async () => stack.edge.runs.get(runId as string)?.outcome === 'run_cancelled', `the record's outcome run_cancelled (${stack.edge.runs.get(runId as string)?.outcome})`);
  // Counted where operators look for refusals, apart from clients that left (499 alone).
  assert.match(await stack.edge.scrapeMetrics(), /^edge_rejects_total\{reason="run_cancelled"\} 1$/m);
  const after = await client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'next' }] });
  assert.equal(after.object, 'chat.completion');
  await waitFor(async () => inFlight(stack.edge) === 0, 'no lease left');
});

test('an unknown run id is not_found', async () => {
  assert.equal(await stack.edge.cancelRun('run-nope-1'), 'not_found');
});
