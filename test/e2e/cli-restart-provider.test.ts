// restart_provider (an operator's node command) on a cli provider ends its
// running processes, and their runs fail: the operator's doing, not the
// provider failing, so it must not count toward outlier ejection. Counted,
// five runs ended by one restart ejected the provider that was just
// restarted (5 consecutive failures) for 30 s.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CLI_ALIAS, livePids, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

let stack: CliStack;

before(async () => {
  stack = await startCliStack({ nodes: 2, capacity: 8 });
});

after(async () => {
  await stack.close();
});

test('restart_provider ends a cli provider\'s runs without ejecting the provider', async () => {
  const answers = Array.from({ length: 10 }, (_, i) =>
    fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-edge-session': `restart-${i}` },
      body: JSON.stringify({ model: CLI_ALIAS, stream: true, messages: [{ role: 'user', content: 'sleep' }] }),
    }).then((res) => res.text()),
  );
  await waitFor(async () => (await livePids(stack.tag)).length === 10, 'ten commands to run');
  const provider = `${stack.nodeId(0)}-cli`;
  const before = (await stack.admin('/admin/status')).json.providers.find((p: { id: string }) => p.id === provider);
  assert.ok(before.inFlight >= 5, `at least five runs on ${provider}: ${JSON.stringify(before)}`);
  const res = await fetch(`${stack.edge.adminUrl as string}/admin/nodes/${stack.nodeId(0)}/commands`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ kind: 'restart_provider', args: { provider } }),
  });
  assert.equal(res.status, 200);
  const result = ((await res.json()) as { results: { status: string; message: string }[] }).results[0];
  assert.equal(result.status, 'ok');
  assert.equal(result.message, `${provider}: ${before.inFlight} runs ended`);
  await waitFor(async () => (await stack.admin('/admin/status')).json.providers.find((p: { id: string }) => p.id === provider).inFlight === 0, 'the restarted runs to end');
  const after = (await stack.admin('/admin/status')).json.providers.find((p: { id: string }) => p.id === provider);
  assert.equal(after.health, 'ok', `the restarted provider still serves: ${JSON.stringify(after)}`);
  assert.equal(after.outlier, undefined);
  const ended = ((await stack.admin(`/admin/runs?state=finished&limit=100`)).json.runs as { provider: string; outcome: string; error: string | null }[]).filter((r) => r.provider === provider);
  assert.equal(ended.length, before.inFlight);
  for (const run of ended) {
    assert.equal(run.outcome, 'error');
    assert.match(String(run.error), /restarted by an operator command/);
  }
  // The other provider's runs go on; end them (the test's clean-up).
  await fetch(`${stack.edge.adminUrl as string}/admin/nodes/${stack.nodeId(1)}/commands`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ kind: 'restart_provider' }) });
  await Promise.all(answers);
  await waitFor(async () => (await livePids(stack.tag)).length === 0, 'every command to be gone');
});
