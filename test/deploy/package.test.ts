// The package an operator installs: packs this checkout the way `npm pack`
// does (from the built dist/, prepack skipped so the running suite's dist/
// is not rebuilt under it), installs the tarball into a temp prefix with
// runtime dependencies only, and runs the installed `edge` and `node-agent`
// commands: --version, the Node version gate, check-config on the shipped
// example, and an edge plus an agent serving one request against the mock
// (from this checkout's dist). Then `systemd-analyze verify` on both
// service units, pointed at the installed commands.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { access, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { MINIMUM_NODE, nodeIsAtLeast } from '../../src/shared/node-check.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PACKAGE = 'llm-edge-gateway';
/** The pinned Node 24 this suite runs on: first on PATH, so npm and the installed `#!/usr/bin/env node` commands run on it. */
const PINNED_PATH = `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`;
const SYSTEMD_ANALYZE = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((p) => existsSync(p));

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function run(command: string, args: readonly string[], options: { cwd?: string; path?: string; timeoutMs?: number } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? ROOT,
      env: { ...process.env, PATH: options.path ?? PINNED_PATH, NODE_ENV: 'production' },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A long-running installed command whose JSON log lines the test can wait on. */
class Service {
  readonly lines: Record<string, unknown>[] = [];
  readonly exited: Promise<number | null>;
  #waiters: (() => void)[] = [];
  #partial = '';
  #stderr = '';

  constructor(readonly child: ChildProcess) {
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => this.#onData(chunk));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (this.#stderr += chunk));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  static start(bin: string, args: readonly string[]): Service {
    return new Service(spawn(bin, args, { env: { ...process.env, PATH: PINNED_PATH, NODE_ENV: 'production', LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  #onData(chunk: string): void {
    const parts = (this.#partial + chunk).split('\n');
    this.#partial = parts.pop() ?? '';
    for (const line of parts) {
      try {
        this.lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        this.lines.push({ msg: line });
      }
    }
    for (const wake of this.#waiters.splice(0)) wake();
  }

  async waitFor(msg: string, timeoutMs = 20_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.find((l) => l.msg === msg);
      if (found !== undefined) return found;
      if (Date.now() > deadline || this.child.exitCode !== null) {
        throw new Error(`no '${msg}' log line (exit ${String(this.child.exitCode)}); stderr: ${this.#stderr}; stdout: ${JSON.stringify(this.lines.slice(-5))}`);
      }
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  }

  async stop(): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }
}

describe('installable package (npm pack, npm install --omit=dev)', () => {
  let work = '';
  let tarball = '';
  let prefix = '';
  let installed = '';
  let packed: { path: string; mode: number }[] = [];
  let packSize = 0;

  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'edge-package-'));
    const pack = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work]);
    assert.equal(pack.code, 0, `npm pack failed: ${pack.stderr}`);
    const [info] = JSON.parse(pack.stdout) as [{ filename: string; size: number; files: { path: string; mode: number }[] }];
    tarball = join(work, info.filename);
    packed = info.files;
    packSize = info.size;
    prefix = join(work, 'prefix');
    const install = await run('npm', ['install', '--global', '--prefix', prefix, '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund', tarball], {
      timeoutMs: 75_000,
    });
    assert.equal(install.code, 0, `npm install failed: ${install.stderr}`);
    installed = join(prefix, 'lib', 'node_modules', PACKAGE);
  });

  after(async () => {
    if (work !== '') await rm(work, { recursive: true, force: true });
  });

  test('the tarball holds what runs: dist/src, the console assets, proto, examples, units, README, LICENSE; no tests, benchmarks, sources or maps', (t) => {
    t.diagnostic(`tarball ${packSize} bytes, ${packed.length} files`);
    const paths = packed.map((f) => f.path);
    const allowed = [/^dist\/src\/.+\.js$/, /^dist\/console\/[^/]+\.(js|html|css)$/, /^proto\/.+\.proto$/, /^examples\/.+\.(yaml|mjs)$/, /^deploy\/systemd\/[^/]+$/, /^README\.md$/, /^LICENSE$/, /^package\.json$/];
    const stray = paths.filter((p) => !allowed.some((re) => re.test(p)));
    assert.deepEqual(stray, [], 'only runtime files are packed');
    for (const must of ['dist/src/edge/bin.js', 'dist/src/agent/bin.js', 'dist/src/edge/cli.js', 'dist/src/gen/edge/v1/tunnel_pb.js', 'proto/edge/v1/tunnel.proto', 'examples/edge.yaml', 'examples/node-agent.yaml', 'examples/cli-agent.mjs', 'dist/console/index.html', 'dist/console/app.js', 'deploy/systemd/llm-edge.service', 'deploy/systemd/llm-node-agent.service', 'LICENSE', 'README.md']) {
      assert.ok(paths.includes(must), `${must} is packed`);
    }
    for (const bin of ['dist/src/edge/bin.js', 'dist/src/agent/bin.js']) {
      const mode = packed.find((f) => f.path === bin)?.mode ?? 0;
      assert.equal(mode & 0o111, 0o111, `${bin} is executable in the tarball (mode ${mode.toString(8)})`);
    }
  });

  test('the install has the runtime dependencies and no dev tools', async () => {
    const modules = join(installed, 'node_modules');
    // (@types/node is left out of the list: protobufjs, under grpc-js, depends on it at runtime.)
    for (const dev of ['typescript', '@bufbuild/buf', '@bufbuild/protoc-gen-es', 'node', 'openai', 'autocannon', 'fast-check', 'puppeteer-core']) {
      assert.equal(existsSync(join(modules, dev)), false, `dev dependency ${dev} is not installed`);
    }
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; engines: { node: string } };
    for (const dep of Object.keys(pkg.dependencies)) assert.ok(existsSync(join(modules, dep)), `runtime dependency ${dep} is installed`);
    assert.equal(pkg.engines.node, `>=${MINIMUM_NODE.replace(/\.0$/, '')}`, 'the bin version gate and engines.node agree');
    const shebang = (await readFile(join(installed, 'dist/src/edge/bin.js'), 'utf8')).split('\n')[0];
    assert.equal(shebang, '#!/usr/bin/env node');
  });

  test('edge --version and node-agent --version print the package version', async () => {
    const { version } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const bin of ['edge', 'node-agent']) {
      const out = await run(join(prefix, 'bin', bin), ['--version']);
      assert.equal(out.code, 0, `${bin} --version: ${out.stderr}`);
      assert.equal(out.stdout.trim(), version);
    }
  });

  test('on an older Node, both commands say which Node they need', async (t) => {
    // The system node (v20 on these machines) is what a bare PATH finds.
    const old = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => existsSync(p));
    const version = old === undefined ? undefined : (await run(old, ['--version'])).stdout.trim();
    if (old === undefined || version === undefined || nodeIsAtLeast(version)) {
      t.skip(`no Node older than ${MINIMUM_NODE} on this machine (found ${old ?? 'none'} ${version ?? ''})`);
      return;
    }
    for (const bin of ['edge', 'node-agent']) {
      const out = await run(join(prefix, 'bin', bin), ['--version'], { path: `${dirname(old)}${delimiter}/usr/bin:/bin` });
      assert.equal(out.code, 1, `${bin} on ${version} exits 1`);
      assert.match(out.stderr, new RegExp(`^${bin}: needs Node\\.js ${MINIMUM_NODE.replace(/\./g, '\\.')} or newer .*this is Node\\.js ${version.replace(/\./g, '\\.')}`));
      assert.doesNotMatch(out.stderr, /SyntaxError|does not provide an export/);
    }
  });

  test('edge check-config validates the shipped example', async () => {
    const example = join(installed, 'examples', 'edge.yaml');
    const out = await run(join(prefix, 'bin', 'edge'), ['check-config', example]);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /: valid \(1 nodes, 3 models/);
  });

  test('the example agent\'s cli provider runs the demo script where the documented install puts it', async () => {
    const example = parseYaml(await readFile(join(installed, 'examples', 'node-agent.yaml'), 'utf8')) as { providers: { type: string; command?: string[] }[] };
    const cli = example.providers.find((p) => p.type === 'cli');
    const script = cli?.command?.[1] ?? '';
    // docs/deploy.md installs with --prefix /usr/local: this test's install has the same layout under its own prefix.
    assert.match(script, /^\/usr\/local\/lib\/node_modules\/llm-edge-gateway\//, script);
    const here = join(prefix, script.slice('/usr/local/'.length));
    await access(here);
  });

  test('an installed edge and node agent, configured from the shipped examples, serve a request', async () => {
    let mock: MockProvider | undefined;
    let edge: Service | undefined;
    let agent: Service | undefined;
    try {
      mock = await startMockProvider({ port: 0 });
      const edgeConfig = parseYaml(await readFile(join(installed, 'examples', 'edge.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
      edgeConfig.listen = { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } };
      edgeConfig.admin = { host: '127.0.0.1', port: 0 };
      const edgeFile = join(work, 'edge.yaml');
      await writeFile(edgeFile, toYaml(edgeConfig));
      edge = Service.start(join(prefix, 'bin', 'edge'), ['--config', edgeFile]);
      const listening = await edge.waitFor('edge listening');

      const agentConfig = parseYaml(await readFile(join(installed, 'examples', 'node-agent.yaml'), 'utf8')) as { edge: { address: string }; providers: { base_url: string }[] };
      agentConfig.edge.address = `127.0.0.1:${String(listening.grpcPort)}`;
      agentConfig.providers[0].base_url = mock.url;
      const agentFile = join(work, 'node-agent.yaml');
      await writeFile(agentFile, toYaml(agentConfig));
      agent = Service.start(join(prefix, 'bin', 'node-agent'), ['--config', agentFile]);
      const connected = await edge.waitFor('node connected');
      assert.equal(connected.node, 'gpu-1');

      const url = `http://127.0.0.1:${String(listening.httpPort)}`;
      assert.equal((await fetch(`${url}/healthz`)).status, 200);
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llama3', messages: [{ role: 'user', content: 'Hello from the package test' }] }),
      });
      const body = (await res.json()) as { object?: string; choices?: { message?: { content?: string } }[] };
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal(body.object, 'chat.completion');
      assert.ok((body.choices?.[0]?.message?.content ?? '').length > 0, 'the mock answered through edge and agent');
      assert.equal(mock.requestLog.at(-1)?.model, 'mock-llama-3-8b-instruct', 'the edge rewrote the alias to the served name');

      // systemd's stop: SIGTERM drains and exits 0 (a non-zero exit would count as a failure and restart).
      assert.equal(await agent.stop(), 0);
      assert.equal(await edge.stop(), 0);
    } finally {
      await agent?.stop();
      await edge?.stop();
      await mock?.close();
    }
  });

  test('both systemd units pass systemd-analyze verify (ExecStart pointed at the installed commands)', async (t) => {
    if (SYSTEMD_ANALYZE === undefined) {
      t.skip('systemd-analyze not found (Debian: apt-get install -y systemd); units not verified');
      return;
    }
    const units = join(ROOT, 'deploy', 'systemd');
    const names = (await readdir(units)).filter((n) => n.endsWith('.service')).sort();
    assert.deepEqual(names, ['llm-edge.service', 'llm-node-agent.service']);
    const dir = join(work, 'units');
    await mkdir(dir, { recursive: true });
    for (const name of names) {
      const text = await readFile(join(units, name), 'utf8');
      assert.match(text, /^ExecStart=\/usr\/local\/bin\/(edge|node-agent) --config \/etc\/llm-edge\//m, `${name}: the documented install path and config`);
      // verify checks that ExecStart exists and is executable: point it at this test's install.
      const copy = join(dir, name);
      await writeFile(copy, text.replace(/^ExecStart=\/usr\/local\/bin\//m, `ExecStart=${prefix}/bin/`));
      const out = await run(SYSTEMD_ANALYZE, ['verify', copy]);
      assert.equal(out.code, 0, `${name}: ${out.stderr}${out.stdout}`);
      assert.equal(out.stderr.trim(), '', `${name}: verify is silent`);
    }
  });

  test('the edge unit stops no sooner than the shipped drain grace allows', async () => {
    const unit = await readFile(join(ROOT, 'deploy', 'systemd', 'llm-edge.service'), 'utf8');
    const example = parseYaml(await readFile(join(ROOT, 'examples', 'edge.yaml'), 'utf8')) as { drain: { grace_ms: number } };
    const stopSec = Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1]);
    const FLUSH_SECONDS = 2; // drainListener's FLUSH_WAIT_MS after the grace
    assert.ok(stopSec > example.drain.grace_ms / 1000 + FLUSH_SECONDS, `TimeoutStopSec=${stopSec} leaves the drain (${example.drain.grace_ms} ms + ${FLUSH_SECONDS} s) time to finish`);
    assert.match(unit, /^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
    // fastify lists the interfaces (a netlink socket) when a listener binds 0.0.0.0: without AF_NETLINK such an edge exits at start.
    assert.match(unit, /^RestrictAddressFamilies=.*\bAF_NETLINK\b/m, 'the edge may list the host\'s interfaces');
    assert.match(unit, /^LimitNOFILE=(\d+)$/m);
    assert.ok(Number(/^LimitNOFILE=(\d+)$/m.exec(unit)?.[1]) >= 65_536, 'LimitNOFILE fits tens of thousands of connections');
  });
});
