// resume_args is chosen when the session's directory is already there. A
// first turn that did not finish (cancelled, timed out, failed) leaves no
// directory behind, so the next turn starts the conversation afresh rather
// than asking the CLI to resume one that never was.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CLI_ALIAS, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

let stack: CliStack;

before(async () => {
  stack = await startCliStack({ cli: { args: ['{model}', '{session}'], resume_args: ['{model}', '{session}', '--resume'], timeout_ms: 1_000 } });
});

after(async () => {
  await stack.close();
});

async function turn(prompt: string, session: string, signal?: AbortSignal): Promise<{ status: number; text: string }> {
  const res = await fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-edge-session': session },
    body: JSON.stringify({ model: CLI_ALIAS, messages: [{ role: 'user', content: prompt }] }),
    signal,
  });
  const body = (await res.json()) as { choices?: { message: { content: string } }[]; error?: { message: string } };
  return { status: res.status, text: body.choices?.[0].message.content ?? body.error?.message ?? '' };
}

test('turns of a session resume its conversation', async () => {
  assert.deepEqual(await turn('remember', 'resumes'), { status: 200, text: 'turn 1' });
  assert.deepEqual(await turn('remember', 'resumes'), { status: 200, text: 'turn 2' });
});

test('a first turn that timed out, failed or was cancelled: the next turn starts afresh instead of failing to resume', async () => {
  assert.equal((await turn('sleep', 'first-timed-out')).status, 504);
  assert.deepEqual(await turn('remember', 'first-timed-out'), { status: 200, text: 'turn 1' });

  assert.equal((await turn('fail', 'first-failed')).status, 502);
  assert.deepEqual(await turn('remember', 'first-failed'), { status: 200, text: 'turn 1' });

  const abort = new AbortController();
  const cancelled = turn('sleep', 'first-cancelled', abort.signal).catch(() => undefined);
  await waitFor(async () => (await stack.admin('/admin/runs?state=running')).json.runs.length === 1, 'the first turn to run');
  abort.abort();
  await cancelled;
  assert.deepEqual(await turn('remember', 'first-cancelled'), { status: 200, text: 'turn 1' });
  assert.deepEqual(await turn('remember', 'first-cancelled'), { status: 200, text: 'turn 2' }, 'and the one after resumes it');
});

test('a later turn that fails keeps the conversation: the next one still resumes', async () => {
  assert.deepEqual(await turn('remember', 'later-fails'), { status: 200, text: 'turn 1' });
  assert.equal((await turn('fail', 'later-fails')).status, 502);
  assert.deepEqual(await turn('remember', 'later-fails'), { status: 200, text: 'turn 2' });
});
