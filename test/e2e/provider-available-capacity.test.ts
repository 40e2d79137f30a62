// edge_provider_available says whether a provider can take new requests: a
// provider at capacity 0 (kept in the catalog to wind it down) takes none, so
// an alert on "no provider of this model available" must see it as 0, as it
// sees a disabled one; raised above 0 by a refresh, it is 1 again.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { NODE_ID, PROVIDER_ID, sample, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';
import { waitFor } from '../helpers/stack.js';

const SLOT = { provider: PROVIDER_ID, node: NODE_ID };
let stack: OpsStack;

before(async () => {
  stack = await startOpsStack({ capacity: 0 });
});
after(async () => {
  await stack?.close();
});

test('a provider at capacity 0 is not available; given capacity by a refresh, it is', async () => {
  const text = await stack.metrics();
  assert.equal(sample(text, 'edge_provider_capacity', SLOT), 0);
  assert.equal(sample(text, 'edge_provider_available', SLOT), 0, 'capacity 0 takes no request');
  const raised = structuredClone(stack.raw) as { nodes: { providers: { capacity?: number }[] }[] };
  raised.nodes[0].providers[0].capacity = 2;
  const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raised } });
  assert.equal(status, 200, JSON.stringify(json));
  await waitFor(async () => sample(await stack.metrics(), 'edge_provider_available', SLOT) === 1, 'available at capacity 2');
});
