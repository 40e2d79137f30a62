// edge_tenant_dispatches_total is a counter: it never goes down while fair
// queuing stays on, also when the scheduler's per-tenant dispatch table
// fills (10,000 tenants of an alias, e.g. clients' fairness ids) and starts
// counting again from 0.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Scheduler } from '../../src/main/scheduler/scheduler.js';
import { EdgeMetrics } from '../../src/workers/observe/metrics.js';
import { makeConfig, RecordingSink } from '../main/scheduler/fixtures.js';

const ALICE = 1;

function dispatches(text: string, tenant: string): number {
  return Number(new RegExp(`^edge_tenant_dispatches_total\\{model="a",tenant="${tenant}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
}

/** A fair-queued alias `a` on one provider, and the metrics reading its scheduler; `run` serves one request of a tenant. */
function fairAlias(): { run: (tenantKey: number) => void; metrics: EdgeMetrics } {
  const base = makeConfig({ nodes: { n0: [{ id: 'p0', capacity: 1 }] }, models: [{ alias: 'a', providers: ['p0'] }] });
  const sink = new RecordingSink();
  const s = new Scheduler({ ...base, scheduler: { ...base.scheduler, fairness: true, agingStepPerSec: 0 } }, sink);
  s.connect('n0', 0);
  let requestId = 1;
  let now = 1;
  const run = (tenantKey: number): void => {
    s.admit({ requestId: requestId++, alias: 'a', estimatedTokens: 10, directNodeId: undefined, priority: 0, tenantKey, weight: 1 }, now++);
    for (const grant of sink.takeGrants()) s.release(grant.leaseId, 'end', now++);
  };
  const metrics = new EdgeMetrics(
    {
      status: () => s.status(),
      connectedNodes: () => 1,
      openRequests: () => 0,
      workers: () => 0,
      ringOccupancy: () => 0,
      configVersion: () => 1,
      shuttingDown: () => false,
      events: () => ({ subscribers: 0, published: 0, dropped: 0 }),
      tenantNames: () => new Map([[ALICE, 'alice']]),
    },
    false,
  );
  return { run, metrics };
}

test('a tenant\'s dispatch count only grows when the scheduler\'s table starts again', async () => {
  const { run, metrics } = fairAlias();

  for (let i = 0; i < 5; i++) run(ALICE);
  assert.equal(dispatches(await metrics.scrape(), 'alice'), 5);
  // 11,000 more tenants (unnamed: `other`), one dispatch each, scraped now and then: the table fills and starts again.
  let other = 0;
  for (let tenant = 1_000; tenant < 12_000; tenant++) {
    run(tenant);
    if (tenant % 500 !== 0) continue;
    const text = await metrics.scrape();
    assert.equal(dispatches(text, 'alice'), 5, `alice's total stays (after tenant ${tenant})`);
    assert.ok(dispatches(text, 'other') >= other, `other went down after tenant ${tenant}: ${other} -> ${dispatches(text, 'other')}`);
    other = dispatches(text, 'other');
  }
  assert.ok(other >= 10_000, `other: ${other}`);
  run(ALICE);
  const text = await metrics.scrape();
  assert.equal(dispatches(text, 'alice'), 6, 'one more dispatch is one more');
  assert.ok(dispatches(text, 'other') >= other);
});

test("a tenant's dispatches after the table starts again all count, also when its new count passes the one last scraped", async () => {
  const { run, metrics } = fairAlias();
  for (let i = 0; i < 5; i++) run(ALICE);
  assert.equal(dispatches(await metrics.scrape(), 'alice'), 5);
  // No scrape while 10,000 other tenants fill the table (it starts again) and alice is served 7 more times.
  for (let tenant = 1_000; tenant < 11_000; tenant++) run(tenant);
  for (let i = 0; i < 7; i++) run(ALICE);
  assert.equal(dispatches(await metrics.scrape(), 'alice'), 12, 'every dispatch since the last scrape, not only those past the old count');
});
