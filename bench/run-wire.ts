// Run-report hand-off microbenchmark: what it costs an I/O worker and the
// main thread to move a request's run reports (queued, dispatched, first
// byte, finished) into the main thread's run records, as structured-cloned
// RunEvent objects against the run wire (src/contract/run-wire.ts). A real
// worker thread builds the reports as the edge's observer does and posts
// them in batches of 12 requests (the edge's 2 ms batches at ~6,000 req/s);
// the main thread reads them into a real RunStore. CPU per request is each
// thread's own (process.threadCpuUsage), the building of the reports
// included in both modes. Modes alternate, and each figure is the median.
// Each round checks that every report arrived and every run finished.
//   npm run bench:run-wire [-- --quick] [-- --save[=DIR]]
import { once } from 'node:events';
import os from 'node:os';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { saveMicroResult } from './harness/micro-result.js';
import { RunWireDecoder, RunWireEncoder, type RunWireBatch } from '../src/contract/run-wire.js';
import type { RunEvent } from '../src/contract/events.js';
import { RunStore } from '../src/main/runs/run-store.js';

type Mode = 'objects' | 'wire';
const PER_BATCH = 12;

interface WorkerJob {
  readonly mode: Mode;
  readonly batches: number;
  readonly first: number;
}

export interface RunWireCase {
  readonly mode: Mode;
  /** The worker's CPU per request: building the reports, encoding, posting. */
  readonly workerUs: number;
  /** The main thread's CPU per request: receiving, decoding, the run records. */
  readonly mainUs: number;
}

function reports(n: number): RunEvent[] {
  const runId = `run-mhx1abc-${n.toString(36)}`;
  const now = Date.now();
  return [
    { type: 'run.queued', runId, requestId: runId, model: 'bench-model', session: 'default', at: now },
    { type: 'run.dispatched', runId, model: 'bench-model', node: 'node-1', provider: 'mock-a', adapter: 'http', attempt: 1, queueMs: 0.021, at: now },
    { type: 'run.first_byte', runId, model: 'bench-model', ttfbMs: 0.9, at: now },
    { type: 'run.finished', runId, requestId: runId, model: 'bench-model', node: 'node-1', provider: 'mock-a', status: 200, outcome: 'end', totalMs: 1.2, queueMs: 0.021, bytesOut: 512, at: now, tokens: { prompt: 10, completion: 20 } },
  ];
}

function produce(job: WorkerJob): void {
  const port = parentPort;
  if (port === null) throw new Error('not a worker');
  const encoder = new RunWireEncoder();
  const start = process.threadCpuUsage();
  let n = job.first;
  for (let b = 0; b < job.batches; b++) {
    const events: RunEvent[] = [];
    for (let i = 0; i < PER_BATCH; i++) events.push(...reports(n++));
    if (job.mode === 'objects') {
      port.postMessage({ type: 'runs', events });
    } else {
      const batch = encoder.encode(events);
      port.postMessage(batch, [batch.numbers.buffer]);
    }
  }
  const used = process.threadCpuUsage(start);
  port.postMessage({ type: 'done', cpuUs: used.user + used.system });
}

async function measure(mode: Mode, batches: number, first: number): Promise<RunWireCase> {
  const store = new RunStore({ active: false, publish: () => undefined });
  const decoder = new RunWireDecoder();
  const worker = new Worker(new URL(import.meta.url), { workerData: { mode, batches, first } satisfies WorkerJob });
  let workerCpu = -1;
  let received = 0;
  let reportsIn = 0;
  // From the first message's arrival to the last one's records: the structured clone's reading happens
  // before the handler runs, so the handler alone would miss it. The main thread does nothing else meanwhile.
  let mainStart: NodeJS.CpuUsage | undefined;
  let mainCpu = 0;
  const done = new Promise<void>((resolve) => {
    worker.on('message', (message: RunWireBatch | { type: 'runs'; events: RunEvent[] } | { type: 'done'; cpuUs: number }) => {
      if (message.type === 'done') {
        workerCpu = message.cpuUs;
      } else {
        mainStart ??= process.threadCpuUsage();
        const events = message.type === 'runs' ? message.events : decoder.decode(message);
        reportsIn += events.length;
        store.runs(events);
        if (++received === batches) {
          const used = process.threadCpuUsage(mainStart);
          mainCpu = used.user + used.system;
        }
      }
      if (workerCpu >= 0 && received === batches) resolve();
    });
  });
  await done;
  await worker.terminate();
  // Every report arrived, and every run finished in the records (they keep the newest maxFinished).
  if (reportsIn !== batches * PER_BATCH * 4) throw new Error(`${mode}: ${reportsIn} reports of ${batches * PER_BATCH * 4} arrived`);
  if (store.size !== Math.min(batches * PER_BATCH, store.maxFinished) || store.list({ state: 'running' }).length > 0) throw new Error(`${mode}: the run records hold ${store.size} runs`);
  const requests = batches * PER_BATCH;
  return { mode, workerUs: workerCpu / requests, mainUs: mainCpu / requests };
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (us: number): number => Math.round(us * 100) / 100;

async function main(): Promise<void> {
  const started = new Date();
  const quick = process.argv.includes('--quick');
  const batches = quick ? 2_000 : 10_000;
  const rounds = quick ? 3 : 7;
  const text = [
    `run reports, worker -> main: ${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${os.availableParallelism()} cores, Node ${process.version}; ${batches} batches of ${PER_BATCH} requests (4 reports each), median of ${rounds} rounds`,
    'mode      worker µs/request   main thread µs/request',
  ];
  console.log(text[0]);
  console.log(text[1]);
  const samples: Record<Mode, RunWireCase[]> = { objects: [], wire: [] };
  let first = 0;
  // A first round of each unrecorded: the JIT warms up.
  for (let r = -1; r < rounds; r++) {
    for (const mode of ['objects', 'wire'] as const) {
      const c = await measure(mode, batches, first);
      first += batches * PER_BATCH;
      if (r >= 0) samples[mode].push(c);
    }
  }
  const results: RunWireCase[] = (['objects', 'wire'] as const).map((mode) => ({
    mode,
    workerUs: round(median(samples[mode].map((c) => c.workerUs))),
    mainUs: round(median(samples[mode].map((c) => c.mainUs))),
  }));
  for (const r of results) {
    const line = `${r.mode.padEnd(8)}  ${String(r.workerUs).padStart(17)}  ${String(r.mainUs).padStart(22)}`;
    text.push(line);
    console.log(line);
  }
  console.log(JSON.stringify({ bench: 'run-wire', results }));
  const file = saveMicroResult('run-wire', started, results, text);
  if (file !== undefined) console.log(`saved ${file}`);
}

if (isMainThread) await main();
else produce(workerData as WorkerJob);
