// The scheduler thread's capacity over the real rings. The main thread runs
// the edge's own SchedulerDriver and WorkerPool (ring drains, record decode,
// scheduler, grant encode); the pool's workers are synthetic load workers
// that speak the same rings through the edge's RemoteScheduler but do no
// HTTP: each keeps `inflight` requests admitted, and on every grant releases
// the lease and admits the next request. So the main thread's CPU per
// request is measured without HTTP and gRPC taking the two cores a small
// machine has, at loads the full edge cannot reach here.
//   npm run bench:rings [-- --workers=1,2 --inflight=1,4,16,64 --seconds=3] [-- --save[=DIR]]
// (--save: also bench/results/<stamp>-rings.json with the machine and commit)
// Prints one table and one JSON line per case.
import os from 'node:os';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { saveMicroResult } from './harness/micro-result.js';
import { parseEdgeConfig } from '../src/main/config.js';
import { SchedulerDriver } from '../src/main/scheduler-driver.js';
import type { Grant } from '../src/contract/scheduler.js';
import { WorkerPool } from '../src/main/worker-pool.js';
import type { EdgeConfig, NodeConfig } from '../src/shared/config-types.js';
import { NO_TLS } from '../src/shared/tls-material.js';
import { ID_STRIDE } from '../src/contract/scheduler-port.js';
import type { ControlRequest, IoWorkerData } from '../src/contract/io-protocol.js';
import { RemoteScheduler } from '../src/workers/remote-scheduler.js';
import type { DecisionHandler, NodeRegistrar } from '../src/contract/scheduler-port.js';

/** What a load worker reports (its 'metrics' reply). */
interface LoadStats {
  readonly granted: number;
  readonly rejected: number;
  readonly cpuUs: number;
}

/** One line of output (the harness reads these: bench/harness/scheduler-capacity.ts). */
export interface CaseResult {
  readonly workers: number;
  readonly inflightPerWorker: number;
  readonly seconds: number;
  readonly requestsPerSec: number;
  readonly mainUsPerRequest: number;
  /** Main thread busy share of one core over the window. */
  readonly mainCpuShare: number;
  readonly workerUsPerRequest: number;
  readonly rejected: number;
}

function threadCpuUs(): number {
  const usage = (process as unknown as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage?.() ?? process.cpuUsage();
  return usage.user + usage.system;
}

// --- main thread ------------------------------------------------------------------

function listArg(name: string, fallback: number[]): number[] {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (arg === undefined) return fallback;
  return arg
    .slice(name.length + 3)
    .split(',')
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
}

/** One node per worker (4 providers each, capacity far above the load), one model on all of them. */
function benchConfig(workers: number): EdgeConfig {
  const nodes: NodeConfig[] = [];
  const providers = new Map<string, string>();
  for (let n = 0; n < workers; n++) {
    const list = [];
    for (let p = 0; p < 4; p++) {
      const id = `n${n}-p${p}`;
      list.push({ id, type: 'vllm' as const, capacity: 100_000, maxContextTokens: 131_072, enabled: true });
      providers.set(id, 'llama3:8b');
    }
    nodes.push({ id: `n${n}`, token: 't', providers: list });
  }
  const defaults = parseEdgeConfig({ nodes: [], models: [] }, 'defaults');
  return { ...defaults, workers: { count: workers }, nodes, models: [{ alias: 'chat', providers, maxQueue: 1_000_000, queueTimeoutMs: 60_000 }] };
}

function sum(stats: LoadStats[], field: keyof LoadStats): number {
  return stats.reduce((total, s) => total + s[field], 0);
}

async function runCase(workers: number, inflight: number, seconds: number): Promise<CaseResult> {
  process.env.RINGS_BENCH_INFLIGHT = String(inflight);
  const config = benchConfig(workers);
  const driver = new SchedulerDriver(config);
  const pool = new WorkerPool(workers, driver, pino({ level: 'silent' }), () => {}, NO_TLS, new URL(import.meta.url));
  await pool.start(config, 'silent');
  await new Promise((resolve) => setTimeout(resolve, Math.min(500, seconds * 500)));
  const before = await pool.callAll<LoadStats>({ type: 'metrics' });
  const cpuBefore = threadCpuUs();
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const after = await pool.callAll<LoadStats>({ type: 'metrics' });
  const cpuAfter = threadCpuUs();
  const elapsedMs = performance.now() - t0;
  await pool.close();
  const requests = sum(after, 'granted') - sum(before, 'granted');
  const workerCpu = sum(after, 'cpuUs') - sum(before, 'cpuUs');
  return {
    workers,
    inflightPerWorker: inflight,
    seconds,
    requestsPerSec: Math.round((requests * 1000) / elapsedMs),
    mainUsPerRequest: round2((cpuAfter - cpuBefore) / requests),
    mainCpuShare: round2((cpuAfter - cpuBefore) / (elapsedMs * 1000)),
    workerUsPerRequest: round2(workerCpu / requests),
    rejected: sum(after, 'rejected') - sum(before, 'rejected'),
  };
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

async function main(): Promise<void> {
  const started = new Date();
  const workerCounts = listArg('workers', [1]);
  const inflights = listArg('inflight', [1, 4, 16, 64, 256]);
  const secondsArg = process.argv.find((a) => a.startsWith('--seconds='));
  const seconds = secondsArg === undefined ? 3 : Number(secondsArg.slice('--seconds='.length));
  if (!(seconds > 0)) throw new RangeError(`--seconds: expected a positive number, got '${secondsArg}'`);
  const text = [
    `scheduler over rings: ${os.cpus().length} cores, Node ${process.version}, ${seconds} s per case`,
    'workers  in flight/worker    req/s  main µs/req  main busy  worker µs/req',
  ];
  for (const line of text) console.log(line);
  const results: CaseResult[] = [];
  for (const workers of workerCounts) {
    for (const inflight of inflights) {
      const r = await runCase(workers, inflight, seconds);
      results.push(r);
      const line =
        `${String(r.workers).padStart(7)}  ${String(r.inflightPerWorker).padStart(16)}  ${String(r.requestsPerSec).padStart(7)}  ${r.mainUsPerRequest.toFixed(2).padStart(11)}  ${(r.mainCpuShare * 100).toFixed(0).padStart(8)}%  ${r.workerUsPerRequest.toFixed(2).padStart(13)}`;
      text.push(line);
      console.log(line);
    }
  }
  for (const r of results) console.log(JSON.stringify(r));
  const saved = saveMicroResult('rings', started, results, text);
  if (saved !== undefined) console.log(`saved ${saved}`);
}

// --- synthetic load worker --------------------------------------------------------------

/** Keeps `inflight` requests admitted: every grant is released at once and replaced. */
class ClosedLoopLoad implements DecisionHandler, NodeRegistrar {
  granted = 0;
  rejected = 0;
  private nextId: number;
  private started = false;

  constructor(
    private readonly port: RemoteScheduler,
    private readonly index: number,
    private readonly inflight: number,
  ) {
    this.nextId = index;
  }

  onConnected(): void {
    if (this.started) return;
    this.started = true;
    for (let i = 0; i < this.inflight; i++) this.admitNext();
  }

  onFence(): void {}

  onGrant(grant: Grant): void {
    this.granted++;
    this.port.release(grant.leaseId, 'end');
    this.admitNext();
  }

  onReject(): void {
    this.rejected++;
    this.admitNext();
  }

  onRequeueRefused(): void {}
  onRequeueAccepted(): void {}
  onStaleChecked(): void {}

  private admitNext(): void {
    this.nextId += ID_STRIDE;
    this.port.admit({ requestId: this.nextId, alias: 'chat', estimatedTokens: 100, directNodeId: undefined });
  }

  stats(): LoadStats {
    return { granted: this.granted, rejected: this.rejected, cpuUs: threadCpuUs() };
  }
}

function runLoadWorker(data: IoWorkerData): void {
  const port = new RemoteScheduler(data.toMain, data.fromMain);
  const load = new ClosedLoopLoad(port, data.index, Number(process.env.RINGS_BENCH_INFLIGHT ?? 1));
  port.setHandler(load);
  port.setRegistrar(load);
  const running = port.run((err) => {
    console.error(err);
    process.exit(1);
  });
  port.register(`n${data.index}`, 1, [0, 1, 2, 3].map((p) => `n${data.index}-p${p}`));
  parentPort?.on('message', (request: ControlRequest) => {
    if (request.type === 'metrics') {
      parentPort?.postMessage({ type: 'reply', id: request.id, value: load.stats() });
    } else if (request.type === 'close') {
      port.close();
      parentPort?.postMessage({ type: 'reply', id: request.id });
      void running.then(() => process.exit(0));
    } else {
      parentPort?.postMessage({ type: 'reply', id: request.id, error: `load worker: ${request.type} not supported` });
    }
  });
  parentPort?.postMessage({ type: 'ready', value: { httpPort: 0, grpcPort: 0 } });
}

// Last: the class above must be initialised before a worker uses it.
if (isMainThread) await main();
else runLoadWorker(workerData as IoWorkerData);
