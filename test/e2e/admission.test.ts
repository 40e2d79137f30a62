// The admission contract through real gRPC and HTTP: queue full, queue
// timeout, late-connecting nodes, nodes dying with requests queued behind
// them, and capacity raised by config waking waiters.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, beforeEach, describe, test } from 'node:test';
import OpenAI from 'openai';
import { NodeAgent } from '../../src/agent/agent.js';
import { parseAgentConfig } from '../../src/agent/config.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import type { EdgeConfig } from '../../src/shared/config-types.js';
import { silentLogger } from '../../src/shared/logger.js';
import { queueDepth, testWorkers, waitUntil } from '../helpers/stack.js';

const ALIAS = 'llama3';

interface TwoNodeOptions {
  readonly capacityA?: number;
  readonly capacityB?: number;
  readonly maxQueue?: number;
  readonly queueTimeoutMs?: number;
}

function twoNodeConfig(options: TwoNodeOptions = {}): EdgeConfig {
  return parseEdgeConfig(
    {
      listen: { http: { port: 0 }, grpc: { port: 0 } },
      heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
      workers: { count: testWorkers() },
      nodes: [
        { id: 'node-a', token: 'ta', providers: [{ id: 'a-mock', capacity: options.capacityA ?? 1 }] },
        { id: 'node-b', token: 'tb', providers: [{ id: 'b-mock', capacity: options.capacityB ?? 1 }] },
      ],
      models: [
        {
          alias: ALIAS,
          max_queue: options.maxQueue ?? 16,
          queue_timeout_ms: options.queueTimeoutMs ?? 10_000,
          providers: { 'a-mock': 'served-a', 'b-mock': 'served-b' },
        },
      ],
    },
    'test',
  );
}

function agent(edge: RunningEdge, node: 'a' | 'b', mock: MockProvider): NodeAgent {
  return new NodeAgent(
    parseAgentConfig(
      {
        edge: { address: `127.0.0.1:${edge.grpcPort}` },
        node: { id: `node-${node}`, token: `t${node}` },
        providers: [{ id: `${node}-mock`, type: 'openai_compat', base_url: mock.url }],
        reconnect: { initial_ms: 50, max_ms: 200 },
      },
      'test',
    ),
    { logger: silentLogger() },
  );
}

async function connected(a: NodeAgent): Promise<NodeAgent> {
  const registered = once(a, 'registered');
  a.start();
  await registered;
  return a;
}

function chat(edge: RunningEdge, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/** A request that holds its slot for `ms` (the mock's generation time). */
function slow(edge: RunningEdge, ms: number): Promise<Response> {
  return chat(edge, { 'x-mock-tokens': '2', 'x-mock-interval-ms': String(ms) });
}


function inFlight(edge: RunningEdge): number {
  return edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0);
}

describe('admission through real gRPC and HTTP', () => {
  let mock: MockProvider;
  let edge: RunningEdge | undefined;
  const agents: NodeAgent[] = [];

  before(async () => {
    mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
  });
  beforeEach(async () => {
    await Promise.all(agents.splice(0).map((a) => a.stop()));
    await edge?.close();
    edge = undefined;
  });
  after(async () => {
    await Promise.all(agents.splice(0).map((a) => a.stop()));
    await edge?.close();
    await mock.close();
  });

  async function start(options: TwoNodeOptions, nodes: readonly ('a' | 'b')[]): Promise<RunningEdge> {
    edge = await startEdge(twoNodeConfig(options), { logger: silentLogger() });
    for (const node of nodes) agents.push(await connected(agent(edge, node, mock)));
    return edge;
  }

  test('queue full answers 429 queue_full with Retry-After', async () => {
    const e = await start({ capacityA: 1, maxQueue: 1 }, ['a']);
    const busy = slow(e, 400);
    await waitUntil(() => inFlight(e) === 1, 'the first request to hold the slot');
    const queued = chat(e);
    await waitUntil(() => queueDepth(e) === 1, 'the second request to queue');
    const rejected = await chat(e);
    assert.equal(rejected.status, 429);
    assert.ok(Number(rejected.headers.get('retry-after')) >= 1);
    const body = (await rejected.json()) as { error: { code: string; type: string } };
    assert.equal(body.error.code, 'queue_full');
    assert.equal((await busy).status, 200);
    assert.equal((await queued).status, 200);
  });

  test('queue timeout answers 503 queue_timeout while nodes are connected but busy', async () => {
    const e = await start({ capacityA: 1, queueTimeoutMs: 150 }, ['a']);
    const busy = slow(e, 600);
    await waitUntil(() => inFlight(e) === 1, 'the slot to be taken');
    const sdk = new OpenAI({ baseURL: `${e.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const err = await sdk.chat.completions.create({ model: ALIAS, messages: [] }).catch((x: unknown) => x);
    assert.ok(err instanceof OpenAI.APIError);
    assert.equal(err.status, 503);
    assert.equal(err.code, 'queue_timeout');
    assert.ok(err.headers?.get('retry-after'));
    // The edge's run id is the error's request id, as the SDK reads it.
    assert.match(err.requestID ?? '', /^run-/);
    assert.equal(err.requestID, err.headers?.get('x-edge-run-id'));
    // Its record says how long it waited: the queue timeout, not 0 or nothing.
    await waitUntil(() => e.runs.get(err.requestID ?? '')?.state === 'finished', 'the run record to finish');
    const record = e.runs.get(err.requestID ?? '');
    assert.equal(record?.outcome, 'queue_timeout');
    assert.ok((record?.queueMs ?? 0) >= 150, `queueMs ${record?.queueMs}`);
    assert.equal((await busy).status, 200);
    assert.equal(queueDepth(e), 0);
  });

  test('a queued request is served by a node that connects after it queued, with no other event', async () => {
    const e = await start({}, []);
    const pending = chat(e);
    await waitUntil(() => queueDepth(e) === 1, 'the request to queue');
    agents.push(await connected(agent(e, 'b', mock)));
    const res = await pending;
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-edge-node'), 'node-b');
    assert.ok(Number(res.headers.get('x-edge-queue-ms')) > 0);
  });

  test('a node killed with requests queued behind it: they go to the other node', async () => {
    const e = await start({ capacityA: 1, capacityB: 1 }, ['a', 'b']);
    const onA = slow(e, 2_000);
    const onB = slow(e, 300);
    await waitUntil(() => inFlight(e) === 2, 'both slots to be taken');
    const queued = [chat(e), chat(e)];
    await waitUntil(() => queueDepth(e) === 2, 'two requests to queue');
    const nodeA = agents[0];
    await nodeA.stop(); // its in-flight request is aborted; A goes offline
    const results = await Promise.all(queued);
    for (const res of results) {
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-edge-node'), 'node-b');
    }
    assert.equal((await onB).status, 200);
    await (await onA).arrayBuffer().catch(() => undefined);
    await waitUntil(() => inFlight(e) === 0, 'every lease to be released');
  });

  test('raising capacity by config wakes a waiter at once', async () => {
    const e = await start({ capacityA: 1 }, ['a']);
    const busy = slow(e, 3_000);
    await waitUntil(() => inFlight(e) === 1, 'the slot to be taken');
    const waiting = chat(e);
    await waitUntil(() => queueDepth(e) === 1, 'the request to queue');
    const startedAt = Date.now();
    e.setConfig(twoNodeConfig({ capacityA: 2 }));
    const res = await waiting;
    assert.equal(res.status, 200);
    assert.ok(Date.now() - startedAt < 2_500, 'served before the busy request ended');
    // With worker threads the waiter's release reaches the scheduler just after its last byte.
    await waitUntil(() => inFlight(e) === 1, 'only the long request to hold a slot');
    await busy;
  });

  test('direct dispatch pins a node and counts against its capacity', async () => {
    const e = await start({ capacityA: 1, capacityB: 1 }, ['a', 'b']);
    const pinned = slow(e, 300);
    await waitUntil(() => inFlight(e) === 1, 'one slot taken');
    const busyNode = e.driver.status().providers.find((p) => p.inFlight === 1)?.nodeId;
    assert.ok(busyNode);
    // pinned to the busy node: it must wait for that node's slot, not use the idle one
    const res = await chat(e, { 'x-edge-node': busyNode });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-edge-node'), busyNode);
    assert.ok(Number(res.headers.get('x-edge-queue-ms')) > 50);
    assert.equal((await pinned).status, 200);
    // A name the config does not have is refused where the request arrived: with I/O workers,
    // names that reach the scheduler are interned for good, and this one is the client's to pick.
    for (let i = 0; i < 3; i++) {
      const unknown = await chat(e, { 'x-edge-node': `node-z${i}` });
      assert.equal(unknown.status, 404);
      const error = ((await unknown.json()) as { error: { code: string; message: string } }).error;
      assert.equal(error.code, 'node_not_found');
      assert.equal(error.message, `no node "node-z${i}" in the config`);
    }
  });

  test('every proxied response carries the x-edge headers', async () => {
    const e = await start({}, ['a']);
    const res = await chat(e);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('x-edge-run-id') ?? '', /^run-/);
    assert.equal(res.headers.get('x-edge-node'), 'node-a');
    assert.equal(res.headers.get('x-edge-provider'), 'a-mock');
    assert.equal(res.headers.get('x-edge-queue-ms'), '0');
  });
});
