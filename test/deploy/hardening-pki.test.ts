// docs/hardening.md's TLS recipe as an operator runs it: its openssl
// snippet and its install commands run verbatim in a temp dir (/etc/llm-edge
// and the service groups mapped onto it), then the doc's edge and agent TLS
// blocks must name files those commands made, with the keys readable by the
// service's group (the services do not run as root: a root-only 0600 key
// fails their start with EACCES), and the real edge and agent CLIs, run with
// those blocks over the shipped examples, must connect over mutual TLS and
// answer HTTPS.
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { hasOpenssl } from '../helpers/certs.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ETC = '/etc/llm-edge/';

/** The fenced blocks of one language in the doc's TLS section, in order. */
function blocks(lang: string): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'hardening.md'), 'utf8');
  const start = doc.indexOf('## TLS and mutual TLS');
  const section = doc.slice(start, doc.indexOf('\n## ', start + 1));
  return [...section.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]);
}

/** Every `*_file` value in a parsed block. */
function files(value: unknown, out: string[] = []): string[] {
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k.endsWith('_file') && typeof v === 'string') out.push(v);
      else files(v, out);
    }
  }
  return out;
}

function start(script: string, config: string, lines: Record<string, unknown>[]): ChildProcess {
  const child = spawn(process.execPath, [join(ROOT, 'dist', 'src', script), '--config', config], { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let partial = '';
  // stderr (a config error, Node's warnings) joins the log lines: waitFor shows the last ones when the process exits.
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => lines.push({ stderr: chunk }));
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) {
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        lines.push({ msg: line });
      }
    }
    child.emit('line');
  });
  return child;
}

function waitFor(child: ChildProcess, lines: Record<string, unknown>[], msg: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const found = lines.find((l) => l.msg === msg);
      if (found !== undefined) {
        child.off('line', check).off('exit', exited);
        resolve(found);
      }
    };
    const exited = (code: number | null): void => reject(new Error(`exited ${String(code)} before '${msg}': ${JSON.stringify(lines.slice(-3))}`));
    child.on('line', check).once('exit', exited);
    check();
  });
}

const work = mkdtempSync(join(tmpdir(), 'edge-hardening-pki-'));
const children: ChildProcess[] = [];
after(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
  rmSync(work, { recursive: true, force: true });
});

test('docs/hardening.md: the PKI snippet and its install commands make the files its TLS blocks name, readable by the services, and they connect', { skip: !hasOpenssl() && 'openssl not found' }, async () => {
  const [pki, install] = blocks('sh');
  assert.ok(pki?.includes('openssl req -x509'), 'the PKI snippet');
  assert.ok(install?.includes('/etc/llm-edge/'), 'the doc installs the PKI\'s files where its TLS blocks name them');
  const made = join(work, 'pki');
  const etc = join(work, 'etc', 'llm-edge');
  mkdirSync(made);
  mkdirSync(etc, { recursive: true, mode: 0o750 });
  execFileSync('sh', ['-e', '-c', pki], { cwd: made, stdio: 'pipe' });
  // Onto the temp dir, with this process's group for the services' (they exist only where the sysusers file was applied).
  const mapped = install.replaceAll(ETC, `${etc}/`).replace(/-g llm-(edge|node-agent)\b/g, `-g ${String(process.getgid?.() ?? 0)}`);
  execFileSync('sh', ['-e', '-c', mapped], { cwd: made, stdio: 'pipe' });

  const [edgeBlock, agentBlock] = blocks('yaml').map((y) => parseYaml(y.replaceAll(ETC, `${etc}/`)) as Record<string, Record<string, unknown>>);
  const named = [...files(edgeBlock), ...files(agentBlock)];
  assert.ok(named.length >= 6, named.join(' '));
  for (const file of named) {
    assert.ok(file.startsWith(`${etc}/`), `${file}: under ${ETC}, beside the config the units read`);
    const mode = statSync(file).mode & 0o777;
    if (file.endsWith('.key')) assert.equal(mode & 0o047, 0o040, `${file}: a key the service's group reads and no one else (mode ${mode.toString(8)})`);
  }

  // The doc's blocks over the shipped examples, on free loopback ports.
  const edgeConfig = parseYaml(readFileSync(join(ROOT, 'examples', 'edge.yaml'), 'utf8')) as Record<string, unknown>;
  Object.assign(edgeConfig, edgeBlock, { listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } }, admin: { host: '127.0.0.1', port: 0 } });
  writeFileSync(join(work, 'edge.yaml'), toYaml(edgeConfig));
  const edgeLines: Record<string, unknown>[] = [];
  const edge = start('edge/cli.js', join(work, 'edge.yaml'), edgeLines);
  children.push(edge);
  const listening = await waitFor(edge, edgeLines, 'edge listening');

  const agentConfig = parseYaml(readFileSync(join(ROOT, 'examples', 'node-agent.yaml'), 'utf8')) as { edge: Record<string, unknown>; providers: unknown[] };
  // The certificate names edge.example and 127.0.0.1: dial the address it names.
  agentConfig.edge = { ...agentBlock.edge, address: `127.0.0.1:${String(listening.grpcPort)}` };
  agentConfig.providers = agentConfig.providers.slice(0, 1);
  writeFileSync(join(work, 'node-agent.yaml'), toYaml(agentConfig));
  const agent = start('agent/cli.js', join(work, 'node-agent.yaml'), []);
  children.push(agent);
  assert.equal((await waitFor(edge, edgeLines, 'node connected')).node, 'gpu-1');

  const status = await new Promise<number | undefined>((resolve, reject) => {
    const ca = readFileSync(files(edgeBlock).find((f) => f.endsWith('ca.crt')) ?? '');
    request({ host: '127.0.0.1', port: Number(listening.httpPort), path: '/healthz', ca }, (res) => {
      res.resume();
      resolve(res.statusCode);
    })
      .once('error', reject)
      .end();
  });
  assert.equal(status, 200, 'HTTPS with the doc\'s certificate, trusted through its CA');
});
