// The HTTP bad-input corpus: malformed and truncated JSON, wrong types, huge
// bodies, deep nesting, invalid UTF-8, missing and extra headers, unknown
// routes and methods, and bytes that are not HTTP at all. Every case gets
// its documented status and an OpenAI error body; the edge stays up and no
// lease or exchange outlives the corpus.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { ALIAS, inFlight, NODE_ID, openExchanges, startStack, waitFor, type Stack } from '../helpers/stack.js';

const BODY_LIMIT = 64 * 1024;

interface Reply {
  readonly status: number;
  readonly body: string;
}

interface ErrorShape {
  readonly error: { readonly message: string; readonly type: string; readonly param: string | null; readonly code: string };
}

/** Sends raw bytes and reads until the server closes or `quietMs` passes. */
function raw(port: number, bytes: string | Buffer, quietMs = 500): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      const split = text.indexOf('\r\n\r\n');
      resolve({ status: match ? Number(match[1]) : 0, body: split >= 0 ? text.slice(split + 4) : '' });
    };
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(done, quietMs);
    };
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      arm();
    });
    socket.on('end', done);
    socket.on('error', (err) => (chunks.length > 0 ? done() : reject(err)));
    socket.write(bytes);
    arm();
  });
}

function assertOpenAiError(body: string, status: number, code: string, context: string): void {
  let parsed: ErrorShape;
  try {
    parsed = JSON.parse(body) as ErrorShape;
  } catch {
    assert.fail(`${context}: body is not JSON: ${JSON.stringify(body.slice(0, 200))}`);
  }
  const e = parsed.error;
  assert.equal(e.code, code, `${context}: code`);
  assert.equal(typeof e.message, 'string', `${context}: message`);
  assert.ok(e.message.length > 0, `${context}: message`);
  assert.ok(['invalid_request_error', 'authentication_error', 'permission_error', 'rate_limit_error', 'server_error'].includes(e.type), `${context}: type ${e.type}`);
  assert.ok(e.param === null || typeof e.param === 'string', `${context}: param`);
  assert.ok(status >= 400, `${context}: status ${status}`);
}

interface BodyCase {
  readonly name: string;
  readonly body: string | Buffer;
  readonly status: number;
  readonly code?: string;
  /** The error's `param`, where one member is to blame. */
  readonly param?: string;
  readonly headers?: Record<string, string>;
}

const nest = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);
const chat = (extra: string): string => `{"model":"${ALIAS}","messages":[{"role":"user","content":"hi"}]${extra}}`;

const BODY_CASES: BodyCase[] = [
  { name: 'empty body', body: '', status: 400, code: 'invalid_json' },
  { name: 'whitespace only', body: ' \n\t ', status: 400, code: 'invalid_json' },
  { name: 'truncated object', body: '{', status: 400, code: 'invalid_json' },
  { name: 'truncated mid-array', body: `{"model":"${ALIAS}","messages":[`, status: 400, code: 'invalid_json' },
  { name: 'truncated mid-string', body: `{"model":"${ALIAS}","messages":"abc`, status: 400, code: 'invalid_json' },
  { name: 'trailing comma', body: `{"model":"${ALIAS}",}`, status: 400, code: 'invalid_json' },
  { name: 'single quotes', body: `{'model':'${ALIAS}'}`, status: 400, code: 'invalid_json' },
  { name: 'trailing garbage', body: `${chat('')}x`, status: 400, code: 'invalid_json' },
  { name: 'two documents', body: `${chat('')}${chat('')}`, status: 400, code: 'invalid_json' },
  { name: 'NaN literal', body: `{"model":"${ALIAS}","temperature":NaN}`, status: 400, code: 'invalid_json' },
  { name: 'raw control byte in a string', body: `{"model":"${ALIAS}","x":"a\u0001b"}`, status: 400, code: 'invalid_json' },
  { name: 'bad escape', body: `{"model":"${ALIAS}","x":"\\q"}`, status: 400, code: 'invalid_json' },
  { name: 'lone surrogate escape is valid JSON', body: chat(',"x":"\\ud800"'), status: 200 },
  { name: 'invalid UTF-8 byte', body: Buffer.concat([Buffer.from(`{"model":"${ALIAS}","x":"`), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]), status: 400, code: 'invalid_json' },
  { name: 'overlong UTF-8', body: Buffer.concat([Buffer.from(`{"model":"${ALIAS}","x":"`), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]), status: 400, code: 'invalid_json' },
  { name: 'UTF-8 BOM', body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(chat(''))]), status: 400, code: 'invalid_json' },
  { name: 'top-level null', body: 'null', status: 400, code: 'invalid_json' },
  { name: 'top-level array', body: '[]', status: 400, code: 'invalid_json' },
  { name: 'top-level string', body: '"llama3"', status: 400, code: 'invalid_json' },
  { name: 'top-level number', body: '42', status: 400, code: 'invalid_json' },
  { name: 'missing model', body: '{"messages":[]}', status: 400, code: 'missing_model' },
  { name: 'model is a number', body: '{"model":42}', status: 400, code: 'invalid_model' },
  { name: 'model is null', body: '{"model":null}', status: 400, code: 'invalid_model' },
  { name: 'model is an object', body: '{"model":{"name":"llama3"}}', status: 400, code: 'invalid_model' },
  { name: 'model is empty', body: '{"model":""}', status: 400, code: 'invalid_model' },
  { name: 'model given twice', body: `{"model":"${ALIAS}","model":"other"}`, status: 400, code: 'invalid_json', param: 'model' },
  { name: 'previous_response_id given twice', body: chat(',"previous_response_id":"resp_a","previous_response_id":"resp_b"'), status: 400, code: 'invalid_json', param: 'previous_response_id' },
  { name: 'unknown model', body: '{"model":"gpt-17"}', status: 404, code: 'model_not_found' },
  { name: 'model only in a nested object', body: `{"x":{"model":"${ALIAS}"}}`, status: 400, code: 'missing_model' },
  { name: 'deep nesting', body: `{"model":"${ALIAS}","x":${nest(5_000)}}`, status: 400, code: 'json_too_deep' },
  { name: 'body over limits.body_bytes', body: chat(`,"pad":"${'a'.repeat(BODY_LIMIT)}"`), status: 413, code: 'request_too_large' },
  // The route's required fields are checked at the door (test/e2e/strict-input.test.ts has every route)...
  { name: 'messages is not an array', body: `{"model":"${ALIAS}","messages":5}`, status: 400, code: 'invalid_field' },
  { name: 'messages missing', body: `{"model":"${ALIAS}"}`, status: 400, code: 'missing_required_field' },
  // ...other fields are the provider's to judge: they pass through untouched.
  { name: 'wrong types elsewhere (provider decides)', body: chat(',"stream":"yes","temperature":"hot"'), status: 200 },
  { name: 'JSON sent as text/plain', body: chat(''), status: 415, code: 'unsupported_media_type', headers: { 'content-type': 'text/plain' } },
  { name: 'JSON with a charset parameter', body: chat(''), status: 200, headers: { 'content-type': 'application/json; charset=utf-8' } },
  { name: 'no content-type', body: chat(''), status: 200, headers: { 'content-type': '' } },
  { name: 'unknown x-edge-node', body: chat(''), status: 404, code: 'node_not_found', headers: { 'x-edge-node': 'gpu-404' } },
  { name: 'valid x-edge-node', body: chat(''), status: 200, headers: { 'x-edge-node': NODE_ID } },
  { name: 'a client Authorization with auth off is ignored', body: chat(''), status: 200, headers: { authorization: 'Bearer whatever' } },
];

describe('HTTP bad-input corpus', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      bodyBytes: BODY_LIMIT,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 0 },
      configure: (r) => void Object.assign(r.limits as object, { max_header_bytes: 4096 }),
    });
  });
  after(async () => {
    await stack.close();
  });

  for (const c of BODY_CASES) {
    test(`body: ${c.name} -> ${c.status}${c.code ? ` ${c.code}` : ''}`, async () => {
      const headers: Record<string, string> = { 'content-type': 'application/json', ...c.headers };
      if (headers['content-type'] === '') delete headers['content-type'];
      // fetch labels a string body text/plain when no type is given; bytes go unlabelled.
      const body = headers['content-type'] === undefined && typeof c.body === 'string' ? Buffer.from(c.body) : c.body;
      const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers, body });
      const text = await res.text();
      assert.equal(res.status, c.status, `${c.name}: ${text.slice(0, 200)}`);
      if (c.code !== undefined) assertOpenAiError(text, res.status, c.code, c.name);
      else assert.equal((JSON.parse(text) as { object: string }).object, 'chat.completion');
      if (c.param !== undefined) assert.equal((JSON.parse(text) as { error: { param: string | null } }).error.param, c.param, c.name);
    });
  }

  const ROUTES: [method: string, path: string, status: number, code: string, allow?: string][] = [
    ['GET', '/v1/chat/completions', 405, 'method_not_allowed', 'POST'],
    ['PUT', '/v1/completions', 405, 'method_not_allowed', 'POST'],
    ['DELETE', '/v1/embeddings', 405, 'method_not_allowed', 'POST'],
    ['POST', '/v1/models', 405, 'method_not_allowed', 'GET, HEAD'],
    ['DELETE', '/v1/models/llama3', 405, 'method_not_allowed', 'GET, HEAD'],
    ['PUT', '/v1/responses/resp_x', 405, 'method_not_allowed', 'GET, HEAD, DELETE'],
    ['GET', '/v1/responses/resp_x/cancel', 405, 'method_not_allowed', 'POST'],
    ['POST', '/v1/responses/resp_x/input_items', 405, 'method_not_allowed', 'GET, HEAD'],
    ['GET', '/v1/unknown', 404, 'unknown_url'],
    ['POST', '/v1/chat/completions/', 404, 'unknown_url'],
    ['POST', '/v2/chat/completions', 404, 'unknown_url'],
    ['GET', '/', 404, 'unknown_url'],
    ['GET', '/v1/responses/resp_x/other', 404, 'unknown_url'],
    ['PATCH', '/admin', 404, 'unknown_url'],
  ];
  for (const [method, path, status, code, allow] of ROUTES) {
    test(`route: ${method} ${path} -> ${status} ${code}`, async () => {
      const res = await fetch(`${stack.edge.url}${path}`, { method, headers: { 'content-type': 'application/json' }, body: method === 'GET' ? undefined : '{}' });
      assert.equal(res.status, status);
      assert.equal(res.headers.get('allow') ?? undefined, allow, 'a 405 names the methods the path takes');
      assert.match(res.headers.get('x-request-id') ?? '', /^req-/);
      assertOpenAiError(await res.text(), res.status, code, `${method} ${path}`);
    });
  }

  test('the model list and a model carry a request id, as every other answer does (the SDK\'s _request_id)', async () => {
    for (const path of ['/v1/models', '/v1/models/llama3']) {
      const res = await fetch(`${stack.edge.url}${path}`);
      assert.equal(res.status, 200, path);
      await res.arrayBuffer();
      assert.match(res.headers.get('x-request-id') ?? '', /^req-/, path);
      assert.equal(res.headers.get('request-id'), res.headers.get('x-request-id'));
    }
    const anthropic = await fetch(`${stack.edge.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } });
    await anthropic.arrayBuffer();
    assert.match(anthropic.headers.get('request-id') ?? '', /^req-/);
  });

  const RAW: [name: string, bytes: string, status: number, code: string][] = [
    ['not HTTP at all', 'hello edge\r\n\r\n', 400, 'invalid_request'],
    ['binary garbage', '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n', 400, 'invalid_request'],
    ['header without a colon', 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nbroken header\r\n\r\n', 400, 'invalid_request'],
    ['control byte in a header value', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n', 400, 'invalid_request'],
    ['missing Host on HTTP/1.1', 'GET /healthz HTTP/1.1\r\n\r\n', 400, 'invalid_request'],
    ['both Content-Length and chunked', 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'invalid_request'],
    ['bad chunk size', 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 400, 'invalid_request'],
    ['head over limits.max_header_bytes', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(8192)}\r\n\r\n`, 431, 'request_headers_too_large'],
    ['URL over limits.max_header_bytes', `GET /${'u'.repeat(8192)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431, 'request_headers_too_large'],
  ];
  for (const [name, bytes, status, code] of RAW) {
    test(`raw: ${name} -> ${status} ${code}`, async () => {
      const reply = await raw(stack.edge.httpPort, Buffer.from(bytes, 'latin1'));
      assert.equal(reply.status, status, `${name}: ${JSON.stringify(reply.body.slice(0, 200))}`);
      assertOpenAiError(reply.body, reply.status, code, name);
    });
  }

  test('a client that sends half a body and hangs up costs nothing: the provider never sees it', async () => {
    const requests = stack.mock.stats.requests;
    for (let i = 0; i < 20; i++) {
      const socket = connect(stack.edge.httpPort, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-request-id: half-body-${i}\r\nContent-Length: 1000\r\n\r\n{"model":"${ALIAS}"`);
      await new Promise((r) => setTimeout(r, 5));
      socket.destroy();
    }
    await waitFor(async () => (await openExchanges(stack.edge)) === 0, 'the half requests to be forgotten');
    assert.equal(stack.mock.stats.requests, requests, 'no half request was dispatched');
    assert.equal(stack.mock.requestLog.filter((r) => r.requestId.startsWith('half-body-')).length, 0);
  });

  test('a client that leaves after its request was dispatched cancels it at the provider', async () => {
    // Long enough (100,000 tokens at 10 ms, whole or streamed) that nothing here ends on its own:
    // each upstream request can only end as an abort, caused by the edge's CANCEL.
    const LEAVERS = 10;
    const aborted = stack.mock.stats.aborted;
    for (let i = 0; i < LEAVERS; i++) {
      const body = JSON.stringify({ model: ALIAS, stream: i % 2 === 0, messages: [] });
      const socket = connect(stack.edge.httpPort, '127.0.0.1');
      socket.on('error', () => {});
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nx-request-id: leaver-${i}\r\nx-mock-tokens: 100000\r\nx-mock-interval-ms: 10\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      // Gone once the provider is working on it (and, for some, a few ms into the answer).
      await stack.mock.waitFor(() => stack.mock.requestLog.some((r) => r.requestId === `leaver-${i}`), 3_000);
      await new Promise((r) => setTimeout(r, i * 3));
      socket.destroy();
    }
    await stack.mock.waitFor(() => stack.mock.stats.aborted - aborted === LEAVERS, 3_000);
    const leavers = stack.mock.requestLog.filter((r) => r.requestId.startsWith('leaver-'));
    assert.deepEqual(
      leavers.map((r) => [r.requestId, r.aborted, r.completed]),
      Array.from({ length: LEAVERS }, (_, i) => [`leaver-${i}`, true, false]),
      'every upstream request was cancelled, none completed',
    );
  });

  test('headers the client names in Connection never reach the provider; end-to-end ones do (RFC 9110 7.6.1)', async () => {
    const body = chat('');
    const socket = connect(stack.edge.httpPort, '127.0.0.1');
    socket.on('error', () => {});
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close, X-Hop-Secret\r\nConnection: x-other-hop\r\n` +
        `X-Hop-Secret: s3cret\r\nX-Other-Hop: 1\r\nX-End-To-End: kept\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await once(socket, 'end');
    assert.match(answer, /^HTTP\/1\.1 200/);
    const seen = stack.mock.lastRequest('/v1/chat/completions')?.headers;
    assert.equal(seen?.['x-end-to-end'], 'kept');
    assert.equal(seen?.['x-hop-secret'], undefined, 'a nominated header reached the provider');
    assert.equal(seen?.['x-other-hop'], undefined, 'a header nominated by a second Connection line reached the provider');
  });

  test('a gzip-compressed request body: 415 naming the encoding, Accept-Encoding: identity, and nothing reaches the provider', async () => {
    const before = stack.mock.stats.requests;
    const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipSync(chat('')) });
    assert.equal(res.status, 415);
    assert.equal(res.headers.get('accept-encoding'), 'identity');
    const error = ((await res.json()) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'unsupported_media_type');
    assert.match(error.message, /content-encoding "gzip"/);
    assert.equal(stack.mock.stats.requests, before);
  });

  test('a transfer coding before chunked (gzip, chunked): 415 naming it, not read as invalid JSON or relayed as if plain', async () => {
    const before = stack.mock.stats.requests;
    const chunked = (bytes: Buffer): Buffer =>
      Buffer.concat([Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n0\r\n\r\n')]);
    // Compressed as it says, and plain bytes labelled compressed: node:http takes off the chunked framing only.
    for (const [what, bytes] of [['gzip', gzipSync(chat(''))], ['labelled gzip', Buffer.from(chat(''))]] as const) {
      const reply = await raw(stack.edge.httpPort, chunked(bytes));
      assert.equal(reply.status, 415, `${what}: ${reply.body}`);
      assertOpenAiError(reply.body, reply.status, 'unsupported_media_type', what);
      assert.match(reply.body, /transfer-encoding \\"gzip, chunked\\"/, what);
    }
    assert.equal(stack.mock.stats.requests, before, 'nothing reached the provider');
  });

  test('the client\'s Accept-Encoding never reaches the provider: it is asked for identity, so the edge reads plain bytes', async () => {
    const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip, deflate, br' }, body: chat('') });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    assert.equal(stack.mock.lastRequest('/v1/chat/completions')?.headers['accept-encoding'], 'identity');
  });

  test('after the corpus: the edge still serves, no lease or exchange is left, every invariant holds', async () => {
    await waitFor(async () => inFlight(stack.edge) === 0 && (await openExchanges(stack.edge)) === 0, 'everything to be released');
    assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
    assert.equal(stack.edge.driver.status().liveLeases, 0);
    const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat('') });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    await stack.mock.waitFor(() => stack.mock.stats.inFlight === 0, 3_000);
  });
});
