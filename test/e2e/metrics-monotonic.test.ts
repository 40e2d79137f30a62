// Counters and histograms on /metrics never go down from one scrape to the
// next (Prometheus reads a drop as a reset): while I/O workers serve
// traffic, across a config refresh that renames and removes aliases, and
// when an I/O worker exits and is replaced.
process.env.EDGE_TEST_HOOKS = '1';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { WorkerPool } from '../../src/main/worker-pool.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { monotoneSamples, parsePromText } from '../helpers/prom-text.js';
import { copyOf, PROVIDER_ID, SERVED, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';
import { chatOnFreshConnection, waitFor } from '../helpers/stack.js';

const KEYS = [
  { name: 'alice', key: 'sk-mono-key-00000001' },
  { name: 'bob', key: 'sk-mono-key-00000002' },
];

// Two workers, and three: with three or more parts the order a scrape adds them in changes a float sum's last bit.
for (const workers of [2, 3])
describe(`/metrics totals only grow (${workers} I/O workers)`, () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({
      capacity: 8,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      configure: (raw) => {
        raw.workers = { count: workers };
        (raw.models as unknown[]).push(...['b', 'c'].map((alias) => ({ alias, providers: { [PROVIDER_ID]: SERVED } })));
        raw.auth = { api_keys: KEYS.map((k) => ({ name: k.name, key_sha256: sha256Hex(k.key), weight: 1 })) };
        raw.scheduler = { fairness: true };
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('while workers serve, across a refresh that renames and removes aliases, and a worker replaced', async () => {
    let aliases = ['llama3', 'b', 'c'];
    let running = true;
    let n = 0;
    const traffic = Array.from({ length: 4 }, async () => {
      while (running) {
        const key = KEYS[n % 2].key;
        // A worker's exit cuts its connections.
        await chatOnFreshConnection(stack.baseURL, aliases[n++ % aliases.length], key).catch(() => undefined);
      }
    });
    const problems: string[] = [];
    let last = new Map<string, number>();
    let scrapes = 0;
    const scrape = async (): Promise<void> => {
      const now = monotoneSamples(parsePromText(await stack.metrics()));
      for (const [series, value] of now) {
        const before = last.get(series);
        if (before !== undefined && value < before) problems.push(`${series}: ${before} -> ${value} (scrape ${scrapes})`);
      }
      for (const series of last.keys()) if (!now.has(series) && !series.startsWith('edge_tenant_dispatches_total')) problems.push(`${series} gone (scrape ${scrapes})`);
      last = now;
      scrapes++;
    };
    const scrapeFor = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) await scrape();
    };
    try {
    await scrapeFor(10);
    // Rename c to c2 and remove b.
    const raw = copyOf(stack.raw);
    raw.models = (raw.models as { alias: string }[]).filter((m) => m.alias !== 'b').map((m) => (m.alias === 'c' ? { ...m, alias: 'c2' } : m));
    const refreshed = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
    assert.equal(refreshed.status, 200, JSON.stringify(refreshed.json));
    aliases = ['llama3', 'c2'];
    await scrapeFor(10);
    const pool = stack.edge.plane as unknown as WorkerPool;
    await pool.call(0, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
    await scrapeFor(3);
    await waitFor(async () => (await pool.inspect()).length === workers, 'the worker is replaced');
    await scrapeFor(10);
    } finally {
      running = false;
      await Promise.all(traffic);
    }
    await scrape();
    assert.ok(n > 20, `traffic was served (${n} requests)`);
    assert.deepEqual(problems, []);
  });
});
