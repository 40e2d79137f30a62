// The run-report microbenchmark (bench/run-wire.ts) end to end, short: a
// real worker thread posts reports into a real RunStore in both modes, the
// bench checks that the store took every run, saves its record, and shows
// what it exists to show: the run wire costs the main thread less than
// structured-cloned report objects (4x in the committed record; this
// asserts only the direction, which noise cannot flip at that margin).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { MicroResult } from '../../bench/harness/micro-result.js';
import type { RunWireCase } from '../../bench/run-wire.js';

const run = promisify(execFile);
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

test('bench:run-wire measures both modes on a worker and the main thread, saves them, and the wire costs the main thread less', { timeout: 120_000 }, async () => {
  const out = mkdtempSync(join(os.tmpdir(), 'bench-run-wire-'));
  try {
    const { stdout } = await run(process.execPath, [join(REPO_ROOT, 'dist', 'bench', 'run-wire.js'), '--quick', `--save=${out}`], { cwd: REPO_ROOT, timeout: 110_000 });
    const files = readdirSync(out);
    assert.equal(files.length, 1, files.join(', '));
    assert.match(files[0], /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ-run-wire\.json$/);
    assert.ok(stdout.includes(`saved ${join(out, files[0])}`));
    const record = JSON.parse(readFileSync(join(out, files[0]), 'utf8')) as MicroResult<RunWireCase[]>;
    assert.equal(record.bench, 'run-wire');
    assert.equal(record.machine.node, process.version);
    assert.equal(record.text.length, 2 + record.results.length);
    assert.deepEqual(record.results.map((r) => r.mode), ['objects', 'wire']);
    for (const r of record.results) assert.ok(r.workerUs > 0 && r.mainUs > 0, JSON.stringify(r));
    const [objects, wire] = record.results;
    assert.ok(wire.mainUs < objects.mainUs, `main thread: wire ${wire.mainUs} µs, objects ${objects.mainUs} µs per request`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
