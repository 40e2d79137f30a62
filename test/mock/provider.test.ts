import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Agent, request } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startMockProvider, type MockProvider, type MockRequestRecord } from '../../src/mock/provider.js';
import { completionText } from '../../src/mock/responses.js';

function sdk(mock: MockProvider): OpenAI {
  return new OpenAI({ baseURL: mock.baseURL, apiKey: 'sk-test', maxRetries: 0, timeout: 10_000 });
}

async function post(mock: MockProvider, path: string, body: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${mock.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
}

const last = (mock: MockProvider): MockRequestRecord => {
  const record = mock.requestLog.at(-1);
  assert.ok(record, 'a request was logged');
  return record;
};

describe('mock provider: OpenAI shapes through the official SDK', () => {
  let mock: MockProvider;
  before(async () => {
    mock = await startMockProvider({ tokens: 6, embeddingDim: 12, models: ['served-a', 'served-b'], recordEmitTimes: true });
  });
  after(() => mock.close());

  test('non-streaming chat echoes the model it received, in the body and the content', async () => {
    const completion = await sdk(mock).chat.completions.create({ model: 'served-a', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(completion.object, 'chat.completion');
    assert.equal(completion.model, 'served-a');
    assert.equal(completion.choices[0].message.role, 'assistant');
    assert.equal(completion.choices[0].message.content, 'hello from served-a hello from served-a');
    assert.equal(completion.choices[0].finish_reason, 'stop');
    assert.equal(completion.usage?.completion_tokens, 6);
    assert.equal(completion.usage?.total_tokens, (completion.usage?.prompt_tokens ?? 0) + 6);
    const record = last(mock);
    assert.deepEqual([record.path, record.model, record.stream, record.completed, record.aborted, record.status], ['/v1/chat/completions', 'served-a', false, true, false, 200]);
    assert.equal(record.receivedHeaders.authorization, 'Bearer sk-test');
    assert.deepEqual(JSON.parse(record.body?.toString('utf8') ?? ''), { model: 'served-a', messages: [{ role: 'user', content: 'hi' }] });
  });

  test('the body is logged as the exact bytes received', async () => {
    const body = '{ "model" : "x\\u0041",  "messages":[], "n": 1.50 }';
    const res = await post(mock, '/v1/chat/completions', body);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { model: string }).model, 'xA');
    assert.equal(last(mock).body?.toString('utf8'), body);
    assert.equal(mock.lastRequest('/v1/chat/completions')?.body.toString('utf8'), body);
  });

  test('streaming chat: role first, one chunk per token, a final chunk with stop and usage, then [DONE]', async () => {
    const stream = await sdk(mock).chat.completions.create({ model: 'served-b', stream: true, messages: [] });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.equal(chunks.length, 6 + 1);
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'served-b' && c.id === chunks[0].id));
    const text = chunks.map((c) => c.choices[0].delta.content ?? '').join('');
    assert.equal(text, completionText('served-b', 6));
    const final = chunks.at(-1)!;
    assert.equal(final.choices[0].finish_reason, 'stop');
    assert.equal(final.usage?.completion_tokens, 6);
    const record = last(mock);
    assert.equal(record.stream, true);
    assert.equal(record.chunksEmitted, 6 + 2, 'tokens, the final chunk and [DONE]');
    assert.deepEqual(record.emitTimes.map((e) => e.index), [0, 1, 2, 3, 4, 5, 6, 7]);
  });

  test('every chunk and every whole body names its request: log id, x-request-id, token count, seq', async () => {
    const client = sdk(mock);
    const stream = await client.chat.completions.create({ model: 'served-b', stream: true, messages: [] }, { headers: { 'x-request-id': 'client-7', 'x-mock-tokens': '3' } });
    const stamps: unknown[] = [];
    for await (const chunk of stream) stamps.push((chunk as unknown as { mock: unknown }).mock);
    const streamed = last(mock);
    assert.deepEqual([streamed.requestId, streamed.tokens], ['client-7', 3]);
    assert.deepEqual(stamps, [0, 1, 2, 3].map((seq) => ({ request: streamed.id, request_id: 'client-7', tokens: 3, seq })));
    const text = await client.completions.create({ model: 'served-a', prompt: 'say', stream: true }, { headers: { 'x-mock-tokens': '2' } });
    const textStamps: unknown[] = [];
    for await (const chunk of text) textStamps.push((chunk as unknown as { mock: unknown }).mock);
    const textRecord = last(mock);
    assert.deepEqual(textStamps, [0, 1, 2].map((seq) => ({ request: textRecord.id, request_id: `mock-${textRecord.id}`, tokens: 2, seq })), 'without x-request-id the id is the mock’s own');
    const whole = await client.chat.completions.create({ model: 'served-a', messages: [] }, { headers: { 'x-request-id': 'client-8' } });
    assert.deepEqual((whole as unknown as { mock: unknown }).mock, { request: last(mock).id, request_id: 'client-8', tokens: 6 });
    const log = (await (await fetch(`${mock.url}/mock/log`)).json()) as { id: number; requestId: string; tokens: number; completed: boolean }[];
    assert.deepEqual(
      log.slice(-3).map((e) => [e.id, e.requestId, e.tokens, e.completed]),
      [
        [streamed.id, 'client-7', 3, true],
        [textRecord.id, `mock-${textRecord.id}`, 2, true],
        [last(mock).id, 'client-8', 6, true],
      ],
    );
  });

  test('the SDK stream helper accumulates the same message', async () => {
    const runner = sdk(mock).chat.completions.stream({ model: 'served-a', messages: [] });
    const completion = await runner.finalChatCompletion();
    assert.equal(completion.choices[0].message.content, completionText('served-a', 6));
    assert.equal(completion.choices[0].finish_reason, 'stop');
  });

  test('text completions, whole and streamed', async () => {
    const whole = await sdk(mock).completions.create({ model: 'served-a', prompt: 'say' });
    assert.equal(whole.object, 'text_completion');
    assert.equal(whole.choices[0].text, completionText('served-a', 6));
    const stream = await sdk(mock).completions.create({ model: 'served-a', prompt: 'say', stream: true });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0].text;
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    assert.equal(text, completionText('served-a', 6));
    assert.equal(finish, 'stop');
  });

  test('embeddings: deterministic vectors, base64 (SDK default) and float agree, dimensions honoured', async () => {
    const client = sdk(mock);
    const viaBase64 = await client.embeddings.create({ model: 'embed', input: ['alpha', 'beta'] });
    const viaFloat = await client.embeddings.create({ model: 'embed', input: ['alpha', 'beta'], encoding_format: 'float' });
    assert.equal(viaBase64.data.length, 2);
    assert.equal(viaBase64.data[0].embedding.length, 12);
    assert.deepEqual(viaBase64.data.map((d) => d.embedding), viaFloat.data.map((d) => d.embedding));
    assert.notDeepEqual(viaFloat.data[0].embedding, viaFloat.data[1].embedding);
    assert.ok(viaFloat.data[0].embedding.every((x) => x >= -1 && x < 1));
    const single = await client.embeddings.create({ model: 'embed', input: 'alpha', encoding_format: 'float', dimensions: 4 });
    assert.equal(single.data.length, 1);
    assert.deepEqual(single.data[0].embedding, (await client.embeddings.create({ model: 'embed', input: 'alpha', encoding_format: 'float', dimensions: 4 })).data[0].embedding);
    assert.equal(single.data[0].embedding.length, 4);
    assert.equal(last(mock).model, 'embed');
  });

  test('models lists the configured ids', async () => {
    const ids = [];
    for await (const model of sdk(mock).models.list()) ids.push(model.id);
    assert.deepEqual(ids, ['served-a', 'served-b']);
  });

  test('bad requests get OpenAI error bodies', async () => {
    const cases: Array<[string, string, Record<string, string>, number, string]> = [
      ['/v1/chat/completions', '{"model":', {}, 400, 'invalid_json'],
      ['/v1/chat/completions', '{"messages":[]}', {}, 400, 'missing_model'],
      ['/v1/embeddings', '{"model":"e","input":5}', {}, 400, 'input'],
      ['/v1/nope', '{}', {}, 404, 'unknown_url'],
      ['/v1/chat/completions', '{"model":"m"}', { 'x-mock-tokens': 'many' }, 400, 'invalid_mock_header'],
      ['/v1/chat/completions', '{"model":"m"}', { 'x-mock-fail': 'explode' }, 400, 'invalid_mock_header'],
    ];
    for (const [path, body, headers, status, codeOrParam] of cases) {
      const res = await post(mock, path, body, headers);
      assert.equal(res.status, status, `${path} ${body}`);
      const json = (await res.json()) as { error: { message: string; type: string; code: string | null; param: string | null } };
      assert.deepEqual(Object.keys(json.error).sort(), ['code', 'message', 'param', 'type']);
      assert.ok(json.error.code === codeOrParam || json.error.param === codeOrParam, JSON.stringify(json));
    }
    const wrongMethod = await fetch(`${mock.url}/v1/chat/completions`);
    assert.equal(wrongMethod.status, 405);
    await wrongMethod.arrayBuffer();
  });
});

describe('mock provider: timing, overrides and failures', () => {
  let mock: MockProvider;
  before(async () => {
    mock = await startMockProvider({ tokens: 4, ttftMs: 0, intervalMs: 0, recordEmitTimes: true });
  });
  after(() => mock.close());

  test('ttft and interval shape the stream; every chunk arrives after the provider emitted it, in order', async () => {
    const stream = await sdk(mock).chat.completions.create(
      { model: 'm', stream: true, messages: [] },
      { headers: { 'x-mock-ttft-ms': '80', 'x-mock-interval-ms': '25', 'x-mock-tokens': '5' } },
    );
    const arrivals: number[] = [];
    for await (const _chunk of stream) arrivals.push(performance.now());
    const record = last(mock);
    assert.equal(arrivals.length, 6);
    const emits = record.emitTimes;
    assert.ok(emits[0].atMs - record.receivedAtMs >= 75, `first token after ${emits[0].atMs - record.receivedAtMs} ms`);
    for (let k = 1; k < 5; k++) assert.ok(emits[k].atMs - emits[k - 1].atMs >= 20, `gap before token ${k}`);
    for (let k = 0; k < arrivals.length; k++) {
      assert.ok(arrivals[k] >= emits[k].atMs, `chunk ${k} arrived before it was emitted`);
      if (k + 1 < 5) assert.ok(arrivals[k] < emits[k + 1].atMs, `chunk ${k} was held back until chunk ${k + 1} was emitted`);
    }
  });

  test('a non-streaming answer comes when generation would have finished', async () => {
    const started = performance.now();
    const completion = await sdk(mock).chat.completions.create(
      { model: 'm', messages: [] },
      { headers: { 'x-mock-ttft-ms': '40', 'x-mock-interval-ms': '20', 'x-mock-tokens': '4' } },
    );
    assert.ok(performance.now() - started >= 95, 'ttft + 3 intervals');
    assert.equal(completion.choices[0].message.content, completionText('m', 4));
  });

  test('x-mock-fail status:<code> answers that status in OpenAI form', async () => {
    const err = await sdk(mock)
      .chat.completions.create({ model: 'm', messages: [] }, { headers: { 'x-mock-fail': 'status:429' } })
      .catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.RateLimitError);
    assert.equal(err.code, 'mock_failure');
    assert.equal(last(mock).failure, 'status:429');
  });

  test('x-mock-fail status:<code> on /v1/messages answers in Anthropic form', async () => {
    const anthropic = new Anthropic({ baseURL: mock.url, apiKey: 'unused', maxRetries: 0 });
    for (const [status, type, errorClass] of [
      [529, 'overloaded_error', Anthropic.InternalServerError],
      [429, 'rate_limit_error', Anthropic.RateLimitError],
      [500, 'api_error', Anthropic.InternalServerError],
    ] as const) {
      const err = await anthropic.messages.create({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-mock-fail': `status:${status}` } }).catch((e: unknown) => e);
      assert.ok(err instanceof errorClass, `${status}: ${String(err)}`);
      assert.equal(err.status, status);
      assert.deepEqual((err.error as { type: string; error: { type: string } }).error.type, type);
      assert.equal((err.error as { type: string }).type, 'error');
    }
  });

  test('reset-before-headers: the client gets a connection error, the mock does not count an abort', async () => {
    const aborted = mock.stats.aborted;
    const err = await sdk(mock)
      .chat.completions.create({ model: 'm', messages: [] }, { headers: { 'x-mock-fail': 'reset-before-headers' } })
      .catch((e: unknown) => e);
    assert.ok(err instanceof OpenAI.APIConnectionError, String(err));
    await mock.waitFor(() => last(mock).endedAtMs !== undefined);
    assert.equal(last(mock).failure, 'reset-before-headers');
    assert.equal(mock.stats.aborted, aborted);
  });

  test('reset-mid-stream: some chunks arrive, then the stream fails', async () => {
    const stream = await sdk(mock).chat.completions.create(
      { model: 'm', stream: true, messages: [] },
      { headers: { 'x-mock-fail': 'reset-mid-stream', 'x-mock-tokens': '10' } },
    );
    let seen = 0;
    await assert.rejects(async () => {
      for await (const _chunk of stream) seen++;
    });
    assert.equal(seen, 5);
    assert.equal(last(mock).completed, false);
  });

  test('reset-mid-stream on a whole response truncates the body', async () => {
    await assert.rejects(post(mock, '/v1/chat/completions', '{"model":"m"}', { 'x-mock-fail': 'reset-mid-stream' }).then((r) => r.text()));
  });

  test('slow-headers delays the response headers', async () => {
    const started = performance.now();
    const res = await post(mock, '/v1/chat/completions', '{"model":"m","stream":true}', { 'x-mock-fail': 'slow-headers:120' });
    assert.ok(performance.now() - started >= 115);
    assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.match(await res.text(), /data: \[DONE\]\n\n$/);
  });

  test('a client that disconnects mid-stream is counted as aborted and emission stops', async () => {
    const before = mock.stats.aborted;
    const aborts: MockRequestRecord[] = [];
    mock.on('abort', (r) => aborts.push(r));
    const controller = new AbortController();
    const stream = await sdk(mock).chat.completions.create(
      { model: 'm', stream: true, messages: [] },
      { headers: { 'x-mock-tokens': '200', 'x-mock-interval-ms': '5' }, signal: controller.signal },
    );
    let seen = 0;
    for await (const _chunk of stream) if (++seen === 3) controller.abort();
    await mock.waitFor(() => mock.stats.aborted === before + 1);
    const record = aborts[0];
    assert.equal(record.aborted, true);
    assert.equal(record.completed, false);
    const emitted = record.chunksEmitted;
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(record.chunksEmitted, emitted, 'no more chunks after the abort');
    assert.ok(emitted < 200);
    assert.equal(mock.stats.inFlight, 0);
  });

  test('a client that leaves while waiting for the first token (streaming or whole) is an abort too', async () => {
    for (const stream of [true, false]) {
      const before = mock.stats.aborted;
      const controller = new AbortController();
      const requested = new Promise<MockRequestRecord>((resolve) => mock.once('request', resolve));
      const response = fetch(`${mock.url}/v1/chat/completions`, {
        method: 'POST',
        body: `{"model":"waiting","stream":${stream}}`,
        headers: { 'x-mock-ttft-ms': '5000' },
        signal: controller.signal,
      });
      if (stream) (await response).body?.getReader(); // headers are sent at once; the first token is 5 s away
      else void response.catch(() => undefined);
      const record = await requested;
      controller.abort();
      await mock.waitFor(() => mock.stats.aborted === before + 1);
      assert.equal(record.aborted, true);
      assert.equal(record.chunksEmitted, 0);
      assert.equal(mock.stats.inFlight, 0, 'its timers are gone with it');
    }
  });
});

describe('mock provider: backpressure, bounds and stats', () => {
  test('a client that does not read makes the provider wait for drain instead of buffering', async () => {
    const mock = await startMockProvider({ tokens: 100_000, intervalMs: 0 });
    try {
      const req = request(`${mock.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } });
      req.end('{"model":"m","stream":true}');
      const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
      res.pause();
      await mock.waitFor(() => mock.stats.backpressureWaits > 0, 10_000);
      const record = last(mock);
      await new Promise((r) => setTimeout(r, 50));
      const stalled = record.chunksEmitted;
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(record.chunksEmitted, stalled, 'emission stalls while the client does not read');
      assert.ok(stalled < 100_002, `stalled after ${stalled} events`);
      res.resume();
      await once(res, 'end');
      assert.equal(record.chunksEmitted, 100_002);
      assert.equal(record.completed, true);
      assert.ok(record.backpressureWaits >= 1);
    } finally {
      await mock.close();
    }
  });

  test('streams of every format, one after another on one keep-alive connection, each arrive whole', async () => {
    const mock = await startMockProvider({ tokens: 4 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const paths = ['/v1/messages', '/v1/responses', '/v1/chat/completions', '/v1/completions', '/v1/messages', '/v1/chat/completions'];
      const answers: { status: number | undefined; reused: boolean; body: string }[] = [];
      for (const path of paths) {
        const req = request(`${mock.url}${path}`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } });
        req.end(JSON.stringify({ model: 'modèle-ü', stream: true, max_tokens: 8, messages: [], prompt: 'x', input: 'x' }));
        const [res] = (await once(req, 'response')) as [import('node:http').IncomingMessage];
        let body = '';
        for await (const chunk of res) body += String(chunk);
        answers.push({ status: res.statusCode, reused: req.reusedSocket, body });
      }
      assert.deepEqual(answers.map((a) => a.status), paths.map(() => 200));
      assert.deepEqual(answers.map((a) => a.reused), [false, true, true, true, true, true], 'one connection for all');
      assert.match(answers[0].body, /event: message_stop\n/);
      assert.match(answers[1].body, /event: response.completed\n/);
      for (const k of [2, 3, 5]) assert.ok(answers[k].body.endsWith('data: [DONE]\n\n'));
      assert.ok(answers[2].body.includes(JSON.stringify(' modèle-ü')), 'non-ASCII text framed by its byte length');
      assert.equal(mock.stats.completed, paths.length);
    } finally {
      agent.destroy();
      await mock.close();
    }
  });

  test('requestLog keeps the last logLimit entries, and only the newest bodyLogLimit bodies', async () => {
    const mock = await startMockProvider({ logLimit: 5, bodyLogLimit: 2 });
    try {
      for (let i = 0; i < 8; i++) await (await post(mock, '/v1/chat/completions', `{"model":"m${i}"}`)).arrayBuffer();
      assert.deepEqual(mock.requestLog.map((r) => r.model), ['m3', 'm4', 'm5', 'm6', 'm7']);
      assert.deepEqual(mock.requestLog.map((r) => r.body?.toString('utf8')), [undefined, undefined, undefined, '{"model":"m6"}', '{"model":"m7"}']);
      assert.equal(mock.stats.requests, 8);
    } finally {
      await mock.close();
    }
  });

  test('GET /mock/stats reports the counters; POST /mock/reset zeroes them', async () => {
    const mock = await startMockProvider({ tokens: 2 });
    try {
      await (await post(mock, '/v1/chat/completions', '{"model":"m","stream":true}')).text();
      await (await post(mock, '/v1/chat/completions', '{"model":"m"}')).text();
      const stats = (await (await fetch(`${mock.url}/mock/stats`)).json()) as Record<string, number>;
      assert.deepEqual(
        [stats.requests, stats.completed, stats.aborted, stats.inFlight, stats.chunksEmitted, stats.logSize],
        [2, 2, 0, 0, 2 + 2 + 1, 2],
      );
      const reset = (await (await fetch(`${mock.url}/mock/reset`, { method: 'POST' })).json()) as Record<string, number>;
      assert.equal(reset.requests, 0);
      assert.equal(mock.stats.requests, 0);
      assert.equal(mock.requestLog.length, 0);
    } finally {
      await mock.close();
    }
  });

  test('the CLI prints its URL on one line and serves', async () => {
    const cli = fileURLToPath(new URL('../../src/mock/cli.js', import.meta.url));
    const child = spawn(process.execPath, [cli, '--port', '0', '--tokens', '3', '--models', 'x,y'], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const lines = createInterface({ input: child.stdout });
      const [line] = (await once(lines, 'line')) as [string];
      const url = /http:\/\/127\.0\.0\.1:\d+/.exec(line)?.[0];
      assert.ok(url, line);
      const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: '{"model":"served"}' });
      const json = (await res.json()) as { choices: Array<{ message: { content: string } }> };
      assert.equal(json.choices[0].message.content, 'hello from served');
      const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> };
      assert.deepEqual(models.data.map((m) => m.id), ['x', 'y']);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });
});
