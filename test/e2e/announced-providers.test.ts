// A provider in the edge's config that the node did not announce at Register
// (the agent does not run it) gets no requests on that connection: without
// this rule it would win ties (its id sorts first), every request sent to
// it would fail at the agent with unknown_provider and cost a retry.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { ALIAS, inFlight, NODE_ID, PROVIDER_ID, SERVED, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const GHOST = 'gpu-1-aaa-not-on-the-node';

describe('providers the node did not announce', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({
      configure(raw) {
        const nodes = raw.nodes as { id: string; providers: Record<string, unknown>[] }[];
        nodes.find((n) => n.id === NODE_ID)?.providers.push({ id: GHOST, type: 'openai_compat', capacity: 4, max_context_tokens: 131072 });
        const models = raw.models as { alias: string; providers: Record<string, string> }[];
        const chat = models.find((m) => m.alias === ALIAS);
        if (chat !== undefined) chat.providers[GHOST] = SERVED;
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('get no requests; every request goes to the announced provider at the first try', async () => {
    const before = stack.mock.requestLog.length;
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: `hi ${i}` }] }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(res.headers.get('x-edge-provider'), PROVIDER_ID);
      await res.arrayBuffer();
    }
    assert.equal(stack.mock.requestLog.length - before, 8, 'one upstream request each');
    const metrics = await stack.metrics();
    assert.doesNotMatch(metrics, new RegExp(`^edge_retries_total\\{[^}]*provider="${GHOST}"[^}]*\\} [1-9]`, 'm'), 'no request was first sent to the provider the node does not run');
    assert.doesNotMatch(metrics, /^edge_retries_total\{[^}]*\} [1-9]/m, 'no retry at all');
    // Not available to route to, as status says: the metric agrees.
    assert.match(metrics, new RegExp(`^edge_provider_available\\{[^}]*provider="${GHOST}"[^}]*\\} 0$`, 'm'));
    assert.match(metrics, new RegExp(`^edge_provider_available\\{[^}]*provider="${PROVIDER_ID}"[^}]*\\} 1$`, 'm'));
    const providers = (await stack.edge.status()).providers;
    assert.equal(providers.find((p) => p.id === GHOST)?.health, 'not_announced');
    assert.equal(providers.find((p) => p.id === PROVIDER_ID)?.health, 'ok');
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released');
  });
});

describe('a provider a refresh adds that the connected node does not run', () => {
  let stack: OpsStack;
  const lines: string[] = [];
  before(async () => {
    stack = await startOpsStack({ edgeLogger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }) });
  });
  after(async () => {
    await stack.close();
  });

  test('is named in a warning as the refresh applies: it gets no requests until the agent runs it', async () => {
    const raw = structuredClone(stack.raw) as { nodes: { id: string; providers: Record<string, unknown>[] }[] };
    raw.nodes.find((n) => n.id === NODE_ID)?.providers.push({ id: GHOST, type: 'openai_compat', capacity: 4 });
    const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
    assert.equal(status, 200, JSON.stringify(json));
    assert.equal(json.status, 'applied');
    const warned = lines.map((line) => JSON.parse(line) as { msg: string; providers?: string[] }).find((entry) => /not announced/.test(entry.msg));
    assert.deepEqual(warned?.providers, [GHOST], lines.join(''));
    assert.equal((await stack.edge.status()).providers.find((p) => p.id === GHOST)?.health, 'not_announced');
  });
});
