// A cli session belongs to its API key. Its working directory holds the
// agent's files and conversation, so another key naming the same session id,
// or none, must land in a directory of its own on the node, never in this
// key's. The client's own id is what run records show.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, test } from 'node:test';
import { CLI_ALIAS, startCliStack, type CliStack } from '../helpers/cli-stack.js';

let stack: CliStack;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

before(async () => {
  stack = await startCliStack({
    configure: (raw) => {
      raw.auth = { api_keys: [{ name: 'team-a', key_sha256: sha256('secret-a') }, { name: 'team-b', key_sha256: sha256('secret-b') }] };
    },
  });
});

after(async () => {
  await stack.close();
});

/** Where the fixture ran (its cwd) and the {session} it was given. */
async function where(key: string, session: string | undefined): Promise<{ cwd: string; session: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  if (session !== undefined) headers['x-edge-session'] = session;
  const res = await fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ model: CLI_ALIAS, messages: [{ role: 'user', content: 'hold 1' }] }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const out = JSON.parse((JSON.parse(text) as { choices: { message: { content: string } }[] }).choices[0].message.content) as { cwd: string; argv: string[] };
  return { cwd: out.cwd, session: out.argv.at(-1) as string };
}

test('two keys naming one session id get two directories; one key keeps its own across requests', async () => {
  const a1 = await where('secret-a', 'shared');
  const a2 = await where('secret-a', 'shared');
  const b = await where('secret-b', 'shared');
  assert.equal(a2.cwd, a1.cwd, 'a key continues its own session');
  assert.notEqual(b.cwd, a1.cwd, "another key never works in this key's directory");
  assert.notEqual(b.session, a1.session);
  assert.match(a1.session, /\.shared$/, 'the client id stays readable in what the node is told');
  const runs = (await stack.admin('/admin/runs?session=shared')).json.runs as { session: string }[];
  assert.equal(runs.length, 3, 'run records keep the id the client named');
});

test('requests naming no session: each key has its own default', async () => {
  const a = await where('secret-a', undefined);
  const b = await where('secret-b', undefined);
  assert.notEqual(a.cwd, b.cwd);
  assert.equal((await where('secret-a', undefined)).cwd, a.cwd);
});
