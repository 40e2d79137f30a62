// /metrics as a scraper parses it (strictly, text format 0.0.4), with the
// data path on the main thread or on I/O workers (EDGE_TEST_WORKERS): model
// aliases and API key names the config accepts (quotes, backslashes, line
// breaks, UTF-8, '=', ',', ':') come out escaped and whole after the merge.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chatOnFreshConnection } from '../helpers/stack.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { parsePromText, sampleOf } from '../helpers/prom-text.js';
import { PROVIDER_ID, SERVED, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

const ALIASES = ['we"ird\\alias\nline', 'modèle,provider:x=1', 'modèle', 'a=b,c'];
const KEYS = [
  { name: 'team "A"\\ops', key: 'sk-metrics-key-000001' },
  { name: 'zé,q=1', key: 'sk-metrics-key-000002' },
  { name: 'plain', key: 'sk-metrics-key-000003' },
];

describe('/metrics exposition', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({
      capacity: 8,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      configure: (raw) => {
        (raw.models as unknown[]).push(...ALIASES.map((alias) => ({ alias, providers: { [PROVIDER_ID]: SERVED } })));
        raw.auth = { api_keys: KEYS.map((k) => ({ name: k.name, key_sha256: sha256Hex(k.key), weight: 1 })) };
        raw.scheduler = { fairness: true };
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  function chat(alias: string, key: string): Promise<number> {
    return chatOnFreshConnection(stack.baseURL, alias, key);
  }

  test('every line parses, families are whole, label values survive the merge', async () => {
    const per = 6;
    for (const alias of ALIASES) {
      for (let i = 0; i < per; i++) assert.equal(await chat(alias, KEYS[i % KEYS.length].key), 200);
    }
    const text = await stack.metrics();
    const families = parsePromText(text);
    for (const alias of ALIASES) {
      assert.equal(sampleOf(families, 'edge_requests_total', { model: alias, provider: PROVIDER_ID, status: '200' }), per, `${JSON.stringify(alias)}\n${text.split('\n').filter((l) => l.startsWith('edge_requests_total')).join('\n')}`);
      assert.equal(sampleOf(families, 'edge_request_duration_seconds_count', { model: alias }), per, JSON.stringify(alias));
    }
    // Each alias served each key's requests: one series per pair, none merged into another.
    for (const alias of ALIASES) {
      for (const k of KEYS) assert.equal(sampleOf(families, 'edge_tenant_dispatches_total', { model: alias, tenant: k.name }), per / KEYS.length, `${JSON.stringify(alias)} ${JSON.stringify(k.name)}\n${text.split('\n').filter((l) => l.startsWith('edge_tenant_dispatches_total')).join('\n')}`);
    }
  });
});
