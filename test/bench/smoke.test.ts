// The bench harness end to end, tiny: `--mode smoke` (direct and the edge
// two-hop, about a second per measurement, into a temp dir) must write a
// JSON result, a markdown report and SVG charts with sane numbers, and stop
// every process it started. Needs neither nginx nor the Portkey gateway.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { BenchResult } from '../../bench/harness/result.js';
import { alive } from '../helpers/processes.js';

const run = promisify(execFile);
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CLI = join(REPO_ROOT, 'dist', 'bench', 'run.js');

test('bench smoke: direct and edge two-hop produce a report (closed loop, open loop with the edge timing split, streaming), charts and sane numbers, and no process is left behind', { timeout: 90_000 }, async () => {
  const out = mkdtempSync(join(os.tmpdir(), 'bench-smoke-'));
  try {
    const { stdout } = await run(process.execPath, [CLI, '--mode', 'smoke', '--out', out], { cwd: REPO_ROOT, timeout: 80_000 });
    assert.match(stdout, /bench smoke done/);

    const files = readdirSync(out);
    const json = files.filter((f) => f.endsWith('.json'));
    assert.equal(json.length, 1, `one JSON result in ${files.join(', ')}`);
    const stamp = json[0].slice(0, -'.json'.length);
    assert.ok(files.includes(`${stamp}.md`), 'markdown report written');
    const svgs = files.filter((f) => f.startsWith(`${stamp}-`) && f.endsWith('.svg'));
    assert.ok(svgs.length >= 2, `charts written: ${svgs.join(', ')}`);
    assert.ok(!existsSync(join(REPO_ROOT, 'bench', 'results', `${stamp}.json`)), 'the smoke run writes nothing into bench/results');

    const result = JSON.parse(readFileSync(join(out, json[0]), 'utf8')) as BenchResult;
    assert.equal(result.settings.mode, 'smoke');
    assert.match(result.machine.node, /^v\d+/);
    assert.deepEqual(result.failures, []);
    for (const target of ['direct', 'edge-w0']) {
      const record = result.targets.find((t) => t.id === target);
      assert.equal(record?.skipped, undefined, `${target} measured (${record?.skipped ?? ''})`);
      const closed = result.measurements.find((m) => m.scenario === 'closed-loop' && m.target === target);
      assert.ok(closed !== undefined, `${target}: closed-loop measured`);
      assert.ok(closed.rps > 0, `${target}: rps ${closed.rps}`);
      assert.equal(closed.errors, 0, `${target}: no errors`);
      assert.equal(closed.non2xx, 0, `${target}: no non-2xx`);
      assert.ok(closed.processes.length > 0 && closed.processes.every((p) => p.peakRssMB > 10), `${target}: RSS per process`);
      // Under a second of closed-loop load every process on the path works: a probe that reads nothing fails here
      // (test/bench/usage.test.ts checks the probe's scale against a known burn).
      for (const p of closed.processes) {
        assert.ok(p.cpuS > 0 && p.cpuSPer1k !== null && p.cpuSPer1k > 0 && p.cpuSPer1k < 20, `${target} ${p.role}: ${p.cpuS} s CPU, ${p.cpuSPer1k} ms per request`);
      }
      for (const variant of ['paced', 'burst']) {
        const stream = result.measurements.find((m) => m.scenario === 'streaming' && m.variant === variant && m.target === target);
        assert.ok(stream !== undefined, `${target}: streaming ${variant} measured`);
        assert.ok(stream.requests > 0 && stream.errors === 0, `${target} ${variant}: ${stream.requests} streams, ${stream.errors} errors`);
        assert.ok(stream.metrics.eventsPerS > 0 && stream.metrics.ttfbP50Ms > 0, `${target} ${variant}: events/s and TTFB measured`);
      }
    }
    // The open loop keeps the edge's timing headers: the node hop and the provider's own time, split per answer.
    const paced = (target: string) => result.measurements.find((m) => m.scenario === 'open-loop' && m.target === target);
    const edgePaced = paced('edge-w0');
    assert.ok(edgePaced !== undefined && edgePaced.requests > 0 && edgePaced.errors === 0, 'edge open loop measured');
    assert.ok(edgePaced.metrics.hopP50Ms >= 0 && edgePaced.metrics.hopP99Ms >= edgePaced.metrics.hopP50Ms, `node hop ${edgePaced.metrics.hopP50Ms} / ${edgePaced.metrics.hopP99Ms} ms`);
    assert.ok(edgePaced.metrics.upstreamP99Ms > 0 && edgePaced.metrics.ownP99Ms >= 0, `provider ${edgePaced.metrics.upstreamP99Ms} ms, edge own ${edgePaced.metrics.ownP99Ms} ms`);
    assert.ok(edgePaced.metrics.hopP50Ms + edgePaced.metrics.ownP99Ms < (edgePaced.latencyMs?.max ?? 0) + 1, 'the parts fit within the slowest whole request');
    assert.equal(paced('direct')?.metrics.hopP50Ms, undefined, 'the mock sends no edge timing');
    const edge = result.measurements.find((m) => m.scenario === 'closed-loop' && m.target === 'edge-w0');
    assert.deepEqual(edge?.processes.map((p) => p.role).sort(), ['agent', 'edge', 'mock']);
    assert.ok(result.headline.some((f) => f.id === 'closed-loop.rps-vs-direct' && f.value !== null && f.value > 0 && f.value < 1.5), 'headline ratio against direct');

    // The scheduler thread over the real rings, measured after the targets stopped.
    const rings = result.schedulerRings ?? [];
    assert.deepEqual(rings.map((c) => c.inflightPerWorker), [1, 16]);
    for (const c of rings) assert.ok(c.requestsPerSec > 0 && c.mainUsPerRequest > 0 && c.rejected === 0, `rings: ${JSON.stringify(c)}`);

    const markdown = readFileSync(join(out, `${stamp}.md`), 'utf8');
    assert.match(markdown, /## Headline/);
    assert.match(markdown, /## Goals/);
    assert.ok((result.machine.loopbackWriteUs ?? 0) > 0, `the host's write floor was measured: ${result.machine.loopbackWriteUs}`);
    assert.match(markdown, /### Scheduler thread over the rings/);
    assert.match(markdown, /\| edge 2-hop w=0 \| \d/);
    for (const svg of svgs) assert.match(readFileSync(join(out, svg), 'utf8'), /^<svg [^>]*>[\s\S]*edge 2-hop w=0[\s\S]*<\/svg>\n$/);
    for (const svg of svgs) assert.ok(markdown.includes(`](${svg})`), `report links ${svg}`);

    // The report can be rebuilt from the JSON alone.
    rmSync(join(out, `${stamp}.md`));
    await run(process.execPath, [CLI, '--render', join(out, json[0])], { cwd: REPO_ROOT, timeout: 20_000 });
    assert.equal(readFileSync(join(out, `${stamp}.md`), 'utf8'), markdown, 'rerendered report matches');

    // Every process the harness started is gone.
    const pids = new Set(result.measurements.flatMap((m) => m.processes.map((p) => p.pid)));
    assert.ok(pids.size >= 3);
    for (const pid of pids) assert.equal(alive(pid), false, `process ${pid} stopped`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
