// The provider's reason, read from its error body as each kind of provider
// writes one, for the in-band error a keepalive-committed stream carries.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { providerErrorMessage, providerErrorSpec } from '../../src/workers/tunnel/provider-error.js';

const read = (body: string): string | undefined => providerErrorMessage(Buffer.from(body));

test('each provider\'s error shape gives its message', () => {
  assert.equal(read('{"error":{"message":"maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}'), 'maximum context length is 8192 tokens', 'OpenAI');
  assert.equal(read('{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}'), 'max_tokens: field required', 'Anthropic');
  assert.equal(read('{"error":"model \\"llama9\\" not found, try pulling it first"}'), 'model "llama9" not found, try pulling it first', 'Ollama');
  assert.equal(read('{"object":"error","message":"This model\'s maximum context length is 4096 tokens","type":"BadRequestError","code":400}'), "This model's maximum context length is 4096 tokens", 'vLLM');
  assert.equal(read('{"detail":[{"loc":["body","messages"],"msg":"field required"}]}'), '[{"loc":["body","messages"],"msg":"field required"}]', 'FastAPI validation');
  assert.equal(read('Bad Gateway\n'), 'Bad Gateway', 'a proxy\'s plain text');
  assert.equal(read(''), undefined);
  assert.equal(read('\u0000\u0001binary'), undefined);
  assert.equal(read(`{"error":"${'x'.repeat(5000)}"}`)?.length, 1001, 'clipped');
});

test('the error type says whose fault it was, as the relayed status would', () => {
  assert.deepEqual([400, 401, 403, 404, 422, 429, 500, 502].map((s) => providerErrorSpec(s).type), [
    'invalid_request_error', 'authentication_error', 'permission_error', 'invalid_request_error', 'invalid_request_error', 'rate_limit_error', 'server_error', 'server_error',
  ]);
});
