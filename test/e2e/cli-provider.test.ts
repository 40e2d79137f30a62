// The agent's `type: cli` providers end to end: a real program (the test
// fixture, run through argv) answers through the edge to the unmodified
// openai SDK, streaming and not; its failures, a client abort and a timeout
// each end the way a client and the host's process table can see.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { CLI_ALIAS, CLI_SERVED, isLive, livePids, readPids, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

let stack: CliStack;
let client: OpenAI;

before(async () => {
  stack = await startCliStack({ capacity: 2, cli: { timeout_ms: 1_500 } });
  client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  await stack.close();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
async function json(res: Response): Promise<any> {
  return res.json();
}

function post(body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal });
}

test('streaming: the SDK gets the command\'s stdout as chat.completion.chunk events, in order', async () => {
  const stream = await client.chat.completions.create({ model: CLI_ALIAS, stream: true, messages: [{ role: 'system', content: 'ignored' }, { role: 'user', content: 'echo alpha beta gamma delta' }] });
  const deltas: string[] = [];
  let finish: string | null = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    assert.equal(chunk.model, CLI_SERVED);
    const content = chunk.choices[0]?.delta?.content;
    if (content) deltas.push(content);
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(deltas.join(''), 'alpha beta gamma delta');
  // The fixture writes a word every 20 ms: they arrive as several chunks, not one at the end.
  assert.ok(deltas.length >= 2, `expected several chunks, got ${JSON.stringify(deltas)}`);
  assert.equal(finish, 'stop');
});

test('not streaming: the whole output is collected into one chat.completion', async () => {
  const completion = await client.chat.completions.create({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'echo one two three' }] });
  assert.equal(completion.object, 'chat.completion');
  assert.equal(completion.choices[0].message.role, 'assistant');
  assert.equal(completion.choices[0].message.content, 'one two three');
  assert.equal(completion.choices[0].finish_reason, 'stop');
});

test('argv: {model} and {session} reach the command as arguments, the session directory is its cwd', async () => {
  const res = await post({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'hold 1' }] }, { 'x-edge-session': 'conv-42' });
  assert.equal(res.status, 200);
  const out = JSON.parse((await json(res)).choices[0].message.content);
  assert.deepEqual(out.argv, [stack.tag, CLI_SERVED, 'conv-42']);
  assert.equal(out.cwd, `${stack.root}/gpu-1/conv-42`);
});

test('env: the command sees only the allow-listed environment', async () => {
  process.env.EDGE_TEST_SECRET = 'must-not-leak';
  try {
    const completion = await client.chat.completions.create({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'env' }] });
    const env = JSON.parse(completion.choices[0].message.content ?? '{}');
    assert.equal(env.EDGE_TEST_SECRET, undefined);
    assert.equal(env.PATH, undefined);
  } finally {
    delete process.env.EDGE_TEST_SECRET;
  }
});

test('a failing command: 502 cli_failed carrying its stderr tail', async () => {
  const res = await post({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'fail' }] });
  assert.equal(res.status, 502);
  const body = await json(res);
  assert.equal(body.error.code, 'cli_failed');
  assert.match(body.error.message, /exited with code 3: fixture: something went wrong/);
  assert.equal(res.headers.get('x-should-retry'), 'false');
});

test('a failing command with a long stderr: the message ends with its last line, in the SDK\'s error and the run record', async () => {
  const err = await client.chat.completions.create({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'long-fail' }] }).catch((e: unknown) => e);
  assert.ok(err instanceof OpenAI.APIError && err.status === 502 && err.code === 'cli_failed', String(err));
  // Where a command says why it failed: the edge keeps 4096 characters of a node's message, so what goes is the start of the stderr.
  assert.match(err.message, /^502 the command exited with code 3: …[a-z ]+\nfixture: the last line says why$/);
  assert.ok(err.message.length <= '502 '.length + 4_096, `${err.message.length} characters`);
  const runId = err.headers?.get('x-edge-run-id') ?? '';
  await waitFor(async () => (await stack.admin(`/admin/runs/${runId}`)).json.state === 'finished', 'the run to be recorded');
  assert.match((await stack.admin(`/admin/runs/${runId}`)).json.error, /\nfixture: the last line says why$/);
});

test('the SDK with its default retries runs a failing command once: a command that ran is not re-run behind the caller\'s back', async () => {
  const finished = async (): Promise<number> => (await stack.admin('/admin/runs?state=finished&limit=10000')).json.runs.length;
  // With I/O workers a run's end reaches the main thread's record after its client's last byte: the
  // earlier tests' runs must all be finished before counting, or one lands inside this count.
  await waitFor(async () => ((await stack.admin('/admin/runs?limit=10000')).json.runs as { state: string }[]).every((r) => r.state === 'finished'), 'earlier runs to be recorded finished');
  const before = await finished();
  const retrying = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 2 });
  const err = await retrying.chat.completions.create({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'fail' }] }).catch((e: unknown) => e);
  assert.ok(err instanceof OpenAI.APIError && err.status === 502, String(err));
  await waitFor(async () => (await finished()) > before, 'the run to be recorded');
  assert.equal((await finished()) - before, 1);
});

test('a command failing after its first bytes: an in-band error event the SDK raises', async () => {
  const stream = await client.chat.completions.create({ model: CLI_ALIAS, stream: true, messages: [{ role: 'user', content: 'late-fail' }] });
  let text = '';
  await assert.rejects(async () => {
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  }, /exited with code 4: fixture: failed late/);
  assert.equal(text, 'partial');
});

test('no user message: 400 before any process runs', async () => {
  const res = await post({ model: CLI_ALIAS, messages: [{ role: 'system', content: 'nothing to do' }] });
  assert.equal(res.status, 400);
  assert.equal((await json(res)).error.code, 'invalid_messages');
});

test('a last user message with no text part (an image only): 400 naming why, and no process runs', async () => {
  const pidsBefore = await livePids(stack.tag);
  const res = await post({ model: CLI_ALIAS, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] });
  assert.equal(res.status, 400);
  const error = (await json(res)).error;
  assert.equal(error.code, 'invalid_messages');
  assert.match(error.message, /no text part/);
  assert.deepEqual(await livePids(stack.tag), pidsBefore);
});

test('client abort: a command that ignores SIGTERM and forked a grandchild leaves no process behind', async () => {
  const abort = new AbortController();
  const res = await post({ model: CLI_ALIAS, stream: true, messages: [{ role: 'user', content: 'orphan' }] }, {}, abort.signal);
  assert.equal(res.status, 200);
  const { child, grandchild } = await readPids(res);
  assert.ok(await isLive(child), 'the command runs');
  assert.ok(await isLive(grandchild), 'its grandchild runs');
  abort.abort();
  // SIGTERM is ignored by both; SIGKILL follows kill_grace_ms (300 ms) later.
  await waitFor(async () => !(await isLive(child)) && !(await isLive(grandchild)), 'the process group to be gone', 5_000);
  assert.deepEqual(await livePids(stack.tag), []);
});

test('admin cancel (POST /admin/runs/:id/cancel): the process group is gone, the stream ends with run_cancelled; again is 409, unknown 404', async () => {
  const res = await post({ model: CLI_ALIAS, stream: true, messages: [{ role: 'user', content: 'orphan' }] });
  assert.equal(res.status, 200);
  const runId = res.headers.get('x-edge-run-id') as string;
  const { reader, text: head, child, grandchild } = await readPids(res);
  let text = head;
  const cancel = (id: string): Promise<Response> => fetch(`${stack.edge.adminUrl as string}/admin/runs/${id}/cancel`, { method: 'POST' });
  const answer = await cancel(runId);
  assert.equal(answer.status, 200);
  assert.deepEqual(await answer.json(), { id: runId, cancelled: true });
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  assert.match(text, /"code":"run_cancelled"/, 'the stream ends with an in-band run_cancelled error');
  await waitFor(async () => !(await isLive(child)) && !(await isLive(grandchild)), 'the process group to be gone', 5_000);
  const again = await cancel(runId);
  assert.equal(again.status, 409);
  assert.equal(((await again.json()) as { error: { code: string } }).error.code, 'run_finished');
  assert.equal((await cancel('run-nope')).status, 404);
});

test('restart_provider (operator command): the running command\'s process group is killed and its stream ends with an error', async () => {
  const res = await post({ model: CLI_ALIAS, stream: true, messages: [{ role: 'user', content: 'orphan' }] });
  assert.equal(res.status, 200);
  const { reader, text: head, child, grandchild } = await readPids(res);
  let text = head;
  assert.ok(await isLive(child), 'the command runs');
  const node = stack.nodeId(0);
  const answer = await fetch(`${stack.edge.adminUrl as string}/admin/nodes/${node}/commands`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ kind: 'restart_provider', args: { provider: `${node}-cli` } }),
  });
  assert.equal(answer.status, 200);
  const result = ((await answer.json()) as { results: { status: string; message: string }[] }).results[0];
  assert.equal(result.status, 'ok');
  assert.equal(result.message, `${node}-cli: 1 run ended`);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  assert.match(text, /"error"/, 'the stream ends with an in-band error event');
  await waitFor(async () => !(await isLive(child)) && !(await isLive(grandchild)), 'the process group to be gone', 5_000);
});

test('timeout_ms: a command that never finishes is killed and the client gets 504', async () => {
  const started = Date.now();
  const res = await post({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'sleep' }] });
  assert.equal(res.status, 504);
  assert.equal((await json(res)).error.code, 'upstream_timeout');
  assert.ok(Date.now() - started >= 1_400, 'not before timeout_ms');
  await waitFor(async () => (await livePids(stack.tag)).length === 0, 'the timed-out command to be gone', 3_000);
});

test('a command that exits while a process outside its group holds its stdout: the answer comes kill_grace_ms after the exit, and the session is free again', async () => {
  const started = Date.now();
  const res = await post({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'escape' }] }, { 'x-edge-session': 'escape' });
  const elapsed = Date.now() - started;
  const body = await json(res);
  try {
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.match(body.choices[0].message.content, /^escaped \d+$/);
    assert.ok(elapsed < 1_400, `answered after ${elapsed} ms: timeout_ms (1500) decided it, not the exit`);
    const next = await post({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'echo again' }] }, { 'x-edge-session': 'escape' });
    assert.equal(next.status, 200, 'the session was given back');
    assert.equal((await json(next)).choices[0].message.content, 'again');
  } finally {
    for (const pid of await livePids(`escape-holder-${stack.tag}`)) process.kill(pid, 'SIGKILL');
  }
});

test('a metadata.session_id the SDK allows (any script, up to 512 characters) names a session by its digest, the same on every turn; a non-string one is 400', async () => {
  const session = `café ☕ ${'x'.repeat(400)}`;
  const cwds: string[] = [];
  for (let turn = 0; turn < 2; turn++) {
    const completion = await client.chat.completions.create({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'hold 1' }], metadata: { session_id: session } });
    cwds.push(JSON.parse(completion.choices[0].message.content ?? '').cwd);
  }
  assert.match(cwds[0], /\/h-[0-9a-f]{32}$/);
  assert.equal(cwds[1], cwds[0], 'both turns ran in the one session directory');
  const res = await post({ model: CLI_ALIAS, session_id: 5, messages: [{ role: 'user', content: 'echo x' }] });
  assert.equal(res.status, 400);
  assert.equal((await json(res)).error.code, 'invalid_session');
});

test('capacity 2: never more than 2 processes at once, counted from their own start and end times', async () => {
  // Each process stamps its own life: a /proc sampler, one file at a time, could miss an overlap on a loaded host.
  // Distinct sessions: only the provider's capacity limits them.
  const lives = await Promise.all(
    Array.from({ length: 6 }, async (_, i) => {
      const res = await post({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'hold 500' }] }, { 'x-edge-session': `cap-${i}` });
      assert.equal(res.status, 200);
      return JSON.parse((await json(res)).choices[0].message.content) as { start: number; end: number };
    }),
  );
  // The most lives that overlap at one instant: +1 at each start, -1 at each end (an end before a start at the same ms).
  const marks = lives.flatMap((l) => [[l.start, 1], [l.end, -1]] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let live = 0;
  let max = 0;
  for (const [, step] of marks) max = Math.max(max, (live += step));
  assert.ok(max <= 2, `at most 2 processes live at once (saw ${max}): ${JSON.stringify(lives)}`);
  assert.equal(max, 2, `both slots were used: ${JSON.stringify(lives)}`);
});

test('one session runs one process at a time: a second request waits for the first', async () => {
  const run = () => post({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'hold 300' }] }, { 'x-edge-session': 'serial' }).then(async (r) => JSON.parse((await json(r)).choices[0].message.content));
  const [a, b] = await Promise.all([run(), run()]);
  const [first, second] = a.start < b.start ? [a, b] : [b, a];
  assert.ok(second.start >= first.end, `overlap: ${JSON.stringify([first, second])}`);
});
