// A session's move is told once its client can read it: the request that
// moved it (its node gone) was abandoned by its client before the answer, so
// the x-edge-session-moved-from it carried was never read, and its first turn
// on the new node, cut, left no directory there. The session's next answer
// says it moved, or the client would continue a conversation that silently
// started afresh.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CLI_ALIAS, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { inFlight, waitFor, waitUntil } from '../helpers/stack.js';

let stack: CliStack;

before(async () => {
  stack = await startCliStack({ nodes: 2, capacity: 2, cli: { resume_args: ['{model}', '{session}', '--resume'] } });
});

after(async () => {
  await stack.close();
});

async function turn(prompt: string, signal?: AbortSignal): Promise<{ node: string; movedFrom: string | null; text: string }> {
  const res = await fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json', 'x-edge-session': 'conversation' },
    body: JSON.stringify({ model: CLI_ALIAS, messages: [{ role: 'user', content: prompt }] }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return { node: res.headers.get('x-edge-node') ?? '', movedFrom: res.headers.get('x-edge-session-moved-from'), text };
}

test('the session moved by a request its client abandoned: the next answer says it moved', async () => {
  assert.match((await turn('remember')).text, /turn 1/);
  const second = await turn('remember');
  assert.match(second.text, /turn 2/);
  const home = second.node;
  const other = home === 'gpu-1' ? 'gpu-2' : 'gpu-1';
  await stack.agents[home === 'gpu-1' ? 0 : 1].stop();
  await waitFor(async () => (await stack.edge.status()).nodes.find((n) => n.id === home)?.connected === false, `${home} to be gone`);

  // The move, cut before its answer: its client never reads the header.
  const abandon = new AbortController();
  const moving = turn('hold 5000', abandon.signal).catch((err: Error) => err.name);
  await waitFor(async () => (await stack.admin('/admin/runs?state=running&session=conversation')).json.runs.length === 1, 'the moving turn to run');
  abandon.abort();
  assert.equal(await moving, 'AbortError');
  await waitUntil(() => inFlight(stack.edge) === 0, 'its lease to be released');

  const next = await turn('remember');
  assert.equal(next.node, other);
  assert.match(next.text, /turn 1/, 'the conversation starts afresh there');
  assert.equal(next.movedFrom, home, 'and the client is told so');
  assert.equal((await turn('remember')).movedFrom, null, 'once');
});
