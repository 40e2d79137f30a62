// The node-agent binary as an operator runs it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FakeEdge, waitFor } from './fake-edge.js';
import { autoNodeFlags } from '../../src/shared/node-flags.js';

const CLI = fileURLToPath(new URL('../../src/agent/cli.js', import.meta.url));
const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** A guard against a hung CLI, not a speed check: a loaded 2-core CI machine took over 5 s to start one. */
const CLI_RUN_TIMEOUT_MS = 30_000;

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { timeout: CLI_RUN_TIMEOUT_MS }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
    });
  });
}

test('--version prints the package version; --help prints usage; a missing --config is a usage error', async () => {
  const [version, help, missing, unknown] = await Promise.all([runCli(['--version']), runCli(['--help']), runCli([]), runCli(['--bogus'])]);
  assert.deepEqual([version.code, version.stdout], [0, `${PACKAGE_VERSION}\n`]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /Usage: node-agent --config FILE/);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /--config FILE is required/);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /Unknown option '--bogus'/);
});

test('--help after check-config or bootstrap prints usage, not a missing file or an unknown option', async () => {
  for (const args of [['check-config', '--help'], ['bootstrap', '-h']]) {
    const result = await runCli(args);
    assert.deepEqual([result.code, result.stderr], [0, ''], args.join(' '));
    assert.match(result.stdout, /node-agent check-config FILE/);
  }
});

test('bootstrap: a token no Authorization header can carry is refused without being printed', async () => {
  // A secret pasted with a line break, or a character outside Latin-1: fetch's refusal would quote the header, token and all.
  for (const token of ['bootstrap-secret-part1\nbootstrap-secret-part2', 'bootstrap-secret-\u20ac-0123']) {
    const result = await runCli(['bootstrap', '--edge', 'http://127.0.0.1:9', '--node-id', 'n', '--dir', tmpdir(), '--token', token]);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /the bootstrap token holds whitespace or a character no Authorization header can carry \(value not shown/);
    assert.doesNotMatch(result.stderr, /bootstrap-secret/);
  }
});

test('an invalid config exits 1 and names each problem by path', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'agent-cli-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'agent.yaml');
  await writeFile(file, 'edge:\n  address: nowhere\nnode:\n  id: n\n  token: t\nproviders:\n  - id: p\n    type: openai_compat\n    base_url: nope\n');
  const result = await runCli(['--config', file]);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /edge\.address: expected host:port/);
  assert.match(result.stderr, /providers\[0\]\.base_url: expected an http\(s\) URL/);
});

test('it registers, and on SIGTERM leaves the edge and exits 0 without logging secrets', async (t) => {
  const edge = await FakeEdge.start();
  const dir = await mkdtemp(join(tmpdir(), 'agent-cli-'));
  t.after(async () => {
    edge.close();
    await rm(dir, { recursive: true, force: true });
  });
  const file = join(dir, 'agent.yaml');
  await writeFile(
    file,
    [
      'edge:',
      `  address: ${edge.address}`,
      'node:',
      '  id: gpu-1',
      '  token: tok-do-not-log',
      'providers:',
      '  - id: gpu-1-mock',
      '    type: openai_compat',
      '    base_url: http://127.0.0.1:9',
      '    api_key: key-do-not-log',
      'log_level: debug',
      '',
    ].join('\n'),
  );
  const child = spawn(process.execPath, [CLI, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));

  const stream = await edge.registeredStream(0, 4000);
  assert.equal(stream.register?.token, 'tok-do-not-log');
  await waitFor('the registered log line', () => (stdout.includes('registered with the edge') ? true : undefined), 4000);

  child.kill('SIGTERM');
  const [code] = await once(child, 'exit');
  assert.equal(code, 0);
  assert.ok(stream.messages.some((m) => m.msg.case === 'leaving'), 'Leaving reached the edge');
  const lines = stdout.trim().split('\n').map((line) => JSON.parse(line) as { msg: string; level: number });
  assert.ok(lines.some((l) => l.msg === 'stopped'));
  assert.ok(!stdout.includes('do-not-log'), 'neither the token nor the api key is logged');
  // runtime.node_flags defaults to auto: the agent restarted itself in place (same PID) with them, once.
  const starting = lines.filter((l) => l.msg === 'node agent starting') as unknown as { pid: number; nodeFlags: string[] }[];
  assert.equal(starting.length, 1);
  assert.equal(starting[0].pid, child.pid);
  assert.deepEqual(starting[0].nodeFlags, autoNodeFlags(availableParallelism()));
});

test('runtime.node_flags: a listed flag is what the agent runs with; a flag outside the allowed ones is a config error', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'agent-cli-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'agent.yaml');
  const base = 'edge:\n  address: 127.0.0.1:9\nnode:\n  id: n\n  token: t\nproviders:\n  - id: p\n    type: openai_compat\n    base_url: http://127.0.0.1:9\n';
  await writeFile(file, `${base}runtime:\n  node_flags: ['--inspect=0.0.0.0:9229']\n`);
  const bad = await runCli(['--config', file]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /runtime\.node_flags\[0\]: expected one of --v8-pool-size=<integer>/);
  await writeFile(file, `${base}runtime:\n  node_flags: ['--max-semi-space-size=4']\n`);
  const child = spawn(process.execPath, [CLI, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const line = await waitFor('the starting log line', () => stdout.split('\n').find((l) => l.includes('"node agent starting"')), 5000);
  const starting = JSON.parse(line) as { pid: number; nodeFlags: string[] };
  assert.equal(starting.pid, child.pid);
  assert.deepEqual(starting.nodeFlags, ['--max-semi-space-size=4']);
});

test('check-config: the TLS files and each cli program are checked where the agent would find them; a start with unreadable TLS files stops at once', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'agent-cli-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const bin = join(dir, 'bin');
  const { mkdir, chmod } = await import('node:fs/promises');
  await mkdir(bin);
  const program = join(bin, 'my-coder');
  await writeFile(program, '#!/bin/sh\necho hi\n');
  await chmod(program, 0o755);
  const cli = (command: string, env = ''): string => ['  - id: coder', '    type: cli', `    command: [${JSON.stringify(command)}]`, env].filter((l) => l !== '').join('\n');
  const write = async (name: string, providers: string, tls = ''): Promise<string> => {
    const file = join(dir, name);
    await writeFile(file, ['edge:', '  address: 127.0.0.1:1', tls, 'node:', '  id: n', '  token: a-node-token-long-enough', 'providers:', providers, ''].filter((l) => l !== '').join('\n'));
    return file;
  };
  // A bare name is found on the PATH the command's env gives it, not the agent's own.
  const viaPath = await runCli(['check-config', await write('path.yaml', cli('my-coder', `    env: [${JSON.stringify(`PATH=${bin}`)}]`))]);
  assert.equal(viaPath.code, 0, viaPath.stderr);
  assert.match(viaPath.stdout, /path\.yaml: valid \(node n, 1 providers, edge 127\.0\.0\.1:1\)/);
  const noPath = await runCli(['check-config', await write('nopath.yaml', cli('my-coder'))]);
  assert.equal(noPath.code, 1);
  assert.match(noPath.stderr, /providers\[0\]\.command\[0\]: no executable my-coder on the command's PATH \(\/usr\/bin:\/bin: the default, since providers\[\]\.env passes no PATH\)/);
  const relative = await runCli(['check-config', await write('relative.yaml', cli('./bin/my-coder'))]);
  assert.match(relative.stderr, /command\[0\]: \.\/bin\/my-coder is relative, so each run would look for it in its session's directory/);
  assert.equal((await runCli(['check-config', await write('absolute.yaml', cli(program))])).code, 0);
  // A directory passes access(X_OK), yet execve refuses it: every run would fail with cli_failed.
  const directory = await runCli(['check-config', await write('directory.yaml', cli(bin))]);
  assert.equal(directory.code, 1, directory.stdout);
  assert.match(directory.stderr, /providers\[0\]\.command\[0\]: .*\/bin is not an executable file/);
  const dirOnPath = await runCli(['check-config', await write('dironpath.yaml', cli('bin', `    env: [${JSON.stringify(`PATH=${dir}`)}]`))]);
  assert.equal(dirOnPath.code, 1, dirOnPath.stdout);
  assert.match(dirOnPath.stderr, /no executable bin on the command's PATH/);
  const empty = await runCli(['check-config', await write('empty.yaml', cli(''))]);
  assert.equal(empty.code, 1, empty.stdout);
  assert.match(empty.stderr, /providers\[0\]\.command\[0\]: expected the program: a path or a name on its PATH, found the string ""/);
  // The sessions' root is made at the first run: one that cannot be would fail every run with cli_failed.
  const underFile = await runCli(['check-config', await write('cwdfile.yaml', cli(program, `    cwd_root: ${JSON.stringify(join(program, 'sessions'))}`))]);
  assert.equal(underFile.code, 1, underFile.stdout);
  assert.match(underFile.stderr, /providers\[0\]\.cwd_root: .*\/my-coder is not a directory/);
  assert.equal((await runCli(['check-config', await write('cwdnew.yaml', cli(program, `    cwd_root: ${JSON.stringify(join(dir, 'new', 'sessions'))}`))])).code, 0, 'a missing root is created');
  // As the first run refuses it (cli-sessions.ts): a root other users may write to.
  const open = join(dir, 'open');
  await mkdir(open);
  await chmod(open, 0o777);
  const shared = await runCli(['check-config', await write('cwdopen.yaml', cli(program, `    cwd_root: ${JSON.stringify(open)}`))]);
  assert.equal(shared.code, 1, shared.stdout);
  assert.match(shared.stderr, /providers\[0\]\.cwd_root: .*\/open is writable by other users/);
  const tls = await write('tls.yaml', cli(program), '  tls:\n    ca_file: missing-ca.pem');
  const badTls = await runCli(['check-config', tls]);
  assert.equal(badTls.code, 1);
  assert.match(badTls.stderr, /edge\.tls\.ca_file: cannot read \/.*missing-ca\.pem: ENOENT/);
  // Started with it: one line, before any dial, not a stack after "node agent starting".
  const started = await runCli(['--config', tls]);
  assert.equal(started.code, 1);
  assert.match(started.stderr, /^node-agent: .*tls\.yaml: edge\.tls\.ca_file: cannot read .*ENOENT\n$/);
  assert.doesNotMatch(started.stdout, /node agent starting/);
});
