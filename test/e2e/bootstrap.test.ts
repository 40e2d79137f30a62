// Bootstrap from the edge: the edge's bootstrap listener serves a real agent
// tarball (this checkout's `npm pack` output, prepack skipped so the running
// suite's dist/ is not rebuilt under it), a fresh directory is filled by the
// `node-agent bootstrap` command alone, and the agent unpacked there,
// started on the config it was given, connects and serves a request. The
// one stand-in: the unpacked package's node_modules is a link to this
// checkout's (what `npm install --omit=dev` would put there; no registry
// here). Then the listener's security: wrong and missing tokens, path
// traversal attempts, unknown node ids, and a tarball that does not change
// while served even when the file on disk does.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { bootstrapNode } from '../../src/agent/bootstrap.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { createLogger, silentLogger } from '../../src/shared/logger.js';
import { hasOpenssl, makeTestPki } from '../helpers/certs.js';
import { testWorkers, waitUntil } from '../helpers/stack.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const AGENT_BIN = join(ROOT, 'dist/src/agent/bin.js');
const TOKEN = 'bootstrap-secret-0123456789';
const NODE_ID = 'gpu-new';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function run(command: string, args: readonly string[], cwd = ROOT, timeoutMs = 60_000, env: NodeJS.ProcessEnv = process.env): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A raw GET: the path goes on the wire exactly as written (fetch would normalize dot segments away). */
function rawGet(port: number, path: string, token: string | null = TOKEN, method = 'GET', scheme = 'Bearer '): Promise<{ status: number; body: string; allow?: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers: token === null ? {} : { authorization: `${scheme}${token}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (s: string) => (body += s));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, allow: res.headers.allow }));
    });
    req.once('error', reject);
    req.end();
  });
}

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

describe('bootstrap from the edge', () => {
  let dir: string;
  let artifactDir: string;
  let tarballPath: string;
  let tarballSha: string;
  let mock: MockProvider;
  let edge: RunningEdge;
  /** The edge's warnings and errors, as JSON lines. */
  const logLines: string[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'bootstrap-'));
    artifactDir = join(dir, 'artifacts');
    await mkdir(artifactDir);
    const pack = await run('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', artifactDir]);
    assert.equal(pack.code, 0, `npm pack failed: ${pack.stderr}`);
    const [name] = await readdir(artifactDir);
    tarballPath = join(artifactDir, name);
    tarballSha = sha256(await readFile(tarballPath));
    mock = await startMockProvider({ ttftMs: 0, tokens: 3, intervalMs: 0 });
    const raw = {
      listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
      heartbeat: { interval_ms: 200, timeout_ms: 2_000 },
      workers: { count: testWorkers() },
      bootstrap: { listen: { host: '127.0.0.1', port: 0 }, artifact_dir: artifactDir, token: TOKEN },
      nodes: [{ id: NODE_ID, token: 'node-token-1', providers: [{ id: 'p-new', type: 'openai_compat', capacity: 2, base_url: mock.url }] }],
      models: [{ alias: 'chat', providers: { 'p-new': 'served' } }],
    };
    edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: createLogger('edge', 'warn', { destination: { write: (line: string) => void logLines.push(line) } }) });
  });

  after(async () => {
    await edge.close();
    await mock.close();
    await rm(dir, { recursive: true, force: true });
  });

  const bootstrapUrl = () => `http://127.0.0.1:${edge.bootstrapPort}`;

  test('a fresh directory bootstrapped with the CLI command alone runs an agent that connects and serves', async () => {
    const nodeDir = join(dir, 'fresh-node');
    const result = await run(process.execPath, [AGENT_BIN, 'bootstrap', '--edge', bootstrapUrl(), '--node-id', NODE_ID, '--token', TOKEN, '--dir', nodeDir]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /agent\.tgz .*verified/);
    assert.deepEqual((await readdir(nodeDir)).sort(), ['SHA256SUMS', 'agent.tgz', 'agent.yaml']);
    assert.equal(sha256(await readFile(join(nodeDir, 'agent.tgz'))), tarballSha);
    assert.equal((await stat(join(nodeDir, 'agent.yaml'))).mode & 0o777, 0o600, 'the config holds the node token');
    const config = parseYaml(await readFile(join(nodeDir, 'agent.yaml'), 'utf8'));
    assert.deepEqual(config, {
      edge: { address: `127.0.0.1:${edge.grpcPort}` },
      node: { id: NODE_ID, token: 'node-token-1' },
      providers: [{ id: 'p-new', type: 'openai_compat', base_url: mock.url }],
    });

    // Unpack as npm would; node_modules stands in for `npm install --omit=dev` (no registry here).
    assert.equal((await run('tar', ['-xzf', 'agent.tgz'], nodeDir)).code, 0);
    await symlink(join(ROOT, 'node_modules'), join(nodeDir, 'package', 'node_modules'));
    const agent = spawn(process.execPath, [join(nodeDir, 'package/dist/src/agent/bin.js'), '--config', join(nodeDir, 'agent.yaml')], { cwd: nodeDir, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    agent.stdout.setEncoding('utf8').on('data', (s: string) => (output += s));
    agent.stderr.setEncoding('utf8').on('data', (s: string) => (output += s));
    try {
      await waitUntil(() => edge.driver.status().nodes.some((n) => n.id === NODE_ID && n.connected), 'the bootstrapped agent connects', 20_000);
      const res = await fetch(`${edge.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const body = (await res.json()) as { choices: { message: { content: string } }[] };
      assert.ok(body.choices[0].message.content.length > 0);
      assert.equal(JSON.parse(String(mock.lastRequest('/v1/chat/completions')?.body)).model, 'served');
    } catch (err) {
      throw new Error(`${(err as Error).message}\nagent output:\n${output}`);
    } finally {
      agent.kill('SIGTERM');
      await new Promise((resolve) => agent.once('exit', resolve));
    }
  });

  test('a link planted where a temporary file could be expected never receives the node token', async () => {
    const nodeDir = join(dir, 'planted-node');
    await mkdir(nodeDir);
    // What another user of a shared directory could plant: the names a temporary file got from the pid alone.
    const stolen = join(dir, 'stolen.txt');
    await writeFile(stolen, '');
    for (const name of ['agent.yaml', 'agent.tgz', 'SHA256SUMS']) await symlink(stolen, join(nodeDir, `${name}.partial-${process.pid}`));
    await bootstrapNode({ edge: bootstrapUrl(), nodeId: NODE_ID, token: TOKEN, dir: nodeDir });
    assert.equal(await readFile(stolen, 'utf8'), '', 'nothing was written through the planted links');
    assert.ok((await lstat(join(nodeDir, 'agent.yaml'))).isFile(), 'agent.yaml is a file of its own, not a link');
    assert.match(await readFile(join(nodeDir, 'agent.yaml'), 'utf8'), /node-token-1/);
    assert.deepEqual((await readdir(nodeDir)).filter((n) => n.includes('.partial-') && !n.endsWith(`-${process.pid}`)), [], 'no temporary file left');
  });

  test('a wrong or missing token gets 401 and nothing else, whatever the path or method; the log says so once, not per request', async () => {
    const linesBefore = logLines.length;
    for (const token of ['wrong-token', TOKEN.slice(0, -1), `${TOKEN}x`, '', null]) {
      for (const path of ['/bootstrap/v1/agent.tgz', `/bootstrap/v1/nodes/${NODE_ID}/agent.yaml`, '/bootstrap/v1/nodes/unknown/SHA256SUMS']) {
        for (const method of ['GET', 'POST']) {
          const res = await rawGet(edge.bootstrapPort as number, path, token, method);
          assert.equal(res.status, 401, `${method} ${path} with ${String(token)}`);
          assert.doesNotMatch(res.body, /node-token-1|unknown|p-new/);
        }
      }
    }
    // 30 refusals within the 10 s interval: one warning line (anyone can send these, and the listener faces the network).
    const refusals = logLines.slice(linesBefore).filter((line) => line.includes('bootstrap request with a wrong or missing token'));
    assert.ok(refusals.length <= 1, `${refusals.length} lines for 30 refusals`);
    const cli = await run(process.execPath, [AGENT_BIN, 'bootstrap', '--edge', bootstrapUrl(), '--node-id', NODE_ID, '--token', 'wrong', '--dir', join(dir, 'denied')]);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /HTTP 401/);
    await assert.rejects(stat(join(dir, 'denied', 'agent.yaml')), 'nothing written');
  });

  test('the token is read as any client writes the Bearer scheme: any case, more than one space (RFC 9110)', async () => {
    for (const scheme of ['bearer ', 'BEARER ', 'Bearer  ', 'Bearer\t']) {
      const res = await rawGet(edge.bootstrapPort as number, `/bootstrap/v1/nodes/${NODE_ID}/SHA256SUMS`, TOKEN, 'GET', scheme);
      assert.equal(res.status, 200, JSON.stringify(scheme));
    }
    for (const scheme of ['Basic ', 'Bearer', 'Bearer x ']) assert.equal((await rawGet(edge.bootstrapPort as number, `/bootstrap/v1/nodes/${NODE_ID}/SHA256SUMS`, TOKEN, 'GET', scheme)).status, 401, JSON.stringify(scheme));
  });

  test('path traversal attempts find nothing', async () => {
    const attempts = [
      '/bootstrap/v1/../../../../etc/passwd',
      '/bootstrap/v1/nodes/../../../etc/passwd',
      `/bootstrap/v1/nodes/${NODE_ID}/../../agent.tgz`,
      '/bootstrap/v1/nodes/..%2F..%2F..%2Fetc%2Fpasswd/agent.yaml',
      '/bootstrap/v1/nodes/%2e%2e/agent.yaml',
      '/bootstrap/v1/%2e%2e/%2e%2e/etc/passwd',
      '/bootstrap/v1/..\\..\\etc\\passwd',
      `/bootstrap/v1/${tarballPath.split('/').pop()}`,
      `/bootstrap/v1/nodes/${NODE_ID}%00/agent.yaml`,
      '/bootstrap/v1/nodes/gpu-new/agent.yaml/../../../../../../etc/passwd',
      `/${tarballPath}`,
    ];
    for (const path of attempts) {
      const res = await rawGet(edge.bootstrapPort as number, path);
      assert.equal(res.status, 404, path);
      assert.doesNotMatch(res.body, /root:|node-token-1/, path);
    }
  });

  test('a method other than GET or HEAD, with the token, is 405 naming the methods in Allow', async () => {
    for (const path of ['/bootstrap/v1/agent.tgz', `/bootstrap/v1/nodes/${NODE_ID}/agent.yaml`]) {
      const res = await rawGet(edge.bootstrapPort as number, path, TOKEN, 'POST');
      assert.equal(res.status, 405, path);
      assert.equal(JSON.parse(res.body).error.code, 'method_not_allowed');
      assert.equal(res.allow, 'GET, HEAD', `${path}: a 405 names the methods the listener takes (RFC 9110 §15.5.6)`);
    }
  });

  test('a node id not in the catalog is refused, by the listener and by the CLI', async () => {
    const res = await rawGet(edge.bootstrapPort as number, '/bootstrap/v1/nodes/gpu-unknown/agent.yaml');
    assert.equal(res.status, 404);
    assert.equal(JSON.parse(res.body).error.code, 'node_not_found');
    const cli = await run(process.execPath, [AGENT_BIN, 'bootstrap', '--edge', bootstrapUrl(), '--node-id', 'gpu-unknown', '--token', TOKEN, '--dir', join(dir, 'unknown')]);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /HTTP 404: no node "gpu-unknown" in the catalog/);
  });

  test('a catalog node whose id holds a slash or a backslash bootstraps like any other (the id is looked up, never a file)', async () => {
    const ids = ['rack1/gpu-9', 'win\\gpu-9'];
    const raw = {
      listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
      workers: { count: testWorkers() },
      bootstrap: { listen: { host: '127.0.0.1', port: 0 }, artifact_dir: artifactDir, token: TOKEN },
      nodes: ids.map((id, i) => ({ id, token: `odd-token-${i}`, providers: [{ id: `p-odd-${i}`, type: 'vllm', capacity: 1 }] })),
      models: [{ alias: 'chat', providers: { 'p-odd-0': 'served' } }],
    };
    const odd = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
    try {
      for (const [i, id] of ids.entries()) {
        const nodeDir = join(dir, `odd-${i}`);
        const cli = await run(process.execPath, [AGENT_BIN, 'bootstrap', '--edge', `http://127.0.0.1:${odd.bootstrapPort}`, '--node-id', id, '--dir', nodeDir], ROOT, 60_000, { ...process.env, EDGE_BOOTSTRAP_TOKEN: TOKEN });
        assert.equal(cli.code, 0, `${id}: ${cli.stderr}`);
        assert.deepEqual(parseYaml(await readFile(join(nodeDir, 'agent.yaml'), 'utf8')).node, { id, token: `odd-token-${i}` });
      }
      // Still refused: the same characters anywhere else, and a raw dot segment or backslash in the node's place.
      for (const path of ['/bootstrap/v1%2Fagent.tgz', '/bootstrap/v1/nodes/rack1%2Fgpu-9/agent.yaml%2F..', '/bootstrap/v1/nodes/../agent.yaml', '/bootstrap/v1/nodes/win\\gpu-9/agent.yaml']) {
        assert.equal((await rawGet(odd.bootstrapPort as number, path)).status, 404, path);
      }
    } finally {
      await odd.close();
    }
  });

  test('the CLI takes the token from EDGE_BOOTSTRAP_TOKEN or --token-file, and warns when it is on the command line', async () => {
    const unknown = ['bootstrap', '--edge', bootstrapUrl(), '--node-id', 'gpu-unknown', '--dir', join(dir, 'unknown')];
    const { EDGE_BOOTSTRAP_TOKEN: _drop, ...clean } = process.env;
    // The listener answers 404 for the unknown node only past the token check: a 404 proves the token was sent.
    const fromEnv = await run(process.execPath, [AGENT_BIN, ...unknown], ROOT, 60_000, { ...clean, EDGE_BOOTSTRAP_TOKEN: TOKEN });
    assert.match(fromEnv.stderr, /HTTP 404: no node "gpu-unknown"/);
    assert.doesNotMatch(fromEnv.stderr, /warning/);
    const tokenFile = join(dir, 'bootstrap-token');
    await writeFile(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    const fromFile = await run(process.execPath, [AGENT_BIN, ...unknown, '--token-file', tokenFile], ROOT, 60_000, clean);
    assert.match(fromFile.stderr, /HTTP 404: no node "gpu-unknown"/);
    const onArgv = await run(process.execPath, [AGENT_BIN, ...unknown, '--token', TOKEN], ROOT, 60_000, clean);
    assert.match(onArgv.stderr, /warning: a token on the command line is visible to every user of this host/);
    assert.match(onArgv.stderr, /HTTP 404/);
    const none = await run(process.execPath, [AGENT_BIN, ...unknown], ROOT, 60_000, clean);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /the bootstrap token is required: EDGE_BOOTSTRAP_TOKEN, --token-file FILE or --token T/);
    const both = await run(process.execPath, [AGENT_BIN, ...unknown, '--token', TOKEN, '--token-file', tokenFile], ROOT, 60_000, clean);
    assert.equal(both.code, 2);
  });

  test('bootstrap.token_expires_at: past it the token is refused as expired (told only to its holder); before it, served', async () => {
    const raw = (expires: string) => ({
      listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
      workers: { count: testWorkers() },
      bootstrap: { listen: { host: '127.0.0.1', port: 0 }, artifact_dir: artifactDir, token: TOKEN, token_expires_at: expires },
      nodes: [{ id: NODE_ID, token: 'node-token-1', providers: [{ id: 'p-new', type: 'openai_compat', capacity: 2, base_url: mock.url }] }],
      models: [{ alias: 'chat', providers: { 'p-new': 'served' } }],
    });
    assert.throws(() => parseEdgeConfig(raw('next tuesday'), 'test'), /bootstrap\.token_expires_at: .*RFC 3339/);
    assert.throws(() => parseEdgeConfig(raw('2026-12-31T18:00:00'), 'test'), /bootstrap\.token_expires_at/, 'an offset is required');
    // Date.parse reads these as another day (March 2, the next hour) without a word: a typo must not move the expiry.
    for (const typo of ['2026-02-30T18:00:00Z', '2026-13-01T18:00:00Z', '2026-12-31T24:00:00Z', '2026-12-31T18:00:00+25:00']) {
      assert.throws(() => parseEdgeConfig(raw(typo), 'test'), /bootstrap\.token_expires_at: .*RFC 3339/, typo);
    }
    // RFC 3339 lets `t` and `z` be lower-case.
    assert.equal(parseEdgeConfig(raw('2026-12-31t18:00:00z'), 'test').bootstrap?.tokenExpiresAt, Date.parse('2026-12-31T18:00:00Z'));
    const expired = await startEdge(parseEdgeConfig(raw(new Date(Date.now() - 60_000).toISOString()), 'test'), { logger: silentLogger() });
    const current = await startEdge(parseEdgeConfig(raw(new Date(Date.now() + 3_600_000).toISOString()), 'test'), { logger: silentLogger() });
    try {
      const path = `/bootstrap/v1/nodes/${NODE_ID}/agent.yaml`;
      const late = await rawGet(expired.bootstrapPort as number, path);
      assert.equal(late.status, 401);
      assert.equal(JSON.parse(late.body).error.code, 'token_expired');
      const wrong = await rawGet(expired.bootstrapPort as number, path, 'not-the-token-0123456789');
      assert.equal(JSON.parse(wrong.body).error.code, 'unauthorized', 'a wrong token learns nothing about expiry');
      const cli = await run(process.execPath, [AGENT_BIN, 'bootstrap', '--edge', `http://127.0.0.1:${expired.bootstrapPort}`, '--node-id', NODE_ID, '--token', TOKEN, '--dir', join(dir, 'expired')]);
      assert.equal(cli.code, 1);
      assert.match(cli.stderr, /HTTP 401: the bootstrap token expired at/);
      assert.equal((await rawGet(current.bootstrapPort as number, path)).status, 200);
    } finally {
      await expired.close();
      await current.close();
    }
  });

  test('with TLS on the node listener, the rendered config says what the node must add to connect', { skip: hasOpenssl() ? false : 'no openssl' }, async () => {
    const pki = makeTestPki();
    let tlsEdge: RunningEdge | undefined;
    try {
      const raw = {
        listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
        workers: { count: testWorkers() },
        tls: { nodes: { cert_file: pki.serverCert, key_file: pki.serverKey, client_ca_file: pki.caCert } },
        bootstrap: { listen: { host: '127.0.0.1', port: 0 }, artifact_dir: artifactDir, token: TOKEN },
        nodes: [{ id: NODE_ID, token: 'node-token-1', providers: [{ id: 'p-new', type: 'openai_compat', capacity: 2, base_url: mock.url }] }],
        models: [{ alias: 'chat', providers: { 'p-new': 'served' } }],
      };
      tlsEdge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
      const res = await rawGet(tlsEdge.bootstrapPort as number, `/bootstrap/v1/nodes/${NODE_ID}/agent.yaml`);
      assert.equal(res.status, 200);
      assert.match(res.body, /^# Before running: the edge's node listener speaks TLS\. Add under edge: tls: \{ ca_file: .*, cert_file: .*, key_file: .* \} \(the edge requires a client certificate\)\.$/m);
      const plain = await rawGet(edge.bootstrapPort as number, `/bootstrap/v1/nodes/${NODE_ID}/agent.yaml`);
      assert.doesNotMatch(plain.body, /speaks TLS/, 'a plaintext listener needs nothing');
    } finally {
      await tlsEdge?.close();
      pki.remove();
    }
  });

  test('the tarball served does not change while served, even when the file does', async () => {
    await writeFile(tarballPath, 'replaced on disk');
    const res = await fetch(`${bootstrapUrl()}/bootstrap/v1/agent.tgz`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(sha256(Buffer.from(await res.arrayBuffer())), tarballSha);
    const sums = await fetch(`${bootstrapUrl()}/bootstrap/v1/nodes/${NODE_ID}/SHA256SUMS`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.match(await sums.text(), new RegExp(`^${tarballSha}  agent\\.tgz$`, 'm'));
  });
});

test('a download cut short, or a --dir that cannot take the files, fails with the reason (exit 1), not a stack trace, and writes nothing', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'bootstrap-cut-'));
  const tarball = Buffer.alloc(64 * 1024, 7);
  const config = Buffer.from('edge: { address: 127.0.0.1:50051 }\nnode: { id: n, token: t }\nproviders: []\n');
  let cut = true;
  // A listener (or a proxy in front of it) that dies part-way through the tarball.
  const server = createServer((req, res) => {
    if (req.url?.endsWith('/SHA256SUMS') === true) return void res.end(`${sha256(tarball)}  agent.tgz\n${sha256(config)}  agent.yaml\n`);
    if (req.url?.endsWith('/agent.yaml') === true) return void res.end(config);
    if (!cut) return void res.end(tarball);
    res.writeHead(200, { 'content-length': tarball.length });
    res.write(tarball.subarray(0, 1024), () => res.socket?.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const edgeUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const env = { ...process.env, EDGE_BOOTSTRAP_TOKEN: TOKEN };
  try {
    const nodeDir = join(dir, 'node');
    const short = await run(process.execPath, [AGENT_BIN, 'bootstrap', '--edge', edgeUrl, '--node-id', 'n', '--dir', nodeDir], ROOT, 60_000, env);
    assert.equal(short.code, 1);
    assert.match(short.stderr, /^node-agent bootstrap: GET \/bootstrap\/v1\/agent\.tgz: /);
    assert.doesNotMatch(short.stderr, /\n\s+at /, 'no stack trace');
    await assert.rejects(stat(nodeDir), 'nothing written');
    cut = false;
    const notADir = join(dir, 'a-file');
    await writeFile(notADir, '');
    const blocked = await run(process.execPath, [AGENT_BIN, 'bootstrap', '--edge', edgeUrl, '--node-id', 'n', '--dir', notADir], ROOT, 60_000, env);
    assert.equal(blocked.code, 1);
    assert.match(blocked.stderr, new RegExp(`^node-agent bootstrap: --dir ${notADir}: `));
    assert.doesNotMatch(blocked.stderr, /\n\s+at /, 'no stack trace');
    // A failure part-way through the writes (here agent.yaml's name is taken) leaves no new agent.tgz behind either.
    const halfway = join(dir, 'halfway');
    await mkdir(join(halfway, 'agent.yaml'), { recursive: true });
    const partial = await run(process.execPath, [AGENT_BIN, 'bootstrap', '--edge', edgeUrl, '--node-id', 'n', '--dir', halfway], ROOT, 60_000, env);
    assert.equal(partial.code, 1);
    assert.match(partial.stderr, new RegExp(`^node-agent bootstrap: --dir ${halfway}: `));
    assert.deepEqual(await readdir(halfway), ['agent.yaml'], 'nothing written, no temporary file left');
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  }
});
