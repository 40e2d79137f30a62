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
const ONE_ALIAS = 'agent-one';

before(async () => {
  // A second alias over the same providers: a client switching models keeps its session.
  // And one only gpu-1 serves.
  stack = await startCliStack({
    nodes: 2,
    capacity: 1,
    configure: (raw) =>
      (raw.models as unknown[]).push(
        { alias: BIG_ALIAS, queue_timeout_ms: 20_000, providers: { 'gpu-1-cli': 'big-model', 'gpu-2-cli': 'big-model' } },
        { alias: ONE_ALIAS, queue_timeout_ms: 20_000, providers: { 'gpu-1-cli': 'one-model' } },
      ),
  });
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

test('two sessions whose ids share a 32-bit hash keep their own nodes: one moving does not move the other unannounced', async () => {
  // 32-bit FNV-1a, what the session key once was: these two ids collide under it.
  const fnv32 = (id: string): number => {
    let hash = 0x811c9dc5;
    for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193);
    return hash >>> 0;
  };
  const [x, y] = ['sess-tin', 'sess-145c0'];
  assert.equal(fnv32(x), fnv32(y));
  // gpu-1 (the tie-break's choice) is busy, so session x starts on gpu-2.
  const busy = run('hold 600', 'occupant-x');
  await waitFor(async () => (await stack.admin('/admin/runs?state=running&session=occupant-x')).json.runs.length === 1, 'the occupant to run');
  const first = await run('echo first', x);
  await busy;
  assert.equal(first.node, 'gpu-2');
  // Session y starts under a model only gpu-1 serves: its first turn, nothing moved.
  const other = await run('echo other', y, ONE_ALIAS);
  assert.equal(other.status, 200, other.text);
  assert.equal(other.node, 'gpu-1');
  assert.equal(other.movedFrom, null, 'session y was never on gpu-2');
  // Session x still keeps to gpu-2, where its directory is.
  const next = await run('hold 1', x);
  assert.equal(next.status, 200, next.text);
  assert.equal(next.node, 'gpu-2', 'not run on gpu-1, in a directory without the session\'s state, unannounced');
  assert.equal(next.movedFrom, null);
  assert.equal((JSON.parse((JSON.parse(next.text) as { choices: { message: { content: string } }[] }).choices[0].message.content) as { cwd: string }).cwd, join(stack.root, 'gpu-2', x));
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
