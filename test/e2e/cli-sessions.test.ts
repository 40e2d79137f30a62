// Sessions across two nodes: the requests of one session keep to the node
// that holds it (its working directory lives there) while that node is
// connected, even when the scheduler's own tie-break would pick the other;
// once that node is gone the next one goes elsewhere.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { CLI_ALIAS, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

let stack: CliStack;
const BIG_ALIAS = 'agent-big';

before(async () => {
  // A second alias over the same providers: a client switching models keeps its session.
  stack = await startCliStack({ nodes: 2, capacity: 1, configure: (raw) => (raw.models as unknown[]).push({ alias: BIG_ALIAS, queue_timeout_ms: 20_000, providers: { 'gpu-1-cli': 'big-model', 'gpu-2-cli': 'big-model' } }) });
});

after(async () => {
  await stack.close();
});

async function run(prompt: string, session: string, model = CLI_ALIAS): Promise<{ node: string; status: number; movedFrom: string | null; text: string }> {
  const res = await fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-edge-session': session },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: prompt }] }),
  });
  const text = await res.text();
  return { node: res.headers.get('x-edge-node') ?? '', status: res.status, movedFrom: res.headers.get('x-edge-session-moved-from'), text };
}

test('a turn under another alias of the same providers (a client switching models) reaches the session\'s node and directory', async () => {
  // gpu-1 (the tie-break's choice) is busy, so session M starts on gpu-2.
  const busy = run('hold 600', 'occupant-m');
  await waitFor(async () => (await stack.admin('/admin/runs?state=running&session=occupant-m')).json.runs.length === 1, 'the occupant to run');
  const first = await run('echo first', 'M');
  await busy;
  assert.equal(first.node, 'gpu-2');
  const switched = await run('hold 1', 'M', BIG_ALIAS);
  assert.equal(switched.status, 200, switched.text);
  assert.equal(switched.node, 'gpu-2', 'not silently run on gpu-1, in a directory without the session\'s state');
  assert.equal(switched.movedFrom, null);
  const { cwd, argv } = JSON.parse((JSON.parse(switched.text) as { choices: { message: { content: string } }[] }).choices[0].message.content) as { cwd: string; argv: string[] };
  assert.equal(cwd, join(stack.root, 'gpu-2', 'M'));
  assert.equal(argv[1], 'big-model');
});

test('10 requests of a session land on the node that holds it; after it disconnects the next goes elsewhere', async () => {
  // gpu-1 (the tie-break's choice) is busy, so session A starts on gpu-2.
  const busy = run('hold 600', 'occupant');
  await waitFor(async () => (await stack.admin('/admin/runs?state=running&session=occupant')).json.runs.length === 1, 'the occupant to run');
  const first = await run('echo first', 'A');
  await busy;
  assert.equal(first.node, 'gpu-2');

  const nodes: string[] = [];
  for (let i = 0; i < 10; i++) nodes.push((await run(`echo ${i}`, 'A')).node);
  assert.deepEqual(nodes, Array(10).fill('gpu-2'));
  // Sessionless requests still follow the scheduler's own choice.
  assert.equal((await run('echo free', '')).node, 'gpu-1');

  await stack.agents[1].stop();
  await waitFor(async () => (await stack.edge.status()).nodes.find((n) => n.id === 'gpu-2')?.connected === false, 'gpu-2 to be gone');
  const after = await run('echo after', 'A');
  assert.equal(after.status, 200);
  assert.equal(after.node, 'gpu-1');
  // The client is told its session moved (its directory on gpu-2 did not come along), once.
  assert.equal(first.movedFrom, null);
  assert.equal(after.movedFrom, 'gpu-2');
  assert.equal((await run('echo again', 'A')).movedFrom, null);
});
