// An I/O worker that dies is cleaned up and replaced (two workers, whatever
// EDGE_TEST_WORKERS says). Streams are opened until both workers hold some;
// the worker that does not hold the node's session is then ended from inside
// (the `crash` test hook throws an uncaught exception there) while its
// requests are in flight on the node of the other worker. Its leases return,
// the upstream requests it left are cancelled, new requests are served, and
// the worker is back on the shared ports. The run records close the runs it
// left open (worker_exited).
process.env.EDGE_TEST_HOOKS = '1';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { connect, type Socket } from 'node:net';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import type { Message, Task } from '@a2a-js/sdk';
import OpenAI from 'openai';
import { Agent, request } from 'undici';
import { homeWorkerOf } from '../../src/workers/a2a/context-history.js';
import { ownerOfTaskId } from '../../src/workers/a2a/task-store.js';
import type { WorkerPool } from '../../src/main/worker-pool.js';
import type { EdgeEvent } from '../../src/contract/events.js';
import type { Subscription } from '../../src/main/events/event-bus.js';
import { ALIAS, inFlight, NODE_ID, PROVIDER_ID, sessionOf, startStack, streamOnOwnConnection, waitFor, waitUntil, type Stack } from '../helpers/stack.js';

/**
 * 100 tokens 50 ms apart by default: a stream lasts 5 s, well past the crash (the victim holds its
 * streams within a round or two of opening them), and the other worker's streams must run
 * to their end before the test goes on, so no longer than that.
 */
const stream = (stack: Stack, tokens = 100): ReturnType<typeof streamOnOwnConnection> => streamOnOwnConnection(stack, tokens);

/** Every edge_requests_total sample of a scrape, summed. */
function served(text: string): number {
  return text
    .split('\n')
    .filter((line) => line.startsWith('edge_requests_total{'))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

/**
 * Requests on fresh connections until the worker not holding the node's session has served some (the kernel
 * spreads them), then every lease released; returns the worker that holds the session.
 */
async function trafficOnBoth(stack: Stack, pool: WorkerPool): Promise<number> {
  await waitFor(async () => (await pool.inspect()).length === 2, 'both workers running');
  const holder = (await pool.inspect()).find((p) => p.sessions.length > 0)?.worker ?? 0;
  for (let round = 0; round < 10; round++) {
    const batch = Array.from({ length: 6 }, () => stream(stack, 2));
    assert.deepEqual(await Promise.all(batch.map((o) => o.done)), batch.map(() => 'status 200'));
    await Promise.all(batch.map((o) => o.dispatcher.close()));
    if (((await pool.inspect()).find((p) => p.worker === 1 - holder)?.requests ?? 0) >= 3) break;
  }
  await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  return holder;
}

describe('an I/O worker that exits', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 64, configure: (raw) => void (raw.workers = { count: 2 }) });
  });
  after(async () => {
    await stack.close();
  });

  test('releases its leases, cancels its upstream requests, and is replaced', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    const holder = (await pool.inspect()).find((p) => p.sessions.length > 0)?.worker;
    assert.ok(holder !== undefined, 'a worker holds the node');
    const victim = 1 - holder;
    const open: { done: Promise<string>; dispatcher: Agent }[] = [];
    // Open streams until the victim holds at least two.
    for (let round = 0; round < 10; round++) {
      for (let i = 0; i < 4; i++) open.push(stream(stack));
      await waitUntil(() => inFlight(stack.edge) === open.length, `${open.length} leases`);
      const here = (await pool.inspect()).find((p) => p.worker === victim);
      if ((here?.openExchanges ?? 0) >= 2) break;
    }
    const victimOpen = (await pool.inspect()).find((p) => p.worker === victim)?.openExchanges ?? 0;
    assert.ok(victimOpen >= 2, `the victim worker holds requests (${victimOpen})`);
    await stack.mock.waitFor(() => stack.mock.stats.inFlight === open.length, 5_000);
    const seen: EdgeEvent[] = [];
    const subscription = stack.edge.events.subscribe({
      readable(sub: Subscription) {
        for (let e = sub.shift(); e !== undefined; e = sub.shift()) seen.push(e.event);
      },
    });

    await pool.call(victim, { type: 'testHook', hook: 'crash' }).catch(() => undefined);

    // The victim's leases are released at once and its upstream requests cancelled on the node;
    // the other worker's streams run on.
    await waitUntil(() => inFlight(stack.edge) === open.length - victimOpen, `leases back to ${open.length - victimOpen} (now ${inFlight(stack.edge)})`);
    await stack.mock.waitFor(() => stack.mock.stats.inFlight === open.length - victimOpen, 5_000);
    const outcomes = await Promise.all(open.map((o) => o.done));
    assert.equal(outcomes.filter((o) => o.startsWith('failed')).length, victimOpen, outcomes.join('; '));
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
    // The run records close the victim's runs (it never reported their end): none stays open,
    // and exactly those show worker_exited; the other worker's ended as usual.
    await waitUntil(() => stack.edge.runs.list({ state: 'running', limit: 1_000 }).length + stack.edge.runs.list({ state: 'queued', limit: 1_000 }).length === 0, 'no run left open');
    const finished = stack.edge.runs.list({ state: 'finished', limit: 1_000 });
    const exited = finished.filter((r) => r.outcome === 'worker_exited');
    assert.equal(exited.length, victimOpen, JSON.stringify(finished.map((r) => r.outcome)));
    assert.ok(exited.every((r) => r.status === 502 && r.error !== null && r.error.includes('exited')), JSON.stringify(exited));
    assert.ok(finished.filter((r) => r.outcome === 'end').length >= open.length - victimOpen, JSON.stringify(finished.map((r) => r.outcome)));
    // Their run.finished events name where they ran, as their records do.
    await waitUntil(() => seen.filter((e) => e.type === 'run.finished' && e.outcome === 'worker_exited').length === victimOpen, 'run.finished for each cut run');
    subscription.close();
    const exitedEvents = seen.filter((e) => e.type === 'run.finished' && e.outcome === 'worker_exited');
    assert.deepEqual(exitedEvents.map((e) => [(e as { node: string | null }).node, (e as { provider: string | null }).provider]), exitedEvents.map(() => [NODE_ID, PROVIDER_ID]), JSON.stringify(exitedEvents));
    // /metrics agrees with the records: the cut requests are 502s there too, under the provider their records name.
    assert.deepEqual([...new Set(exited.map((r) => r.provider))], [PROVIDER_ID], JSON.stringify(exited));
    const cut = new RegExp(`^edge_requests_total\\{model="llama3",provider="${PROVIDER_ID}",status="502"\\} (\\d+)$`, 'm').exec(await stack.edge.scrapeMetrics());
    assert.equal(Number(cut?.[1] ?? 0), victimOpen);

    // The worker is back on the shared ports, and new requests are served by both.
    await waitFor(async () => (await pool.inspect()).length === 2, 'the worker is replaced');
    const fresh = Array.from({ length: 12 }, () => stream(stack, 3));
    const served = await Promise.all(fresh.map((o) => o.done));
    assert.deepEqual(served, fresh.map(() => 'status 200'));
    await waitUntil(() => inFlight(stack.edge) === 0, 'the new requests released their leases');
    // The kernel spreads new connections over the listeners as it likes (a loaded CI machine once gave all 12
    // to the old worker): more fresh connections until one reaches the replacement, each served whole.
    const more: ReturnType<typeof stream>[] = [];
    await waitFor(async () => {
      if (((await pool.inspect()).find((p) => p.worker === victim)?.requests ?? 0) > 0) return true;
      const next = stream(stack, 3);
      more.push(next);
      assert.equal(await next.done, 'status 200');
      return false;
    }, 'the new worker to take client connections on the shared port', 20_000);
    await Promise.all([...open, ...fresh, ...more].map((o) => o.dispatcher.close()));
  });

  test('its counters stay in the scrape: a total never goes down when a worker dies', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    const victim = 1 - (await trafficOnBoth(stack, pool));
    const before = served(await stack.edge.scrapeMetrics());
    await pool.call(victim, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
    await waitFor(async () => (await pool.inspect()).length === 2, 'the worker is replaced');
    assert.equal(served(await stack.edge.scrapeMetrics()), before, 'the dead worker\'s requests are still counted');
  });

  test('a worker that exits in the middle of a scrape is counted once in it, and the next scrape agrees', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    const holder = await trafficOnBoth(stack, pool);
    const victim = 1 - holder;
    const before = served(await stack.edge.scrapeMetrics());
    // The other worker is busy for a moment, so the scrape waits for it after the victim has answered. The stall
    // runs from the hook's arrival: 800 ms was over, on a loaded CI machine, before the scrape had begun.
    await pool.call(holder, { type: 'testHook', hook: 'stall', ms: 3_000 });
    const during = stack.edge.scrapeMetrics();
    await waitUntil(() => pool.openCallsTo(victim) === 0 && pool.openCallsTo(holder) > 0, 'the victim to answer its part of the scrape, the holder not yet');
    await pool.call(victim, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
    assert.equal(served(await during), before, 'the scrape the victim died in');
    await waitFor(async () => (await pool.inspect()).length === 2, 'the worker is replaced');
    assert.equal(served(await stack.edge.scrapeMetrics()), before, 'the scrape after');
  });

  test('a replacement answering a control call before it is ready is still taken as started: a second fault replaces it again', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    await waitFor(async () => (await pool.inspect()).length === 2, 'both workers running');
    const victim = 1 - ((await pool.inspect()).find((p) => p.sessions.length > 0)?.worker ?? 0);
    for (let fault = 1; fault <= 2; fault++) {
      // Status (the console polls it) asks every worker, a booting replacement too.
      let scraping = true;
      const scrapes = (async () => {
        while (scraping) await pool.inspect().catch(() => undefined);
      })();
      await pool.call(victim, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
      await waitFor(async () => (await pool.inspect()).length === 2, `the worker replaced after fault ${fault}`);
      scraping = false;
      await scrapes;
    }
    const res = await stream(stack, 2);
    assert.equal(await res.done, 'status 200');
    await res.dispatcher.close();
  });

  test('the worker holding a node\'s session: the node is reported gone at once, and served again once it reconnects', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    await waitFor(async () => (await pool.inspect()).some((p) => p.sessions.length > 0), 'a worker holds the node');
    const holder = (await pool.inspect()).find((p) => p.sessions.length > 0)?.worker as number;
    const before = await sessionOf(stack.edge, NODE_ID);
    assert.ok(before !== undefined, 'the edge sees the session');
    const seen: EdgeEvent[] = [];
    const subscription = stack.edge.events.subscribe({
      readable(sub: Subscription) {
        for (let e = sub.shift(); e !== undefined; e = sub.shift()) seen.push(e.event);
      },
    });
    try {
      // Status, metrics and a drain's inspection keep answering while the worker is replaced.
      const failures: string[] = [];
      let polling = true;
      const poller = (async () => {
        while (polling) {
          await pool.inspect().catch((err: Error) => failures.push(err.message));
          await new Promise((resolve) => setImmediate(resolve));
        }
      })();
      await pool.call(holder, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
      await waitFor(async () => (await pool.inspect()).length === 2, 'the worker is replaced');
      polling = false;
      await poller;
      assert.deepEqual(failures, [], 'inspect() answered throughout');
      await waitUntil(() => seen.some((e) => e.type === 'node.disconnected' && e.node === NODE_ID && e.generation === before.generation), 'node.disconnected for the old connection');
      const gone = seen.find((e) => e.type === 'node.disconnected') as { reason: string };
      assert.match(gone.reason, /I\/O worker \d+ exited/);
      // The agent reconnects (to a live worker) and requests are served again.
      await waitFor(async () => ((await sessionOf(stack.edge, NODE_ID))?.generation ?? 0) > before.generation, 'the node reconnected', 10_000);
      assert.equal(await stream(stack, 3).done, 'status 200');
    } finally {
      subscription.close();
    }
  });
});

describe('an I/O worker that exits while another relays a subscription to its A2A task', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      mock: { tokens: 400, intervalMs: 25 },
      configure: (raw) => {
        raw.workers = { count: 2 };
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS, name: 'Writer', description: 'Writes', skills: [{ id: 'write', name: 'Write', description: 'Writes text', tags: ['text'] }] }] };
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('the relayed subscription ends at once with TaskNotFound, never left waiting', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    const url = `${stack.edge.url}/a2a/writer/`;
    // A fresh connection per call: the kernel spreads them over both workers' listeners.
    const fetchImpl = (input: string | URL | Request, init?: RequestInit): Promise<Response> => fetch(input, { ...init, dispatcher: new Agent({ pipelining: 0 }) } as RequestInit);
    const client = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] })).createFromUrl(url);
    const text: Message = { messageId: randomUUID(), contextId: '', taskId: '', role: 1, parts: [{ content: { $case: 'text', value: 'a long one' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
    const task = (await client.sendMessage({ tenant: '', message: text, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true }, metadata: undefined })) as Task;
    const owner = ownerOfTaskId(task.id);
    assert.ok(owner === 0 || owner === 1, `a worker's task id: ${task.id}`);
    const other = 1 - owner;
    // Subscribe until one of them lands on the other worker (relayed through the pool).
    const outcomes: Promise<string>[] = [];
    for (let i = 0; i < 20; i++) {
      outcomes.push(
        (async () => {
          let events = 0;
          try {
            for await (const _ of client.resubscribeTask({ tenant: '', id: task.id })) events++;
            return `ended after ${events} events`;
          } catch (err) {
            return `${events > 0 ? 'after events' : 'at once'}: ${(err as Error).message}`;
          }
        })(),
      );
      const relayed = async () => (await pool.inspect()).find((p) => p.worker === other)?.a2aRelayedStreams.remote ?? 0;
      const served = await waitFor(async () => (await relayed()) > 0, 'the subscription to be served', 1_000).then(
        () => true,
        () => false,
      );
      if (served) break;
    }
    const remote = (await pool.inspect()).find((p) => p.worker === other)?.a2aRelayedStreams.remote ?? 0;
    assert.ok(remote >= 1, 'a subscription is relayed from the other worker');

    await pool.call(owner, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
    // Every subscription ends: the owner's with its connection, the relayed ones with the task's loss.
    const settled = await Promise.race([Promise.all(outcomes), new Promise<string[]>((resolve) => setTimeout(() => resolve(['still waiting']), 4_000))]);
    assert.ok(!settled.includes('still waiting'), 'no subscription is left waiting');
    // The SDK raises the JSON-RPC error event; -32001 is A2A's TaskNotFoundError.
    assert.equal(settled.filter((o) => /^after events: .*the worker that held it exited \(Code: -32001\)/.test(o)).length, remote, settled.join('; '));
    const after = (await pool.inspect()).find((p) => p.worker === other)?.a2aRelayedStreams;
    assert.deepEqual(after, { remote: 0, served: 0 });
  });

  test('a relayed GetTask that its stalled owner does not answer in time is an internal error (retry), never "task not found"', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    await waitFor(async () => (await pool.inspect()).length === 2, 'both workers running');
    const fetchImpl = (input: string | URL | Request, init?: RequestInit): Promise<Response> => fetch(input, { ...init, dispatcher: new Agent({ pipelining: 0 }) } as RequestInit);
    const client = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] })).createFromUrl(`${stack.edge.url}/a2a/writer/`);
    const text: Message = { messageId: randomUUID(), contextId: '', taskId: '', role: 1, parts: [{ content: { $case: 'text', value: 'held up' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
    const task = (await client.sendMessage({ tenant: '', message: text, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true }, metadata: undefined })) as Task;
    const owner = ownerOfTaskId(task.id) as number;
    // The owner is busy past the relay's 5 s wait; calls landing on the other worker are relayed to it.
    await pool.call(owner, { type: 'testHook', hook: 'stall', ms: 6_500 });
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, async () => {
        try {
          return `state ${(await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).status?.state}`;
        } catch (err) {
          // The SDK raises a JSON-RPC error as the A2A error class of its code (TaskNotFoundError for -32001).
          return `${(err as Error).name}: ${(err as Error).message}`;
        }
      }),
    );
    assert.ok(!outcomes.some((o) => o.startsWith('TaskNotFoundError')), outcomes.join('; '));
    assert.ok(outcomes.some((o) => /did not answer/.test(o)), `a call relayed and timed out: ${outcomes.join('; ')}`);
  });
});

describe('an A2A caller that leaves while its worker asks another for the conversation', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({
      mock: { tokens: 5, intervalMs: 20 },
      configure: (raw) => {
        raw.workers = { count: 2 };
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }] };
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('no run starts for it: no one could learn its task id', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    await waitFor(async () => (await pool.inspect()).length === 2, 'both workers running');
    // A context whose turns live on worker 0, which is busy: a message arriving on worker 1 waits for them.
    let contextId = '';
    for (let i = 0; homeWorkerOf(contextId, 2) !== 0 || contextId === ''; i++) contextId = `ctx-${i}`;
    const begun = async (): Promise<number[]> => [...(await pool.inspect())].sort((a, b) => a.worker - b.worker).map((p) => p.requests);
    const before = await begun();
    await pool.call(0, { type: 'testHook', hook: 'stall', ms: 1_500 });
    const target = new URL(stack.edge.url);
    const sockets: Socket[] = [];
    for (let i = 0; i < 10; i++) {
      const body = JSON.stringify({ jsonrpc: '2.0', id: i, method: 'SendStreamingMessage', params: { message: { messageId: randomUUID(), contextId, role: 'ROLE_USER', parts: [{ text: `gone ${i}` }] } } });
      const socket = connect(Number(target.port), target.hostname);
      socket.on('error', () => {});
      socket.write(`POST /a2a/writer HTTP/1.1\r\nhost: ${target.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      sockets.push(socket);
    }
    await new Promise((resolve) => setTimeout(resolve, 400));
    // Reset, not closed: a half-closed HTTP/1.1 client may still read its answer.
    for (const socket of sockets) socket.resetAndDestroy();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    // Worker 1 saw each of its callers leave while it waited for the turns: it begins no run. (Of 10
    // connections the kernel puts some there, all but surely. Worker 0's, read whole once its stall
    // ended, may begin theirs: the caller's leaving reaches it only after.)
    const after = await begun();
    assert.equal(after[1] - before[1], 0, `runs begun on worker 1 for callers already gone: ${after[1] - before[1]}`);
    const started = stack.mock.requestLog.filter((r) => (r.body?.toString('utf8') ?? '').includes('gone ')).length;
    assert.equal(started, after[0] - before[0], 'every run the provider saw was begun on worker 0');
  });

  test('a turn whose earlier turns its busy home does not hand over in time fails (-32603, retry), never runs without them', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    await waitFor(async () => (await pool.inspect()).length === 2, 'both workers running');
    let contextId = '';
    for (let i = 0; homeWorkerOf(contextId, 2) !== 0 || contextId === ''; i++) contextId = `held-${i}`;
    const send = async (text: string): Promise<{ error?: { code: number; message: string }; result?: { task?: { status?: { state?: string } } } }> => {
      const dispatcher = new Agent({ connections: 1, pipelining: 0 });
      try {
        const body = { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: randomUUID(), contextId, role: 'ROLE_USER', parts: [{ text }] } } };
        const res = await request(`${stack.edge.url}/a2a/writer`, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        return (await res.body.json()) as { error?: { code: number; message: string } };
      } finally {
        await dispatcher.close();
      }
    };
    const first = await send('first turn');
    assert.equal(first.result?.task?.status?.state, 'TASK_STATE_COMPLETED', JSON.stringify(first));
    // The first turn reaches its home (worker 0) by a relayed message when worker 1 ran it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    // 9 s against the relay's 5 s: a lookup sent up to 4 s into the stall still times out.
    await pool.call(0, { type: 'testHook', hook: 'stall', ms: 9_000 });
    const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => send(`second turn ${i}`)));
    // Every second turn the provider ran carried the first turn before it.
    const runs = stack.mock.requestLog.map((r) => r.body?.toString('utf8') ?? '').filter((b) => b.includes('second turn '));
    for (const run of runs) assert.ok(run.includes('first turn'), `a turn ran without its conversation: ${run}`);
    const refused = outcomes.filter((o) => o.error !== undefined);
    // Of 10 fresh connections the kernel puts some on worker 1, which had to ask worker 0.
    assert.ok(refused.length > 0, `some turns were asked of the stalled home: ${JSON.stringify(outcomes)}`);
    for (const o of refused) {
      assert.equal(o.error?.code, -32603, JSON.stringify(o));
      assert.match(o.error?.message ?? '', /did not answer within 5 s; retry/);
    }
    assert.equal(runs.length + refused.length, 10, 'every turn either ran or was refused');
  });
});

describe('an I/O worker that exits while clients have stored responses', () => {
  let stack: Stack;
  before(async () => {
    // vllm serves the Responses API (the mock stores the responses).
    stack = await startStack({ providerType: 'vllm', capacity: 64, configure: (raw) => void (raw.workers = { count: 2 }) });
  });
  after(async () => {
    await stack.close();
  });

  test('its replacement knows the responses made before: a follow-up on any connection still reaches them', async () => {
    const pool = stack.edge.plane as unknown as WorkerPool;
    await waitFor(async () => (await pool.inspect()).length === 2, 'both workers running');
    const dispatchers: Agent[] = [];
    // One connection per call: the kernel spreads them over both workers' listeners.
    const fresh = (): OpenAI => {
      const dispatcher = new Agent({ connections: 1, pipelining: 0 });
      dispatchers.push(dispatcher);
      return new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0, timeout: 15_000, fetchOptions: { dispatcher } });
    };
    try {
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) ids.push((await fresh().responses.create({ model: ALIAS, input: `turn ${i}` })).id);
      const victim = 1 - ((await pool.inspect()).find((p) => p.sessions.length > 0)?.worker ?? 0);
      await pool.call(victim, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
      await waitFor(async () => (await pool.inspect()).length === 2, 'the worker is replaced');
      const servedByReplacement = async (): Promise<number> => (await pool.inspect()).find((p) => p.worker === victim)?.requests ?? 0;
      const lost: string[] = [];
      // Follow-ups until the replacement has taken several of them (the kernel picks the listener).
      for (let round = 0; round < 20 && (await servedByReplacement()) < 4; round++) {
        for (const id of ids) {
          const next = await fresh()
            .responses.create({ model: ALIAS, input: 'and then', previous_response_id: id })
            .catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
          if (next instanceof Error) lost.push(`${id}: ${next.message}`);
          const got = await fresh()
            .responses.retrieve(id)
            .catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
          if (got instanceof Error) lost.push(`GET ${id}: ${got.message}`);
        }
      }
      assert.ok((await servedByReplacement()) >= 4, 'the replacement took some of the calls');
      assert.deepEqual(lost, [], 'every response made before the fault is still found');
    } finally {
      await Promise.all(dispatchers.map((d) => d.close()));
    }
  });
});
