// The provider's reason, read from its error body as each kind of provider
// writes one, for the in-band error a keepalive-committed stream carries.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { decodedErrorBody, PROVIDER_ERROR_BYTES, providerErrorMessage, providerErrorSpec, readProviderError } from '../../src/workers/tunnel/provider-error.js';

const read = (body: string): string | undefined => providerErrorMessage(Buffer.from(body));

test('each provider\'s error shape gives its message', () => {
  assert.equal(read('{"error":{"message":"maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}'), 'maximum context length is 8192 tokens', 'OpenAI');
  assert.equal(read('{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}'), 'max_tokens: field required', 'Anthropic');
  assert.equal(read('{"error":"model \\"llama9\\" not found, try pulling it first"}'), 'model "llama9" not found, try pulling it first', 'Ollama');
  assert.equal(read('{"object":"error","message":"This model\'s maximum context length is 4096 tokens","type":"BadRequestError","code":400}'), "This model's maximum context length is 4096 tokens", 'vLLM');
  assert.equal(read('{"detail":[{"loc":["body","messages"],"msg":"field required"}]}'), '[{"loc":["body","messages"],"msg":"field required"}]', 'FastAPI validation');
  assert.equal(read('Bad Gateway\n'), 'Bad Gateway', 'a proxy\'s plain text');
  assert.equal(read('<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body><center><h1>502 Bad Gateway</h1></center></body></html>'), '502 Bad Gateway', 'a proxy\'s HTML page: its title');
  assert.equal(read('<!DOCTYPE html><html><body><h1>Service down</h1><p>try later</p></body></html>'), 'Service down try later', 'an HTML page without a title: its text');
  assert.equal(read(''), undefined);
  assert.equal(read('\u0000\u0001binary'), undefined);
  assert.equal(read(`{"error":"${'x'.repeat(5000)}"}`)?.length, 1001, 'clipped');
});

test('a 4xx the request caused keeps the provider\'s code and param; a 429 or 5xx, and a vLLM numeric code, do not', () => {
  const openai = readProviderError(Buffer.from('{"error":{"message":"too long","type":"invalid_request_error","param":"messages[0].content","code":"context_length_exceeded"}}'));
  assert.deepEqual(openai, { message: 'too long', code: 'context_length_exceeded', param: 'messages[0].content' });
  assert.deepEqual([providerErrorSpec(400, openai).code, providerErrorSpec(400, openai).param], ['context_length_exceeded', 'messages[0].content']);
  assert.deepEqual([providerErrorSpec(429, openai).code, providerErrorSpec(429, openai).param], ['upstream_error', null]);
  assert.deepEqual([providerErrorSpec(500, openai).code, providerErrorSpec(500, openai).param], ['upstream_error', null]);
  const vllm = readProviderError(Buffer.from('{"object":"error","message":"bad","type":"BadRequestError","code":400}'));
  assert.deepEqual([providerErrorSpec(400, vllm).code, providerErrorSpec(400, vllm).param], ['upstream_error', null]);
  const odd = readProviderError(Buffer.from('{"error":{"message":"x","code":"has space\\r\\n","param":""}}'));
  assert.deepEqual([odd.code, odd.param], [undefined, undefined], 'only a plain token is carried');
});

test('the error type says whose fault it was, as the relayed status would', () => {
  assert.deepEqual([400, 401, 403, 404, 422, 429, 500, 502].map((s) => providerErrorSpec(s).type), [
    'invalid_request_error', 'authentication_error', 'permission_error', 'invalid_request_error', 'invalid_request_error', 'rate_limit_error', 'server_error', 'server_error',
  ]);
});

test('a compressed error body longer than the cap once decoded still gives its message, as the same body uncompressed does', () => {
  // A 400 that echoes a long input: 40 KB of text, about 30 KB compressed; the edge keeps its first 16 KiB of it.
  const body = Buffer.from(`Bad request: the prompt is longer than the context window. Input was: ${randomBytes(30_000).toString('base64')}`);
  const plain = providerErrorMessage(body.subarray(0, PROVIDER_ERROR_BYTES));
  assert.match(plain ?? '', /^Bad request: the prompt is longer than the context window/);
  for (const [encoding, compress] of [['gzip', gzipSync], ['deflate', deflateSync], ['br', brotliCompressSync]] as const) {
    const whole = compress(body);
    for (const held of [whole, whole.subarray(0, PROVIDER_ERROR_BYTES)]) {
      const decoded = decodedErrorBody(held, encoding);
      assert.ok(decoded !== undefined && decoded.length <= PROVIDER_ERROR_BYTES, `${encoding}, ${held.length} bytes: decoded, within the cap`);
      assert.equal(providerErrorMessage(decoded), plain, `${encoding}, ${held.length} bytes`);
    }
  }
  // Text that compresses a thousandfold: decoded past the cap, read as its first part.
  const repetitive = gzipSync(Buffer.from(`Internal error: ${'retrying will not help. '.repeat(1_000)}`));
  assert.match(providerErrorMessage(decodedErrorBody(repetitive, 'gzip') as Buffer) ?? '', /^Internal error: retrying will not help/);
  // A bomb stays bounded: no message, no huge buffer.
  assert.equal(decodedErrorBody(gzipSync(Buffer.alloc(64 * 1024 * 1024)), 'gzip'), undefined);
  assert.equal(decodedErrorBody(Buffer.from('not gzip'), 'gzip'), undefined);
});
