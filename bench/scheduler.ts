// Scheduler microbenchmark: admit+release throughput of the pure state
// machine, with no I/O around it.
//   queued:    2 nodes x 4 providers x capacity 8 (64 slots) and 1,000
//              requests kept waiting. Each pair: release the oldest lease (the
//              pump grants the queue head), admit a new request (queued at
//              the tail). This is the pump's worst steady state.
//   immediate: the same pool, nothing waits: admit (granted at once) and
//              release (nothing to pump).
// Run: npm run bench:scheduler [-- PAIRS] [-- --save[=DIR]] (--save: bench/results/<stamp>-scheduler.json)
import { parseEdgeConfig } from '../src/main/config.js';
import os from 'node:os';
import { saveMicroResult } from './harness/micro-result.js';
import { Scheduler } from '../src/main/scheduler/scheduler.js';
import type { AdmitRequest, Grant, RejectCode, SchedulerSink } from '../src/contract/scheduler.js';
import type { EdgeConfig, NodeConfig } from '../src/shared/config-types.js';

/** Every limit at its documented default (the scheduler reads none of them). */
const DEFAULT_LIMITS = parseEdgeConfig({ nodes: [], models: [] }, 'defaults').limits;

const NODES = 2;
const PROVIDERS_PER_NODE = 4;
const CAPACITY = 8;
const SLOTS = NODES * PROVIDERS_PER_NODE * CAPACITY;
const KEPT_QUEUED = 1_000;
const PAIRS = Number(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 1_000_000);
const STARTED = new Date();

function benchConfig(): EdgeConfig {
  const nodes: NodeConfig[] = [];
  const providers = new Map<string, string>();
  for (let n = 0; n < NODES; n++) {
    const list = [];
    for (let p = 0; p < PROVIDERS_PER_NODE; p++) {
      const id = `n${n}-p${p}`;
      list.push({ id, type: 'vllm' as const, capacity: CAPACITY, maxContextTokens: 131_072, enabled: true });
      providers.set(id, 'llama3:8b');
    }
    nodes.push({ id: `n${n}`, token: 't', providers: list });
  }
  return {
    http: { host: '127.0.0.1', port: 0 },
    grpc: { host: '127.0.0.1', port: 0 },
    limits: DEFAULT_LIMITS,
    heartbeat: { intervalMs: 5_000, timeoutMs: 15_000 },
    scheduler: { longContextThresholdTokens: 32_768 },
    workers: { count: 0 },
    nodes,
    models: [{ alias: 'chat', providers, maxQueue: KEPT_QUEUED * 2, queueTimeoutMs: 3_600_000 }],
  };
}

/** Keeps live lease ids in grant order (a ring), so the oldest can be released. */
class LeaseRing implements SchedulerSink {
  private readonly ids = new Float64Array(SLOTS + 1);
  private head = 0;
  private tail = 0;
  grants = 0;
  rejects = 0;

  grant(grant: Grant): void {
    this.ids[this.tail] = grant.leaseId;
    this.tail = (this.tail + 1) % this.ids.length;
    this.grants++;
  }

  reject(_requestId: number, _code: RejectCode, _retryAfterSec: number): void {
    this.rejects++;
  }

  retryRefused(_requestId: number): void {
    this.rejects++;
  }

  shift(): number {
    if (this.head === this.tail) throw new Error('no live lease');
    const id = this.ids[this.head];
    this.head = (this.head + 1) % this.ids.length;
    return id;
  }
}

interface Result {
  readonly scenario: string;
  readonly pairs: number;
  readonly nsPerPair: number;
  readonly pairsPerSec: number;
  readonly callsPerSec: number;
}

function run(scenario: 'queued' | 'immediate', pairs: number): Result {
  const ring = new LeaseRing();
  const s = new Scheduler(benchConfig(), ring);
  let now = 0;
  for (let n = 0; n < NODES; n++) s.connect(`n${n}`, now);
  let requestId = 0;
  const request = { requestId: 0, alias: 'chat', estimatedTokens: 512, directNodeId: undefined } as {
    -readonly [K in keyof AdmitRequest]: AdmitRequest[K];
  };
  const waiting = scenario === 'queued' ? KEPT_QUEUED : 0;
  const initial = scenario === 'queued' ? SLOTS + waiting : SLOTS - 1;
  for (let i = 0; i < initial; i++) {
    request.requestId = ++requestId;
    s.admit(request, now);
  }
  if (s.status().groups[0].queueDepth !== waiting) throw new Error('setup: wrong queue depth');

  const loop = (count: number): void => {
    for (let i = 0; i < count; i++) {
      now += 0.001;
      if (scenario === 'queued') {
        s.release(ring.shift(), 'end', now); // the pump grants the queue head
        request.requestId = ++requestId;
        s.admit(request, now); // joins the tail
      } else {
        request.requestId = ++requestId;
        s.admit(request, now); // granted at once
        s.release(ring.shift(), 'end', now);
      }
    }
  };
  loop(Math.min(100_000, pairs)); // warm up the JIT
  const grantsBefore = ring.grants;
  const start = process.hrtime.bigint();
  loop(pairs);
  const elapsedNs = Number(process.hrtime.bigint() - start);

  const status = s.status();
  const errors = s.checkInvariants();
  if (errors.length > 0) throw new Error(`invariants: ${errors.join('; ')}`);
  if (ring.grants - grantsBefore !== pairs || ring.rejects !== 0) throw new Error('every pair must grant exactly once');
  if (status.groups[0].queueDepth !== waiting || status.liveLeases !== (scenario === 'queued' ? SLOTS : SLOTS - 1)) {
    throw new Error('steady state drifted');
  }
  const nsPerPair = elapsedNs / pairs;
  return {
    scenario,
    pairs,
    nsPerPair: Math.round(nsPerPair),
    pairsPerSec: Math.round(1e9 / nsPerPair),
    callsPerSec: Math.round(2e9 / nsPerPair),
  };
}

const results = [run('queued', PAIRS), run('immediate', PAIRS)];
const machine = { node: process.version, cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length };
console.log(JSON.stringify({ bench: 'scheduler', slots: SLOTS, keptQueued: KEPT_QUEUED, machine, results }));
const text = results.map(
  (r) =>
    `scheduler ${r.scenario}: ${r.pairs.toLocaleString('en')} admit+release pairs, ` +
    `${r.nsPerPair} ns/pair, ${r.pairsPerSec.toLocaleString('en')} pairs/s ` +
    `(${r.callsPerSec.toLocaleString('en')} calls/s)` +
    (r.scenario === 'queued' ? `, ${KEPT_QUEUED} waiting, ${SLOTS} slots` : ''),
);
for (const line of text) console.log(line);
const saved = saveMicroResult('scheduler', STARTED, { slots: SLOTS, keptQueued: KEPT_QUEUED, cases: results }, text);
if (saved !== undefined) console.log(`saved ${saved}`);
