// The markdown report (bench/results/<stamp>.md), generated from the result
// JSON alone: headline ratios first, then one table per scenario variant
// with the medians, the spread over repetitions, CPU and memory per process.
// Measurements with errors or non-2xx answers are flagged where they appear
// and listed in their own section; the headline withholds every figure built
// on one, and every p99 from fewer than MIN_P99_SAMPLES samples.
import type { BenchResult, ScenarioRecord, TargetRecord } from '../harness/result.js';
import type { Spread } from '../harness/stats.js';
import type { ChartFile } from './charts.js';
import { goals } from './goals.js';
import { FigureReader, isClean, MIN_P99_SAMPLES, type Figure, type Summary } from './summary.js';

function fmt(value: number | undefined, digits?: number): string {
  if (value === undefined || !Number.isFinite(value)) return 'n/a';
  const d = digits ?? (Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2);
  return value.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
}

function signed(value: number | undefined, digits = 2): string {
  if (value === undefined || !Number.isFinite(value)) return 'n/a';
  return `${value >= 0 ? '+' : ''}${fmt(value, digits)}`;
}

/** Median, with the min-max spread when there was more than one run and it differs. */
function cell(spread: Spread | undefined, digits?: number): string {
  if (spread === undefined) return 'n/a';
  const median = fmt(spread.median, digits);
  const low = fmt(spread.min, digits);
  const high = fmt(spread.max, digits);
  return spread.n < 2 || low === high ? median : `${median} (${low}–${high})`;
}

function perRole(summary: Summary, roles: readonly string[], prefix: string, digits: number): string {
  const parts: string[] = [];
  for (const role of roles) {
    const s = summary.values[`${prefix}:${role}`];
    if (s !== undefined) parts.push(`${role} ${fmt(s.median, digits)}`);
  }
  return parts.length > 0 ? parts.join(' · ') : 'n/a';
}

function times(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? 'n/a' : `${fmt(value, value >= 10 ? 1 : 2)}×`;
}

class Writer {
  readonly lines: string[] = [];
  line(text = ''): void {
    this.lines.push(text);
  }
  table(header: readonly string[], rows: readonly (readonly string[])[]): void {
    this.line(`| ${header.join(' | ')} |`);
    this.line(`|${header.map(() => '---').join('|')}|`);
    for (const row of rows) this.line(`| ${row.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`);
    this.line();
  }
}

export function markdownReport(result: BenchResult, charts: readonly ChartFile[]): string {
  const w = new Writer();
  const m = result.machine;
  const date = result.startedAt.slice(0, 10);
  w.line(`# Benchmark report ${result.id}`);
  w.line();
  w.line(
    `Mode **${result.settings.mode}**, ${date}, ${fmt(result.durationS / 60, 1)} minutes; ` +
      `${result.settings.reps > 1 ? `each measurement repeated ${result.settings.reps} times: medians, with the spread (min–max) in parentheses` : 'one run per measurement'}` +
      (result.scenarios.some((s) => s.id === 'closed-loop')
        ? `; closed loop ${result.settings.closedLoop.durationS} s a run after ${result.settings.closedLoop.warmupS} s of unrecorded warm-up per target. `
        : '. ') +
      `Commit ${m.commit ?? 'unknown'}${m.dirty === true ? ' with uncommitted changes' : ''}.`,
  );
  w.line();
  w.table(
    ['machine', 'value'],
    [
      ['CPU', `${m.cpuModel}, ${m.cores} cores`],
      ['memory', `${fmt(m.memoryGB, 1)} GB`],
      ['OS', m.os],
      ['Node (all Node processes and the load generator)', m.node],
      ['nginx', result.peers.nginx ?? 'not installed'],
      ['Portkey gateway', result.peers.portkey ?? 'not installed'],
      ['load generators', `autocannon ${m.autocannon ?? '?'} (closed loop), undici ${m.undici ?? '?'} (paced client), node:net (streaming client)`],
    ],
  );
  w.line(
    `> The load generator runs on the same ${m.cores}-core machine as the target and competes with it for CPU, ` +
      'so absolute figures understate what each target does on its own hardware and drift between runs. ' +
      'Read the ratios between targets measured in the same run; they are what this report is for.',
  );
  w.line();
  w.line(
    '> Edge loop lag is prom-client\'s `nodejs_eventloop_lag_p99_seconds` from the edge\'s admin `/metrics` over each measurement. ' +
      'It samples the loop every 10 ms and counts that interval in: about 10 ms is an idle loop, and the excess is the delay.',
  );
  w.line();
  writeHeadline(w, result);
  writeGoals(w, result);
  writeTargets(w, result);
  for (const scenario of result.scenarios) writeScenario(w, result, scenario, charts);
  writeSweep(w, result, charts);
  writeFlagged(w, result);
  writeProblems(w, result);
  writeConfigs(w, result);
  w.line('## Reproduce');
  w.line();
  w.line('```sh');
  w.line('apt-get install -y nginx      # optional peer');
  w.line('npm run bench:peers           # optional peer: the Portkey gateway, into bench/peers/');
  w.line(`npm run bench${result.settings.mode === 'full' ? '' : `:${result.settings.mode}`}`);
  w.line('```');
  w.line();
  return `${w.lines.join('\n').trimEnd()}\n`;
}

/** Issue 17's goals against this run's figures (goals.ts); the per-token ones beside the host's floor. */
function writeGoals(w: Writer, result: BenchResult): void {
  const variants: Record<string, string[]> = {};
  for (const scenario of result.scenarios) variants[scenario.id] = scenario.variants.map((v) => v.id);
  const rows = goals({ summaries: result.summaries, targets: result.targets, variants });
  if (rows.length === 0) return;
  w.line('## Goals');
  w.line();
  w.table(
    ['goal', 'threshold', 'measured', 'holds'],
    rows.map((g) => {
      const unit = g.unit === 'x' ? '×' : ` ${g.unit}`;
      const value = g.figure.value !== undefined ? `${fmt(g.figure.value)}${unit}` : g.figure.withheld !== undefined ? `withheld (${g.figure.withheld})` : 'not measured';
      return [g.goal, g.threshold, g.detail === undefined ? value : `${value} (${g.detail})`, g.holds === undefined ? '–' : g.holds ? 'yes' : '**no**'];
    }),
  );
  const floor = result.machine.loopbackWriteUs;
  if (floor !== undefined) {
    w.line(
      `On this host one small loopback TCP write costs its Node writer ${fmt(floor, 1)} µs of CPU (bench/harness/write-floor.ts, measured before the targets started). ` +
        'A token of a slow stream is its own write on every hop that relays it, so that is the floor under any per-token figure of a process that writes one.',
    );
    w.line();
  }
  const paced = result.machine.tokenFloor;
  if (paced !== undefined) {
    w.line(
      `At the per-token goals' own pattern (${paced.streams.toLocaleString('en-US')} connections, each written ${paced.tokensPerSecond} times a second, evenly spread, to a reader in another process) ` +
        `a bare Node writer spends ${fmt(paced.writeUs, 1)} µs of CPU per write and the reader ${fmt(paced.readUs, 1)} µs per write it receives (bench/harness/write-floor.ts, pacedTokenFloor). ` +
        'The edge writes each token once to its client, the agent reads each once from its provider: these are their floors at that pattern.',
    );
    w.line();
  }
}

function measured(result: BenchResult): TargetRecord[] {
  return result.targets.filter((t) => t.skipped === undefined);
}

/** A headline figure as text: the formatted value, "withheld (why)", or n/a. */
function show(figure: Figure, format: (v: number) => string): string {
  if (figure.value !== undefined) return format(figure.value);
  return figure.withheld === undefined ? 'n/a' : `withheld (${figure.withheld})`;
}

const ms = (v: number): string => `${signed(v)} ms`;

function writeHeadline(w: Writer, result: BenchResult): void {
  const f = new FigureReader(result.summaries);
  const variants = (id: string): string[] => result.scenarios.find((x) => x.id === id)?.variants.map((v) => v.id) ?? [];
  const closed = variants('closed-loop')[0];
  const open = variants('open-loop')[0];
  const largest = variants('large-body').filter((v) => v !== 'small-alone').at(-1);
  // '1 MB x 2 connections + ...' -> '1 MB'
  const largestLabel = result.scenarios.find((x) => x.id === 'large-body')?.variants.find((v) => v.id === largest)?.label.split(' x ')[0] ?? largest;
  const rate = open?.replace('rate-', '');
  const rows = measured(result).filter((t) => t.sweepOnly !== true);
  const flagged = result.summaries.filter((x) => !isClean(x));
  w.line('## Headline');
  w.line();
  w.line(
    `> Gates: a figure built on a measurement with errors or non-2xx answers is withheld (req/s counts 2xx answers only), ` +
      `and a p99 is quoted only from at least ${MIN_P99_SAMPLES.toLocaleString('en-US')} samples in every run. ` +
      (flagged.length === 0 ? 'No measurement in this run had an error or a non-2xx answer.' : `**${flagged.length} measurement group(s) had errors or non-2xx answers**: see "Flagged measurements".`),
  );
  w.line();
  for (const t of rows.filter((x) => x.kind === 'ours')) {
    const rps = f.get('closed-loop', closed, t.id, 'rps');
    const cpu = f.get('closed-loop', closed, t.id, 'cpu1k:proxy');
    const peer = (id: string): Figure => f.get('closed-loop', closed, id, 'rps');
    w.line(`**${t.label}**`);
    w.line();
    if (f.summary('closed-loop', closed, t.id) !== undefined) {
      const per = t.roles.filter((r) => r !== 'mock').map((role) => {
        const c = f.get('closed-loop', closed, t.id, `cpu1k:${role}`);
        return c.value === undefined ? undefined : `${role} ${fmt(c.value * 1000, 0)}`;
      });
      w.line(
        `- Throughput (closed loop): ${show(rps, (v) => fmt(v, 0))} req/s at **${show(cpu, (v) => fmt(v * 1000, 0))} µs of CPU per request** (${per.filter((x) => x !== undefined).join(' + ')}) = ` +
          `**${show(f.ratio(rps, peer('portkey')), times)} Portkey's** (${show(peer('portkey'), (v) => fmt(v, 0))}), ` +
          `**${show(f.ratio(rps, peer('nginx')), times)} nginx's** (1 worker, ${show(peer('nginx'), (v) => fmt(v, 0))}), ` +
          `${show(f.ratio(rps, peer('nginx-auto')), times)} nginx's with \`worker_processes auto\` (${show(peer('nginx-auto'), (v) => fmt(v, 0))}), ` +
          `${show(f.ratio(rps, peer('direct')), times)} direct (${show(peer('direct'), (v) => fmt(v, 0))}).`,
      );
    }
    if (open !== undefined) {
      const p50 = f.diff(f.get('open-loop', open, t.id, 'p50'), f.get('open-loop', open, 'direct', 'p50'));
      const p99 = f.diff(f.get('open-loop', open, t.id, 'p99'), f.get('open-loop', open, 'direct', 'p99'));
      w.line(
        `- Latency added vs direct at ${rate} req/s: **p50 ${show(p50, ms)}, p99 ${show(p99, ms)}** ` +
          `(direct p50 ${show(f.get('open-loop', open, 'direct', 'p50'), (v) => `${fmt(v)} ms`)}, p99 ${show(f.get('open-loop', open, 'direct', 'p99'), (v) => `${fmt(v)} ms`)}).`,
      );
    }
    const ttfb50 = f.diff(f.get('streaming', 'paced', t.id, 'ttfbP50Ms'), f.get('streaming', 'paced', 'direct', 'ttfbP50Ms'));
    const ttfb99 = f.diff(f.get('streaming', 'paced', t.id, 'ttfbP99Ms'), f.get('streaming', 'paced', 'direct', 'ttfbP99Ms'));
    const relay = f.get('streaming', 'burst', t.id, 'eventsPerS');
    if (f.summary('streaming', 'burst', t.id) !== undefined || f.summary('streaming', 'paced', t.id) !== undefined) {
      w.line(
        `- Streaming: time to first byte added vs direct p50 ${show(ttfb50, ms)}, p99 ${show(ttfb99, ms)}; ` +
          `relay ${show(relay, (v) => fmt(v, 0))} SSE events/s = ${show(f.ratio(relay, f.get('streaming', 'burst', 'nginx', 'eventsPerS')), times)} nginx, ` +
          `${show(f.ratio(relay, f.get('streaming', 'burst', 'portkey', 'eventsPerS')), times)} Portkey, ${show(f.ratio(relay, f.get('streaming', 'burst', 'direct', 'eventsPerS')), times)} direct.`,
      );
    }
    if (largest !== undefined) {
      w.line(
        `- Large bodies: small-request p50 ${show(f.get('large-body', 'small-alone', t.id, 'smallP50Ms'), (v) => `${fmt(v)} ms`)} alone, ` +
          `${show(f.get('large-body', largest, t.id, 'smallP50Ms'), (v) => `${fmt(v)} ms`)} alongside ${largestLabel} uploads; ` +
          `p99 ${show(f.get('large-body', 'small-alone', t.id, 'smallP99Ms'), (v) => `${fmt(v)} ms`)} alone, ${show(f.get('large-body', largest, t.id, 'smallP99Ms'), (v) => `${fmt(v)} ms`)} alongside ` +
          `(${show(f.get('large-body', largest, t.id, 'uploadMBPerS'), (v) => fmt(v, 1))} MB/s uploaded).`,
      );
    }
    for (const v of result.scenarios.find((x) => x.id === 'many-streams')?.variants ?? []) {
      const s = f.summary('many-streams', v.id, t.id);
      const streams = s?.values.streams?.median;
      if (s === undefined || streams === undefined) continue;
      // Completion, errors and stalls are this scenario's findings: quoted whatever they are.
      const at = (key: string): number | undefined => s.values[key]?.median;
      const lag = at('lagP99Ms');
      const direct = f.summary('many-streams', v.id, 'direct')?.values.ttfbP50Ms?.median;
      const ttfb = at('ttfbP50Ms');
      w.line(
        `- ${v.label}: ${fmt(at('requests'), 0)} of ${fmt(streams, 0)} completed, ${fmt(at('errors'), 0)} failed, ` +
          `${fmt(at('stalls'), 0)} stalled (longest silence ${fmt(at('maxGapMs'), 0)} ms), TTFB p50 ${signed(ttfb !== undefined && direct !== undefined ? ttfb - direct : undefined)} ms vs direct; ` +
          `peak RSS edge ${fmt(at('rss:edge'), 0)} MB + agent ${fmt(at('rss:agent'), 0)} MB; ` +
          `edge event-loop lag p99 ${lag === undefined ? 'unavailable' : `${fmt(lag, 1)} ms`}.`,
      );
    }
    w.line();
  }
  const header = [
    'target',
    'req/s (closed loop)',
    'proxy CPU µs/req',
    '× direct',
    'vs Portkey',
    'vs nginx (1 worker)',
    'vs nginx (auto)',
    `added p50 @${rate ?? '?'}/s`,
    `added p99 @${rate ?? '?'}/s`,
    'TTFB added p50',
    'events/s (burst)',
    `small p99 with ${largestLabel ?? '?'} (alone)`,
  ];
  const table = rows.map((t) => {
    const rps = f.get('closed-loop', closed, t.id, 'rps');
    const clean = result.summaries.filter((x) => x.target === t.id).every(isClean);
    const vs = (id: string): string => (t.id === id ? '—' : show(f.ratio(rps, f.get('closed-loop', closed, id, 'rps')), times));
    const added = (scenario: string, variant: string | undefined, key: string): string =>
      t.id === 'direct' ? '—' : show(f.diff(f.get(scenario, variant, t.id, key), f.get(scenario, variant, 'direct', key)), ms);
    const cpu = f.get('closed-loop', closed, t.id, 'cpu1k:proxy');
    return [
      clean ? t.label : `${t.label} ⚠ errors`,
      show(rps, (v) => fmt(v, 0)),
      t.id === 'direct' ? '—' : show(cpu, (v) => fmt(v * 1000, 0)),
      vs('direct'),
      vs('portkey'),
      vs('nginx'),
      vs('nginx-auto'),
      added('open-loop', open, 'p50'),
      added('open-loop', open, 'p99'),
      added('streaming', 'paced', 'ttfbP50Ms'),
      show(f.get('streaming', 'burst', t.id, 'eventsPerS'), (v) => fmt(v, 0)),
      `${show(f.get('large-body', largest, t.id, 'smallP99Ms'), (v) => `${fmt(v)} ms`)} (${show(f.get('large-body', 'small-alone', t.id, 'smallP99Ms'), (v) => fmt(v))})`,
    ];
  });
  w.table(header, table);
}

function writeTargets(w: Writer, result: BenchResult): void {
  w.line('## Targets');
  w.line();
  w.table(
    ['target', 'path', 'status', 'version', 'notes'],
    result.targets.map((t) => [
      t.label,
      t.hops === 0 ? 'client → mock' : t.hops === 1 ? `client → ${t.id} → mock` : 'client → edge → gRPC → agent → mock',
      t.skipped === undefined ? 'measured' : `skipped: ${t.skipped}`,
      t.version ?? '',
      t.notes.join('; '),
    ]),
  );
}

function writeScenario(w: Writer, result: BenchResult, scenario: ScenarioRecord, charts: readonly ChartFile[]): void {
  const targets = result.targets.filter((t) => result.summaries.some((s) => s.scenario === scenario.id && s.target === t.id));
  if (targets.length === 0) return;
  w.line(`## ${scenario.title}`);
  w.line();
  w.line(scenario.description);
  w.line();
  for (const variant of scenario.variants) {
    const rows = targets
      .map((t) => ({ t, s: result.summaries.find((x) => x.scenario === scenario.id && x.variant === variant.id && x.target === t.id) }))
      .filter((r): r is { t: TargetRecord; s: Summary } => r.s !== undefined);
    if (rows.length === 0) continue;
    w.line(`### ${variant.label}`);
    w.line();
    const rate = scenario.units?.rate ?? 'req/s';
    const lat = scenario.units === undefined ? '' : `${scenario.units.latency} `;
    const per = rate.replace('/s', '');
    const header = ['target', rate, 'samples', `${lat}p50 ms`, `${lat}p90 ms`, `${lat}p99 ms`, `${lat}max ms`, 'errors', 'non-2xx'];
    for (const c of scenario.columns) header.push(c.unit === '' ? c.label : `${c.label} ${c.unit}`);
    header.push(`CPU s/1k ${per}`, 'peak RSS MB', 'edge loop lag p99 ms', 'load gen CPU %');
    w.table(
      header,
      rows.map(({ t, s }) => {
        const v = s.values;
        const d = scenario.latencyDigits;
        const label = isClean(s) ? t.label : `${t.label} ⚠`;
        const errors = s.errors > 0 ? `**${cell(v.errors, 0)}**` : cell(v.errors, 0);
        const non2xx = s.non2xx > 0 ? `**${cell(v.non2xx, 0)}**` : cell(v.non2xx, 0);
        const row = [label, cell(v.rps, 0), cell(v.requests, 0), cell(v.p50, d ?? 2), cell(v.p90, d ?? 2), cell(v.p99, d ?? 2), cell(v.max, d ?? 1), errors, non2xx];
        for (const c of scenario.columns) row.push(cell(v[c.key], c.digits));
        row.push(perRole(s, t.roles, 'cpu1k', 3), perRole(s, t.roles, 'rss', 0), t.kind === 'ours' ? cell(v.lagP99Ms, 1) : '', cell(v.loadgenCpuPct, 0));
        return row;
      }),
    );
    const thin = rows.filter(({ s }) => (s.values.requests?.min ?? 0) < MIN_P99_SAMPLES).length;
    if (thin > 0) {
      w.line(`p99 columns of rows with fewer than ${MIN_P99_SAMPLES.toLocaleString('en-US')} samples per run are indicative only; the headline does not quote them. ⚠: errors or non-2xx answers, kept out of every ratio.`);
      w.line();
    }
    for (const chart of charts.filter((c) => c.section === scenario.id && c.variant === variant.id)) w.line(`![${chart.title}](${chart.name})`);
    w.line();
  }
  for (const chart of charts.filter((c) => c.section === scenario.id && c.variant === undefined)) {
    w.line(`![${chart.title}](${chart.name})`);
    w.line();
  }
}

function writeSweep(w: Writer, result: BenchResult, charts: readonly ChartFile[]): void {
  const closed = result.scenarios.find((s) => s.id === 'closed-loop')?.variants[0];
  // An edge variant that only other scenarios measure (e.g. coalescing off) is no sweep point.
  const edges = result.targets.filter(
    (t) => t.workers !== undefined && t.baseline === undefined && (t.skipped !== undefined || result.summaries.some((x) => x.scenario === 'closed-loop' && x.target === t.id)),
  );
  if (edges.length === 0 || closed === undefined) return;
  w.line('## Worker-count sweep');
  w.line();
  w.line(
    `The closed-loop measurement (${closed.label}) for each \`workers.count\`. ` +
      'Main-thread µs/req is the CPU of the edge process\'s main thread (the scheduler, and the whole data path when workers.count is 0) per request; ' +
      'the per-thread split (medians, by thread name: edge-io-N are the I/O workers, V8Worker V8\'s GC and compiler helpers) shows where the rest went.',
  );
  w.line();
  w.table(
    ['workers.count', 'status', 'req/s', 'edge CPU s/1k req', 'edge main-thread µs/req', 'edge CPU µs/req by thread'],
    edges.map((t) => {
      const s = result.summaries.find((x) => x.scenario === 'closed-loop' && x.variant === closed.id && x.target === t.id);
      if (t.skipped !== undefined || s === undefined) return [String(t.workers), t.skipped ?? 'not measured', '', '', '', ''];
      const prefix = 'threadUsPerReq:edge:';
      const split = Object.entries(s.values)
        .filter(([key, v]) => key.startsWith(prefix) && v.median > 0)
        .sort((a, b) => b[1].median - a[1].median)
        .map(([key, v]) => `${key.slice(prefix.length)} ${fmt(v.median, 1)}`)
        .join(', ');
      return ['' + t.workers, isClean(s) ? 'measured' : `measured ⚠ ${s.errors} errors, ${s.non2xx} non-2xx`, cell(s.values.rps, 0), cell(s.values['cpu1k:edge'], 3), cell(s.values['mainUsPerReq:edge'], 1), split];
    }),
  );
  for (const chart of charts.filter((c) => c.section === 'worker-sweep')) w.line(`![${chart.title}](${chart.name})`);
  w.line();
  writeSchedulerRings(w, result, closed.id);
}

/** The scheduler thread's own capacity, and the many-core projection that combines it with the sweep. */
function writeSchedulerRings(w: Writer, result: BenchResult, closedVariant: string): void {
  const cases = result.schedulerRings;
  if (cases === undefined || cases.length === 0) return;
  w.line('### Scheduler thread over the rings');
  w.line();
  w.line(
    'The main thread alone (`npm run bench:rings`, run after the targets stopped): the edge\'s own WorkerPool, ring drains and scheduler, ' +
      'fed by synthetic load workers that speak the same rings but do no HTTP; each keeps N requests admitted and, on every grant, releases the lease and admits the next. ' +
      'At one request in flight every request costs a cross-thread wake-up; with more in flight the records of one event-loop turn share one.',
  );
  w.line();
  w.table(
    ['load workers', 'in flight per worker', 'req/s', 'main-thread µs/req', 'main thread busy', 'load worker µs/req'],
    cases.map((c) => [String(c.workers), String(c.inflightPerWorker), fmt(c.requestsPerSec, 0), fmt(c.mainUsPerRequest, 2), `${fmt(c.mainCpuShare * 100, 0)}%`, fmt(c.workerUsPerRequest, 2)]),
  );
  const saturated = cases.reduce((best, c) => (c.requestsPerSec > best.requestsPerSec ? c : best));
  const oneWorker = result.targets.find((t) => t.workers === 1 && t.skipped === undefined);
  const sweep = oneWorker && result.summaries.find((x) => x.scenario === 'closed-loop' && x.variant === closedVariant && x.target === oneWorker.id);
  // Everything but the main thread, V8's helper threads included: an I/O worker's whole cost per request.
  const edgeCpu1k = sweep?.values['cpu1k:edge']?.median;
  const mainUs = sweep?.values['mainUsPerReq:edge']?.median;
  if (edgeCpu1k === undefined || mainUs === undefined) return;
  if (sweep !== undefined && !isClean(sweep)) {
    w.line(`No 16-core projection: the w=1 measurement it rests on had ${sweep.errors} errors and ${sweep.non2xx} non-2xx answers.`);
    w.line();
    return;
  }
  const workerUs = edgeCpu1k * 1000 - mainUs;
  if (!(workerUs > 0)) return;
  const cores = 16;
  const workersRps = ((cores - 1) * 1e6) / workerUs;
  const mainRps = 1e6 / saturated.mainUsPerRequest;
  w.line(
    `**Projection, not a measurement** (no ${cores}-core host was measured): the ceiling for a ${cores}-core host, ${cores - 1} I/O workers and the main thread, from this ${result.machine.cores}-core run's figures: ` +
      `min(${cores - 1} × 1e6 / ${fmt(workerUs, 1)} µs (edge CPU per request at w=1 above, less its main thread: the worker and V8's helper threads), 1e6 / ${fmt(saturated.mainUsPerRequest, 2)} µs (main thread per request when saturated)) ` +
      `= min(${fmt(workersRps, 0)}, ${fmt(mainRps, 0)}) ≈ **${fmt(Math.min(workersRps, mainRps), 0)} req/s**, ${workersRps <= mainRps ? 'bounded by the workers' : 'bounded by the main thread'}. ` +
      'The main thread\'s cost per request only falls as load rises (fewer wake-ups per request), so its low-load figure in the sweep is no bound. ' +
      'Worker µs/request on this machine include the load generator and the other processes competing for the same cores.',
  );
  w.line();
}

function writeFlagged(w: Writer, result: BenchResult): void {
  const flagged = result.measurements.filter((m) => m.errors > 0 || m.non2xx > 0);
  if (flagged.length === 0) return;
  w.line('## Flagged measurements');
  w.line();
  w.line('These runs had transport errors, timeouts, unfinished streams or non-2xx answers. Their rows are marked ⚠ and every headline figure built on them is withheld.');
  w.line();
  w.table(
    ['scenario', 'variant', 'target', 'run', 'answered (2xx)', 'errors', 'non-2xx'],
    flagged.map((m) => [m.scenario, m.variant, m.target, String(m.rep + 1), fmt(m.requests, 0), fmt(m.errors, 0), fmt(m.non2xx, 0)]),
  );
}

function writeProblems(w: Writer, result: BenchResult): void {
  if (result.skips.length === 0 && result.failures.length === 0) return;
  w.line('## Skipped and failed measurements');
  w.line();
  const rows = [
    ...result.skips.map((s) => [s.scenario, s.variant, s.target, `skipped: ${s.reason}`]),
    ...result.failures.map((f) => [f.scenario, f.variant, f.target, `failed (run ${f.rep + 1}): ${f.reason}`]),
  ];
  w.table(['scenario', 'variant', 'target', 'what happened'], rows);
}

function writeConfigs(w: Writer, result: BenchResult): void {
  w.line('## Configuration used');
  w.line();
  w.line('<details><summary>Mode settings</summary>');
  w.line();
  w.line('```json');
  w.line(JSON.stringify(result.settings, null, 2));
  w.line('```');
  w.line();
  w.line('</details>');
  w.line();
  for (const t of result.targets) {
    for (const [name, text] of Object.entries(t.configs)) {
      w.line(`<details><summary>${t.label}: ${name}</summary>`);
      w.line();
      w.line('```');
      w.line(text.trimEnd());
      w.line('```');
      w.line();
      w.line('</details>');
      w.line();
    }
  }
}
