// The agent side of the cli adapter, against the fake edge: a TunnelRequest
// with adapter CLI and a session id runs the provider's command and comes
// back as HEADERS, DATA (OpenAI chunks), END; the agent's log lines carry
// the adapter and the session; a CLI request for an HTTP provider is
// refused with adapter_not_supported. A run that ends (cancelled, past its
// timeout) while its output is held back for credit still gives its session
// back, and its process is gone.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { test, type TestContext } from 'node:test';
import { pino } from 'pino';
import { NodeAgent } from '../../src/agent/agent.js';
import { parseAgentConfig } from '../../src/agent/config.js';
import { Adapter, FrameKind } from '../../src/gen/edge/v1/tunnel_pb.js';
import { FakeEdge, waitFor, type EdgeStream } from './fake-edge.js';
import { alive } from '../helpers/processes.js';

const FIXTURE = fileURLToPath(new URL('../../../test/fixtures/cli-fixture.mjs', import.meta.url));

test('a CLI TunnelRequest runs the command; logs name the adapter and the session', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'cli-adapter-'));
  const edge = await FakeEdge.start();
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line));
      done();
    },
  });
  const config = parseAgentConfig(
    {
      edge: { address: edge.address },
      node: { id: 'gpu-1', token: 't' },
      providers: [
        { id: 'agent', type: 'cli', command: [process.execPath, FIXTURE], cwd_root: root },
        { id: 'http', type: 'openai_compat', base_url: 'http://127.0.0.1:9' },
        { id: 'agent-arg', type: 'cli', command: [process.execPath, FIXTURE], input: 'arg', args: ['--', '{prompt}'], cwd_root: root },
      ],
      log_level: 'debug',
    },
    'test',
  );
  const agent = new NodeAgent(config, { logger: pino({ level: 'debug' }, sink) });
  t.after(async () => {
    await agent.stop();
    edge.close();
    await rm(root, { recursive: true, force: true });
  });
  agent.start();
  const stream = await edge.registeredStream(0);
  const body = new TextEncoder().encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'echo hi there' }] }));
  stream.sendTunnel({ runId: 'run-cli', tunnelId: 1, providerId: 'agent', adapter: Adapter.CLI, sessionId: 'sess-9', target: 'served-m', method: 'POST', path: '/v1/chat/completions', body, stream: true, timeoutMs: 10_000 });
  const frames = await stream.terminalFrames(1, 10_000);
  assert.equal(frames[0].kind, FrameKind.HEADERS);
  assert.equal(frames[0].status, 200);
  assert.equal(frames.at(-1)?.kind, FrameKind.END);
  const text = frames.filter((f) => f.kind === FrameKind.DATA).map((f) => new TextDecoder().decode(f.data)).join('');
  const content = [...text.matchAll(/^data: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]).choices[0].delta.content ?? '').join('');
  assert.equal(content, 'hi there');
  assert.match(text, /"model":"served-m"/);
  assert.match(text, /data: \[DONE\]\n\n$/);
  const started = lines.find((l) => l.msg === 'tunnel started' && l.runId === 'run-cli');
  assert.equal(started?.adapter, 'CLI');
  assert.equal(started?.sessionId, 'sess-9');

  stream.sendTunnel({ runId: 'run-mismatch', tunnelId: 2, providerId: 'http', adapter: Adapter.CLI, sessionId: '', method: 'POST', path: '/', body, stream: false });
  const refused = await stream.terminalFrames(2);
  assert.equal(refused.at(-1)?.errorCode, 'adapter_not_supported');
  const argBody = new TextEncoder().encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: "echo $(rm -rf /) 'quoted' ; semi" }] }));
  stream.sendTunnel({ runId: 'run-arg', tunnelId: 3, providerId: 'agent-arg', adapter: Adapter.CLI, sessionId: 'a', target: 'm', method: 'POST', path: '/', body: argBody, stream: false, timeoutMs: 10_000 });
  const argFrames = await stream.terminalFrames(3, 10_000);
  const completion = JSON.parse(new TextDecoder().decode(argFrames.find((f) => f.kind === FrameKind.DATA)?.data));
  // input: arg hands the prompt over as one argv entry: no shell ever sees it.
  assert.equal(completion.choices[0].message.content, "$(rm -rf /) 'quoted' ; semi");
  const failed = lines.find((l) => l.msg === 'tunnel failed' && l.runId === 'run-mismatch');
  assert.equal(failed?.adapter, 'CLI');
  assert.equal(failed?.sessionId, 'default');
});

test('a finished run is never signalled again: a cancel while its answer waits for credit sends no signal to its old process group', async (t) => {
  const stream = await cliAgent(t, 'cli-ended-', [{ id: 'agent', kill_grace_ms: 200 }]);
  const groupSignals: [number, string][] = [];
  const kill = process.kill;
  process.kill = ((pid: number, signal?: string | number) => {
    if (pid < 0) groupSignals.push([pid, String(signal)]);
    return kill.call(process, pid, signal);
  }) as typeof process.kill;
  t.after(() => {
    process.kill = kill;
  });
  const body = new TextEncoder().encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'dump 64' }] }));
  // 256 bytes of credit: the 64 KB completion (sent once the command has exited and its pipes closed) waits for more.
  stream.sendTunnel({ runId: 'ended', tunnelId: 1, providerId: 'agent', adapter: Adapter.CLI, sessionId: 'e', target: 'm', method: 'POST', path: '/v1/chat/completions', body, stream: false, timeoutMs: 30_000, initialCredit: 256 });
  await waitFor('the completion to start', () => stream.framesOf(1).find((f) => f.kind === FrameKind.DATA), 10_000);
  const atClose = groupSignals.length;
  assert.ok(atClose > 0, 'the group was killed when the command exited');
  stream.cancel(1);
  await stream.terminalFrames(1, 5_000).catch(() => undefined);
  await new Promise((resolve) => setTimeout(resolve, 500)); // past kill_grace_ms
  // The group id is free once its last process is gone: signalling it could hit another process group.
  assert.deepEqual(groupSignals.slice(atClose), []);
});

/** A node agent with these cli providers (each under its own temp cwd_root) against a fake edge; torn down after the test. */
async function cliAgent(t: TestContext, prefix: string, providers: Record<string, unknown>[]): Promise<EdgeStream> {
  const root = await mkdtemp(join(tmpdir(), prefix));
  const edge = await FakeEdge.start();
  const config = parseAgentConfig(
    { edge: { address: edge.address }, node: { id: 'gpu-1', token: 't' }, providers: providers.map((p) => ({ type: 'cli', command: [process.execPath, FIXTURE], cwd_root: root, ...p })), log_level: 'silent' },
    'test',
  );
  const agent = new NodeAgent(config, { logger: pino({ level: 'silent' }) });
  t.after(async () => {
    await agent.stop();
    edge.close();
    await rm(root, { recursive: true, force: true });
  });
  agent.start();
  return edge.registeredStream(0);
}

test('a cli run ended while its output waits for credit gives its session back: the next run of that session starts', async (t) => {
  // session_wait_ms: how long the next run waits for a session still held before session_busy.
  const stream = await cliAgent(t, 'cli-held-', [{ id: 'agent', timeout_ms: 1_500, kill_grace_ms: 200, session_wait_ms: 3_000 }]);
  const request = (content: string) => new TextEncoder().encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] }));
  const cases: [string, (tunnelId: number) => void][] = [
    ['the edge cancelled it', (tunnelId) => stream.cancel(tunnelId)],
    ['past its timeout_ms', () => {}],
  ];
  let tunnelId = 0;
  for (const [label, end] of cases) {
    const flood = ++tunnelId;
    // 256 bytes of credit and never more: the run's stdout is paused with 1 MB still to come.
    // The session comes back with the child's 'close', which waits for that pipe to end:
    // Node resumes a child's stdio when it exits, and this pins that it still ends.
    stream.sendTunnel({ runId: `flood-${flood}`, tunnelId: flood, providerId: 'agent', adapter: Adapter.CLI, sessionId: 'held', target: 'm', method: 'POST', path: '/v1/chat/completions', body: request('flood 1024'), stream: true, timeoutMs: 30_000, initialCredit: 256 });
    const text = await waitFor(`${label}: the run's first bytes`, () => {
      const data = stream.framesOf(flood).filter((f) => f.kind === FrameKind.DATA).map((f) => new TextDecoder().decode(f.data)).join('');
      return /pid (\d+)/.test(data) ? data : undefined;
    }, 5_000);
    const pid = Number(/pid (\d+)/.exec(text)?.[1]);
    end(flood);
    const next = ++tunnelId;
    stream.sendTunnel({ runId: `next-${next}`, tunnelId: next, providerId: 'agent', adapter: Adapter.CLI, sessionId: 'held', target: 'm', method: 'POST', path: '/v1/chat/completions', body: request('echo after'), stream: false, timeoutMs: 30_000 });
    const frames = await stream.terminalFrames(next, 10_000);
    assert.equal(frames.at(-1)?.kind, FrameKind.END, `${label}: the session's next run got ${frames.at(-1)?.errorCode}: ${frames.at(-1)?.errorMessage}`);
    const completion = JSON.parse(new TextDecoder().decode(frames.find((f) => f.kind === FrameKind.DATA)?.data));
    assert.equal(completion.choices[0].message.content, 'after');
    assert.equal(alive(pid), false, `${label}: the flooding process ${pid} is still running`);
  }
});

test('a prompt holding a NUL character for an `input: arg` provider fails that run (400), not the agent', async (t) => {
  const stream = await cliAgent(t, 'cli-nul-', [{ id: 'agent-arg', input: 'arg', args: ['--', '{prompt}'] }]);
  const body = (content: string) => new TextEncoder().encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] }));
  stream.sendTunnel({ runId: 'nul', tunnelId: 1, providerId: 'agent-arg', adapter: Adapter.CLI, sessionId: 'z', target: 'm', method: 'POST', path: '/', body: body('echo a\u0000b'), stream: false, timeoutMs: 10_000 });
  const refused = await stream.terminalFrames(1, 5_000);
  assert.equal(refused.at(-1)?.kind, FrameKind.ERROR);
  assert.equal(refused.at(-1)?.errorCode, 'cli_bad_request');
  assert.match(refused.at(-1)?.errorMessage ?? '', /NUL/);
  // The agent and the session go on.
  stream.sendTunnel({ runId: 'after', tunnelId: 2, providerId: 'agent-arg', adapter: Adapter.CLI, sessionId: 'z', target: 'm', method: 'POST', path: '/', body: body('echo fine'), stream: false, timeoutMs: 10_000 });
  const served = await stream.terminalFrames(2, 10_000);
  assert.equal(served.at(-1)?.kind, FrameKind.END);
  assert.equal(JSON.parse(new TextDecoder().decode(served.find((f) => f.kind === FrameKind.DATA)?.data)).choices[0].message.content, 'fine');
});

test('a prompt longer than one command-line argument may be is the client\'s error (400, E2BIG), not the program failing', async (t) => {
  const stream = await cliAgent(t, 'cli-e2big-', [{ id: 'agent-arg', input: 'arg', args: ['--', '{prompt}'] }]);
  const body = (content: string) => new TextEncoder().encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }] }));
  // Linux takes at most 128 KiB (MAX_ARG_STRLEN) in one argument.
  stream.sendTunnel({ runId: 'big', tunnelId: 1, providerId: 'agent-arg', adapter: Adapter.CLI, sessionId: 'z', target: 'm', method: 'POST', path: '/', body: body(`echo ${'x'.repeat(140_000)}`), stream: false, timeoutMs: 10_000 });
  const refused = await stream.terminalFrames(1, 5_000);
  assert.equal(refused.at(-1)?.kind, FrameKind.ERROR);
  assert.equal(refused.at(-1)?.errorCode, 'cli_bad_request', refused.at(-1)?.errorMessage);
  assert.match(refused.at(-1)?.errorMessage ?? '', /too long to pass as a command-line argument.*input: stdin/);
  stream.sendTunnel({ runId: 'after', tunnelId: 2, providerId: 'agent-arg', adapter: Adapter.CLI, sessionId: 'z', target: 'm', method: 'POST', path: '/', body: body('echo fine'), stream: false, timeoutMs: 10_000 });
  const served = await stream.terminalFrames(2, 10_000);
  assert.equal(served.at(-1)?.kind, FrameKind.END);
});

test("a session id starting with '-' is refused (400) where it would start an argument of the command; elsewhere it runs", async (t) => {
  const stream = await cliAgent(t, 'cli-dash-', [
    { id: 'whole', args: ['{session}'] },
    { id: 'inside', args: ['--session={session}'] },
  ]);
  const body = new TextEncoder().encode(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'echo ran' }] }));
  const send = (tunnelId: number, providerId: string, sessionId: string) => stream.sendTunnel({ runId: `r${tunnelId}`, tunnelId, providerId, adapter: Adapter.CLI, sessionId, target: 'm', method: 'POST', path: '/', body, stream: false, timeoutMs: 10_000 });
  send(1, 'whole', '--dangerously-skip-permissions');
  const refused = await stream.terminalFrames(1, 5_000);
  assert.equal(refused.at(-1)?.kind, FrameKind.ERROR);
  assert.equal(refused.at(-1)?.errorCode, 'cli_bad_request');
  assert.match(refused.at(-1)?.errorMessage ?? '', /starts with '-'/);
  for (const [tunnelId, providerId, sessionId] of [[2, 'whole', 'plain-9'], [3, 'inside', '-x']] as const) {
    send(tunnelId, providerId, sessionId);
    const served = await stream.terminalFrames(tunnelId, 10_000);
    assert.equal(served.at(-1)?.kind, FrameKind.END, `${providerId} ${sessionId}: ${served.at(-1)?.errorMessage}`);
  }
});
