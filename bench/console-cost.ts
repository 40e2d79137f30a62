// Does an open operator console cost the data path anything? Runs the edge,
// a node agent and the mock provider as their own processes (built CLIs),
// then alternates closed-loop autocannon runs in three conditions, round
// after round:
//   none        no console;
//   subscriber  what an open console asks of the edge, without a browser:
//               /admin/events?runs=0 (node events) read to the end,
//               /admin/runs?limit=50 every second, /admin/status every
//               2 s and /admin/series every 5 s;
//   browser     the console itself, logged in, in headless Debian chromium.
// For each run it prints req/s, p99 and the edge process's CPU time per
// request (all its threads, from /proc), then the means per condition
// against the spread between runs of the same condition. On a small host
// the browser competes with the edge for the same cores: compare
// "subscriber" (the edge's own cost) with "browser" (plus the browser's).
//
//   npm run build && node dist/bench/console-cost.js [--rounds 3] [--seconds 10] [--connections 32] [--workers 0]
//
// The page polls the newest runs instead of streaming run events: a stream
// made the edge build and serialise two events per request while a page was
// open (-16 % req/s in bench/results/2026-12-01T15-18-29Z-console-cost.txt);
// a poll costs the same at any load. Verdict per condition: "within noise"
// when its mean req/s lies within the spread (max - min) of the runs
// without a console.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import puppeteer from 'puppeteer-core';
import { closedLoop } from './load/autocannon-load.js';
import { DIST, NODE } from './harness/paths.js';
import { freePort } from './harness/ports.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '32' },
    workers: { type: 'string', default: '0' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
  },
});
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const TOKEN = 'console-cost-token';

function start(script: string, args: string[]): ChildProcess {
  const child = spawn(NODE, [join(DIST, script), ...args], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, LOG_LEVEL: 'warn' } });
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal === null) console.error(`${script} exited with ${code}`);
  });
  return child;
}

async function waitFor(url: string, init: RequestInit = {}): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(url, init)).ok) return;
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  throw new Error(`${url} never answered`);
}

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** utime + stime of a process, ms (all threads). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ is 100 on Linux
}

/** CPU ms of a process and all its descendants (chromium runs a tree of them). */
function treeCpuMs(root: number): number {
  const parent = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  let total = 0;
  for (const pid of parent.keys()) {
    let p: number | undefined = pid;
    while (p !== undefined && p > 1 && p !== root) p = parent.get(p);
    if (p !== root) continue;
    try {
      total += cpuMs(pid);
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

type Condition = 'none' | 'subscriber' | 'browser';

/** What the console's page asks of the edge, done with fetch: the node events stream read to the end; runs, status and series polled. */
function subscribe(admin: string): () => void {
  const stop = new AbortController();
  const headers = { authorization: `Bearer ${TOKEN}` };
  void (async () => {
    try {
      const res = await fetch(`${admin}/admin/events?runs=0`, { headers, signal: stop.signal });
      for await (const _chunk of res.body as AsyncIterable<Uint8Array>) {
        // read and dropped, as a page that parses it would
      }
    } catch {
      // stopped
    }
  })();
  const poll = async (path: string, everyMs: number): Promise<void> => {
    while (!stop.signal.aborted) {
      try {
        await (await fetch(`${admin}${path}`, { headers, signal: stop.signal })).text();
      } catch {
        // stopped
      }
      await sleep(everyMs).catch(() => undefined);
    }
  };
  void poll('/admin/runs?limit=50', 1_000);
  void poll('/admin/status', 2_000);
  void poll('/admin/series', 5_000);
  return () => stop.abort();
}

async function main(): Promise<void> {
  const [mockPort, httpPort, grpcPort, adminPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'console-cost-'));
  const edgeConfig = join(dir, 'edge.json');
  const agentConfig = join(dir, 'agent.json');
  // JSON is YAML: the CLIs read either.
  writeFileSync(edgeConfig, JSON.stringify({
    listen: { http: { host: '127.0.0.1', port: httpPort }, grpc: { host: '127.0.0.1', port: grpcPort } },
    admin: { host: '127.0.0.1', port: adminPort, token: TOKEN },
    workers: { count: Number(values.workers) },
    nodes: [{ id: 'n1', token: 'node-token', providers: [{ id: 'mock', type: 'openai_compat', capacity: 1024 }] }],
    models: [{ alias: 'bench', max_queue: 4096, providers: { mock: 'bench-served' } }],
  }));
  writeFileSync(agentConfig, JSON.stringify({
    edge: { address: `127.0.0.1:${grpcPort}` },
    node: { id: 'n1', token: 'node-token' },
    providers: [{ id: 'mock', type: 'openai_compat', base_url: `http://127.0.0.1:${mockPort}` }],
    log_level: 'warn',
  }));
  const edge = start('src/edge/cli.js', ['--config', edgeConfig]);
  const children = [start('src/mock/cli.js', ['--port', String(mockPort), '--tokens', '4']), edge];
  await waitFor(`http://127.0.0.1:${adminPort}/admin/status`, { headers: { authorization: `Bearer ${TOKEN}` } });
  children.push(start('src/agent/cli.js', ['--config', agentConfig]));
  const url = `http://127.0.0.1:${httpPort}/v1/chat/completions`;
  const body = Buffer.from(JSON.stringify({ model: 'bench', stream: true, messages: [{ role: 'user', content: 'hi' }] }));
  await waitFor(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

  const browser = await puppeteer.launch({ executablePath: values.chromium, args: ['--no-sandbox', '--headless=new'], headless: true });
  const admin = `http://127.0.0.1:${adminPort}`;
  const browserPid = browser.process()?.pid as number;
  const results: { condition: Condition; reqPerS: number; p99: number; cpuUsPerReq: number; browserCores: number; errors: number }[] = [];
  try {
    await closedLoop({ url, headers: {}, body, connections: CONNECTIONS, durationS: 3 }); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const condition of ['none', 'subscriber', 'browser'] as const) {
        const page = condition === 'browser' ? await browser.newPage() : undefined;
        if (page !== undefined) {
          await page.setViewport({ width: 1280, height: 800 });
          await page.goto(`${admin}/console`);
          await page.type('#token', TOKEN);
          await page.keyboard.press('Enter');
          await page.waitForSelector('#conn[data-state="ok"]');
        }
        const unsubscribe = condition === 'subscriber' ? subscribe(admin) : undefined;
        await sleep(200);
        const cpuBefore = cpuMs(edge.pid as number);
        const browserBefore = treeCpuMs(browserPid);
        const r = await closedLoop({ url, headers: {}, body, connections: CONNECTIONS, durationS: SECONDS });
        const cpu = cpuMs(edge.pid as number) - cpuBefore;
        const browserCpu = treeCpuMs(browserPid) - browserBefore;
        unsubscribe?.();
        await page?.close();
        const row = { condition, reqPerS: r.requests / r.wallS, p99: r.latencyMs?.p99 ?? 0, cpuUsPerReq: (cpu * 1000) / Math.max(1, r.requests), browserCores: browserCpu / (r.wallS * 1000), errors: r.errors + r.non2xx };
        results.push(row);
        console.log(`round ${round + 1} ${condition.padEnd(10)} ${row.reqPerS.toFixed(0).padStart(7)} req/s  p99 ${String(row.p99).padStart(4)} ms  edge CPU ${row.cpuUsPerReq.toFixed(0).padStart(4)} µs/req  browser ${row.browserCores.toFixed(2)} cores  errors ${row.errors}`);
      }
    }
  } finally {
    await browser.close();
    for (const child of children.reverse()) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  }
  const spread = (xs: number[]): number => Math.max(...xs) - Math.min(...xs);
  const noneRps = results.filter((r) => r.condition === 'none').map((r) => r.reqPerS);
  const base = mean(noneRps);
  const noise = spread(noneRps);
  console.log('');
  for (const condition of ['none', 'subscriber', 'browser'] as const) {
    const rows = results.filter((r) => r.condition === condition);
    const rps = rows.map((r) => r.reqPerS);
    const delta = ((mean(rps) - base) / base) * 100;
    const verdict = condition === 'none' ? '' : Math.abs(mean(rps) - base) <= noise ? '  within noise' : '  BEYOND noise';
    console.log(`${condition.padEnd(10)} mean ${mean(rps).toFixed(0).padStart(6)} req/s (spread ${spread(rps).toFixed(0)}, ${delta >= 0 ? '+' : ''}${delta.toFixed(1)} % vs none)  edge CPU ${mean(rows.map((r) => r.cpuUsPerReq)).toFixed(0)} µs/req  browser ${mean(rows.map((r) => r.browserCores)).toFixed(2)} cores${verdict}`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
