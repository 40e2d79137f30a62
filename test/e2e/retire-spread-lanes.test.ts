// A node retired by a config change (its token changed) whose lanes live on
// several I/O workers: once every lane is idle the connection closes, as
// docs/operations.md says ("closed once its open tunnels finish"), not only
// when drain.grace_ms runs out. The anchor's worker cannot see the other
// workers' lanes; the main thread tells it when the last of them closed.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import { NodeAgent } from '../../src/agent/agent.js';
import { parseAgentConfig } from '../../src/agent/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import type { WorkerPool } from '../../src/main/worker-pool.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { edgeConfigObject, NODE_ID, NODE_TOKEN, PROVIDER_ID, waitUntil } from '../helpers/stack.js';

const GRACE_MS = 20_000;
const STREAMS = 8;

let edge: RunningEdge;
let mock: MockProvider;
let agent: NodeAgent;

function edgeRaw(token: string): Record<string, unknown> {
  const raw = edgeConfigObject() as { nodes: { token: string }[] } & Record<string, unknown>;
  raw.workers = { count: 2 };
  raw.drain = { grace_ms: GRACE_MS };
  raw.nodes[0].token = token;
  return raw;
}

before(async () => {
  mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 0 });
  edge = await startEdge(parseEdgeConfig(edgeRaw(NODE_TOKEN), 'test'), { logger: silentLogger() });
  agent = new NodeAgent(
    parseAgentConfig(
      {
        edge: { address: `127.0.0.1:${edge.grpcPort}`, streams: STREAMS },
        node: { id: NODE_ID, token: NODE_TOKEN },
        providers: [{ id: PROVIDER_ID, type: 'openai_compat', base_url: mock.url }],
        reconnect: { initial_ms: 50, max_ms: 200 },
      },
      'test',
    ),
    { logger: silentLogger() },
  );
});

after(async () => {
  await agent?.stop();
  await edge?.close();
  await mock?.close();
});

/**
 * `step` within 20 s, else a failure that names it: one CI run hung this test for its whole 180 s without
 * saying where (not seen again in 20 runs under load), so each wait that has no bound of its own has one.
 */
async function within<T>(step: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`waited 20 s for ${what}`)), 20_000);
  });
  try {
    return await Promise.race([step, late]);
  } finally {
    clearTimeout(timer);
  }
}

test('a retired node whose lanes are spread over I/O workers is closed once idle, not at the grace', async () => {
  const pool = edge.plane as unknown as WorkerPool;
  agent.start();
  // The kernel spreads the streams over the workers; reconnect until they do span both (all 8 on one is rare).
  for (let attempt = 0; ; attempt++) {
    await waitUntil(() => (pool.placeOf(NODE_ID)?.lanes.length ?? 0) === STREAMS - 1, 'every lane joined', 10_000);
    const place = pool.placeOf(NODE_ID)!;
    if (place.lanes.some((w) => w !== place.worker)) break;
    assert.ok(attempt < 10, 'the lanes never spread over both workers');
    const gone = once(agent, 'disconnected');
    agent.dropConnection();
    await within(gone, 'the agent to see its dropped connection');
  }
  const disconnected = once(agent, 'disconnected');
  const result = await within(edge.refresh({ mode: 'apply', config: edgeRaw('rotated-token-0123456789') }), 'the apply to answer');
  assert.equal(result.status, 'applied', JSON.stringify(result.reasons));
  const startedAt = performance.now();
  // Nothing is open: the connection closes within a few retire polls, far from the 20 s grace.
  const closed = await Promise.race([disconnected.then(() => true), new Promise<boolean>((resolve) => setTimeout(resolve, 10_000, false).unref())]);
  assert.ok(closed, `the retired connection still open ${Math.round(performance.now() - startedAt)} ms after the apply (grace ${GRACE_MS} ms)`);
  await waitUntil(() => pool.placeOf(NODE_ID) === undefined, 'the connection gone on the edge');
});
