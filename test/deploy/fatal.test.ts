// A fault nothing caught ends the edge and the agent with one `fatal` line
// in their JSON log and exit code 70, not a bare stack on stderr and exit 1:
// the real CLIs as child processes, with a rejected promise no one handles
// injected once it logged its start (test/fixtures/fault-after-start.mjs,
// preloaded, on SIGUSR2).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';
import { FAULT_EXIT_CODE } from '../../src/shared/fatal.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const FAULT = fileURLToPath(new URL('../../../test/fixtures/fault-after-start.mjs', import.meta.url));

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'edge-fatal-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function runFaulted(bin: string, config: Record<string, unknown>): Promise<{ code: number | null; lines: Record<string, unknown>[]; stderr: string }> {
  const file = join(dir, `${bin.replace(/\W/g, '-')}.yaml`);
  await writeFile(file, toYaml(config));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', FAULT, join(ROOT, bin), '--config', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
    let stdout = '';
    let stderr = '';
    let faulted = false;
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
      // The fault once it has started (the fixture's SIGUSR2 handler is in place before the program runs).
      if (!faulted && /"msg":"[^"]*(started|starting)/.test(stdout)) {
        faulted = true;
        child.kill('SIGUSR2');
      }
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.once('error', reject);
    child.once('close', (code) => {
      const lines = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({ code, lines, stderr });
    });
  });
}

function assertFatal(what: string, run: { code: number | null; lines: Record<string, unknown>[]; stderr: string }): void {
  assert.equal(run.code, FAULT_EXIT_CODE, `${what} exit code; stderr: ${run.stderr.slice(0, 500)}`);
  const fatal = run.lines.find((l) => l.level === 60);
  assert.ok(fatal !== undefined, `${what}: a fatal line in ${JSON.stringify(run.lines.map((l) => l.msg))}`);
  assert.match(String(fatal.msg), /nothing caught/);
  assert.match(JSON.stringify(fatal.err), /injected fault/);
  assert.ok(run.lines.some((l) => /started|starting/.test(String(l.msg))), `${what} had started`);
}

test('the edge: an uncaught fault is one fatal log line and exit 70', async () => {
  const run = await runFaulted('dist/src/edge/bin.js', {
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    runtime: { node_flags: [] },
    nodes: [{ id: 'gpu-1', token: 'token-gpu-1-0123456789', providers: [{ id: 'p1', type: 'openai_compat', capacity: 1 }] }],
    models: [{ alias: 'm', providers: { p1: 'served' } }],
  });
  assertFatal('edge', run);
});

test('the node agent: an uncaught fault is one fatal log line and exit 70', async () => {
  const run = await runFaulted('dist/src/agent/bin.js', {
    // Nothing listens there: the agent keeps retrying, which is fine; the fault comes once it logged its start.
    edge: { address: '127.0.0.1:9' },
    node: { id: 'gpu-1', token: 'token-gpu-1-0123456789' },
    runtime: { node_flags: [] },
    providers: [{ id: 'p1', type: 'openai_compat', base_url: 'http://127.0.0.1:9' }],
  });
  assertFatal('agent', run);
});
