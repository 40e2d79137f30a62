// Config refresh, node drain and admin auth against a real stack: edge with
// its admin listener, a node agent over gRPC, the mock provider.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { stringify as toYaml } from 'yaml';
import { ALIAS, copyOf, NODE_ID, PROVIDER_ID, sample, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';
import { openExchanges, queueDepth, sessionOf } from '../helpers/stack.js';

const CAPACITY_PATH = `nodes[${NODE_ID}].providers[${PROVIDER_ID}].capacity`;

function chat(stack: OpsStack, headers: Record<string, string> = {}, stream = false): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

function withCapacity(stack: OpsStack, capacity: number): any {
  const raw = copyOf(stack.raw);
  raw.nodes[0].providers[0].capacity = capacity;
  return raw;
}

function providerCapacity(status: any): number {
  return status.providers.find((p: any) => p.id === PROVIDER_ID).capacity;
}

describe('config refresh through the admin API', () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({ capacity: 1, maxQueue: 4, queueTimeoutMs: 10_000, mock: { ttftMs: 0, tokens: 3, intervalMs: 1 } });
  });
  after(async () => {
    await stack.close();
  });

  test('status shows the node connection, providers, groups and workers', async () => {
    const { status, json } = await stack.admin('/admin/status');
    assert.equal(status, 200);
    const node = json.nodes.find((n: any) => n.id === NODE_ID);
    assert.equal(node.connected, true);
    assert.equal(node.generation, stack.agent.generation);
    assert.ok(Date.now() - Date.parse(node.connectedSince) < 60_000, node.connectedSince);
    assert.match(node.agentVersion, /^\d+\.\d+\.\d+/);
    assert.match(node.address, /127\.0\.0\.1/);
    assert.equal(node.draining, false);
    assert.deepEqual(
      json.providers.map((p: any) => [p.id, p.node, p.capacity, p.inFlight, p.queued, p.loadRatio, p.health]),
      [[PROVIDER_ID, NODE_ID, 1, 0, 0, 0, 'ok']],
    );
    assert.deepEqual(json.providers[0].servedModels.length, 2);
    assert.deepEqual(json.groups.find((g: any) => g.model === ALIAS), { model: ALIAS, queueDepth: 0, maxQueue: 4, queueTimeoutMs: 10_000, oldestWaitMs: 0, rejectsPerMinute: 0, policy: 'fifo' });
    // Per node: its lanes and how long since it was last heard (heartbeats every 200 ms here).
    assert.equal(node.lanes, 1);
    assert.ok(node.heartbeatAgeMs >= 0 && node.heartbeatAgeMs < 1_000, String(node.heartbeatAgeMs));
    // Whole milliseconds, as every other *Ms of status (not 50.69970703125).
    assert.ok(Number.isInteger(node.heartbeatAgeMs), String(node.heartbeatAgeMs));
    assert.equal(json.workers.count, stack.edge.workers);
    // Two scheduler rings per I/O worker and one per ordered pair of workers; none on the main thread alone.
    const n = stack.edge.workers;
    assert.equal(json.workers.rings.length, n * 2 + n * (n - 1));
    assert.equal(json.edge.configVersion, 1);
    assert.equal(json.edge.shuttingDown, false);
  });

  test('evaluate lists the changes and touches nothing', async () => {
    const running = stack.edge.config;
    const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'evaluate', config: withCapacity(stack, 3) } });
    assert.equal(status, 200);
    assert.equal(json.status, 'evaluated');
    assert.equal(json.applicable, true);
    assert.deepEqual(json.changes.map((c: any) => [c.path, c.old, c.new, c.mutable]), [[CAPACITY_PATH, 1, 3, true]]);
    assert.equal(stack.edge.config, running, 'the running snapshot is the same object');
    const after = await stack.admin('/admin/status');
    assert.equal(providerCapacity(after.json), 1);
    assert.equal(after.json.edge.configVersion, 1);
    assert.equal(stack.refreshes.length, 0, 'nodes hear nothing about a dry run');
  });

  test('apply of a capacity raise dispatches a queued request at once and tells the node', async () => {
    const first = await chat(stack, { 'x-mock-tokens': '16', 'x-mock-interval-ms': '50' }, true); // holds the only slot ~0.8 s
    assert.equal(first.status, 200);
    const firstBody = first.text();
    let secondDone = false;
    const second = chat(stack).then((res) => {
      secondDone = true;
      return res;
    });
    await waitUntil(() => queueDepth(stack.edge) === 1, 'the second request to queue');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(secondDone, false, 'still queued behind the first');

    const applyAt = performance.now();
    const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: withCapacity(stack, 2) } });
    assert.equal(status, 200);
    assert.equal(json.status, 'applied');
    assert.equal(json.configVersion, 2);
    assert.deepEqual(json.notified, [{ node: NODE_ID, paths: [CAPACITY_PATH] }]);
    const res = await second;
    const wokeAfterMs = performance.now() - applyAt;
    assert.equal(res.status, 200);
    await res.text();
    assert.ok(wokeAfterMs < 1_000, `the queued request was answered ${Math.round(wokeAfterMs)} ms after the apply`);
    // The first stream is still running: the second did not wait for its slot.
    assert.ok((await openExchanges(stack.edge)) >= 1, 'the first stream is still open');
    assert.match(await firstBody, /\[DONE\]/);
    assert.equal(providerCapacity((await stack.admin('/admin/status')).json), 2);
    await waitUntil(() => stack.refreshes.length === 1, 'the agent to get its ConfigRefresh');
    assert.deepEqual(stack.refreshes[0], [[CAPACITY_PATH], 2]);
  });

  test('a restart-required change is rejected (409) and the old config keeps serving', async () => {
    const raw = withCapacity(stack, 5);
    raw.listen.http.port = 1; // needs a restart; the capacity change must not sneak in either
    const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
    assert.equal(status, 409);
    assert.equal(json.status, 'rejected');
    assert.equal(json.rejection, 'restart_required');
    assert.match(json.reasons.join('\n'), /listen\.http\.port: needs a restart/);
    assert.equal(providerCapacity((await stack.admin('/admin/status')).json), 2);
    assert.equal(stack.edge.configVersion, 2);
    assert.equal((await chat(stack)).status, 200, 'still serving');
  });

  test('an invalid config is rejected (400) with every problem, and the old config keeps serving', async () => {
    const raw = withCapacity(stack, 5);
    raw.nodes[0].providers[0].capacity = 'lots';
    raw.models[0].max_queue = -2;
    const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
    assert.equal(status, 400);
    assert.equal(json.rejection, 'invalid_config');
    assert.equal(json.reasons.length, 2);
    assert.match(json.reasons.join('\n'), /capacity: expected an integer/);
    assert.match(json.reasons.join('\n'), /max_queue: expected an integer/);
    assert.equal(providerCapacity((await stack.admin('/admin/status')).json), 2);
    assert.equal((await chat(stack)).status, 200);
    // A mode that is none of the two, null included (absent is the only way to ask for the default).
    for (const mode of ['commit', null]) {
      const bad = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode } });
      assert.equal(bad.status, 400, JSON.stringify(mode));
      assert.equal(bad.json.error.code, 'invalid_mode');
    }
    const nullTimeout = await stack.admin('/admin/config/refresh', { method: 'POST', body: { node_timeout_ms: null } });
    assert.equal(nullTimeout.status, 400);
    assert.equal(nullTimeout.json.error.code, 'invalid_request');
    // An evaluate of the same candidate fails alike, and is counted as what it was: a rejection, not an evaluation.
    const count = async (status: string): Promise<number> => sample(await stack.edge.scrapeMetrics(), 'edge_config_refreshes_total', { mode: 'evaluate', status }) ?? 0;
    const [rejectedBefore, evaluatedBefore] = [await count('rejected'), await count('evaluated')];
    const evaluated = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'evaluate', config: raw } });
    assert.equal(evaluated.status, 400);
    assert.equal(await count('rejected'), rejectedBefore + 1);
    assert.equal(await count('evaluated'), evaluatedBefore);
  });

  test('a body with a field the route does not take is refused, naming it, and nothing is applied', async () => {
    const before = (await stack.admin('/admin/status')).json;
    const candidate = withCapacity(stack, providerCapacity(before) + 3);
    // `sourceDigest` as the evaluate's answer spells it (taken as absent, the file check was skipped), a typo of `config`
    // (the edge applied its file instead of the candidate), and a near miss of node_timeout_ms.
    for (const [field, body] of [
      ['sourceDigest', { mode: 'apply', config: candidate, sourceDigest: 'a'.repeat(64) }],
      ['confg', { mode: 'apply', confg: candidate }],
      ['node_timeout', { mode: 'apply', config: candidate, node_timeout: 100 }],
    ] as const) {
      const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body });
      assert.equal(status, 400, `${field}: ${JSON.stringify(json)}`);
      assert.equal(json.error.code, 'invalid_request');
      assert.match(json.error.message, new RegExp(`"${field}"`));
      assert.match(json.error.message, /mode, config, node_timeout_ms, source_digest/);
    }
    const after = (await stack.admin('/admin/status')).json;
    assert.equal(providerCapacity(after), providerCapacity(before));
    assert.equal(after.edge.configVersion, before.edge.configVersion);
  });

  test('a no-change apply pushes nothing to nodes; a real change pushes the changed paths', async () => {
    const before = stack.refreshes.length;
    const same = toYaml(withCapacity(stack, 2)); // as YAML text this time
    const unchanged = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: same } });
    assert.equal(unchanged.status, 200);
    assert.equal(unchanged.json.status, 'unchanged');
    assert.deepEqual(unchanged.json.notified, []);
    // A notice would arrive within a few ms on loopback; give it far longer.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(stack.refreshes.length, before, 'no ConfigRefresh for a no-change apply');
    assert.equal(stack.edge.configVersion, 2);

    const raw = withCapacity(stack, 2);
    raw.models[0].max_queue = 8;
    const applied = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
    assert.equal(applied.json.status, 'applied');
    await waitUntil(() => stack.refreshes.length === before + 1, 'the ConfigRefresh for the real change');
    assert.deepEqual(stack.refreshes.at(-1), [[`models[${ALIAS}].max_queue`], 3]);
    assert.equal(stack.edge.driver.status().groups.find((g) => g.alias === ALIAS)?.maxQueue, 8);
  });

  test('drain: a draining node gets no new requests and finishes its open ones; undrain dispatches the waiter', async () => {
    const open = await chat(stack, { 'x-mock-tokens': '10', 'x-mock-interval-ms': '30' }, true);
    const drained = await stack.admin(`/admin/nodes/${NODE_ID}/drain`, { method: 'POST' });
    assert.equal(drained.status, 200);
    assert.deepEqual({ draining: drained.json.draining, openTunnels: drained.json.openTunnels }, { draining: true, openTunnels: 1 });
    const status = await stack.admin('/admin/status');
    assert.equal(status.json.nodes.find((n: any) => n.id === NODE_ID).draining, true);
    assert.equal(status.json.providers[0].health, 'draining');

    let waiterDone = false;
    const waiter = chat(stack).then((res) => {
      waiterDone = true;
      return res;
    });
    assert.match(await open.text(), /\[DONE\]/, 'the open stream ran to its end');
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.equal(waiterDone, false, 'no new request went to the draining node');
    assert.equal(queueDepth(stack.edge), 1);

    const undrained = await stack.admin(`/admin/nodes/${NODE_ID}/undrain`, { method: 'POST' });
    assert.equal(undrained.json.draining, false);
    assert.equal((await waiter).status, 200);

    assert.equal((await stack.admin('/admin/nodes/nope/drain', { method: 'POST' })).status, 404);
  });

  test('a node removed from the config is retired: its session closes and it cannot register again', async () => {
    const rejected = once(stack.agent, 'rejected');
    const raw = copyOf(stack.raw);
    raw.nodes = [];
    raw.models = [];
    const { json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
    assert.equal(json.status, 'applied');
    assert.deepEqual(json.retired, [NODE_ID]);
    const [reason] = (await rejected) as [string];
    assert.match(reason, /unknown node/);
    assert.equal(await sessionOf(stack.edge, NODE_ID), undefined);
    const res = await chat(stack);
    assert.equal(res.status, 404, 'its model is gone too');
  });
});

describe('the warning a retirement logs', () => {
  test('says the node was removed, not that its token was revoked, when the config drops the node', async () => {
    const lines: string[] = [];
    // One thread: with I/O workers the gateway's lines go to the workers' own stdout, not this logger.
    const stack = await startOpsStack({
      edgeLogger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }),
      configure: (raw) => void (raw.workers = { count: 0 }),
    });
    try {
      const raw = copyOf(stack.raw);
      raw.nodes = [];
      raw.models = [];
      const { json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
      assert.deepEqual(json.retired, [NODE_ID]);
      const messages = lines.map((line) => (JSON.parse(line) as { msg: string }).msg);
      assert.ok(messages.some((msg) => /^node removed from the config/.test(msg)), messages.join('\n'));
      assert.ok(!messages.some((msg) => /token revoked/.test(msg)), messages.join('\n'));
    } finally {
      await stack.close();
    }
  });
});

describe('a node retired by a token change', () => {
  test('cannot be undrained back to work while its old connection finishes', async () => {
    const stack = await startOpsStack({ capacity: 2, mock: { ttftMs: 0, tokens: 3, intervalMs: 1 } });
    try {
      // A stream keeps the old connection open past the refresh (it closes once idle).
      const open = await chat(stack, { 'x-mock-tokens': '20', 'x-mock-interval-ms': '40' }, true);
      const raw = copyOf(stack.raw);
      raw.nodes[0].token = 'rotated-after-a-leak';
      const { json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: raw } });
      assert.deepEqual(json.retired, [NODE_ID]);
      const undrain = await stack.admin(`/admin/nodes/${NODE_ID}/undrain`, { method: 'POST' });
      assert.equal(undrain.status, 409);
      assert.equal(undrain.json.error.code, 'node_retiring');
      // Nor by a node command: the agent is not told to take work the edge will not give it.
      const command = await stack.admin(`/admin/nodes/${NODE_ID}/commands`, { method: 'POST', body: { kind: 'undrain' } });
      assert.equal(command.json.results[0].status, 'failed');
      assert.match(command.json.results[0].message, /node_retiring/);
      const status = await stack.admin('/admin/status');
      assert.equal(status.json.nodes.find((n: any) => n.id === NODE_ID).draining, true, 'still draining');
      assert.match(await open.text(), /\[DONE\]/, 'the open stream ran to its end');
    } finally {
      await stack.close();
    }
  });
});

describe('admin listener auth', () => {
  test('with admin.token set, every admin route (drain and undrain included) and /metrics need the bearer token', async () => {
    const stack = await startOpsStack({ adminToken: 'ops-secret-token' });
    try {
      for (const path of ['/admin/status', '/metrics', '/admin/events']) {
        const none = await stack.admin(path, { token: null });
        assert.equal(none.status, 401, path);
        const wrong = await stack.admin(path, { token: 'ops-secret-tokeN' });
        assert.equal(wrong.status, 401, path);
      }
      assert.equal((await stack.admin('/admin/config/refresh', { method: 'POST', token: null, body: { mode: 'apply' } })).status, 401);
      const ok = await stack.admin('/admin/status');
      assert.equal(ok.status, 200);
      assert.equal(ok.json.nodes[0].id, NODE_ID);
      // Drain and undrain change routing: without the right token they are refused and change nothing.
      const draining = async (): Promise<boolean> => (await stack.admin('/admin/status')).json.nodes[0].draining;
      const refused = async (action: string, expected: boolean): Promise<void> => {
        const path = `/admin/nodes/${NODE_ID}/${action}`;
        assert.equal((await stack.admin(path, { method: 'POST', token: null })).status, 401, `${path} without a token`);
        assert.equal((await stack.admin(path, { method: 'POST', token: 'ops-secret-tokeN' })).status, 401, `${path} with a wrong token`);
        assert.equal(await draining(), expected, `${path} without the token left the node as it was`);
      };
      await refused('drain', false);
      assert.equal((await stack.admin(`/admin/nodes/${NODE_ID}/drain`, { method: 'POST' })).status, 200);
      assert.equal(await draining(), true, 'with the token it drains');
      await refused('undrain', true);
      assert.equal((await stack.admin(`/admin/nodes/${NODE_ID}/undrain`, { method: 'POST' })).status, 200);
      assert.equal(await draining(), false, 'with the token it undrains');
    } finally {
      await stack.close();
    }
  });
});

describe('a large config text', () => {
  test('is parsed off the main thread: a client request is answered while it parses', async () => {
    const stack = await startOpsStack({ capacity: 2, mock: { ttftMs: 0, tokens: 3, intervalMs: 1 } });
    try {
      // ~600 KB of YAML: over a second of parsing here, which used to hold the main thread (SIGHUP does the same).
      const raw = copyOf(stack.raw);
      for (let i = 0; i < 2_500; i++) raw.nodes.push({ id: `spare-${i}`, token: `spare-token-${i}-${'t'.repeat(20)}`, labels: ['spare'], providers: [{ id: `spare-${i}-p`, capacity: 1 }] });
      const text = toYaml(raw);
      const order: string[] = [];
      const evaluated = stack.edge.refresh({ mode: 'evaluate', config: text }).then((result) => {
        order.push('refresh');
        return result;
      });
      const answered = chat(stack).then(async (res) => {
        order.push('chat');
        await res.text();
        return res.status;
      });
      assert.equal(await answered, 200);
      const result = await evaluated;
      assert.equal(result.status, 'evaluated', result.reasons.join('\n'));
      assert.equal(result.changes.length, 2_500, 'every spare node is a change');
      assert.deepEqual(order, ['chat', 'refresh'], 'the request did not wait for the parse');
      // The same text with a mistake: every problem comes back from the parsing thread, named as at start.
      const broken = await stack.edge.refresh({ mode: 'evaluate', config: text.replace('capacity: 1', 'capacity: lots') });
      assert.equal(broken.rejection, 'invalid_config');
      assert.match(broken.reasons.join('\n'), /capacity: expected an integer/);
    } finally {
      await stack.close();
    }
  });
});
