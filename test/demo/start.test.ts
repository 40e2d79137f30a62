// `npm start` must serve the curl lines it prints (README quick start), and
// the README's TypeScript examples (openai, @anthropic-ai/sdk,
// @a2a-js/sdk) must run against it as a reader copies each block.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));
const demo = fileURLToPath(new URL('../../src/demo/start.js', import.meta.url));

let child: ChildProcessByStdio<null, Readable, null>;
/** What the demo printed up to its "Ctrl-C" line. */
let out = '';

before(async () => {
  child = spawn(process.execPath, [demo], {
    env: { ...process.env, DEMO_HTTP_PORT: '0', DEMO_GRPC_PORT: '0', DEMO_MOCK_PORT: '0', DEMO_ADMIN_PORT: '0', LOG_LEVEL: 'error' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child.stdout.setEncoding('utf8');
  while (!out.includes('Ctrl-C')) {
    const [chunk] = (await once(child.stdout, 'data')) as [string];
    out += chunk;
  }
});

after(async () => {
  child.kill('SIGTERM');
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.equal(code, 0, 'the demo exits cleanly on SIGTERM');
});

test('the demo prints curl lines that work and the console URL', async () => {
  const consoleUrl = /operator console: (http:\/\/\S+\/console)/.exec(out)?.[1];
  assert.ok(consoleUrl, out);
  const page = await fetch(consoleUrl);
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<title>Edge console<\/title>/);
  const curlLines = out.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('curl '));
  assert.equal(curlLines.length, 12, out);
  const [plain, streaming, models, agent, messages, responses, status, metrics] = await Promise.all(curlLines.slice(0, 8).map((line) => run('bash', ['-c', line])));
  // The cli provider: the example script's stdout, as chunks.
  const agentText = [...agent.stdout.matchAll(/^data: (\{.*\})$/gm)].map((m) => (JSON.parse(m[1]) as { choices: { delta: { content?: string } }[] }).choices[0].delta.content ?? '').join('');
  assert.match(agentText, /session demo, turn \d+\] You said: Hello, agent!/);
  const runs = JSON.parse((await run('bash', ['-c', curlLines[8]])).stdout) as { runs: { model: string; outcome: string }[] };
  assert.ok(runs.runs.some((r) => r.model === 'agent' && r.outcome === 'end'), JSON.stringify(runs));
  // A2A: the edge's card at its client URL, and a task on the cli agent through JSON-RPC.
  const card = JSON.parse((await run('bash', ['-c', curlLines[9]])).stdout) as { skills: { id: string }[]; supportedInterfaces: { url: string }[] };
  assert.deepEqual(card.skills.map((s) => s.id), ['chat', 'agent']);
  assert.match(card.supportedInterfaces[0].url, /^http:\/\/127\.0\.0\.1:\d+\/a2a\/chat$/);
  const a2a = JSON.parse((await run('bash', ['-c', curlLines[10]])).stdout) as { result: { task: { status: { state: string }; artifacts: { parts: { text: string }[] }[] } } };
  assert.equal(a2a.result.task.status.state, 'TASK_STATE_COMPLETED', JSON.stringify(a2a));
  assert.match(a2a.result.task.artifacts[0].parts[0].text, /You said: Hello, agent!/);
  // CORS: the example config's page gets its preflight answered.
  const preflight = (await run('bash', ['-c', curlLines[11]])).stdout;
  assert.match(preflight, /^HTTP\/1\.1 204 /, preflight);
  assert.match(preflight, /^access-control-allow-origin: http:\/\/localhost:5173\r?$/m, preflight);
  assert.match(preflight, /^access-control-allow-headers: authorization, content-type\r?$/m, preflight);
  const completion = JSON.parse(plain.stdout) as { object: string; choices: { message: { content: string } }[] };
  assert.equal(completion.object, 'chat.completion');
  assert.ok(completion.choices[0].message.content.length > 0);
  assert.match(streaming.stdout, /^data: .*chat\.completion\.chunk/m);
  assert.match(streaming.stdout, /data: \[DONE\]/);
  assert.equal((JSON.parse(messages.stdout) as { type: string }).type, 'message', messages.stdout);
  assert.equal((JSON.parse(responses.stdout) as { object: string; status: string }).status, 'completed', responses.stdout);
  assert.equal((JSON.parse(status.stdout) as { nodes: { id: string }[] }).nodes[0].id, 'gpu-1');
  assert.match(metrics.stdout, /^# TYPE edge_requests_total counter$/m);
  assert.deepEqual((JSON.parse(models.stdout) as { data: { id: string }[] }).data.map((m) => m.id), ['llama3', 'embed-small', 'agent']);
});

test('a demo port already in use is named, with the variable that moves it', async () => {
  const { createServer } = await import('node:net');
  const taken = createServer();
  taken.listen(0, '127.0.0.1');
  await once(taken, 'listening');
  const port = (taken.address() as { port: number }).port;
  try {
  for (const name of ['DEMO_HTTP_PORT', 'DEMO_GRPC_PORT', 'DEMO_ADMIN_PORT', 'DEMO_MOCK_PORT']) {
    const env = { ...process.env, DEMO_HTTP_PORT: '0', DEMO_GRPC_PORT: '0', DEMO_MOCK_PORT: '0', DEMO_ADMIN_PORT: '0', LOG_LEVEL: 'error', [name]: String(port) };
    const failed = await run(process.execPath, [demo], { env, timeout: 30_000 }).then(
      () => assert.fail(`${name}: the demo started on a port in use`),
      (err: { code?: number; stderr?: string }) => err,
    );
    assert.equal(failed.code, 1, name);
    assert.match(failed.stderr ?? '', new RegExp(`port ${port} is already in use.*${name}=<port> npm start`), `${name}: ${failed.stderr}`);
  }
  } finally {
  taken.close();
  }
});

test('an unknown LOG_LEVEL is named, not answered with the logger\'s own error', async () => {
  const env = { ...process.env, DEMO_HTTP_PORT: '0', DEMO_GRPC_PORT: '0', DEMO_MOCK_PORT: '0', DEMO_ADMIN_PORT: '0', LOG_LEVEL: 'verbose' };
  const failed = await run(process.execPath, [demo], { env, timeout: 30_000 }).then(
  () => assert.fail('the demo started with LOG_LEVEL=verbose'),
  (err: { code?: number; stderr?: string }) => err,
  );
  assert.equal(failed.code, 1);
  assert.equal(failed.stderr?.trim(), 'LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent; got "verbose"');
});

test('every TypeScript example in the README runs as written against the demo', async () => {
  const readme = await readFile(`${root}README.md`, 'utf8');
  const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  assert.ok(blocks.length >= 3, 'the README has its SDK examples');
  const edgeUrl = /demo ready: edge (http:\/\/[^\s,]+)/.exec(out)?.[1];
  assert.ok(edgeUrl, out);
  for (const block of blocks) {
    // The README's port is the demo's default; this demo took a free one.
    const code = block.replaceAll('http://127.0.0.1:8080', edgeUrl);
    const { stdout } = await run(process.execPath, ['--input-type=module-typescript', '--eval', code], { cwd: root, timeout: 60_000 }).catch(
      (err: { stderr?: string }) => assert.fail(`README example failed:\n${block}\n${err.stderr ?? String(err)}`),
    );
    assert.match(stdout, /hello from|You said: Hello, agent!/, `README example printed no answer:\n${block}\n${stdout}`);
  }
});
