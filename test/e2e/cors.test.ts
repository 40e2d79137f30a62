// CORS on the client listener (config `cors`): a page on an allowed origin
// calls the API from a browser, the official openai SDK unmodified in
// Debian's chromium included; a preflight from another origin is refused
// in the API's format; every answer to an allowed page (the edge's own
// errors too) is readable by it; and the provider's own Access-Control-*
// headers (vLLM allows every origin) never decide what a page may read.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, extname, join, normalize } from 'node:path';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser } from 'puppeteer-core';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, serveOnLoopback, startStack, type Stack } from '../helpers/stack.js';
import { startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const KEY = 'sk-browser-0123456789';
const APP = 'http://app.test';
const WORDS = ['Hello', ' from', ' the', ' provider'];

/** A provider that, as vLLM does by default, answers every origin with CORS headers of its own, and varies on Accept-Encoding. */
async function startProvider(): Promise<{ url: string; close(): Promise<void>; served(): number }> {
  let served = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    served++;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { stream?: boolean };
      const own = { 'access-control-allow-origin': '*', 'access-control-allow-credentials': 'true', 'access-control-expose-headers': 'x-provider', vary: 'Accept-Encoding', 'x-provider': 'scripted' };
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream', ...own });
        for (const [i, word] of WORDS.entries()) {
          res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served', choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: word } : { content: word }, finish_reason: null }] })}\n\n`);
        }
        res.end(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\ndata: [DONE]\n\n`);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', ...own });
      res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'served', choices: [{ index: 0, message: { role: 'assistant', content: WORDS.join('') }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } }));
    });
  });
  return { ...(await serveOnLoopback(server)), served: () => served };
}

function startCorsStack(providerUrl: string, origins: readonly string[] | undefined, limits: Record<string, unknown> = {}): Promise<Stack> {
  return startStack({
    providerUrl,
    configure(raw) {
      Object.assign(raw.limits as Record<string, unknown>, limits);
      raw.auth = { api_keys: [{ name: 'web', key_sha256: sha256Hex(KEY) }] };
      raw.a2a = { agents: [{ id: 'writer', model: ALIAS }] };
      if (origins !== undefined) raw.cors = { allowed_origins: origins, max_age_s: 120 };
    },
  });
}

const CHAT = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });

function preflight(stack: Stack, path: string, origin: string, headers = 'authorization, content-type, x-stainless-os'): Promise<Response> {
  return fetch(`${stack.edge.url}${path}`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': headers } });
}

function post(stack: Stack, origin: string | undefined, init: { key?: string; body?: string; chunked?: boolean } = {}): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (origin !== undefined) headers.origin = origin;
  if (init.key !== undefined) headers.authorization = `Bearer ${init.key}`;
  const bytes = init.body ?? CHAT;
  // A streamed body has no Content-Length: node:http reads it, not the lean connection.
  const body = init.chunked === true ? new Blob([bytes]).stream() : bytes;
  return fetch(`${stack.edge.url}/v1/chat/completions`, { method: 'POST', headers, body, ...(init.chunked === true ? { duplex: 'half' } : {}) } as RequestInit);
}

describe('CORS on the client listener', () => {
  let provider: Awaited<ReturnType<typeof startProvider>>;
  let stack: Stack;
  before(async () => {
    provider = await startProvider();
    stack = await startCorsStack(provider.url, [APP]);
  });
  after(async () => {
    await stack?.close();
    await provider?.close();
  });

  test('a preflight from an allowed origin is answered 204 without a key, for the headers the SDK asks', async () => {
    for (const path of ['/v1/chat/completions', '/v1/messages', '/v1/models', '/v1/responses/resp_1']) {
      const res = await preflight(stack, path, APP);
      assert.equal(res.status, 204, path);
      assert.equal(res.headers.get('access-control-allow-origin'), APP);
      assert.deepEqual(res.headers.get('access-control-allow-methods')?.split(/,\s*/).sort(), ['DELETE', 'GET', 'POST']);
      assert.equal(res.headers.get('access-control-allow-headers'), 'authorization, content-type, x-stainless-os');
      assert.equal(res.headers.get('access-control-max-age'), '120');
      assert.match(res.headers.get('vary') ?? '', /Origin/);
      // A 204 has no body, and no Content-Length (RFC 9110 §8.6: a server must not send one).
      assert.equal(res.headers.get('content-length'), null, path);
      assert.equal(await res.text(), '');
    }
  });

  test("Chromium's Private Network Access preflight from an allowed page is allowed too; not unasked", async () => {
    const asked = await fetch(`${stack.edge.url}/v1/chat/completions`, { method: 'OPTIONS', headers: { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-private-network': 'true' } });
    assert.equal(asked.status, 204);
    assert.equal(asked.headers.get('access-control-allow-private-network'), 'true');
    const plain = await preflight(stack, '/v1/chat/completions', APP);
    assert.equal(plain.headers.get('access-control-allow-private-network'), null);
    const other = await fetch(`${stack.edge.url}/v1/chat/completions`, { method: 'OPTIONS', headers: { origin: 'http://evil.test', 'access-control-request-method': 'POST', 'access-control-request-private-network': 'true' } });
    assert.equal(other.status, 403);
    assert.equal(other.headers.get('access-control-allow-private-network'), null);
    await other.body?.cancel();
  });

  test('a preflight from another origin is refused 403 in the route API format', async () => {
    const openai = await preflight(stack, '/v1/chat/completions', 'http://evil.test');
    assert.equal(openai.status, 403);
    assert.equal(openai.headers.get('access-control-allow-origin'), null);
    const error = ((await openai.json()) as { error: { code: string; type: string; message: string } }).error;
    assert.equal(error.code, 'origin_not_allowed');
    assert.equal(error.type, 'permission_error');
    assert.match(error.message, /http:\/\/evil\.test.*cors\.allowed_origins/);
    const anthropic = await preflight(stack, '/v1/messages', 'http://evil.test');
    assert.equal(anthropic.status, 403);
    assert.deepEqual(((await anthropic.json()) as { type: string; error: { type: string } }).type, 'error');
  });

  test("an answer to an allowed page carries the edge's CORS headers, never the provider's", async () => {
    // The lean connection (a plain POST) and node:http (a chunked body) write the head apart.
    for (const chunked of [false, true]) {
      const res = await post(stack, APP, { key: KEY, chunked });
      assert.equal(res.status, 200, `chunked ${chunked}: ${await res.clone().text()}`);
      assert.equal(res.headers.get('access-control-allow-origin'), APP, `chunked ${chunked}`);
      assert.equal(res.headers.get('access-control-expose-headers'), '*');
      assert.equal(res.headers.get('access-control-allow-credentials'), null);
      // The provider's Vary and the edge's both hold.
      assert.match(res.headers.get('vary') ?? '', /Accept-Encoding/);
      assert.match(res.headers.get('vary') ?? '', /Origin/);
      assert.equal(res.headers.get('x-provider'), 'scripted');
      assert.match(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content, /Hello from the provider/);
    }
  });

  test("the edge's own answers and refusals are readable by an allowed page; another origin's are not marked", async () => {
    const refused = await post(stack, APP);
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.get('access-control-allow-origin'), APP);
    assert.ok(refused.headers.get('x-request-id'));
    await refused.body?.cancel();
    const models = await fetch(`${stack.edge.url}/v1/models`, { headers: { origin: APP, authorization: `Bearer ${KEY}` } });
    assert.equal(models.status, 200);
    assert.equal(models.headers.get('access-control-allow-origin'), APP);
    await models.body?.cancel();
    const other = await post(stack, 'http://evil.test', { key: KEY });
    assert.equal(other.status, 200);
    assert.equal(other.headers.get('access-control-allow-origin'), null);
    await other.body?.cancel();
    const server = await post(stack, undefined, { key: KEY });
    assert.equal(server.status, 200);
    assert.equal(server.headers.get('access-control-allow-origin'), null);
    assert.equal(server.headers.get('access-control-expose-headers'), null);
    await server.body?.cancel();
  });

  test("an Agent Card (public, its own Vary: Host for caches) varies by Origin too, whoever asked", async () => {
    // A cache keyed by Host alone would serve a server's unmarked card, or one page's, to an allowed page.
    for (const path of ['/.well-known/agent-card.json', '/a2a/writer/.well-known/agent-card.json']) {
      for (const origin of [APP, undefined, 'http://evil.test']) {
        const res = await fetch(`${stack.edge.url}${path}`, { headers: origin === undefined ? {} : { origin } });
        assert.equal(res.status, 200, path);
        assert.equal(res.headers.get('access-control-allow-origin'), origin === APP ? APP : null, `${path} from ${origin}`);
        assert.deepEqual(res.headers.get('vary')?.split(/,\s*/).sort(), ['Host', 'Origin'], `${path} from ${origin}`);
        await res.body?.cancel();
      }
    }
  });
});

describe('CORS on refusals written on the raw socket', () => {
  let provider: Awaited<ReturnType<typeof startProvider>>;
  let stack: Stack;
  before(async () => {
    provider = await startProvider();
    stack = await startCorsStack(provider.url, [APP], { request_timeout_ms: 600 });
  });
  after(async () => {
    await stack?.close();
    await provider?.close();
  });

  /** A chat POST from `origin` framed by `framing`, of which only `piece` of the body comes: the head of the edge's answer (it closes after). */
  const answerTo = (origin: string, framing: string, piece: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = connect(stack.edge.httpPort, '127.0.0.1', () => socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nOrigin: ${origin}\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\n${framing}\r\n\r\n${piece}`));
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      socket.on('close', () => resolve(answer.split('\r\n\r\n')[0].toLowerCase()));
      socket.on('error', reject);
    });

  test("an allowed page's upload cut by a 408 or a broken chunk reads its answer; another origin's is not marked", async () => {
    const cases = [
      // The lean connection's own 408 (a Content-Length body that never comes whole), node:http's (chunked), its 400 on a bad chunk.
      { framing: 'Content-Length: 100', piece: '{', status: 408 },
      { framing: 'Transfer-Encoding: chunked', piece: '1\r\n{\r\n', status: 408 },
      { framing: 'Transfer-Encoding: chunked', piece: 'zz\r\n{\r\n', status: 400 },
    ];
    const answers = await Promise.all(cases.flatMap((c) => [APP, 'http://evil.test'].map(async (origin) => ({ ...c, origin, head: await answerTo(origin, c.framing, c.piece) }))));
    for (const { framing, status, origin, head } of answers) {
      const what = `${framing} ${status} from ${origin}: ${head}`;
      assert.match(head, new RegExp(`^http/1.1 ${status} `), what);
      if (origin === APP) {
        assert.match(head, /\r\naccess-control-allow-origin: http:\/\/app\.test\r\n/, what);
        assert.match(head, /\r\naccess-control-expose-headers: \*\r\n/, what);
        assert.match(head, /\r\nvary: origin\r\n/, what);
      } else {
        assert.doesNotMatch(head, /access-control-/, what);
      }
    }
  });
});

describe('CORS off (the default)', () => {
  let provider: Awaited<ReturnType<typeof startProvider>>;
  let stack: Stack;
  before(async () => {
    provider = await startProvider();
    stack = await startCorsStack(provider.url, undefined);
  });
  after(async () => {
    await stack?.close();
    await provider?.close();
  });

  test("a preflight is no request the edge answers for a page, and the provider's CORS headers do not open the edge to pages", async () => {
    // An OPTIONS as any other: the key check refuses it (no key on a preflight), unmarked.
    const res = await preflight(stack, '/v1/chat/completions', APP);
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('access-control-allow-origin'), null);
    await res.body?.cancel();
    const answer = await post(stack, APP, { key: KEY });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('access-control-allow-origin'), null);
    assert.equal(answer.headers.get('access-control-allow-credentials'), null);
    assert.equal(answer.headers.get('vary'), 'Accept-Encoding');
    await answer.body?.cancel();
  });
});

describe('CORS turned on and off by a config refresh', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({ mock: { ttftMs: 0, tokens: 2, intervalMs: 1 } });
  });
  after(async () => {
    await stack?.close();
  });

  const apply = async (cors: unknown): Promise<void> => {
    const config = structuredClone(stack.raw);
    if (cors !== undefined) config.cors = cors;
    const applied = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config } });
    assert.equal(applied.json.status, 'applied', JSON.stringify(applied.json));
  };
  /** On a new connection each time: with I/O workers, the kernel spreads them over the workers' listeners. */
  const preflightStatus = (): Promise<[number, string | null]> =>
    new Promise((resolve, reject) => {
      const req = request(`${stack.baseURL}/chat/completions`, { method: 'OPTIONS', agent: false, headers: { origin: APP, 'access-control-request-method': 'POST' } }, (res) => {
        res.resume();
        res.on('end', () => resolve([res.statusCode ?? 0, (res.headers['access-control-allow-origin'] as string | undefined) ?? null]));
      });
      req.on('error', reject);
      req.end();
    });

  test('every data path takes the new origins for the requests after the apply', async () => {
    assert.deepEqual(await preflightStatus(), [405, null]);
    await apply({ allowed_origins: [APP] });
    for (let i = 0; i < 6; i++) assert.deepEqual(await preflightStatus(), [204, APP]);
    const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { origin: APP, 'content-type': 'application/json' }, body: CHAT });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('access-control-allow-origin'), APP);
    await res.body?.cancel();
    await apply(undefined);
    for (let i = 0; i < 6; i++) assert.deepEqual(await preflightStatus(), [405, null]);
  });
});

describe('the openai SDK in chromium, from a page on another origin', { skip: existsSync(CHROMIUM) ? false : `no ${CHROMIUM} (apt-get install -y chromium)` }, () => {
  let provider: Awaited<ReturnType<typeof startProvider>>;
  let stack: Stack;
  let allowed: Awaited<ReturnType<typeof serveOnLoopback>>;
  let other: Awaited<ReturnType<typeof serveOnLoopback>>;
  let browser: Browser;

  /** Serves a blank page and the openai package's own ES modules, as they ship. */
  function pageServer(): Server {
    const sdk = dirname(createRequire(import.meta.url).resolve('openai'));
    return createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path.startsWith('/openai/')) {
        const file = normalize(join(sdk, path.slice('/openai/'.length)));
        if (file.startsWith(sdk) && existsSync(file)) {
          res.writeHead(200, { 'content-type': extname(file) === '.mjs' || extname(file) === '.js' ? 'text/javascript' : 'application/octet-stream' });
          res.end(readFileSync(file));
          return;
        }
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>app</title><script type="module">import OpenAI from "/openai/index.mjs"; window.OpenAI = OpenAI;</script>');
    });
  }

  before(async () => {
    provider = await startProvider();
    allowed = await serveOnLoopback(pageServer());
    other = await serveOnLoopback(pageServer());
    stack = await startCorsStack(provider.url, [allowed.url]);
    browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'], headless: true });
  });
  after(async () => {
    await browser?.close();
    await stack?.close();
    await Promise.all([provider?.close(), allowed?.close(), other?.close()]);
  });

  /** Runs a streamed chat completion with the SDK in a page of `origin`: the text, the request id it could read, or the error's class and status. */
  async function streamFrom(origin: string): Promise<{ text?: string; requestId?: string | null; error?: string; status?: number }> {
    const page = await browser.newPage();
    try {
      await page.goto(origin);
      await page.waitForFunction('window.OpenAI !== undefined');
      return (await page.evaluate(`(async () => {
        const client = new window.OpenAI({ baseURL: ${JSON.stringify(`${stack.edge.url}/v1`)}, apiKey: ${JSON.stringify(KEY)}, dangerouslyAllowBrowser: true, maxRetries: 0 });
        try {
          const { data: stream, response } = await client.chat.completions.create({ model: ${JSON.stringify(ALIAS)}, stream: true, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
          let text = '';
          for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
          return { text, requestId: response.headers.get('x-request-id') };
        } catch (err) {
          return { error: err.constructor.name, status: err.status };
        }
      })()`)) as { text?: string; requestId?: string | null; error?: string; status?: number };
    } finally {
      await page.close();
    }
  }

  test('a page on an allowed origin streams a chat completion and reads its request id', async () => {
    const result = await streamFrom(allowed.url);
    assert.equal(result.error, undefined, JSON.stringify(result));
    assert.equal(result.text, WORDS.join(''));
    assert.match(result.requestId ?? '', /^run-/);
  });

  test('a page on another origin is stopped at its preflight: the SDK sees a connection error', async () => {
    const served = provider.served();
    const result = await streamFrom(other.url);
    assert.equal(result.error, 'APIConnectionError', JSON.stringify(result));
    // Nothing reached the provider.
    assert.equal(provider.served(), served);
  });
});
