// Logs never carry credentials; the edge CLI's flags and exit codes.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { stringify as toYaml } from 'yaml';
import { createLogger } from '../../../src/shared/logger.js';
import { hasOpenssl, makeTestPki } from '../../helpers/certs.js';
import type { NodeAgent } from '../../../src/agent/agent.js';
import { agentWith, NODE_TOKEN, opsConfigObject } from './ops-stack.js';

const CLI = fileURLToPath(new URL('../../../src/edge/cli.js', import.meta.url));

test('credentials are redacted wherever they sit in a log object', () => {
  const lines: string[] = [];
  const logger = createLogger('t', 'info', { destination: { write: (line: string) => void lines.push(line) } });
  logger.info({ token: 'secret-1', node: { id: 'n1', token: 'secret-2' } }, 'a');
  logger.info({ headers: { authorization: 'Bearer secret-3', 'x-api-key': 'secret-4', accept: 'x' } }, 'b');
  logger.info({ req: { headers: { authorization: 'Bearer secret-5' } }, provider: { apiKey: 'secret-6', api_key: 'secret-7' } }, 'c');
  logger.info({ config: { admin: { token: 'secret-8' }, nodes: [{ id: 'n1', token: 'secret-9' }] } }, 'd');
  const text = lines.join('');
  for (let i = 1; i <= 9; i++) assert.ok(!text.includes(`secret-${i}`), `secret-${i} leaked: ${text}`);
  assert.equal(text.split('[redacted]').length - 1, 9);
  assert.ok(text.includes('"accept":"x"'), 'other fields stay');
});

function run(args: string[], env: NodeJS.ProcessEnv = process.env): { status: number | null; stdout: string; stderr: string } {
  const out = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 15_000, env });
  return { status: out.status, stdout: out.stdout, stderr: out.stderr };
}

test('edge --help, --version and check-config answer with the right exit codes', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-cli-'));
  try {
    const help = run(['--help']);
    assert.equal(help.status, 0);
    assert.match(help.stdout, /edge --config FILE/);
    assert.match(help.stdout, /SIGHUP/);
    assert.match(run(['--version']).stdout, /^\d+\.\d+\.\d+/);
    const good = join(dir, 'good.yaml');
    await writeFile(good, toYaml(opsConfigObject()));
    const ok = run(['check-config', good]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /valid \(1 nodes, 2 models; admin 127\.0\.0\.1:0\)/);
    // A node token short enough to guess passes, with a warning that never shows the token.
    assert.match(ok.stderr, /warning: nodes\[0\]\.token \(node [^)]+\): \d+ characters; a token this short can be guessed/);
    assert.doesNotMatch(ok.stderr, new RegExp(NODE_TOKEN));
    const strong = join(dir, 'strong.yaml');
    const strongRaw = opsConfigObject();
    (strongRaw.nodes as { token: string }[])[0].token = 'a-node-token-of-32-characters-xx';
    await writeFile(strong, toYaml(strongRaw));
    const quiet = run(['check-config', strong]);
    assert.equal(quiet.status, 0, quiet.stderr);
    assert.equal(quiet.stderr, '');
    // Extra words are refused, not ignored: which file was checked, and which key was hashed, is never a guess.
    for (const args of [['check-config', good, strong], ['check-config', good, '--config', strong], ['hash-key', 'two', 'words']]) {
      const extra = run(args);
      assert.equal(extra.status, 2, `${args.join(' ')}: ${extra.stdout}`);
      assert.match(extra.stderr, /^edge (check-config: one FILE|hash-key: one KEY)/);
      assert.equal(extra.stdout, '');
    }
    assert.equal(run(['hash-key', 'two words']).status, 0);
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, toYaml({ ...opsConfigObject(), admin: { host: '0.0.0.0' } }));
    const invalid = run(['check-config', bad]);
    assert.equal(invalid.status, 1);
    assert.match(invalid.stderr, /admin\.token: required/);
    assert.equal(run(['--bogus']).status, 2);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('check-config also checks the files the config names: a key that is not the certificate\'s, a CA with no certificate, a missing file, an empty artifact dir', { skip: hasOpenssl() ? false : 'no openssl' }, async () => {
  const pki = makeTestPki();
  const dir = await mkdtemp(join(tmpdir(), 'edge-cli-'));
  try {
    const write = async (name: string, raw: Record<string, unknown>): Promise<string> => {
      const file = join(dir, name);
      await writeFile(file, toYaml(raw));
      return file;
    };
    const good = await write('tls-good.yaml', { ...opsConfigObject(), tls: { client: { cert_file: pki.serverCert, key_file: pki.serverKey }, nodes: { cert_file: pki.serverCert, key_file: pki.serverKey, client_ca_file: pki.caCert } } });
    const ok = run(['check-config', good]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /valid/);

    const bad = await write('tls-bad.yaml', {
      ...opsConfigObject(),
      tls: { client: { cert_file: pki.serverCert, key_file: pki.clientKey }, nodes: { cert_file: join(dir, 'missing.crt'), key_file: pki.serverKey, client_ca_file: pki.serverKey } },
      bootstrap: { listen: { host: '127.0.0.1', port: 0 }, artifact_dir: dir, token: 'a-bootstrap-token-long-enough' },
    });
    const refused = run(['check-config', bad]);
    assert.equal(refused.status, 1, refused.stdout);
    assert.match(refused.stderr, /tls\.client: .*server\.crt and .*client\.key are not a certificate and its key/);
    assert.match(refused.stderr, new RegExp(`tls\\.nodes\\.cert_file: cannot read ${join(dir, 'missing.crt').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ENOENT`));
    assert.match(refused.stderr, /tls\.nodes\.client_ca_file: .*server\.key holds no PEM certificate/);
    assert.match(refused.stderr, /bootstrap\.artifact_dir: expected exactly one agent tarball/);
    assert.doesNotMatch(refused.stdout, /valid/);
  } finally {
    pki.remove();
    await rm(dir, { recursive: true, force: true });
  }
});

test('check-config warns of a bootstrap token already past its token_expires_at: valid, yet the started edge would refuse every bootstrap', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-cli-'));
  try {
    await writeFile(join(dir, 'agent.tgz'), 'not really a tarball');
    const strong = opsConfigObject();
    (strong.nodes as { token: string }[])[0].token = 'a-node-token-of-32-characters-xx';
    const withExpiry = async (name: string, at: string): Promise<string> => {
      const file = join(dir, name);
      await writeFile(file, toYaml({ ...strong, bootstrap: { listen: { host: '127.0.0.1', port: 0 }, artifact_dir: dir, token: 'a-bootstrap-token-long-enough', token_expires_at: at } }));
      return file;
    };
    const past = run(['check-config', await withExpiry('past.yaml', '2020-01-01T00:00:00Z')]);
    assert.equal(past.status, 0, past.stderr);
    assert.match(past.stdout, /valid/);
    assert.match(past.stderr, /warning: bootstrap\.token_expires_at \(2020-01-01T00:00:00\.000Z\) is past: every bootstrap request will be refused \(401 token_expired\)/);
    const future = run(['check-config', await withExpiry('future.yaml', '2999-01-01T00:00:00Z')]);
    assert.equal(future.status, 0, future.stderr);
    assert.equal(future.stderr, '');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('--pretty prints human-readable lines instead of JSON', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-cli-'));
  const file = join(dir, 'edge.yaml');
  await writeFile(file, toYaml(opsConfigObject()));
  const child = spawn(process.execPath, [CLI, '--config', file, '--pretty'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LOG_LEVEL: 'info' } });
  try {
    let out = '';
    child.stdout.setEncoding('utf8');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line: ${out}`)), 15_000);
      child.stdout.on('data', (chunk: string) => {
        out += chunk;
        if (out.includes('edge listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    assert.match(out, /INFO.*\(edge\): edge listening/);
    assert.match(out, /WARN.*\(edge\): nodes\[0\]\.token \(node [^)]+\): \d+ characters; a token this short can be guessed/);
    assert.ok(!out.trimStart().startsWith('{'), 'not JSON');
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});

test('--pretty with I/O workers: the lines the workers log (node connected) are human-readable too', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-cli-'));
  const file = join(dir, 'edge.yaml');
  const raw = opsConfigObject();
  raw.workers = { count: 2 };
  await writeFile(file, toYaml(raw));
  const child = spawn(process.execPath, [CLI, '--config', file, '--pretty'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LOG_LEVEL: 'info' } });
  let agent: NodeAgent | undefined;
  try {
    let out = '';
    child.stdout.setEncoding('utf8');
    const seen = (needle: RegExp): Promise<void> =>
      new Promise<void>((resolve, reject) => {
        const check = (): boolean => {
          if (!needle.test(out)) return false;
          clearTimeout(timer);
          child.stdout.off('data', onData);
          resolve();
          return true;
        };
        const onData = (chunk: string): void => {
          out += chunk;
          check();
        };
        const timer = setTimeout(() => reject(new Error(`no ${needle}: ${out}`)), 15_000);
        if (!check()) child.stdout.on('data', onData);
      });
    await seen(/edge listening[\s\S]*grpcPort: \d+/);
    const grpcPort = Number(/grpcPort: (\d+)/.exec(out)?.[1]);
    agent = agentWith(grpcPort, 'http://127.0.0.1:9');
    agent.start();
    await seen(/\): node connected/);
    assert.match(out, /INFO.*\(edge\): node connected\n\s+worker: \d/);
    const json = out.split('\n').filter((line) => line.trimStart().startsWith('{'));
    assert.deepEqual(json, [], 'no JSON line among the pretty ones');
    await agent.stop();
    agent = undefined;
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
  } finally {
    await agent?.stop();
    if (child.exitCode === null) child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});

test('what stops a start that the operator fixes prints one line naming the config key, not a stack: a port in use, a missing file, an unknown LOG_LEVEL', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-cli-'));
  const busy = createNetServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const port = (busy.address() as AddressInfo).port;
  try {
    const write = async (name: string, raw: Record<string, unknown>): Promise<string> => {
      const file = join(dir, name);
      await writeFile(file, toYaml(raw));
      return file;
    };
    const cases: [string, Record<string, unknown>, RegExp][] = [];
    for (const workers of [0, 2]) {
      const http = opsConfigObject();
      http.listen = { http: { host: '127.0.0.1', port }, grpc: { host: '127.0.0.1', port: 0 } };
      http.workers = { count: workers };
      cases.push([`http-w${workers}.yaml`, http, new RegExp(`^listen\\.http: cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use`)]);
      const grpc = opsConfigObject();
      grpc.listen = { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port } };
      grpc.workers = { count: workers };
      cases.push([`grpc-w${workers}.yaml`, grpc, new RegExp(`^listen\\.grpc: cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use`)]);
    }
    const admin = opsConfigObject();
    admin.listen = { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } };
    admin.admin = { host: '127.0.0.1', port };
    cases.push(['admin.yaml', admin, new RegExp(`^admin: cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use`)]);
    const tls = opsConfigObject();
    tls.listen = { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } };
    tls.tls = { client: { cert_file: 'no-such.crt', key_file: 'no-such.key' } };
    cases.push(['tls.yaml', tls, /^tls\.client\.(key|cert)_file: cannot read \/.*no-such\.(key|crt): ENOENT/]);
    for (const [name, raw, expected] of cases) {
      const out = run(['--config', await write(name, raw)], { ...process.env, LOG_LEVEL: 'silent' });
      assert.equal(out.status, 1, `${name}: ${out.stderr}`);
      assert.match(out.stderr.trim(), expected, name);
      assert.doesNotMatch(out.stderr, /\n\s+at /, `${name}: a stack trace`);
    }
    const missing = run(['--config', join(dir, 'absent.yaml')]);
    assert.equal(missing.status, 1);
    // The absolute path tried: a relative one is read from the working directory, `/` under systemd.
    assert.match(missing.stderr, /absent\.yaml.*\n.*cannot read the file: ENOENT \(no such file: \/.*absent\.yaml\)/);
    assert.doesNotMatch(missing.stderr, /\n\s+at /);
    const level = run(['--config', await write('level.yaml', opsConfigObject())], { ...process.env, LOG_LEVEL: 'verbose' });
    assert.equal(level.status, 2);
    assert.match(level.stderr, /^LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent; got "verbose"/);
  } finally {
    busy.close();
    await rm(dir, { recursive: true, force: true });
  }
});
