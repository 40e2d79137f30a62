// The body-rewrite microbenchmark (bench/rewrite.ts) end to end, short: it
// must verify each rewrite against JSON.parse + JSON.stringify before timing
// it, save its record with the machine and commit, and show what the bench
// exists to show: the byte-level rewrite of a 2 MB body beats parsing it, and
// its cost grows with the body (a bench that times nothing fails here).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { MicroResult } from '../../bench/harness/micro-result.js';
import type { RewriteCase } from '../../bench/rewrite.js';

const run = promisify(execFile);
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

test('bench:rewrite verifies, times and saves 2 KB / 200 KB / 2 MB rewrites; the 2 MB rewrite beats JSON.parse + stringify', { timeout: 240_000 }, async () => {
  const out = mkdtempSync(join(os.tmpdir(), 'bench-rewrite-'));
  try {
    const { stdout } = await run(process.execPath, [join(REPO_ROOT, 'dist', 'bench', 'rewrite.js'), '--quick', `--save=${out}`], { cwd: REPO_ROOT, timeout: 230_000 });
    const files = readdirSync(out);
    assert.equal(files.length, 1, files.join(', '));
    assert.match(files[0], /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ-rewrite\.json$/);
    assert.ok(stdout.includes(`saved ${join(out, files[0])}`));
    const record = JSON.parse(readFileSync(join(out, files[0]), 'utf8')) as MicroResult<RewriteCase[]>;
    assert.equal(record.bench, 'rewrite');
    assert.equal(record.machine.node, process.version);
    assert.match(record.machine.commit ?? '', /^[0-9a-f]{7,}$/);
    assert.equal(record.loadAverage.length, 3);
    assert.equal(record.text.length, 2 + record.results.length);

    assert.deepEqual(record.results.map((r) => r.shape), ['prose', 'prose', 'prose', 'mixed', 'mixed', 'mixed']);
    for (const [i, size] of [2048, 204_800, 2_097_152, 2048, 204_800, 2_097_152].entries()) {
      const r = record.results[i];
      assert.ok(r.bytes >= size && r.bytes <= size * 1.15, `${r.shape} body of ${r.bytes} bytes for ${size}`);
      assert.ok(r.inspectRewriteUs > 0 && r.rewriteOnlyUs > 0 && r.parseStringifyUs > 0, JSON.stringify(r));
    }
    for (const shape of ['prose', 'mixed']) {
      const [small, , large] = record.results.filter((r) => r.shape === shape);
      assert.ok(large.inspectRewriteUs < large.parseStringifyUs, `${shape} 2 MB: rewrite ${large.inspectRewriteUs} µs vs parse+stringify ${large.parseStringifyUs} µs`);
      assert.ok(large.inspectRewriteUs > small.inspectRewriteUs * 10, `${shape}: 2 MB costs more than 2 KB (${large.inspectRewriteUs} vs ${small.inspectRewriteUs} µs)`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
