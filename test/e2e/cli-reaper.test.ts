// A cli run's command lives in its own process group, so nothing kills it
// when its parent dies. These run the node agent as a real child process
// (its installed command, dist/src/agent/bin.js) and end it the ways a host
// can: SIGKILL (no handler runs) and SIGTERM (the graceful stop). Either
// way the command, its grandchild and the agent's process-group reaper are
// gone afterwards, as /proc shows.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { CLI_ALIAS, isLive, livePids, readPids, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

const AGENT_BIN = fileURLToPath(new URL('../../src/agent/bin.js', import.meta.url));

let stack: CliStack;
/** Agents started here: a failed test must not leave one running (it would hold the test process open). */
const agents: ChildProcess[] = [];

before(async () => {
  // kill_grace_ms 300: the fixture ignores SIGTERM, so SIGKILL must follow.
  stack = await startCliStack({ inProcessAgents: false });
});

after(async () => {
  for (const agent of agents) if (agent.exitCode === null && agent.signalCode === null) agent.kill('SIGKILL');
  await stack.close();
});

interface AgentProcess {
  readonly child: ChildProcess;
  output(): string;
}

/** `ownGroup`: the agent leads a process group of its own, as under a shell's job control or `timeout`. */
async function startAgentProcess(ownGroup = false): Promise<AgentProcess> {
  const file = join(stack.root, 'agent.yaml');
  // JSON is YAML: the agent reads it as its config file.
  await writeFile(file, JSON.stringify({ ...stack.agentConfig(0), log_level: 'warn' }));
  const child = spawn(process.execPath, [AGENT_BIN, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'], detached: ownGroup });
  agents.push(child);
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (output += s));
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (output += s));
  const node = stack.nodeId(0);
  await waitFor(async () => stack.edge.driver.status().nodes.some((n) => n.id === node && n.connected), 'the agent to register', 20_000);
  return { child, output: () => output };
}

/** Starts the 'orphan' fixture through the edge; resolves with its pids once it printed them. */
async function startOrphan(): Promise<{ child: number; grandchild: number; body: ReadableStreamDefaultReader<Uint8Array> }> {
  const res = await fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: CLI_ALIAS, stream: true, messages: [{ role: 'user', content: 'orphan' }] }),
  });
  assert.equal(res.status, 200);
  const { reader, child, grandchild } = await readPids(res);
  return { child, grandchild, body: reader };
}

/** The agent's reaper: its child running /bin/sh -c. */
async function reaperOf(agentPid: number): Promise<number> {
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== agentPid) continue;
      const argv = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).split('\0');
      if (argv[0] === '/bin/sh' && argv[1] === '-c') return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return 0;
}

/** Drains what is left of a response body; the edge ends it with an error once the node is gone. */
async function drain(body: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let text = '';
  try {
    for (;;) {
      const { value, done } = await body.read();
      if (done) return text;
      text += new TextDecoder().decode(value);
    }
  } catch {
    return text;
  }
}

interface OpenRun {
  readonly child: number;
  readonly grandchild: number;
  readonly reaper: number;
  readonly body: ReadableStreamDefaultReader<Uint8Array>;
}

/** The 'orphan' fixture running under `agent`, and the reaper the agent started for it. */
async function openRun(agent: AgentProcess): Promise<OpenRun> {
  const { child, grandchild, body } = await startOrphan();
  assert.ok(await isLive(child), 'the command runs');
  assert.ok(await isLive(grandchild), 'its grandchild runs');
  const reaper = await reaperOf(agent.child.pid as number);
  assert.ok(reaper > 0, 'the agent started its reaper');
  return { child, grandchild, reaper, body };
}

/** The command, its grandchild and the reaper are gone: TERM (ignored), kill_grace_ms (300 ms), then KILL. */
async function assertNothingLeft(run: OpenRun): Promise<void> {
  await waitFor(async () => !(await isLive(run.child)) && !(await isLive(run.grandchild)), 'the process group to be gone', 5_000);
  await waitFor(async () => !(await isLive(run.reaper)), 'the reaper to exit', 5_000);
  assert.deepEqual(await livePids(stack.tag), []);
}

test('SIGKILL of the agent: the running command and its grandchild (both ignoring SIGTERM) are killed, and the reaper exits', async () => {
  const agent = await startAgentProcess();
  const run = await openRun(agent);
  const exited = once(agent.child, 'exit');
  agent.child.kill('SIGKILL');
  await exited;
  await assertNothingLeft(run);
  await drain(run.body);
});

test('SIGKILL of the agent\'s whole process group (timeout -s KILL, a supervisor\'s group kill): the reaper, in a group of its own, still ends the run', async () => {
  const agent = await startAgentProcess(true);
  const run = await openRun(agent);
  const exited = once(agent.child, 'exit');
  process.kill(-(agent.child.pid as number), 'SIGKILL');
  await exited;
  await assertNothingLeft(run);
  await drain(run.body);
});

test('SIGTERM (graceful stop) with a run open: the group is gone, the agent exits 0 and leaves no reaper behind', async () => {
  const agent = await startAgentProcess();
  const run = await openRun(agent);
  const exited = once(agent.child, 'exit');
  agent.child.kill('SIGTERM');
  // The client goes too (else the stop waits out its 10 s grace for the run): the agent aborts it.
  await run.body.cancel();
  const [code] = (await exited) as [number | null];
  assert.equal(code, 0, agent.output());
  await assertNothingLeft(run);
});

for (const [first, second] of [['SIGTERM', 'SIGINT'], ['SIGINT', 'SIGTERM']] as const) {
  test(`${first} then ${second} while a run is open: the second signal means now (exit 1), and the group is still reaped`, async () => {
    const agent = await startAgentProcess();
    const run = await openRun(agent);
    const exited = once(agent.child, 'exit');
    agent.child.kill(first);
    // The run stays open (its client stays): a graceful stop would wait out its 10 s grace, then exit 0.
    await new Promise((resolve) => setTimeout(resolve, 300));
    agent.child.kill(second);
    const [code] = (await exited) as [number | null];
    assert.equal(code, 1, agent.output());
    await assertNothingLeft(run);
    await drain(run.body);
  });
}
