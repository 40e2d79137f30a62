// A provider's error whose body is not JSON: an Ollama older than its
// Anthropic routes answers /v1/messages with Gin's plain-text
// "404 page not found", and a reverse proxy in front of vLLM answers 502
// with an nginx HTML page. Relayed as they were, the SDKs found no error
// object in them (the Anthropic SDK's error.type and the openai SDK's
// error.code undefined, the message a page of HTML). The edge answers
// them in the route's own error format, the provider's status kept and
// its text (the page's title) as the message. A JSON error still passes
// through untouched.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { inFlight, startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const NGINX_502 = '<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0</center>\r\n</body>\r\n</html>\r\n';
const VLLM_400 = JSON.stringify({ object: 'error', message: "This model's maximum context length is 8192 tokens.", type: 'BadRequestError', param: null, code: 400 });

/** An old Ollama (no /v1/messages: Gin's NoRoute answer) whose chat route sits behind a failing proxy when `proxyDown`. */
function fakeOllama(): Promise<{ server: Server; url: string; proxyDown: boolean; jsonError: boolean; emptyJson: false | 'length' | 'chunked' }> {
  const state = { server: undefined as unknown as Server, url: '', proxyDown: false, jsonError: false, emptyJson: false as false | 'length' | 'chunked' };
  state.server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/api/tags') {
        res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
        res.end('{"models":[]}');
      } else if (state.emptyJson !== false) {
        // A server whose error path sets the JSON content-type and writes nothing: said with
        // `content-length: 0`, or (node:http's writeHead then end()) a chunked body that ends at once.
        res.writeHead(500, state.emptyJson === 'length' ? { 'content-type': 'application/json', 'content-length': '0' } : { 'content-type': 'application/json' });
        res.end();
      } else if (req.url === '/v1/chat/completions' && state.jsonError) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(VLLM_400);
      } else if (req.url === '/v1/chat/completions' && state.proxyDown) {
        res.writeHead(502, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(NGINX_502) });
        res.end(NGINX_502);
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('404 page not found');
      }
    });
  });
  return new Promise((resolve) => state.server.listen(0, '127.0.0.1', () => {
    state.url = `http://127.0.0.1:${(state.server.address() as AddressInfo).port}`;
    resolve(state);
  }));
}

describe('a provider error that is not JSON', () => {
  let ollama: Awaited<ReturnType<typeof fakeOllama>>;
  let stack: ProvidersStack;
  let openai: OpenAI;
  let anthropic: Anthropic;
  before(async () => {
    ollama = await fakeOllama();
    // As an old Ollama is typed: its defaults claim /v1/messages, which it answers 404.
    stack = await startProvidersStack('llama3', { ol: ollama.url }, {}, { ol: ['chat', 'messages'] });
    openai = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: stack.edge.url, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await stack.close();
    ollama.server.closeAllConnections();
    await new Promise((resolve) => ollama.server.close(resolve));
  });

  test("is answered in the route's error format, with the provider's status and its text", async () => {
    const notFound = await anthropic.messages.create({ model: 'llama3', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }).then(() => undefined, (err: unknown) => err);
    assert.ok(notFound instanceof Anthropic.NotFoundError, String(notFound));
    assert.equal((notFound.error as { type?: string; error?: { type?: string; message?: string } }).type, 'error');
    const inner = (notFound.error as { error: { type: string; message: string } }).error;
    assert.equal(inner.type, 'not_found_error');
    assert.match(inner.message, /the provider answered HTTP 404: 404 page not found/);

    ollama.proxyDown = true;
    for (const stream of [false, true]) {
      const failed = await openai.chat.completions.create({ model: 'llama3', stream, messages: [{ role: 'user', content: 'hi' }] }).then(() => undefined, (err: unknown) => err);
      assert.ok(failed instanceof OpenAI.InternalServerError, String(failed));
      assert.equal(failed.status, 502);
      assert.equal(failed.code, 'upstream_error', `stream: ${stream}`);
      assert.equal(failed.type, 'server_error');
      assert.equal(failed.message, '502 the provider answered HTTP 502: 502 Bad Gateway', 'the page title, not its markup');
    }
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  });

  for (const empty of ['length', 'chunked'] as const) test(`an empty error body labelled JSON (${empty}) is answered in the route's format too, not relayed as no error at all`, async () => {
    ollama.emptyJson = empty;
    try {
      const failed = await anthropic.messages.create({ model: 'llama3', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }).then(() => undefined, (err: unknown) => err);
      assert.ok(failed instanceof Anthropic.InternalServerError, String(failed));
      assert.equal(failed.status, 500);
      assert.deepEqual(failed.error, { type: 'error', error: { type: 'api_error', message: 'the provider answered HTTP 500 (upstream_error)' } });
      assert.match(failed.requestID ?? '', /^run-/);
      const chat = await openai.chat.completions.create({ model: 'llama3', messages: [{ role: 'user', content: 'hi' }] }).then(() => undefined, (err: unknown) => err);
      assert.ok(chat instanceof OpenAI.InternalServerError, String(chat));
      assert.equal(chat.code, 'upstream_error');
      assert.equal(chat.message, '500 the provider answered HTTP 500');
    } finally {
      ollama.emptyJson = false;
    }
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  });

  test('a JSON error still passes through untouched', async () => {
    ollama.jsonError = true;
    try {
      const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llama3', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(res.status, 400);
      assert.equal(await res.text(), VLLM_400);
    } finally {
      ollama.jsonError = false;
    }
  });
});
