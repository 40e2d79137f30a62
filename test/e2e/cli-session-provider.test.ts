// A node with two cli providers of one alias (one per GPU, say): each has its
// own cwd_root and runs one process per session, so a session's turns must
// keep to the provider that holds its directory, not merely to its node.
// Otherwise a turn sent while that provider is busier than its neighbour
// runs in the neighbour's empty directory (the conversation silently lost),
// and two turns of one session run at once.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { NodeAgent } from '../../src/agent/agent.js';
import { parseAgentConfig } from '../../src/agent/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { FIXTURE } from '../helpers/cli-stack.js';
import { testWorkers, waitUntil } from '../helpers/stack.js';

let edge: RunningEdge;
let agent: NodeAgent;
let root: string;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'edge-cli-two-providers-'));
  edge = await startEdge(
    parseEdgeConfig(
      {
        listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
        workers: { count: testWorkers() },
        nodes: [{ id: 'gpu-1', token: 'token-1', providers: [{ id: 'cli-a', type: 'cli', capacity: 1 }, { id: 'cli-b', type: 'cli', capacity: 1 }] }],
        models: [{ alias: 'agent', providers: { 'cli-a': 'fixture-agent', 'cli-b': 'fixture-agent' } }],
      },
      'test',
    ),
    { logger: silentLogger() },
  );
  const provider = (id: string): Record<string, unknown> => ({ id, type: 'cli', command: [process.execPath, FIXTURE, 'two-providers'], resume_args: ['--resume'], cwd_root: join(root, id), kill_grace_ms: 300 });
  agent = new NodeAgent(parseAgentConfig({ edge: { address: `127.0.0.1:${edge.grpcPort}` }, node: { id: 'gpu-1', token: 'token-1' }, providers: [provider('cli-a'), provider('cli-b')] }, 'test'), { logger: silentLogger() });
  const registered = once(agent, 'registered');
  agent.start();
  await registered;
});

after(async () => {
  await agent.stop();
  await edge.close();
  await rm(root, { recursive: true, force: true });
});

async function turn(content: string, session: string): Promise<{ status: number; provider: string | null; content: string }> {
  const res = await fetch(`${edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-edge-session': session },
    body: JSON.stringify({ model: 'agent', messages: [{ role: 'user', content }] }),
  });
  const body = (await res.json()) as { choices?: { message: { content: string } }[]; error?: { message: string } };
  return { status: res.status, provider: res.headers.get('x-edge-provider'), content: body.choices?.[0].message.content ?? body.error?.message ?? '' };
}

function inFlightOf(providerId: string): number {
  return edge.driver.status().providers.find((p) => p.id === providerId)?.inFlight ?? 0;
}

test("a session's next turn keeps to the provider holding its directory, even while that provider is the busier one", async () => {
  const first = await turn('remember', 'conv');
  assert.deepEqual(first, { status: 200, provider: 'cli-a', content: 'turn 1' });
  // With I/O workers a run's end reaches the scheduler after its client's last byte.
  await waitUntil(() => inFlightOf('cli-a') === 0, 'the first turn to be released');
  // Another session now holds cli-a's only slot: cli-b, on the same node, is the less loaded choice.
  const other = turn('hold 600', 'other');
  await waitUntil(() => inFlightOf('cli-a') === 1, 'the other session to run on cli-a');
  const second = await turn('remember', 'conv');
  assert.equal((await other).provider, 'cli-a');
  assert.deepEqual(second, { status: 200, provider: 'cli-a', content: 'turn 2' });
});

test('two turns of one session sent at once run one after the other, on its provider', async () => {
  await waitUntil(() => inFlightOf('cli-a') === 0 && inFlightOf('cli-b') === 0, 'the earlier turns to be released');
  const [a, b] = await Promise.all([turn('hold 300', 'conv'), turn('hold 300', 'conv')]);
  assert.equal(a.provider, 'cli-a');
  assert.equal(b.provider, 'cli-a');
  const [x, y] = [JSON.parse(a.content), JSON.parse(b.content)].sort((p, q) => p.start - q.start);
  assert.ok(y.start >= x.end, `the turns overlapped: ${JSON.stringify([x, y])}`);
});
