// "Noisy neighbour" (issue 19, docs/scheduling.md): tenant A floods an alias
// of capacity 4 with 50 concurrent requests (closed loop) while tenant B sends
// 2 requests a second (open loop). B's queue wait (x-edge-queue-ms) is
// measured with FIFO and with fair queuing, in the same run, on the same
// processes' builds: the edge, a node agent and the mock provider run as
// their own processes (built CLIs), restarted between the two phases so each
// starts from an empty queue. Goal: B's p99 wait <= 2 service times with
// fairness on.
//
//   npm run bench:fairness            (prints; `--save` writes bench/results/<stamp>-fairness.json)
//   node dist/bench/fairness.js [--seconds 20] [--service-ms 200] [--save]
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Agent } from 'undici';
import { DIST, NODE } from './harness/paths.js';
import { freePort } from './harness/ports.js';
import { saveMicroResult } from './harness/micro-result.js';
import { sha256Hex } from '../src/workers/http/client-auth.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '20' },
    'service-ms': { type: 'string', default: '200' },
    save: { type: 'boolean', default: false },
  },
  allowPositionals: true,
  strict: false,
});
const SECONDS = Number(values.seconds);
const SERVICE_MS = Number(values['service-ms']);
const CAPACITY = 4;
const FLOOD = 50;
const B_RATE_PER_S = 2;
const TOKENS = 4;
const KEY_A = 'sk-noisy-neighbour-a-000';
const KEY_B = 'sk-noisy-neighbour-b-000';

function start(script: string, args: string[]): ChildProcess {
  return spawn(NODE, [join(DIST, script), ...args], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, LOG_LEVEL: 'warn' } });
}

async function stop(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await Promise.race([once(child, 'exit'), sleep(3_000).then(() => child.kill('SIGKILL'))]);
    }),
  );
}

async function waitFor(url: string, init: RequestInit = {}): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      const res = await fetch(url, init);
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  throw new Error(`${url} never answered`);
}

function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

interface Waits {
  readonly n: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

function waits(xs: number[]): Waits {
  const sorted = [...xs].sort((a, b) => a - b);
  return { n: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted.at(-1) ?? NaN };
}

interface Phase {
  readonly policy: 'fifo' | 'fair';
  readonly b: Waits;
  readonly a: Waits;
  /** Measured service time (response time minus queue wait), B's median, ms. */
  readonly serviceMs: number;
  readonly bP99InServiceTimes: number;
  readonly errors: number;
  readonly aRequests: number;
}

async function phase(policy: 'fifo' | 'fair'): Promise<Phase> {
  const [mockPort, httpPort, grpcPort] = [await freePort(), await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'bench-fairness-'));
  const edgeConfig = join(dir, 'edge.json');
  const agentConfig = join(dir, 'agent.json');
  // The same keys in both phases; only scheduler.fairness differs.
  writeFileSync(
    edgeConfig,
    JSON.stringify({
      listen: { http: { host: '127.0.0.1', port: httpPort }, grpc: { host: '127.0.0.1', port: grpcPort } },
      workers: { count: 0 },
      scheduler: { fairness: policy === 'fair' },
      auth: { api_keys: [{ name: 'a', key_sha256: sha256Hex(KEY_A) }, { name: 'b', key_sha256: sha256Hex(KEY_B) }] },
      nodes: [{ id: 'n1', token: 'node-token', providers: [{ id: 'mock', type: 'openai_compat', capacity: CAPACITY }] }],
      models: [{ alias: 'bench', max_queue: 256, queue_timeout_ms: 120_000, providers: { mock: 'bench-served' } }],
    }),
  );
  writeFileSync(
    agentConfig,
    JSON.stringify({
      edge: { address: `127.0.0.1:${grpcPort}` },
      node: { id: 'n1', token: 'node-token' },
      providers: [{ id: 'mock', type: 'openai_compat', base_url: `http://127.0.0.1:${mockPort}` }],
      log_level: 'warn',
    }),
  );
  const interval = Math.round(SERVICE_MS / TOKENS);
  const children = [start('src/mock/cli.js', ['--port', String(mockPort), '--tokens', String(TOKENS), '--interval-ms', String(interval)]), start('src/edge/cli.js', ['--config', edgeConfig])];
  const url = `http://127.0.0.1:${httpPort}/v1/chat/completions`;
  const body = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'hello, how are you today?' }] });
  const dispatcher = new Agent({ connections: FLOOD + 32 });
  try {
    children.push(start('src/agent/cli.js', ['--config', agentConfig]));
    await waitFor(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY_B}` }, body });

    const post = async (key: string): Promise<{ ok: boolean; queueMs: number; totalMs: number }> => {
      const t0 = performance.now();
      try {
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body, dispatcher } as RequestInit);
        await res.arrayBuffer();
        return { ok: res.ok, queueMs: Number(res.headers.get('x-edge-queue-ms')), totalMs: performance.now() - t0 };
      } catch {
        return { ok: false, queueMs: NaN, totalMs: performance.now() - t0 };
      }
    };
    const deadline = performance.now() + SECONDS * 1000;
    const aWaits: number[] = [];
    const bWaits: number[] = [];
    const bService: number[] = [];
    let errors = 0;
    // A: 50 loops, each sending its next request as soon as the last one ends.
    const flood = Array.from({ length: FLOOD }, async () => {
      while (performance.now() < deadline) {
        const r = await post(KEY_A);
        if (r.ok) aWaits.push(r.queueMs);
        else errors++;
      }
    });
    // B: open loop, 2 a second, starting once A's flood has filled the queue.
    await sleep(1_000);
    const bRequests: Promise<void>[] = [];
    while (performance.now() < deadline - 1_000) {
      bRequests.push(
        post(KEY_B).then((r) => {
          if (!r.ok) {
            errors++;
            return;
          }
          bWaits.push(r.queueMs);
          bService.push(r.totalMs - r.queueMs);
        }),
      );
      await sleep(1000 / B_RATE_PER_S);
    }
    await Promise.all([...flood, ...bRequests]);
    const b = waits(bWaits);
    const serviceMs = waits(bService).p50;
    return { policy, b, a: waits(aWaits), serviceMs, bP99InServiceTimes: b.p99 / serviceMs, errors, aRequests: aWaits.length };
  } finally {
    await dispatcher.close();
    await stop(children);
  }
}

async function main(): Promise<void> {
  const started = new Date();
  const lines: string[] = [];
  const say = (line: string): void => {
    lines.push(line);
    console.log(line);
  };
  say(`noisy neighbour: capacity ${CAPACITY}, tenant A ${FLOOD} concurrent (closed loop), tenant B ${B_RATE_PER_S} req/s (open loop), ${SECONDS} s per policy, service ~${SERVICE_MS} ms`);
  const results: Phase[] = [];
  for (const policy of ['fifo', 'fair'] as const) {
    const r = await phase(policy);
    results.push(r);
    say(
      `${policy.padEnd(4)}  B wait p50 ${r.b.p50.toFixed(0)} ms  p99 ${r.b.p99.toFixed(0)} ms  max ${r.b.max.toFixed(0)} ms (n=${r.b.n})  = ${r.bP99InServiceTimes.toFixed(2)} service times (${r.serviceMs.toFixed(0)} ms)` +
        `  |  A wait p50 ${r.a.p50.toFixed(0)} ms p99 ${r.a.p99.toFixed(0)} ms (n=${r.aRequests})  errors ${r.errors}`,
    );
  }
  const fair = results[1];
  say(`goal (B p99 <= 2 service times with fairness): ${fair.bP99InServiceTimes <= 2 && fair.errors === 0 ? 'met' : 'NOT met'}`);
  const file = saveMicroResult('fairness', started, results, lines);
  if (file !== undefined) console.log(`saved ${file}`);
}

await main();
