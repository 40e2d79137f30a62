// Chaos through real processes: the edge, node agent and mock provider CLIs,
// 1,000 seeded requests at bounded concurrency, with the agent killed -9
// mid-stream (and restarted), provider resets mid-stream and before
// headers, and clients aborting at random points. Every client gets a
// completion or a clear error (never a hang, never a truncated body that
// looks whole); every upstream request the edge gave up on was cancelled at
// the mock (an uncancelled one would run to completion and show up in the
// mock's `completed`); every completion a client got is its own (each chunk
// stamped by the mock with the client's x-request-id and token count, and
// the mock's log agrees); and the edge's status shows nothing in flight after.
// A second run gives the alias two providers and makes them misbehave
// without any request asking for it (the mock's process-wide fault): each
// flaps (every request reset for 5 s, then recovered) and meets a 429 storm
// (Retry-After 1). Again no request is lost, every client gets its answer
// or a clear error, and no lease is left after.
// CHAOS_SEED / CHAOS_REQUESTS explore other runs.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import type { MockLogEntry } from '../../src/mock/provider.js';
import { assertLogged, assertOwnBody, assertOwnStream, clientRequestId, type OwnAnswer } from '../helpers/identity.js';
import { mulberry32 as prng } from '../helpers/prng.js';

const SEED = Number(process.env.CHAOS_SEED ?? 20_240_611);
const REQUESTS = Number(process.env.CHAOS_REQUESTS ?? 1_000);
const CONCURRENCY = 24;
const KILLS = 3;
const REQUEST_DEADLINE_MS = 20_000;
const DIST = fileURLToPath(new URL('../../src/', import.meta.url));

interface Proc {
  readonly child: ChildProcess;
  readonly lines: string[];
  /** Resolves with the first stdout line matching `re`. */
  line(re: RegExp, timeoutMs?: number): Promise<string>;
}

function start(script: string, args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, [join(DIST, script), ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const lines: string[] = [];
  const waiters: { re: RegExp; resolve: (line: string) => void }[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    if (stream === null) continue;
    createInterface({ input: stream }).on('line', (line) => {
      if (lines.length < 2_000) lines.push(line);
      for (let i = waiters.length - 1; i >= 0; i--) {
        if (waiters[i].re.test(line)) {
          waiters[i].resolve(line);
          waiters.splice(i, 1);
        }
      }
    });
  }
  return {
    child,
    lines,
    line(re: RegExp, timeoutMs = 10_000): Promise<string> {
      const seen = lines.find((l) => re.test(l));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${script}: no line matching ${re} within ${timeoutMs} ms:\n${lines.slice(-20).join('\n')}`)), timeoutMs);
        waiters.push({ re, resolve: (l) => (clearTimeout(timer), resolve(l)) });
      });
    },
  };
}

async function stop(proc: Proc | undefined, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (proc === undefined || proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const exited = once(proc.child, 'exit');
  proc.child.kill(signal);
  await exited;
}

async function getJson<T>(url: string): Promise<T> {
  const res = await fetch(url);
  assert.equal(res.status, 200, url);
  return (await res.json()) as T;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

interface MockStats {
  requests: number;
  completed: number;
  aborted: number;
  failuresInjected: number;
  inFlight: number;
}

interface AdminStatus {
  edge: { openRequests: number };
  nodes: { id: string; connected: boolean }[];
  providers: { id: string; inFlight: number }[];
  groups: { model: string; queueDepth: number }[];
}

type Outcome = 'completed' | 'error_status' | 'error_event' | 'cut' | 'aborted' | 'hang' | 'corrupt';

interface Plan {
  readonly stream: boolean;
  readonly tokens: number;
  readonly intervalMs: number;
  readonly fail: string | undefined;
  /** Client aborts this many ms after sending; undefined = never. */
  readonly abortAfterMs: number | undefined;
}

function planFor(rand: () => number): Plan {
  const r = rand();
  const stream = rand() < 0.7;
  if (r < 0.12) return { stream, tokens: 12, intervalMs: 3, fail: 'reset-mid-stream', abortAfterMs: undefined };
  if (r < 0.17) return { stream, tokens: 4, intervalMs: 1, fail: 'reset-before-headers', abortAfterMs: undefined };
  if (r < 0.32) {
    // Far longer than the run: at the mock it can only end by being cancelled (or by a kill).
    return { stream, tokens: 6_000, intervalMs: 10, fail: undefined, abortAfterMs: Math.floor(rand() * 250) };
  }
  return { stream, tokens: 2 + Math.floor(rand() * 20), intervalMs: Math.floor(rand() * 4), fail: undefined, abortAfterMs: undefined };
}

interface Result {
  readonly outcome: Outcome;
  readonly detail: string;
  /** For a completion: the mock request that answered it (checked against the mock's log at the end). */
  readonly answer?: OwnAnswer;
}

/** A completed answer that is not this client's own (crossed, spliced, cut) is corrupt. */
function ownAnswer(text: string, plan: Plan, id: number): Result {
  try {
    const requestId = clientRequestId('chaos', id);
    const answer = plan.stream ? assertOwnStream(text, requestId, plan.tokens) : assertOwnBody(text, requestId, plan.tokens);
    return { outcome: 'completed', detail: '', answer };
  } catch (err) {
    return { outcome: 'corrupt', detail: `not this client's answer: ${(err as Error).message.split('\n')[0]}` };
  }
}

/** One client request; never throws; classifies what the client saw. */
async function run(base: string, plan: Plan, id: number): Promise<Result> {
  const controller = new AbortController();
  let aborted = false;
  let abortTimer: NodeJS.Timeout | undefined;
  if (plan.abortAfterMs !== undefined) {
    abortTimer = setTimeout(() => {
      aborted = true;
      controller.abort();
    }, plan.abortAfterMs);
  }
  let hangTimer: NodeJS.Timeout | undefined;
  const hang = new Promise<Result>((resolve) => {
    hangTimer = setTimeout(() => {
      controller.abort();
      resolve({ outcome: 'hang', detail: `request ${id} had no outcome after ${REQUEST_DEADLINE_MS} ms` });
    }, REQUEST_DEADLINE_MS);
  });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-mock-tokens': String(plan.tokens),
    'x-mock-interval-ms': String(plan.intervalMs),
    'x-request-id': clientRequestId('chaos', id),
  };
  if (plan.fail !== undefined) headers['x-mock-fail'] = plan.fail;
  const attempt = (async (): Promise<Result> => {
    let res: Response;
    try {
      res = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: 'llama3', stream: plan.stream, messages: [{ role: 'user', content: `chaos ${id}` }] }),
        signal: controller.signal,
      });
    } catch (err) {
      return aborted ? { outcome: 'aborted', detail: '' } : { outcome: 'cut', detail: `fetch: ${(err as Error).message}` };
    }
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      if (aborted) return { outcome: 'aborted', detail: '' };
      // Only a non-SSE body may end by a cut connection; an SSE stream must end with an event.
      return plan.stream ? { outcome: 'corrupt', detail: `SSE body cut without an error event: ${(err as Error).message}` } : { outcome: 'cut', detail: '' };
    }
    if (res.status >= 400) {
      const body = JSON.parse(text) as { error?: { code?: string } };
      if (typeof body.error?.code !== 'string') return { outcome: 'corrupt', detail: `error without an OpenAI body: ${text.slice(0, 200)}` };
      return { outcome: 'error_status', detail: body.error.code };
    }
    if (!plan.stream) {
      try {
        const body = JSON.parse(text) as { object?: string };
        return body.object === 'chat.completion' ? ownAnswer(text, plan, id) : { outcome: 'corrupt', detail: text.slice(0, 200) };
      } catch {
        return { outcome: 'corrupt', detail: `a 200 JSON body that does not parse: ${text.slice(-100)}` };
      }
    }
    const events = text.split('\n\n').filter((e) => e.length > 0);
    for (const e of events) {
      if (!e.startsWith('data: ')) return { outcome: 'corrupt', detail: `not an SSE event: ${e.slice(0, 100)}` };
      if (e === 'data: [DONE]') continue;
      const parsed = JSON.parse(e.slice(6)) as { error?: { code?: string } };
      if (parsed.error !== undefined) return e === events.at(-1) ? { outcome: 'error_event', detail: parsed.error.code ?? '' } : { outcome: 'corrupt', detail: 'error event not last' };
    }
    return events.at(-1) === 'data: [DONE]' ? ownAnswer(text, plan, id) : { outcome: 'corrupt', detail: `stream ended without [DONE] or an error: ${text.slice(-120)}` };
  })();
  const result = await Promise.race([attempt, hang]);
  clearTimeout(hangTimer);
  clearTimeout(abortTimer);
  // A request aborted by its client counts as aborted whatever it had seen.
  return aborted && result.outcome !== 'completed' && result.outcome !== 'hang' ? { outcome: 'aborted', detail: '' } : result;
}

let dir: string;
let mock: Proc | undefined;
let edge: Proc | undefined;
let agent: Proc | undefined;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'edge-chaos-'));
});
after(async () => {
  await stop(agent);
  await stop(edge);
  await stop(mock);
  rmSync(dir, { recursive: true, force: true });
});

test(`chaos: ${REQUESTS} requests through real processes with kill -9, resets and client aborts`, { timeout: 120_000 }, async () => {
  const rand = prng(SEED);
  // A log long enough to hold every request of the run (retries and kills included), without bodies.
  mock = start('mock/cli.js', ['--port', '0', '--log-limit', String(REQUESTS * 3), '--body-log-limit', '0']);
  const mockUrl = /(http:\/\/127\.0\.0\.1:\d+)/.exec(await mock.line(/mock provider listening on/))?.[1] as string;

  const edgeConfig = join(dir, 'edge.yaml');
  writeFileSync(
    edgeConfig,
    JSON.stringify({
      listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
      admin: { host: '127.0.0.1', port: 0 },
      drain: { grace_ms: 100 },
      limits: { tunnel_timeout_ms: 15_000, ttfb_timeout_ms: 10_000, idle_timeout_ms: 5_000 },
      heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
      nodes: [{ id: 'gpu-1', token: 'chaos-token', providers: [{ id: 'gpu-1-mock', capacity: 16 }] }],
      models: [{ alias: 'llama3', max_queue: 1_000, queue_timeout_ms: 15_000, providers: { 'gpu-1-mock': 'mock-llama' } }],
    }),
  );
  edge = start('edge/cli.js', ['--config', edgeConfig]);
  const listening = JSON.parse(await edge.line(/"edge listening"/)) as { httpPort: number; grpcPort: number; adminPort: number };
  const base = `http://127.0.0.1:${listening.httpPort}`;
  const admin = `http://127.0.0.1:${listening.adminPort}`;

  const agentConfig = join(dir, 'agent.yaml');
  writeFileSync(
    agentConfig,
    JSON.stringify({
      edge: { address: `127.0.0.1:${listening.grpcPort}` },
      node: { id: 'gpu-1', token: 'chaos-token' },
      providers: [{ id: 'gpu-1-mock', type: 'openai_compat', base_url: mockUrl }],
      reconnect: { initial_ms: 50, max_ms: 200 },
      log_level: 'warn',
    }),
  );
  const connected = async (): Promise<boolean> => (await getJson<AdminStatus>(`${admin}/admin/status`)).nodes.some((n) => n.connected);
  agent = start('agent/cli.js', ['--config', agentConfig]);
  await until('the agent to register', connected);

  // Kill -9 the agent at a few points of the first 60% of the run, mid-stream, and bring it back.
  // The last 40% has no kill, so an abandoned upstream request there can only end by its CANCEL.
  const killAt = new Set(Array.from({ length: KILLS }, (_, i) => Math.floor((REQUESTS * 0.6 * (i + 1)) / KILLS) - 1));
  let kills = 0;
  const chaosMonkey = async (): Promise<void> => {
    kills++;
    await stop(agent, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 100 + Math.floor(rand() * 200)));
    agent = start('agent/cli.js', ['--config', agentConfig]);
  };

  const plans = Array.from({ length: REQUESTS }, () => planFor(rand));
  const outcomes: (Result & { plan: Plan; id: number })[] = [];
  let next = 0;
  const monkeys: Promise<void>[] = [];
  const worker = async (): Promise<void> => {
    while (next < REQUESTS) {
      const id = next++;
      if (killAt.has(id)) monkeys.push(chaosMonkey());
      const result = await run(base, plans[id], id);
      outcomes.push({ ...result, plan: plans[id], id });
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  await Promise.all(monkeys);
  const elapsedMs = performance.now() - started;

  const count = (o: Outcome): number => outcomes.filter((x) => x.outcome === o).length;
  const summary = Object.fromEntries((['completed', 'error_status', 'error_event', 'cut', 'aborted', 'hang', 'corrupt'] as Outcome[]).map((o) => [o, count(o)]));
  const codes: Record<string, number> = {};
  for (const o of outcomes) if (o.outcome === 'error_status' || o.outcome === 'error_event') codes[o.detail] = (codes[o.detail] ?? 0) + 1;
  console.log(`chaos: ${REQUESTS} requests in ${Math.round(elapsedMs)} ms, ${kills} agent kills: ${JSON.stringify(summary)} codes ${JSON.stringify(codes)}`);

  // Every client got a completion or a clear error.
  assert.equal(outcomes.length, REQUESTS);
  assert.deepEqual(outcomes.filter((o) => o.outcome === 'hang' || o.outcome === 'corrupt').map((o) => `${o.outcome}: ${o.detail}`), []);
  // Every request that nothing went wrong for completed.
  const clean = outcomes.filter((o) => o.plan.fail === undefined && o.plan.abortAfterMs === undefined);
  const cleanFailures = clean.filter((o) => o.outcome !== 'completed');
  assert.ok(cleanFailures.every((o) => o.detail === 'node_disconnected' || o.outcome === 'cut'), `unexpected failures of clean requests: ${JSON.stringify(cleanFailures.filter((o) => o.detail !== 'node_disconnected').slice(0, 5))}`);
  assert.ok(cleanFailures.length <= KILLS * 16, `${cleanFailures.length} clean requests failed; only those caught by a kill may`);
  // Injected resets surface as upstream errors, never as a success.
  for (const o of outcomes.filter((x) => x.plan.fail !== undefined && x.plan.abortAfterMs === undefined)) {
    assert.notEqual(o.outcome, 'completed', `an injected ${o.plan.fail} reported success`);
  }
  assert.ok(count('aborted') > REQUESTS * 0.05, 'the run exercised client aborts');
  assert.ok((codes.upstream_reset ?? 0) > REQUESTS * 0.05, 'the run exercised provider resets');
  assert.equal(kills, KILLS);

  // The edge: nothing in flight, nothing queued, every request closed.
  await until('the edge to show zero in flight', async () => {
    const s = await getJson<AdminStatus>(`${admin}/admin/status`);
    return s.edge.openRequests === 0 && s.providers.every((p) => p.inFlight === 0) && s.groups.every((g) => g.queueDepth === 0);
  }, 5_000);

  // The mock: nothing left generating (an uncancelled abandoned stream would run
  // for a minute), and every request it saw ended one way.
  await until('the mock to have nothing in flight', async () => (await getJson<MockStats>(`${mockUrl}/mock/stats`)).inFlight === 0, 3_000);
  const stats = await getJson<MockStats>(`${mockUrl}/mock/stats`);
  console.log(`chaos: mock ${JSON.stringify(stats)}`);
  assert.equal(stats.requests, stats.completed + stats.aborted + stats.failuresInjected, 'each upstream request completed, was aborted or failed by injection');
  // Every completion a client got was answered by the mock request its chunks name, for this client, to the end.
  const log = await getJson<MockLogEntry[]>(`${mockUrl}/mock/log`);
  assert.equal(log.length, stats.requests, 'the mock log holds every request of the run');
  for (const o of outcomes) if (o.answer !== undefined) assertLogged(log, o.answer, clientRequestId('chaos', o.id), o.plan.tokens);
  // The mock completes exactly what clients completed, plus at most what an
  // agent kill cut between the mock's last byte and the client.
  const clientCompleted = count('completed');
  const killed = outcomes.filter((o) => o.detail === 'node_disconnected' || (o.outcome === 'cut' && o.plan.fail === undefined)).length;
  assert.ok(stats.completed >= clientCompleted, `mock completed ${stats.completed} < client completions ${clientCompleted}`);
  assert.ok(stats.completed <= clientCompleted + killed, `mock completed ${stats.completed} > client completions ${clientCompleted} + kill casualties ${killed}: an abandoned upstream request ran on`);
  assert.ok(stats.aborted >= outcomes.filter((o) => o.outcome === 'aborted').length * 0.5, 'client aborts reached the provider as cancellations');
  assert.equal(edge.child.exitCode, null, 'the edge process is still running');
  assert.equal(mock.child.exitCode, null);
});

let mockA: Proc | undefined;
let mockB: Proc | undefined;
let flapEdge: Proc | undefined;
let flapAgent: Proc | undefined;
after(async () => {
  await stop(flapAgent);
  await stop(flapEdge);
  await stop(mockA);
  await stop(mockB);
});

async function fault(mockUrl: string, body: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${mockUrl}/mock/fault`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 200, await res.text());
}

test('chaos: provider flaps (100 % failing for 5 s, then recovered) and 429 storms lose no request', { timeout: 120_000 }, async () => {
  const rand = prng(SEED + 1);
  mockA = start('mock/cli.js', ['--port', '0', '--log-limit', '50000', '--body-log-limit', '0']);
  mockB = start('mock/cli.js', ['--port', '0', '--log-limit', '50000', '--body-log-limit', '0']);
  const urlOf = async (p: Proc): Promise<string> => /(http:\/\/127\.0\.0\.1:\d+)/.exec(await p.line(/mock provider listening on/))?.[1] as string;
  const [urlA, urlB] = [await urlOf(mockA), await urlOf(mockB)];

  const edgeConfig = join(dir, 'edge-flaps.yaml');
  writeFileSync(
    edgeConfig,
    JSON.stringify({
      listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
      admin: { host: '127.0.0.1', port: 0 },
      drain: { grace_ms: 100 },
      limits: { tunnel_timeout_ms: 15_000, ttfb_timeout_ms: 10_000, idle_timeout_ms: 5_000 },
      heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
      // Short ejections, so a flapped provider is probed (and back) within the run.
      resilience: { outliers: { base_ejection_ms: 500, max_ejection_ms: 2_000 } },
      nodes: [{ id: 'gpu-1', token: 'chaos-token', providers: [{ id: 'a', capacity: 8 }, { id: 'b', capacity: 8 }] }],
      models: [{ alias: 'llama3', max_queue: 1_000, queue_timeout_ms: 15_000, providers: { a: 'mock-a', b: 'mock-b' } }],
    }),
  );
  flapEdge = start('edge/cli.js', ['--config', edgeConfig]);
  const listening = JSON.parse(await flapEdge.line(/"edge listening"/)) as { httpPort: number; grpcPort: number; adminPort: number };
  const base = `http://127.0.0.1:${listening.httpPort}`;
  const admin = `http://127.0.0.1:${listening.adminPort}`;
  const agentConfig = join(dir, 'agent-flaps.yaml');
  writeFileSync(
    agentConfig,
    JSON.stringify({
      edge: { address: `127.0.0.1:${listening.grpcPort}` },
      node: { id: 'gpu-1', token: 'chaos-token' },
      providers: [
        { id: 'a', type: 'openai_compat', base_url: urlA },
        { id: 'b', type: 'openai_compat', base_url: urlB },
      ],
      reconnect: { initial_ms: 50, max_ms: 200 },
      log_level: 'warn',
    }),
  );
  flapAgent = start('agent/cli.js', ['--config', agentConfig]);
  await until('the agent to register', async () => (await getJson<AdminStatus>(`${admin}/admin/status`)).nodes.some((n) => n.connected));

  // The schedule (ms from the start): a flaps, then storms on b and a, then b flaps; clients run throughout.
  let done = false;
  const started = performance.now();
  const schedule = (async (): Promise<void> => {
    const at = async (ms: number): Promise<void> => {
      const wait = ms - (performance.now() - started);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    };
    try {
      await at(300);
      await fault(urlA, { fail: 'reset-before-headers', for_ms: 5_000 });
      await at(6_000);
      await fault(urlB, { fail: 'status:429,retry-after:1', for_ms: 2_500 });
      await at(7_500);
      await fault(urlA, { fail: 'status:429,retry-after:1', for_ms: 2_500 });
      await at(9_000);
      await fault(urlB, { fail: 'reset-before-headers', for_ms: 5_000 });
      await at(15_000);
    } finally {
      done = true;
    }
  })();
  const outcomes: (Result & { plan: Plan; id: number })[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (!done) {
      const id = next++;
      const plan: Plan = { stream: rand() < 0.7, tokens: 2 + Math.floor(rand() * 10), intervalMs: 2 + Math.floor(rand() * 5), fail: undefined, abortAfterMs: undefined };
      const result = await run(base, plan, id);
      outcomes.push({ ...result, plan, id });
    }
  };
  await Promise.all([schedule, ...Array.from({ length: 16 }, worker)]);

  const count = (o: Outcome): number => outcomes.filter((x) => x.outcome === o).length;
  const codes: Record<string, number> = {};
  for (const o of outcomes) if (o.outcome === 'error_status' || o.outcome === 'error_event') codes[o.detail] = (codes[o.detail] ?? 0) + 1;
  const summary = Object.fromEntries((['completed', 'error_status', 'error_event', 'cut', 'aborted', 'hang', 'corrupt'] as Outcome[]).map((o) => [o, count(o)]));
  console.log(`chaos flaps: ${outcomes.length} requests in ${Math.round(performance.now() - started)} ms: ${JSON.stringify(summary)} codes ${JSON.stringify(codes)}`);

  // No request lost: every client got its own answer or a clear error (never a hang, a cut or a corrupt body).
  assert.equal(outcomes.length, next);
  assert.deepEqual(outcomes.filter((o) => o.outcome !== 'completed' && o.outcome !== 'error_status' && o.outcome !== 'error_event').map((o) => `${o.outcome}: ${o.detail}`), []);
  // With the other provider there, almost everything completes: a flapped request is retried elsewhere, a 429 goes back to the queue.
  assert.ok(count('completed') >= outcomes.length * 0.97, `only ${count('completed')} of ${outcomes.length} completed: ${JSON.stringify(codes)}`);
  assert.ok(outcomes.length >= 200, `the run kept clients busy (${outcomes.length} requests)`);

  // Zero leases, nothing queued, nothing open.
  await until('the edge to show zero in flight', async () => {
    const s = await getJson<AdminStatus>(`${admin}/admin/status`);
    return s.edge.openRequests === 0 && s.providers.every((p) => p.inFlight === 0) && s.groups.every((g) => g.queueDepth === 0);
  }, 5_000);
  // Both mocks saw their faults, and each of their requests ended one way.
  let injected429 = 0;
  for (const url of [urlA, urlB]) {
    await until('the mock to have nothing in flight', async () => (await getJson<MockStats>(`${url}/mock/stats`)).inFlight === 0, 3_000);
    const stats = await getJson<MockStats>(`${url}/mock/stats`);
    assert.ok(stats.failuresInjected > 0, `${url} misbehaved`);
    // (A 429 is both injected and written to the end, so the log, not the counters, says how each ended.)
    const log = await getJson<MockLogEntry[]>(`${url}/mock/log`);
    assert.equal(log.length, stats.requests, 'the mock log holds every request of the run');
    assert.deepEqual(log.filter((e) => !e.completed && !e.aborted && e.failure === null), [], 'each upstream request completed, was aborted or failed by injection');
    injected429 += log.filter((e) => e.failure === 'status:429').length;
  }
  console.log(`chaos flaps: ${injected429} 429s injected, ${codes.mock_failure ?? 0} reached a client`);
  // A 429 goes back to the queue (up to max_requeues): few of a storm's refusals reach a client.
  // (Relayed as is, every one of them did.)
  assert.ok(injected429 >= 10, `the storms happened (${injected429} refusals)`);
  assert.ok((codes.mock_failure ?? 0) <= injected429 * 0.25, `${codes.mock_failure} of ${injected429} 429s reached clients`);
  // The edge said what it did: ejections for the flaps, lowered limits for the storms.
  assert.ok(flapEdge.lines.some((l) => l.includes('provider ejected as an outlier')), 'a flap ejected its provider');
  assert.ok(flapEdge.lines.some((l) => l.includes('provider overloaded')), 'a storm lowered a limit');
  assert.equal(flapEdge.child.exitCode, null, 'the edge process is still running');
});
