// edge_key_requests_total when an I/O worker exits under a key's open
// requests (two workers, whatever EDGE_TEST_WORKERS says): the pool closes
// their runs as 502 worker_exited and the main thread counts them in
// edge_requests_total, as their worker never did; they count under their key
// too, so that the per-key totals still sum to edge_requests_total, as
// docs/operations.md says.
process.env.EDGE_TEST_HOOKS = '1';
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Agent } from 'undici';
import type { WorkerPool } from '../../src/main/worker-pool.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { inFlight, startStack, streamOnOwnConnection, waitFor, waitUntil, type Stack } from '../helpers/stack.js';

const ALICE = 'sk-exit-alice-0123456789';

let stack: Stack;
before(async () => {
  stack = await startStack({
    capacity: 64,
    configure: (raw) => {
      raw.workers = { count: 2 };
      raw.auth = { api_keys: [{ name: 'alice', key_sha256: sha256Hex(ALICE) }] };
    },
  });
});
after(async () => {
  await stack.close();
});

/** A 5 s stream of alice's on its own connection, so the kernel spreads them over the workers. */
const stream = (): ReturnType<typeof streamOnOwnConnection> => streamOnOwnConnection(stack, 100, { authorization: `Bearer ${ALICE}` });

/** Every sample of a counter, by its labels. */
function samples(text: string, name: string): Map<string, number> {
  return new Map([...text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'gm'))].map((m) => [m[1], Number(m[2])]));
}

test('the requests of a worker that exited count under their key as the 502 their records say', async () => {
  const pool = stack.edge.plane as unknown as WorkerPool;
  await waitFor(async () => (await pool.inspect()).length === 2, 'both workers running');
  const holder = (await pool.inspect()).find((p) => p.sessions.length > 0)?.worker;
  assert.ok(holder !== undefined, 'a worker holds the node');
  const victim = 1 - holder;
  const open: { done: Promise<string>; dispatcher: Agent }[] = [];
  for (let round = 0; round < 10; round++) {
    for (let i = 0; i < 4; i++) open.push(stream());
    await waitUntil(() => inFlight(stack.edge) === open.length, `${open.length} leases`);
    if (((await pool.inspect()).find((p) => p.worker === victim)?.openExchanges ?? 0) >= 2) break;
  }
  await pool.call(victim, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
  const outcomes = await Promise.all(open.map((o) => o.done));
  await Promise.all(open.map((o) => o.dispatcher.close()));
  await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  await waitUntil(() => stack.edge.runs.list({ state: 'running', limit: 1_000 }).length + stack.edge.runs.list({ state: 'queued', limit: 1_000 }).length === 0, 'no run left open');
  const cut = outcomes.filter((o) => o.startsWith('failed')).length;
  assert.ok(cut >= 2, outcomes.join('; '));
  // The records name the key of the runs the pool closed.
  const exited = stack.edge.runs.list({ key: 'alice', state: 'finished', limit: 1_000 }).filter((r) => r.outcome === 'worker_exited');
  assert.equal(exited.length, cut);

  await waitFor(async () => (await pool.inspect()).length === 2, 'the worker is replaced');
  const text = await stack.edge.scrapeMetrics();
  const keyed = samples(text, 'edge_key_requests_total');
  assert.equal(keyed.get('key="alice",status="502"'), cut, text);
  assert.equal(keyed.get('key="alice",status="200"'), open.length - cut, text);
  const total = [...samples(text, 'edge_requests_total').values()].reduce((a, b) => a + b, 0);
  assert.equal([...keyed.values()].reduce((a, b) => a + b, 0), total, 'every request had a key: the per-key totals sum to edge_requests_total');
});
