// Every reason edge_rejects_total counts a door refusal under is one the
// metrics table of docs/operations.md names for it: an operator who reads a
// reason off /metrics finds what it means. Real stack with API keys and
// CORS on; the refusals a browser, an SDK or a bad client meets at the door.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { parsePromText } from '../helpers/prom-text.js';
import { startOpsStack } from '../main/admin/ops-stack.js';

const KEY = 'sk-rejects-docs-000001';

/** The codes the edge_rejects_total row of the metrics table names. */
function documentedReasons(): Set<string> {
  const text = readFileSync(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
  const row = text.split('\n').find((l) => l.startsWith('| `edge_rejects_total` |'));
  assert.ok(row !== undefined, 'the edge_rejects_total row');
  return new Set([...row.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]));
}

test('each door refusal counts under a reason the metrics table documents', async () => {
  const stack = await startOpsStack({
    apiKeys: [{ name: 'docs', key_sha256: sha256Hex(KEY), models: ['llama3'] }],
    configure: (raw) => void (raw.cors = { allowed_origins: ['http://app.test'] }),
  });
  try {
    const refused = async (path: string, init: RequestInit): Promise<number> => {
      const res = await fetch(`${stack.edge.url}${path}`, init);
      await res.text();
      return res.status;
    };
    const json = { 'content-type': 'application/json', authorization: `Bearer ${KEY}` };
    assert.equal(await refused('/v1/chat/completions', { method: 'OPTIONS', headers: { origin: 'http://evil.test', 'access-control-request-method': 'POST' } }), 403);
    assert.equal(await refused('/v1/chat/completions', { method: 'POST', headers: json, body: '{"model":"llama3"' }), 400);
    assert.equal(await refused('/v1/chat/completions', { method: 'POST', headers: json, body: '{"model":"embed-small","messages":[]}' }), 403);
    assert.equal(await refused('/v1/files', { method: 'GET', headers: json }), 404);
    const sdk = new OpenAI({ baseURL: stack.baseURL, apiKey: 'sk-not-a-key', maxRetries: 0 });
    assert.equal(await sdk.models.list().then(() => 200, (err: { status: number }) => err.status), 401);
    const reasons = new Set(parsePromText(await stack.metrics()).get('edge_rejects_total')?.samples.map((s) => s.labels.reason));
    assert.ok(reasons.has('origin_not_allowed') && reasons.has('invalid_api_key'), `the refusals were counted: ${[...reasons].join(', ')}`);
    const documented = documentedReasons();
    assert.deepEqual([...reasons].filter((r) => !documented.has(r)), [], 'reasons /metrics shows that the table does not name');
  } finally {
    await stack.close();
  }
});
