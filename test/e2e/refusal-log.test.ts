// A request refused at the door (a bad key, a bad body, an unknown route or
// model, a method not allowed, a body or head too large) has no run, yet its
// answer names a `req-…` id a user may quote to an operator: each refusal is
// logged once at debug with that id, its method, path, status, code and the
// client's address, never its key or body (docs/operations.md, "Logs").
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createLogger } from '../../src/shared/logger.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, startStack, testWorkers, waitUntil } from '../helpers/stack.js';

const KEY = 'sk-refusal-log-0123456789';
const SECRET = 'sk-wrong-secret-42';

interface Refusal {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly status: number;
  readonly code: string;
}

const json = { 'content-type': 'application/json', authorization: `Bearer ${KEY}` };
const chat = (body: object): string => JSON.stringify(body);
const REFUSALS: readonly Refusal[] = [
  { name: 'bad key', method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET}` }, body: chat({ model: ALIAS, messages: [] }), status: 401, code: 'invalid_api_key' },
  { name: 'bad key (Anthropic)', method: 'POST', path: '/v1/messages', headers: { 'content-type': 'application/json', 'x-api-key': SECRET }, body: '{}', status: 401, code: 'invalid_api_key' },
  { name: 'invalid JSON', method: 'POST', path: '/v1/chat/completions', headers: json, body: '{"model":', status: 400, code: 'invalid_json' },
  { name: 'missing model', method: 'POST', path: '/v1/chat/completions', headers: json, body: chat({ messages: [] }), status: 400, code: 'missing_model' },
  { name: 'unknown model', method: 'POST', path: '/v1/chat/completions?secret=1', headers: json, body: chat({ model: 'nope', messages: [] }), status: 404, code: 'model_not_found' },
  { name: 'unsupported media type', method: 'POST', path: '/v1/embeddings', headers: { ...json, 'content-type': 'text/plain' }, body: 'hello', status: 415, code: 'unsupported_media_type' },
  { name: 'body too large', method: 'POST', path: '/v1/chat/completions', headers: json, body: chat({ model: ALIAS, messages: [{ role: 'user', content: 'x'.repeat(70_000) }] }), status: 413, code: 'request_too_large' },
  { name: 'unknown route', method: 'GET', path: '/v1/nope', headers: json, status: 404, code: 'unknown_url' },
  { name: 'method not allowed', method: 'GET', path: '/v1/chat/completions', headers: json, status: 405, code: 'method_not_allowed' },
  { name: 'head too large (the parser)', method: 'GET', path: '/v1/models', headers: { ...json, 'x-big': 'y'.repeat(20_000) }, status: 431, code: 'request_headers_too_large' },
];

// The I/O workers log to their own stdout: the log is read in the single-thread mode.
describe('refusals at the door are logged at debug', { skip: testWorkers() > 0 ? 'the I/O workers log to their own stdout' : false }, () => {
  for (const lean of [true, false]) {
    test(`one line per refusal, naming its request id, never its key or body (lean_http1 ${lean})`, async () => {
      const lines: string[] = [];
      const stack = await startStack({
        bodyBytes: 64 * 1024,
        logger: createLogger('edge', 'debug', { destination: { write: (line: string) => void lines.push(line) } }),
        configure(raw) {
          raw.auth = { api_keys: [{ name: 'tester', key_sha256: sha256Hex(KEY) }] };
          (raw.listen as { http: Record<string, unknown> }).http.lean_http1 = lean;
        },
      });
      try {
        for (const refusal of REFUSALS) {
          const response = await fetch(`${stack.edge.url}${refusal.path}`, { method: refusal.method, headers: refusal.headers, body: refusal.body });
          await response.text();
          assert.equal(response.status, refusal.status, refusal.name);
          const id = response.headers.get('x-request-id');
          assert.match(id ?? '', /^req-/, refusal.name);
          await waitUntil(() => lines.some((l) => l.includes(`"requestId":"${id}"`)), `${refusal.name}: its log line`);
          const logged = lines.filter((l) => l.includes(`"requestId":"${id}"`));
          assert.equal(logged.length, 1, `${refusal.name}: ${logged.join('')}`);
          const line = JSON.parse(logged[0]) as Record<string, unknown>;
          const path = refusal.code === 'request_headers_too_large' ? undefined : refusal.path.split('?')[0];
          const method = refusal.code === 'request_headers_too_large' ? undefined : refusal.method;
          assert.deepEqual(
            { level: line.level, msg: line.msg, method: line.method, path: line.path, status: line.status, code: line.code, remote: line.remote },
            { level: 20, msg: 'request refused', method, path, status: refusal.status, code: refusal.code, remote: '127.0.0.1' },
            refusal.name,
          );
        }
        const good = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: json, body: chat({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }) });
        assert.equal(good.status, 200);
        await good.text();
        const text = lines.join('');
        assert.equal(lines.filter((l) => l.includes('"msg":"request refused"')).length, REFUSALS.length, 'nothing for the request that was served');
        assert.ok(!text.includes(SECRET) && !text.includes(KEY), 'no key in the log');
        assert.ok(!text.includes('xxxxxxxx') && !text.includes('"nope"'), `no body in the log: ${text}`);
        assert.ok(!text.includes('secret=1'), 'no query in the log');
      } finally {
        await stack.close();
      }
    });
  }
});
