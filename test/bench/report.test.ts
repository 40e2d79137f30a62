// The harness's pure parts: exact-size bodies, percentiles and spreads, the
// Prometheus lag reader, the flattening of measurements, the gates on the
// headline (errors, p99 samples), the markdown report and the SVG charts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chatBody } from '../../bench/harness/bodies.js';
import { lagP99FromText } from '../../bench/harness/metrics.js';
import { latencySummary, percentileSorted, spreadOf } from '../../bench/harness/stats.js';
import { MODES } from '../../bench/harness/modes.js';
import type { BenchResult } from '../../bench/harness/result.js';
import type { Measurement } from '../../bench/harness/types.js';
import { goals } from '../../bench/report/goals.js';
import { markdownReport } from '../../bench/report/markdown.js';
import { barChartSvg } from '../../bench/report/svg.js';
import { FigureReader, flatten, headline, summarize, type HeadlineFigure } from '../../bench/report/summary.js';
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

test('a measurement with errors or non-2xx answers is flagged and kept out of every ratio; a p99 needs 10,000 samples', () => {
  const failing: Measurement = { ...measurement('nginx', 0, 9000, 1), non2xx: 40 };
  const open = (target: string, requests: number, p99: number): Measurement => ({
    ...measurement(target, 0, requests / 2, 1),
    scenario: 'open-loop',
    variant: 'rate-500',
    requests,
    latencyMs: { p50: 1, p90: 2, p99, max: 9 },
  });
  const summaries = summarize([
    measurement('edge-w0', 0, 3000, 2),
    measurement('portkey', 0, 1000, 2),
    failing,
    measurement('direct', 0, 30000, 1),
    open('edge-w0', 10_500, 5),
    open('direct', 10_500, 1),
  ]);
  assert.equal(summaries.find((s) => s.target === 'nginx')?.non2xx, 40);
  const input = {
    summaries,
    targets: [{ id: 'edge-w0', label: 'edge', kind: 'ours' }],
    variants: { 'closed-loop': ['v'], 'open-loop': ['rate-500'] },
  };
  const figures = headline(input);
  const byId = (id: string): HeadlineFigure | undefined => figures.find((f) => f.id === id);
  assert.equal(byId('closed-loop.rps-vs-portkey')?.value, 3);
  assert.equal(byId('closed-loop.rps-vs-nginx')?.value, null, 'nginx answered 40 non-2xx: no ratio');
  assert.match(byId('closed-loop.rps-vs-nginx')?.withheld ?? '', /nginx: 0 errors, 40 non-2xx/);
  assert.equal(byId('closed-loop.cpu-per-request')?.value, 1000 * ((2 / 6000) * 1000), 'µs of edge + agent CPU per request');
  assert.equal(byId('open-loop.added-p99')?.value, 4, '10,500 samples: p99 quoted');

  const thin = headline({ ...input, summaries: summarize([open('edge-w0', 1_500, 5), open('direct', 1_500, 1)]) });
  const p99 = thin.find((f) => f.id === 'open-loop.added-p99');
  assert.equal(p99?.value, null, '1,500 samples: p99 not quoted');
  assert.match(p99?.withheld ?? '', /p99 not quoted: 1,500 samples, under 10,000/);
  assert.equal(thin.find((f) => f.id === 'open-loop.added-p50')?.value, 0, 'the p50 stands on 1,500 samples');

  const reader = new FigureReader(summaries);
  assert.equal(reader.get('closed-loop', 'v', 'nginx', 'rps').value, undefined);
  assert.equal(reader.get('closed-loop', 'v', 'absent', 'rps').withheld, undefined, 'not measured is not withheld');
});

test('the markdown report marks flagged rows, withholds their ratios and lists them', () => {
  const measurements = [measurement('edge-w0', 0, 3000, 2), { ...measurement('nginx', 0, 9000, 1), errors: 7 }, measurement('direct', 0, 30000, 1)];
  const summaries = summarize(measurements);
  const targets = ['direct', 'nginx', 'edge-w0'].map((id) => ({ id, label: id, kind: id === 'edge-w0' ? ('ours' as const) : ('peer' as const), hops: 1, configs: {}, notes: [], roles: ['edge', 'mock'] }));
  const result: BenchResult = {
    schema: 1,
    id: 'test',
    startedAt: '2026-12-01T00:00:00.000Z',
    finishedAt: '2026-12-01T00:01:00.000Z',
    durationS: 60,
    settings: MODES.smoke,
    machine: { cpuModel: 'cpu', cores: 2, memoryGB: 4, os: 'Linux', node: 'v24', clockTicks: 100, commit: 'abc', dirty: false, autocannon: '9', undici: '7' },
    peers: { nginx: '1.22', portkey: undefined },
    targets,
    scenarios: [{ id: 'closed-loop', title: 'Closed loop', description: 'd', units: undefined, latencyDigits: 0, columns: [], charts: [], variants: [{ id: 'v', label: 'v', reps: 1 }] }],
    measurements,
    failures: [],
    skips: [],
    summaries,
    headline: headline({ summaries, targets, variants: { 'closed-loop': ['v'] } }),
    charts: [],
  };
  const md = markdownReport(result, []);
  assert.match(md, /1 measurement group\(s\) had errors or non-2xx answers/);
  assert.match(md, /\| nginx ⚠ errors \| withheld \(nginx: 7 errors, 0 non-2xx\) \|/);
  assert.match(md, /\| edge-w0 \| 3,000 \| 333 \| 0\.10× \| n\/a \| withheld \(nginx: 7 errors, 0 non-2xx\) \|/);
  assert.match(md, /## Flagged measurements[\s\S]*\| closed-loop \| v \| nginx \| 1 \| 18,000 \| 7 \| 0 \|/);
  // The header says how long the closed loop warmed and ran, so runs with different methods are not read as one.
  assert.match(md, /one run per measurement; closed loop 1 s a run after 0\.2 s of unrecorded warm-up per target\./);
  assert.match(markdownReport({ ...result, scenarios: [] }, []), /one run per measurement\. Commit abc\./);
});

/** One measurement with the given processes' CPU seconds (the roles' cpuSPer1k follow from the requests). */
function withCpu(scenario: string, variant: string, target: string, requests: number, cpuByRole: Record<string, number>, metrics: Record<string, number> = {}, errors = 0): Measurement {
  return {
    scenario,
    variant,
    target,
    rep: 0,
    wallS: 10,
    requests,
    rps: requests / 10,
    errors,
    non2xx: 0,
    latencyMs: { p50: 1, p90: 2, p99: 3, max: 4 },
    metrics,
    processes: Object.entries(cpuByRole).map(([role, cpuS], i) => ({ role, pid: i + 1, cpuS, cpuSPer1k: (cpuS / requests) * 1000, mainThreadCpuS: cpuS, peakRssMB: role === 'mock' ? 50 : 400, threads: {} })),
    edgeLagP99Ms: null,
    loadgenCpuS: 2,
  };
}

test('the goals table reads each goal from the same run, says which hold, and never passes what was not measured cleanly', () => {
  const summaries = summarize([
    withCpu('closed-loop', 'c', 'portkey', 10_000, { portkey: 1 }),
    withCpu('closed-loop', 'c', 'nginx', 100_000, { nginx: 5 }),
    // edge w=0: 6,000 req/s (6x Portkey, 0.6x nginx); edge 100 µs and agent 200 µs per request against nginx's 50.
    withCpu('closed-loop', 'c', 'edge-w0', 60_000, { edge: 6, agent: 12, mock: 1 }),
    // w=1 costs 1.1x w=0 per request: holds.
    withCpu('closed-loop', 'c', 'edge-w1', 50_000, { edge: 5.5, agent: 10, mock: 1 }),
    // A --baseline build that happens to be faster is still the before, never the edge the goals read.
    withCpu('closed-loop', 'c', 'base-w0', 90_000, { edge: 1, agent: 1, mock: 1 }),
    // 10,000 streams: 1,000,000 events (50,000/s over 20 s); edge 3 µs and agent 8 µs per event; 2 stalls.
    { ...withCpu('many-streams', '10000-streams-5tps', 'edge-w0', 10_000, { edge: 3, agent: 8, mock: 9 }, { eventsPerS: 50_000, stalls: 2, streams: 10_000 }), wallS: 20 },
  ]);
  const rows = goals({
    summaries,
    targets: [
      { id: 'portkey', kind: 'peer' },
      { id: 'nginx', kind: 'peer' },
      { id: 'edge-w0', kind: 'ours', workers: 0 },
      { id: 'edge-w1', kind: 'ours', workers: 1, sweepOnly: true },
      { id: 'base-w0', kind: 'ours', workers: 0, baseline: 'f00ba47' },
    ],
    variants: { 'closed-loop': ['c'], 'many-streams': ['10000-streams-5tps'] },
  });
  const byId = new Map(rows.map((r) => [r.id, r]));
  assert.equal(byId.get('rps-vs-portkey')?.figure.value, 6);
  assert.equal(byId.get('rps-vs-portkey')?.holds, true);
  assert.equal(byId.get('rps-vs-nginx')?.holds, true);
  assert.equal(byId.get('cpu-edge-vs-nginx')?.figure.value, 2);
  assert.equal(byId.get('cpu-edge-vs-nginx')?.holds, true);
  assert.equal(byId.get('cpu-agent-vs-nginx')?.figure.value, 4);
  assert.equal(byId.get('cpu-agent-vs-nginx')?.holds, false);
  assert.ok(Math.abs((byId.get('w1-vs-w0')?.figure.value ?? 0) - 1.1) < 1e-9);
  assert.equal(byId.get('w1-vs-w0')?.holds, true);
  assert.equal(byId.get('token-edge')?.figure.value, 3);
  assert.equal(byId.get('token-edge')?.holds, true);
  assert.equal(byId.get('token-agent')?.figure.value, 8);
  assert.equal(byId.get('token-agent')?.holds, false);
  assert.equal(byId.get('streams-10k')?.holds, false, '2 stalls: the streams goal does not hold');
  // Not measured in this run: no verdict either way.
  assert.equal(byId.get('added-p99')?.holds, undefined);
  assert.equal(byId.get('ttfb-added-p50')?.holds, undefined);

  // A peer measurement with errors withholds every ratio built on it: no pass by a failing baseline.
  const failing = summarize([withCpu('closed-loop', 'c', 'portkey', 1_000, { portkey: 1 }, {}, 5), withCpu('closed-loop', 'c', 'edge-w0', 60_000, { edge: 6, agent: 12 })]);
  const withheld = goals({ summaries: failing, targets: [{ id: 'portkey', kind: 'peer' }, { id: 'edge-w0', kind: 'ours', workers: 0 }], variants: { 'closed-loop': ['c'] } });
  const portkey = withheld.find((r) => r.id === 'rps-vs-portkey');
  assert.equal(portkey?.holds, undefined);
  assert.match(portkey?.figure.withheld ?? '', /5 errors/);
});
