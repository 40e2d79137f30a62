// A cli command runs once per request: its side effects (files written in
// its session directory, tools called) happen when it runs, so a run that
// may have started is never run again on the client's behalf. Through the
// official openai SDK, unmodified (it retries 5xx unless told not to): a
// non-streaming cli run whose node drops while the command works (before
// any byte, which for a non-streaming cli run is its whole life) is not
// re-queued to the other node, and the client's 502 says not to retry.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI, { APIError } from 'openai';
import { CLI_ALIAS, livePids, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

let stack: CliStack;

before(async () => {
  stack = await startCliStack({ nodes: 2 });
});

after(async () => {
  await stack.close();
});

test('a cli run whose node drops before its first byte is neither re-run by the edge nor retried by the SDK', async () => {
  const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 2, timeout: 20_000 });
  const answer = client.chat.completions.create({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'hold 3000' }] }).then(
    (completion) => `served: ${completion.choices[0]?.message.content ?? ''}`,
    (err: unknown) => err,
  );
  let node = '';
  await waitFor(async () => {
    const running = (await stack.admin('/admin/runs?state=running')).json.runs as { node: string | null }[];
    node = running[0]?.node ?? '';
    return node !== '';
  }, 'the command to run');
  await waitFor(async () => (await livePids(stack.tag)).length === 1, 'the command to start');
  stack.agents[node === stack.nodeId(0) ? 0 : 1].dropConnection();
  const outcome = await answer;
  assert.ok(outcome instanceof APIError, `the client hears the failure: ${String(outcome)}`);
  assert.equal(outcome.status, 502);
  assert.equal(outcome.headers?.get('x-should-retry'), 'false');
  assert.match(String((outcome.error as { code?: string } | undefined)?.code), /node_disconnected/);
  // One run, on the node that dropped: none was started on the other.
  const runs = (await stack.admin('/admin/runs?limit=100')).json.runs as { node: string | null; state: string }[];
  assert.equal(runs.length, 1, JSON.stringify(runs));
  const metrics = await (await fetch(`${stack.edge.adminUrl as string}/metrics`)).text();
  assert.doesNotMatch(metrics, /^edge_retries_total\{[^}]*\} [1-9]/m, 'no retry was counted');
});
