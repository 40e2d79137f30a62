// A request refused before its body is read (over limits.body_bytes, or no
// valid API key) gets its answer although the client is still uploading:
// the SDKs send the whole body without Expect: 100-continue, so a socket
// closed with that body unread was reset under them, and they raised a
// "Connection error." (EPIPE) and sent the whole body twice more, instead of
// 413 / 401. The edge now lingers before the close: the answer goes out, the
// rest of the body is read and dropped, and the socket closes when the
// client is done, or after LINGER_MS. Real stack; the SDKs, unmodified, run in
// a child process (in the edge's own process the upload and the reset race
// differently, and the answer got through).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { LINGER_MS } from '../../src/workers/http/linger.js';
import { ALIAS, startStack, waitUntil, type Stack } from '../helpers/stack.js';

const KEY = 'sk-upload-0123456789';
const LIMIT = 64 * 1024;

/**
 * What an SDK call with a `mib` MiB message raised, from a child process: the error's class, status and
 * code, and how many requests the SDK sent (its default retries on).
 */
interface Outcome {
  readonly error: string;
  readonly status: number | undefined;
  readonly requests: number;
}

const CHILD = `
const [sdk, baseURL, apiKey, model, mib, call] = process.argv.slice(1);
let requests = 0;
// Not the data: URL the openai SDK fetches once to learn whether fetch takes FormData.
const fetchCounting = (input, init) => { if (!String(input).startsWith('data:')) requests++; return fetch(input, init); };
const content = 'x'.repeat(Number(mib) * 1024 * 1024);
let error = 'none', status;
try {
  if (sdk === 'openai') {
    const { default: OpenAI, toFile } = await import('openai');
    const client = new OpenAI({ baseURL, apiKey, fetch: fetchCounting, timeout: 20000 });
    if (call === 'upload') await client.audio.transcriptions.create({ model, file: await toFile(Buffer.from(content), 'talk.mp3') });
    else await client.chat.completions.create({ model, messages: [{ role: 'user', content }] });
  } else {
    const { default: Anthropic, toFile } = await import('@anthropic-ai/sdk');
    const client = new Anthropic({ baseURL, apiKey, fetch: fetchCounting, timeout: 20000 });
    if (call === 'upload') await client.beta.files.upload({ file: await toFile(Buffer.from(content), 'notes.txt') });
    else await client.messages.stream({ model, max_tokens: 8, messages: [{ role: 'user', content }] }).finalMessage();
  }
} catch (err) { error = err.constructor.name; status = err.status; }
console.log(JSON.stringify({ error, status, requests }));
`;

/** `call`: a chat / Messages request (default), or an upload to an API the edge does not serve (Audio, Files). */
function sdkCall(sdk: 'openai' | 'anthropic', baseURL: string, apiKey: string, mib: number, call: 'chat' | 'upload' = 'chat'): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', CHILD, sdk, baseURL, apiKey, ALIAS, String(mib), call], { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Outcome);
    });
  });
}

/** One raw connection per head: its body is never sent, so an edge that invites it waits for ever. `body`: sent once invited. */
function headOnly(stack: Stack, head: string, body?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(stack.edge.url).port), '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (body !== undefined && /^HTTP\/1\.1 100 /.test(text) && !text.includes('\r\n\r\nHTTP/1.1 ')) socket.write(body);
      if (/^HTTP\/1\.1 [2-5]\d\d /m.test(text) && (text.trimEnd().endsWith('}') || text.endsWith('\r\n0\r\n\r\n'))) {
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
    socket.setTimeout(5_000, () => {
      socket.destroy();
      resolve(`no answer in 5 s: ${text}`);
    });
    socket.write(head);
  });
}

/** What the A2A SDK's sendMessage of a `mib` MiB text raised, from a child process, and how many JSON-RPC requests it sent. */
const A2A_CHILD = `
const [url, apiKey, mib] = process.argv.slice(1);
let requests = 0;
const fetchKeyed = (input, init) => { requests++; const headers = new Headers(init?.headers); headers.set('authorization', 'Bearer ' + apiKey); return fetch(input, { ...init, headers }); };
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } = await import('@a2a-js/sdk/client');
const client = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl: fetchKeyed })] })).createFromUrl(url);
const part = { content: { $case: 'text', value: 'x'.repeat(Number(mib) * 1024 * 1024) }, metadata: undefined, filename: '', mediaType: 'text/plain' };
let error = 'none', message;
try {
  await client.sendMessage({ tenant: '', message: { messageId: 'm-1', contextId: '', taskId: '', role: 1, parts: [part], metadata: undefined, extensions: [], referenceTaskIds: [] }, configuration: undefined, metadata: undefined });
} catch (err) { error = err.constructor.name; message = err.message; }
console.log(JSON.stringify({ error, message, requests }));
`;

function a2aSend(url: string, apiKey: string, mib: number): Promise<{ error: string; message?: string; requests: number }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', A2A_CHILD, url, apiKey, String(mib)], { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { error: string; message?: string; requests: number });
    });
  });
}

describe('a refused upload', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      bodyBytes: LIMIT,
      configure(raw) {
        raw.auth = { api_keys: [{ name: 'uploader', key_sha256: sha256Hex(KEY) }] };
        raw.a2a = { agents: [{ id: 'helper', model: ALIAS }] };
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('a body far over the limit: the SDKs raise 413 after one request, not a connection error they retry', async () => {
    for (const mib of [8, 32]) {
      assert.deepEqual(await sdkCall('openai', stack.baseURL, KEY, mib), { error: 'APIError', status: 413, requests: 1 }, `${mib} MiB, openai`);
      assert.deepEqual(await sdkCall('anthropic', stack.edge.url, KEY, mib), { error: 'ContentTooLargeError', status: 413, requests: 1 }, `${mib} MiB, anthropic`);
    }
    assert.equal(stack.mock.stats.requests, 0, 'nothing reached the provider');
  });

  test('a large body with a wrong key: the SDKs raise AuthenticationError after one request', async () => {
    for (const mib of [8, 32]) {
      assert.deepEqual(await sdkCall('openai', stack.baseURL, 'sk-wrong', mib), { error: 'AuthenticationError', status: 401, requests: 1 }, `${mib} MiB, openai`);
      assert.deepEqual(await sdkCall('anthropic', stack.edge.url, 'sk-wrong', mib), { error: 'AuthenticationError', status: 401, requests: 1 }, `${mib} MiB, anthropic`);
    }
  });

  test('an upload to an API the edge does not serve (Audio, Files): NotFoundError after one request, whatever its size', async () => {
    for (const mib of [1, 8]) {
      assert.deepEqual(await sdkCall('openai', stack.baseURL, KEY, mib, 'upload'), { error: 'NotFoundError', status: 404, requests: 1 }, `${mib} MiB, openai`);
      assert.deepEqual(await sdkCall('anthropic', stack.edge.url, KEY, mib, 'upload'), { error: 'NotFoundError', status: 404, requests: 1 }, `${mib} MiB, anthropic`);
    }
    assert.equal(stack.mock.stats.requests, 0, 'nothing reached the provider');
  });

  test('Expect: 100-continue with a body no API route reads (415 by its headers) is answered from the head, never invited', async () => {
    const exchange = (head: string): Promise<string> => headOnly(stack, head);
    const cases: [string, string, string, RegExp][] = [
      ['/v1/chat/completions', 'Content-Type: application/x-www-form-urlencoded\r\n', 'text/plain', /"type":"invalid_request_error"/],
      ['/v1/chat/completions', 'Content-Type: application/json\r\nContent-Encoding: gzip\r\n', 'gzip', /content-encoding/],
      ['/v1/messages', 'Content-Type: text/plain\r\n', 'anthropic', /"type":"error"/],
      // An A2A agent's endpoint refuses them too (its JSON-RPC error), as the /v1/ routes do.
      ['/a2a/helper', 'Content-Type: text/plain\r\n', 'a2a', /"jsonrpc":"2.0"/],
      ['/a2a/helper', 'Content-Type: application/json\r\nContent-Encoding: gzip\r\n', 'a2a gzip', /"jsonrpc":"2.0"/],
    ];
    for (const [path, headers, what, body] of cases) {
      const answer = await exchange(`POST ${path} HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer ${KEY}\r\n${headers}Content-Length: 60000\r\nExpect: 100-continue\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 415 /, `${what}: ${answer.slice(0, 200)}`);
      assert.doesNotMatch(answer, /100 Continue/i, what);
      assert.match(answer, body, what);
      assert.match(answer, /\r\nconnection: close\r\n/i, `${what}: the unread body is not taken`);
    }
    assert.equal(stack.mock.stats.requests, 0, 'nothing reached the provider');
  });

  test('Expect: 100-continue where no route reads a body (unknown route, GET-only route, unknown agent) is answered from the head, never invited', async () => {
    const cases: [string, string, number, RegExp][] = [
      ['POST', '/v1/nope', 404, /"code":"unknown_url"/],
      ['POST', '/nope', 404, /"code":"unknown_url"/],
      ['POST', '/v1/models', 405, /"code":"method_not_allowed"/],
      ['PUT', '/v1/chat/completions', 405, /"code":"method_not_allowed"/],
      ['POST', '/a2a/nobody', 404, /"jsonrpc":"2.0".*no A2A agent/],
      ['POST', '/a2a/helper/more', 404, /"jsonrpc":"2.0".*unknown_url/],
    ];
    for (const [method, path, status, body] of cases) {
      const what = `${method} ${path}`;
      const answer = await headOnly(stack, `${method} ${path} HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 60000\r\nExpect: 100-continue\r\n\r\n`);
      assert.match(answer, new RegExp(`^HTTP/1\\.1 ${status} `), `${what}: ${answer.slice(0, 200)}`);
      assert.doesNotMatch(answer, /100 Continue/i, what);
      assert.match(answer, body, what);
      assert.match(answer, /\r\nconnection: close\r\n/i, `${what}: the unread body is not taken`);
    }
    // A route that reads the body is still invited, and served.
    const call = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { id: 'no-such-task' } });
    const served = await headOnly(stack, `POST /a2a/helper HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${call.length}\r\nExpect: 100-continue\r\n\r\n`, call);
    assert.match(served, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /, served.slice(0, 200));
    assert.match(served, /"jsonrpc":"2.0","id":1/, served);
    assert.equal(stack.mock.stats.requests, 0, 'nothing reached the provider');
  });

  test('an Expect other than 100-continue: 417 expectation_failed in the route\'s API format, from the head, its body never invited', async () => {
    const cases: [string, string, RegExp][] = [
      ['POST', '/v1/chat/completions', /^\{"error":\{.*"code":"expectation_failed"/],
      ['POST', '/v1/messages', /^\{"type":"error","error":\{"type":"invalid_request_error",.*\(expectation_failed\)/],
      ['POST', '/a2a/helper', /^\{"jsonrpc":"2.0",.*expectation_failed/],
      ['GET', '/v1/models', /^\{"error":\{.*"code":"expectation_failed"/],
      // An absolute-form target is the path's too (RFC 9112 §3.2.2), as the route it names is served.
      ['POST', 'http://edge/v1/messages?beta=true', /^\{"type":"error","error":\{"type":"invalid_request_error",.*\(expectation_failed\)/],
    ];
    for (const [method, path, body] of cases) {
      const what = `${method} ${path}`;
      const answer = await headOnly(stack, `${method} ${path} HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 60000\r\nExpect: 200-ok\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 417 /, `${what}: ${answer.slice(0, 200)}`);
      assert.doesNotMatch(answer, /100 Continue/i, what);
      assert.match(answer.slice(answer.indexOf('\r\n\r\n') + 4), body, `${what}: ${answer}`);
      assert.match(answer, /\r\nx-request-id: req-/i, what);
      assert.match(answer, /\r\nconnection: close\r\n/i, `${what}: the unread body is not taken`);
    }
    assert.equal(stack.mock.stats.requests, 0, 'nothing reached the provider');
  });

  test('the body is not waited for: the answer comes at once, and an upload that never ends is cut after LINGER_MS', async () => {
    // Half-open allowed: the client's socket does not end with the edge's FIN, so it goes on uploading, slowly, for ever.
    const socket = connect({ port: Number(new URL(stack.edge.url).port), host: '127.0.0.1', allowHalfOpen: true });
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => {});
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(performance.now())));
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${LIMIT * 1000}\r\n\r\n{"model":`);
    const started = performance.now();
    const trickle = setInterval(() => socket.writable && socket.write('x'.repeat(1024)), 100);
    try {
      while (!/\r\n\r\n\{.*\}$/s.test(text) && performance.now() - started < 5_000) await new Promise((r) => setTimeout(r, 10));
      assert.match(text, /^HTTP\/1\.1 413 /, text.slice(0, 200));
      assert.ok(performance.now() - started < 2_000, 'answered before the body came');
      assert.match(text, /\r\nconnection: close\r\n/i);
      const at = await closed;
      assert.ok(at - started < LINGER_MS + 3_000, `cut after ${Math.round(at - started)} ms`);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  });

  test('a message far over the limit to an A2A agent: the SDK raises the JSON-RPC 413 error, not "fetch failed"', async () => {
    for (const mib of [8, 32]) {
      const outcome = await a2aSend(`${stack.edge.url}/a2a/helper/`, KEY, mib);
      assert.deepEqual(outcome, { error: 'JsonRpcRequestMalformedError', message: 'request body is larger than the configured limit (request_too_large)', requests: 1 }, `${mib} MiB`);
    }
    assert.equal(stack.mock.stats.requests, 0, 'nothing reached the provider');
  });
});

describe('Expect: 100-continue during a drain', () => {
  test('a request pipelined behind a stream the drain lets finish gets its 503 in place of 100 Continue, its body never invited', async () => {
    const stack = await startStack({});
    const socket = connect(Number(new URL(stack.edge.url).port), '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => {});
    const closed = new Promise((resolve) => socket.on('close', resolve));
    try {
      const body = JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] });
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nx-mock-tokens: 50\r\nx-mock-interval-ms: 20\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      await waitUntil(() => text.startsWith('HTTP/1.1 200 '), 'the stream to begin');
      const report = stack.edge.shutdown(10_000);
      // Read once the stream (which the drain lets finish) is over: the edge is draining by then.
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: 60000\r\nExpect: 100-continue\r\n\r\n`);
      await closed;
      await report;
      const second = text.slice(text.indexOf('\r\n0\r\n\r\n') + 7);
      assert.match(second, /^HTTP\/1\.1 503 /, second.slice(0, 200));
      assert.match(second, /"code":"shutting_down"/);
      assert.doesNotMatch(text, /100 Continue/i, 'a draining edge invited a body it refuses');
    } finally {
      socket.destroy();
      await stack.close();
    }
  });
});
