// With I/O workers a refresh reaches each worker by message. The answer
// `applied` waits for every one of them: a worker busy for a moment (a long
// GC pause, a CPU-bound turn) delays the answer, and once it comes a key the
// new config removed is refused on every worker's connections.
process.env.EDGE_TEST_HOOKS = '1';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { get } from 'node:http';
import { after, before, test } from 'node:test';
import { chatOnFreshConnection, waitUntil } from '../helpers/stack.js';
import type { WorkerPool } from '../../src/main/worker-pool.js';
import { ALIAS, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

const ALICE = 'sk-alice-refresh-workers';
const BOB = 'sk-bob-refresh-workers';
const sha = (key: string): string => createHash('sha256').update(key).digest('hex');
let stack: OpsStack;

before(async () => {
  stack = await startOpsStack({
    capacity: 8,
    mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
    configure(raw) {
      raw.workers = { count: 2 };
      raw.auth = { api_keys: [{ name: 'alice', key_sha256: sha(ALICE) }, { name: 'bob', key_sha256: sha(BOB) }] };
    },
  });
});

after(async () => {
  await stack.close();
});

function statusWith(key: string): Promise<number> {
  return chatOnFreshConnection(stack.baseURL, ALIAS, key);
}

test('applied comes once every worker has the config: a busy worker delays it, and the removed key is refused everywhere after', async () => {
  const pool = stack.edge.plane as unknown as WorkerPool;
  assert.equal(await statusWith(ALICE), 200);
  const raw = structuredClone(stack.raw) as { auth: { api_keys: unknown[] } };
  raw.auth.api_keys = raw.auth.api_keys.slice(1);
  // Worker 1 is busy for 600 ms from the next turn: the config message waits for it.
  await pool.call(1, { type: 'testHook', hook: 'stall', ms: 600 });
  const started = performance.now();
  const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
  const answeredMs = performance.now() - started;
  assert.equal(status, 200);
  assert.equal(json.status, 'applied');
  assert.ok(answeredMs >= 400, `answered after ${Math.round(answeredMs)} ms, before the busy worker had the config`);
  const statuses = await Promise.all(Array.from({ length: 16 }, () => statusWith(ALICE)));
  assert.deepEqual(statuses, statuses.map(() => 401), 'the removed key on every worker');
  assert.equal(await statusWith(BOB), 200);
});


/** GET /v1/models on a connection of its own (the kernel picks the worker). */
function modelsOnFreshConnection(): Promise<{ data: { id: string; created: number }[] }> {
  return new Promise((resolve, reject) => {
    const req = get(`${stack.baseURL}/models`, { agent: false, headers: { authorization: `Bearer ${BOB}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve(JSON.parse(body) as { data: { id: string; created: number }[] }));
    });
    req.on('error', reject);
  });
}

test("the model list's created is one value whichever worker answers, and a refresh keeps it", async () => {
  // Sixteen connections: the kernel spreads them over both workers.
  const lists = await Promise.all(Array.from({ length: 16 }, () => modelsOnFreshConnection()));
  const seen = new Set(lists.flatMap((l) => l.data.map((m) => m.created)));
  assert.equal(seen.size, 1, `created: ${[...seen].join(', ')}`);
  const [created] = seen;
  // A refresh a second later (one that adds an alias) must not restamp it.
  await waitUntil(() => Math.floor(Date.now() / 1000) > created, 'a second boundary');
  const raw = structuredClone(stack.raw) as { models: { alias: string }[] };
  raw.models.push({ ...raw.models[0], alias: 'another' });
  const { json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
  assert.equal(json.status, 'applied');
  const listed = await Promise.all(Array.from({ length: 8 }, () => modelsOnFreshConnection()));
  assert.ok(listed.every((l) => l.data.some((m) => m.id === 'another')), 'every worker has the refreshed list');
  assert.deepEqual(new Set(listed.flatMap((l) => l.data.map((m) => m.created))), new Set([created]));
});
