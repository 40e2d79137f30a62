// The harness's pure parts: exact-size bodies, percentiles and spreads, the
// Prometheus lag reader, the flattening of measurements and the SVG charts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chatBody } from '../../bench/harness/bodies.js';
import { lagP99FromText } from '../../bench/harness/metrics.js';
import { latencySummary, percentileSorted, spreadOf } from '../../bench/harness/stats.js';
import type { Measurement } from '../../bench/harness/types.js';
import { barChartSvg } from '../../bench/report/svg.js';
import { flatten, headline, summarize } from '../../bench/report/summary.js';
import { sweepCounts } from '../../bench/targets/index.js';

test('chatBody is valid JSON of exactly the requested size, naming the model', () => {
  for (const size of [256, 2048, 200 * 1024]) {
    const body = chatBody('bench-model', size, true);
    assert.equal(body.length, size);
    const parsed = JSON.parse(body.toString()) as { model: string; stream: boolean };
    assert.equal(parsed.model, 'bench-model');
    assert.equal(parsed.stream, true);
  }
  assert.throws(() => chatBody('m', 10), RangeError);
});

test('percentiles are nearest-rank; spreads report median, min and max of finite values', () => {
  const sorted = Float64Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentileSorted(sorted, 50), 50);
  assert.equal(percentileSorted(sorted, 99), 99);
  assert.equal(percentileSorted(sorted, 100), 100);
  assert.ok(Number.isNaN(percentileSorted(new Float64Array(0), 50)));
  assert.deepEqual(latencySummary([5, 1, 3]), { p50: 3, p90: 5, p99: 5, max: 5 });
  assert.equal(latencySummary([]), null);
  assert.deepEqual(spreadOf([3, Number.NaN, 1, 2]), { median: 2, min: 1, max: 3, n: 3 });
  assert.deepEqual(spreadOf([4, 1]), { median: 2.5, min: 1, max: 4, n: 2 });
  assert.equal(spreadOf([Number.NaN]), undefined);
});

test('the lag reader takes the worst nodejs_eventloop_lag_p99_seconds sample, in ms', () => {
  const text = [
    '# HELP nodejs_eventloop_lag_p99_seconds The 99th percentile of the recorded event loop delays.',
    '# TYPE nodejs_eventloop_lag_p99_seconds gauge',
    'nodejs_eventloop_lag_p99_seconds 0.0123',
    'nodejs_eventloop_lag_p99_seconds{worker="1"} 0.0456',
    'nodejs_eventloop_lag_p99_seconds_other 9',
    'nodejs_eventloop_lag_p90_seconds 0.5',
  ].join('\n');
  assert.equal(lagP99FromText(text), 45.6);
  assert.equal(lagP99FromText('process_cpu_seconds_total 1'), undefined);
});

test('the worker sweep covers 0, powers of two and the maximum', () => {
  assert.deepEqual(sweepCounts(0), [0]);
  assert.deepEqual(sweepCounts(2), [0, 1, 2]);
  assert.deepEqual(sweepCounts(6), [0, 1, 2, 4, 6]);
});

function measurement(target: string, rep: number, rps: number, edgeCpuS: number): Measurement {
  return {
    scenario: 'closed-loop',
    variant: 'v',
    target,
    rep,
    wallS: 2,
    requests: rps * 2,
    rps,
    errors: 0,
    non2xx: 0,
    latencyMs: { p50: 1, p90: 2, p99: 3, max: 4 },
    metrics: {},
    processes: [
      { role: 'edge', pid: 1, cpuS: edgeCpuS, cpuSPer1k: (edgeCpuS / (rps * 2)) * 1000, mainThreadCpuS: edgeCpuS / 2, peakRssMB: 100, threads: {} },
      { role: 'mock', pid: 2, cpuS: 1, cpuSPer1k: 1, mainThreadCpuS: 1, peakRssMB: 50, threads: {} },
    ],
    edgeLagP99Ms: null,
    loadgenCpuS: 0.5,
  };
}

test('measurements flatten to named figures and fold into medians with their spread; headline ratios follow', () => {
  const flat = flatten(measurement('edge-w0', 0, 1000, 2));
  assert.equal(flat.rps, 1000);
  assert.equal(flat['cpu1k:edge'], 1);
  assert.equal(flat['rss:proxy'], 100, 'proxy = every process but the mock');
  assert.equal(flat['mainUsPerReq:edge'], 500);
  assert.equal(flat.loadgenCpuPct, 25);
  assert.equal(flat.lagP99Ms, undefined);

  const summaries = summarize([
    measurement('edge-w0', 0, 1000, 2),
    measurement('edge-w0', 1, 3000, 2),
    measurement('edge-w0', 2, 2000, 2),
    measurement('portkey', 0, 500, 2),
  ]);
  const edge = summaries.find((s) => s.target === 'edge-w0');
  assert.deepEqual(edge?.values.rps, { median: 2000, min: 1000, max: 3000, n: 3 });
  const figures = headline({
    summaries,
    targets: [
      { id: 'portkey', label: 'Portkey', kind: 'peer' },
      { id: 'edge-w0', label: 'edge', kind: 'ours' },
    ],
    variants: { 'closed-loop': ['v'] },
  });
  assert.equal(figures.find((f) => f.id === 'closed-loop.rps-vs-portkey')?.value, 4);
  assert.equal(figures.find((f) => f.id === 'closed-loop.rps-vs-nginx'), undefined, 'no nginx measured, no ratio invented');
});

test('the bar chart is well-formed SVG with a bar and a whisker per measured value and n/a for a missing one', () => {
  const svg = barChartSvg({
    title: 'Throughput <2 KB>',
    unit: 'req/s',
    categories: ['direct', 'edge & agent', 'skipped'],
    series: [{ name: 'req/s', values: [30000, 2500, undefined], lows: [29000, 2400, undefined], highs: [31000, 2600, undefined] }],
  });
  assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"[^>]*>/);
  assert.match(svg, /<\/svg>\n$/);
  assert.ok(svg.includes('Throughput &lt;2 KB&gt;') && svg.includes('edge &amp; agent'), 'text is escaped');
  assert.equal((svg.match(/<rect x="190"/g) ?? []).length, 2, 'one bar per measured value');
  assert.ok(svg.includes('>n/a<'), 'missing value marked');
  const widths = [...svg.matchAll(/<rect x="190" y="[\d.]+" width="([\d.]+)"/g)].map((m) => Number(m[1]));
  assert.ok(widths[0] > widths[1] * 10, `bars proportional to values: ${widths.join(', ')}`);
});
