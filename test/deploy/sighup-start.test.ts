// `systemctl reload llm-edge` sends SIGHUP as soon as the unit is active,
// which with Type=exec is right after the exec: long before the edge CLI
// has loaded its modules and config and put in its own SIGHUP handler. The
// installed command (dist/src/edge/bin.js, what package.json's bin names)
// runs as a child process; its config is a FIFO, so the test knows the
// edge is inside its start (reading the config) when the signal goes, and
// then what the reload reads.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stringify as toYaml } from 'yaml';

const BIN = fileURLToPath(new URL('../../src/edge/bin.js', import.meta.url));

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'edge-sighup-start-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function config(capacity: number): string {
  return toYaml({
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    admin: { host: '127.0.0.1', port: 0 },
    // No restart in place for node flags: it would read the FIFO a second time.
    runtime: { node_flags: [] },
    nodes: [{ id: 'gpu-1', token: 'node-token-0123456789abcdef', providers: [{ id: 'p', type: 'openai_compat', capacity }] }],
    models: [{ alias: 'llama3', providers: { p: 'served' } }],
  });
}

/** Writes `text` to the FIFO: resolves once the edge has opened it to read and the text is in. */
async function feed(fifo: string, text: string): Promise<void> {
  const handle = await open(fifo, 'w');
  await handle.writeFile(text);
  await handle.close();
}

test('a SIGHUP (systemctl reload) while the edge starts neither kills it nor is lost: the file is re-read once it runs', { skip: process.platform === 'win32' }, async () => {
  const fifo = join(dir, 'edge.yaml');
  execFileSync('mkfifo', [fifo]);
  const child = spawn(process.execPath, [BIN, '--config', fifo], { env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  let stderr = '';
  let partial = '';
  const waiters: (() => void)[] = [];
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
    for (const wake of waiters.splice(0)) wake();
  });
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  let ended: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void exited.then((e) => {
    ended = e;
    for (const wake of waiters.splice(0)) wake();
  });
  const waitFor = async (pick: (l: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>> => {
    for (;;) {
      const found = lines.find(pick);
      if (found !== undefined) return found;
      if (ended !== undefined) assert.fail(`the edge ended (code ${String(ended.code)}, signal ${String(ended.signal)}) before ${what}; stderr: ${stderr}; log: ${JSON.stringify(lines.map((l) => l.msg))}`);
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  try {
    // open() for writing returns once the edge opened the FIFO to read its config: it is mid-start.
    const handle = await open(fifo, 'w');
    child.kill('SIGHUP');
    await handle.writeFile(config(1));
    await handle.close();
    await waitFor((l) => l.msg === 'edge started', "'edge started'");
    assert.ok(lines.some((l) => l.msg === 'SIGHUP while starting: the config file is re-read once the edge has started'), JSON.stringify(lines.map((l) => l.msg)));
    // The reload the signal asked for reads the file again, now with a change it applies.
    await feed(fifo, config(3));
    const applied = await waitFor((l) => l.msg === 'config applied', "'config applied'");
    assert.equal(applied.origin, 'SIGHUP');
    assert.deepEqual(applied.changed, ['nodes[gpu-1].providers[p].capacity']);
    child.kill('SIGTERM');
    assert.deepEqual(await exited, { code: 0, signal: null }, 'SIGTERM drains and exits 0');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});
