// Interleaved A/B of the 2-hop closed loop: two builds of the gateway (a base
// checkout's dist and this one's), measured in alternating rounds against one
// mock, so the noise of a shared machine (other processes taking the cores
// for a while) falls on both alike. Prints req/s and CPU µs per request of
// the edge and the agent per round and their medians. It complements the
// one-shot `npm run bench:quick` figures quoted in each lever's commit.
//
//   node dist/bench/profile/ab.js --base /tmp/base/dist [--rounds 5] [--seconds 3] [--workers 0]
//                                 [--scenario closed-loop|streaming|many-streams|large-body] [--streams 2000] [--body-kb 1024]
//                                 [--base-node-args "..."] [--node-args "..."]
//                                 [--warmup 1] [--gc]
// --scenario streaming: 10 SSE streams of 200 chunks back to back, closed
// loop; the figures are then per relayed event instead of per request.
// --scenario many-streams: --streams slow streams (5 tokens/s, opened at
// 1,000/s) lasting the whole window, per relayed event too (their setup
// included): the per-token path of the 10,000-stream goal, at a size a
// short A/B can afford.
// --scenario large-body: uploads of --body-kb (1 MB) on 2 connections,
// closed loop, per request: the long-prompt path (copies, GC of big buffers).
// The node-args options give each side's edge and agent extra Node flags, so
// one build can be A/B'd against itself with a flag (e.g. a V8 heap setting).
// --warmup S: unrecorded load before each round's window (V8 reaches its
// steady heap only after several seconds at full rate). --gc: both sides run
// with --trace-gc-nvp, and each round also prints the edge's and the agent's
// collections within its window (gc-nvp.ts).
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chatBody } from '../harness/bodies.js';
import { postOk } from '../harness/http-probe.js';
import { answers } from '../harness/http-probe.js';
import { DIST, NODE } from '../harness/paths.js';
import { freePort } from '../harness/ports.js';
import { CLK_TCK, processTicks, statusKb } from '../harness/proc-stats.js';
import { Supervisor } from '../harness/processes.js';
import { closedLoop } from '../load/autocannon-load.js';
import { streamLoad } from '../load/stream-load.js';
import { startMock } from '../targets/mock.js';
import { agentConfigObject, edgeConfigObject, EDGE_MODEL } from '../targets/edge.js';
import { formatGc, summariseGcNvp } from './gc-nvp.js';
import { arg } from './cli-arg.js';

const baseDist = arg('base', '');
if (baseDist === '') throw new Error('--base DIST is required');
const rounds = Number(arg('rounds', '5'));
const seconds = Number(arg('seconds', '3'));
const workers = Number(arg('workers', '0'));
const scenario = arg('scenario', 'closed-loop');
if (scenario !== 'closed-loop' && scenario !== 'streaming' && scenario !== 'many-streams' && scenario !== 'large-body') throw new RangeError(`--scenario: closed-loop, streaming, many-streams or large-body, got '${scenario}'`);
const unit = scenario === 'closed-loop' || scenario === 'large-body' ? 'req' : 'event';
const bodyKb = Number(arg('body-kb', '1024'));
const slowStreams = Number(arg('streams', '2000'));
const baseNodeArgs = arg('base-node-args', process.env.BENCH_NODE_ARGS ?? '');
const thisNodeArgs = arg('node-args', process.env.BENCH_NODE_ARGS ?? '');
const warmupS = Number(arg('warmup', '1'));
const traceGc = process.argv.includes('--gc');
const workDir = mkdtempSync(join(tmpdir(), 'edge-ab-'));
const supervisor = new Supervisor(workDir);
supervisor.stopWithProcess();

interface Row {
  readonly rps: number;
  readonly edgeUs: number;
  readonly agentUs: number;
  /** Peak RSS of the edge and the agent, MB (their whole life: warm-up and window). */
  readonly edgeMb: number;
  readonly agentMb: number;
  /** --gc: the window's collections, edge then agent. */
  readonly gc?: readonly [string, string];
}

/** What a log gained since `from` bytes. */
function logSince(file: string, from: number): string {
  return readFileSync(file).subarray(from).toString('utf8');
}

async function measure(variant: string, dist: string, mockOrigin: string): Promise<Row> {
  const [httpPort, grpcPort] = [await freePort(), await freePort()];
  const edgeFile = join(workDir, `${variant}-edge.yaml`);
  writeFileSync(edgeFile, JSON.stringify(edgeConfigObject(workers, httpPort, grpcPort, undefined)));
  const edge = supervisor.spawn(`${variant}-edge`, NODE, [join(dist, 'src/edge/cli.js'), '--config', edgeFile]);
  const origin = `http://127.0.0.1:${httpPort}`;
  await supervisor.waitReady(edge, () => answers(`${origin}/healthz`));
  const agentFile = join(workDir, `${variant}-agent.yaml`);
  writeFileSync(agentFile, JSON.stringify(agentConfigObject(grpcPort, mockOrigin, Math.max(1, workers))));
  const agent = supervisor.spawn(`${variant}-agent`, NODE, [join(dist, 'src/agent/cli.js'), '--config', agentFile]);
  const body = chatBody(EDGE_MODEL, 2048);
  const url = `${origin}/v1/chat/completions`;
  await supervisor.waitReady(agent, () => postOk(url, {}, body));
  const load = async (durationS: number): Promise<{ units: number; wallS: number; failed: number }> => {
    if (scenario === 'closed-loop') {
      const r = await closedLoop({ url, headers: {}, body, connections: 10, durationS });
      return { units: r.requests, wallS: r.wallS, failed: r.errors + r.non2xx };
    }
    if (scenario === 'large-body') {
      const r = await closedLoop({ url, headers: {}, body: chatBody(EDGE_MODEL, bodyKb * 1024), connections: 2, durationS });
      return { units: r.requests, wallS: r.wallS, failed: r.errors + r.non2xx };
    }
    if (scenario === 'many-streams') {
      const tokens = Math.max(1, Math.round(durationS * 5));
      const headers = { 'x-mock-tokens': String(tokens), 'x-mock-interval-ms': '200', 'x-mock-ttft-ms': '0' };
      const r = await streamLoad({ origin, path: '/v1/chat/completions', headers, body: chatBody(EDGE_MODEL, 512, true), concurrency: slowStreams, openPerSecond: 1_000, minEvents: tokens, stallMs: 2_000, deadlineS: durationS * 3 + 30 });
      return { units: r.metrics.eventsPerS * r.wallS, wallS: r.wallS, failed: r.errors + r.non2xx + r.metrics.incomplete };
    }
    const r = await streamLoad({ origin, path: '/v1/chat/completions', headers: STREAM_HEADERS, body: chatBody(EDGE_MODEL, 512, true), concurrency: 10, durationS, minEvents: 200, stallMs: 2_000, deadlineS: durationS + 30 });
    return { units: r.metrics.eventsPerS * r.wallS, wallS: r.wallS, failed: r.errors + r.non2xx + r.metrics.incomplete };
  };
  await load(warmupS);
  const [e0, a0] = [processTicks(edge.pid), processTicks(agent.pid)];
  const [edgeLog0, agentLog0] = [statSync(edge.logFile).size, statSync(agent.logFile).size];
  const result = await load(seconds);
  const [e1, a1] = [processTicks(edge.pid), processTicks(agent.pid)];
  const [edgeMb, agentMb] = [statusKb(edge.pid, 'VmHWM') / 1024, statusKb(agent.pid, 'VmHWM') / 1024];
  const gc = traceGc ? ([formatGc(summariseGcNvp(logSince(edge.logFile, edgeLog0))), formatGc(summariseGcNvp(logSince(agent.logFile, agentLog0)))] as const) : undefined;
  await agent.stop();
  await edge.stop();
  const perUnit = (ticks: number): number => (ticks / CLK_TCK / result.units) * 1e6;
  if (result.failed > 0) console.log(`  ${variant}: ${result.failed} failed`);
  return { rps: result.units / result.wallS, edgeUs: perUnit(e1 - e0), agentUs: perUnit(a1 - a0), edgeMb, agentMb, gc };
}

/** The mock's knobs for a burst stream: 200 chunks, back to back. */
const STREAM_HEADERS: Record<string, string> = { 'x-mock-tokens': '200', 'x-mock-interval-ms': '0', 'x-mock-ttft-ms': '0' };

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function main(): Promise<void> {
  const mock = await startMock(supervisor);
  const variants = [
    { name: 'base', dist: baseDist, nodeArgs: baseNodeArgs },
    { name: 'this', dist: DIST, nodeArgs: thisNodeArgs },
  ];
  const rows = new Map<string, Row[]>(variants.map((v) => [v.name, []]));
  for (let round = 1; round <= rounds; round++) {
    // Alternate which goes first, so neither always follows the other.
    const order = round % 2 === 1 ? variants : [...variants].reverse();
    for (const v of order) {
      // The supervisor passes BENCH_NODE_ARGS to every Node child it spawns from now on.
      process.env.BENCH_NODE_ARGS = traceGc ? `${v.nodeArgs} --trace-gc-nvp` : v.nodeArgs;
      const row = await measure(v.name, v.dist, mock.origin);
      rows.get(v.name)!.push(row);
      console.log(`round ${round} ${v.name.padEnd(4)}: ${row.rps.toFixed(0)} ${unit}/s, edge ${row.edgeUs.toFixed(1)} µs/${unit}, agent ${row.agentUs.toFixed(1)} µs/${unit}; peak RSS edge ${row.edgeMb.toFixed(0)} + agent ${row.agentMb.toFixed(0)} MB`);
      if (row.gc !== undefined) console.log(`  edge GC: ${row.gc[0]}\n  agent GC: ${row.gc[1]}`);
    }
  }
  for (const v of variants) {
    const r = rows.get(v.name)!;
    const edge = median(r.map((x) => x.edgeUs));
    const agent = median(r.map((x) => x.agentUs));
    console.log(`median ${v.name.padEnd(4)} (${rounds} rounds of ${seconds} s, w=${workers}, ${scenario}): ${median(r.map((x) => x.rps)).toFixed(0)} ${unit}/s, edge ${edge.toFixed(1)} + agent ${agent.toFixed(1)} = ${(edge + agent).toFixed(1)} µs CPU/${unit}; peak RSS edge ${median(r.map((x) => x.edgeMb)).toFixed(0)} + agent ${median(r.map((x) => x.agentMb)).toFixed(0)} MB`);
  }
  await supervisor.stopAll();
}

main().catch(async (err: unknown) => {
  console.error(err);
  await supervisor.stopAll();
  process.exitCode = 1;
});
