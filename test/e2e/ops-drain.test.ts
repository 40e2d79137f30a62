// Graceful drain: SIGTERM to the edge CLI while 20 streams are open (all
// finish, exit 0), and in-process: a request on a kept-alive connection
// during the drain gets 503 shutting_down, and a stream that outlives the
// grace period is ended with an in-band error, its lease released.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import type { NodeAgent } from '../../src/agent/agent.js';
import type { Subscription } from '../../src/main/events/event-bus.js';
import { startMockProvider } from '../../src/mock/provider.js';
import { EdgeProcess } from '../main/admin/edge-process.js';
import { agentWith, ALIAS, registered, inFlight, opsConfigObject, startOpsStack, waitUntil } from '../main/admin/ops-stack.js';

const STREAMS = 20;
const TOKENS = 20;

interface Reply {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Promise<string>;
}

/** POST a chat completion with node:http, so the test controls connection reuse. */
function post(url: string, agent: http.Agent | false, extra: Record<string, string>, stream = true, path = '/v1/chat/completions'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}${path}`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', ...extra } },
      (res) => {
        res.setEncoding('utf8');
        let text = '';
        res.on('data', (chunk: string) => (text += chunk));
        const body = new Promise<string>((done, fail) => {
          res.on('end', () => done(text));
          res.on('error', fail);
          res.on('aborted', () => fail(new Error('response aborted')));
        });
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'drain me' }] }));
  });
}

function countTokens(body: string): number {
  return body.split('\n').filter((line) => line.startsWith('data: {') && line.includes('"content"')).length;
}

describe('SIGTERM to the edge process', () => {
  test(`all ${STREAMS} open streams complete within the grace period and the process exits 0`, async () => {
    const mock = await startMockProvider({ ttftMs: 0 });
    const edge = await EdgeProcess.start(opsConfigObject({ capacity: 32, drainGraceMs: 10_000 }));
    let agent: NodeAgent | undefined;
    try {
      agent = agentWith(edge.grpcPort, mock.url);
      await registered(agent);

      const headers = { 'x-mock-tokens': String(TOKENS), 'x-mock-interval-ms': '60' }; // ~1.2 s per stream
      const replies = await Promise.all(Array.from({ length: STREAMS }, () => post(edge.url, false, headers)));
      for (const reply of replies) assert.equal(reply.status, 200);
      const status = await edge.adminJson('/admin/status');
      assert.equal(status.providers[0].inFlight, STREAMS, 'all streams are open when SIGTERM arrives');

      const signalledAt = performance.now();
      edge.signal('SIGTERM');
      await edge.waitForLog((l) => l.msg.startsWith('draining'));
      // A new connection is refused (listener closed) or answered 503: never served.
      const late = await post(edge.url, false, headers).then(
        (reply) => reply.status,
        (err: NodeJS.ErrnoException) => err.code,
      );
      // With worker threads each listener shares the port (reusePort); a connection the kernel had
      // already queued on a listener that then closed is reset: also never served.
      assert.ok(late === 'ECONNREFUSED' || late === 'ECONNRESET' || late === 503, `a request after SIGTERM got ${String(late)}`);

      const bodies = await Promise.all(replies.map((r) => r.body));
      for (const body of bodies) {
        assert.equal(countTokens(body), TOKENS, 'every token arrived');
        assert.match(body, /data: \[DONE\]/);
      }
      const code = await edge.exited;
      const exitedAfterMs = performance.now() - signalledAt;
      assert.equal(code, 0);
      assert.ok(exitedAfterMs < 10_000, `exited ${Math.round(exitedAfterMs)} ms after SIGTERM (grace 10 s)`);
      const stopped = await edge.waitForLog((l) => l.msg === 'edge stopped');
      assert.deepEqual({ drained: stopped.drained, aborted: stopped.aborted }, { drained: true, aborted: 0 });
    } finally {
      await agent?.stop();
      await edge.dispose();
      await mock.close();
    }
  });
});

// workers.count set here, not by EDGE_TEST_WORKERS: the node sockets of I/O workers close apart from the main thread's.
for (const workers of [0, 2]) {
  describe(`SIGTERM to the edge process, workers.count ${workers}`, () => {
    test("a connected agent's stream ends with its status (OK), not a reset", async () => {
      const mock = await startMockProvider({ ttftMs: 0 });
      const edge = await EdgeProcess.start(opsConfigObject({ capacity: 4, drainGraceMs: 5_000, configure: (raw) => (raw.workers = { count: workers }) }));
      let agent: NodeAgent | undefined;
      try {
        agent = agentWith(edge.grpcPort, mock.url);
        await registered(agent);
        const disconnected = once(agent, 'disconnected') as Promise<[string]>;
        edge.signal('SIGTERM');
        assert.equal(await edge.exited, 0);
        const [reason] = await disconnected;
        assert.equal(reason, 'the edge ended the stream (OK)', 'the edge ended the node stream cleanly before it exited');
      } finally {
        await agent?.stop();
        await edge.dispose();
        await mock.close();
      }
    });
  });
}

for (const [first, second] of [['SIGTERM', 'SIGINT'], ['SIGINT', 'SIGTERM']] as const) {
  describe(`${second} during a drain started by ${first}`, () => {
    test('ends the drain at once: the process exits 1 long before the grace period', async () => {
      const mock = await startMockProvider({ ttftMs: 0 });
      const edge = await EdgeProcess.start(opsConfigObject({ capacity: 4, drainGraceMs: 30_000 }));
      let agent: NodeAgent | undefined;
      try {
        agent = agentWith(edge.grpcPort, mock.url);
        await registered(agent);
        // ~20 s of stream: the drain cannot finish on its own within the test.
        const open = await post(edge.url, false, { 'x-mock-tokens': '200', 'x-mock-interval-ms': '100' });
        assert.equal(open.status, 200);
        open.body.catch(() => undefined);
        edge.signal(first);
        await edge.waitForLog((l) => l.msg.startsWith('draining'));
        const signalledAt = performance.now();
        edge.signal(second);
        const exited = await Promise.race([edge.exited, new Promise<'still running'>((resolve) => setTimeout(resolve, 5_000, 'still running'))]);
        assert.equal(exited, 1, `the second signal (${second}) ends the drain at once`);
        assert.ok(performance.now() - signalledAt < 5_000);
      } finally {
        await agent?.stop();
        await edge.dispose();
        await mock.close();
      }
    });
  });
}

describe('drain in process', () => {
  test('a new request on a kept-alive connection gets 503 shutting_down; a stream past the grace ends with an error', async () => {
    const stack = await startOpsStack({ capacity: 4, mock: { ttftMs: 0 } });
    const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const short = await post(stack.edge.url, keepAlive, { 'x-mock-tokens': '4', 'x-mock-interval-ms': '20' });
      const long = await post(stack.edge.url, false, { 'x-mock-tokens': '200', 'x-mock-interval-ms': '20' });
      assert.equal(short.status, 200);
      assert.equal(long.status, 200);

      const report = stack.edge.shutdown(700);
      assert.equal(countTokens(await short.body), 4, 'the short stream finished during the drain');

      // Draining also closes idle kept-alive sockets; when that close wins the
      // race with this request the client sees a reset instead: never served either way.
      const refused = await post(stack.edge.url, keepAlive, {}, false).catch((err: NodeJS.ErrnoException) => err.code);
      if (refused !== 'ECONNRESET') {
        assert.ok(typeof refused === 'object' && refused !== undefined, `unexpected ${String(refused)}`);
        assert.equal(refused.status, 503);
        assert.equal(refused.headers.connection, 'close');
        const error = JSON.parse(await refused.body) as { error: { code: string; type: string; message: string; param: null } };
        assert.equal(error.error.code, 'shutting_down');
        assert.equal(error.error.type, 'server_error');
      }

      const longBody = await long.body;
      assert.match(longBody, /"code":"shutting_down"/, 'the stream cut by the grace says why, in band');
      assert.ok(countTokens(longBody) < 200);
      assert.deepEqual(await report, { drained: false, aborted: 1, waitedMs: (await report).waitedMs });
      assert.ok((await report).waitedMs >= 650);
      await waitUntil(() => inFlight(stack.edge) === 0, 'its lease to be released (with workers the release record trails the response)');
      assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
    } finally {
      keepAlive.destroy();
      await stack.agent.stop();
      await stack.mock.close();
    }
  });
});

describe('a stream cut by the drain', () => {
  test("its run ends as shutting_down (the client's error code), not fenced, and its provider is not judged", async () => {
    const stack = await startOpsStack({ capacity: 4, mock: { ttftMs: 0 } });
    const finished: { runId: string; outcome: string }[] = [];
    // Subscribed before the request: run.finished reaches the bus the moment the drain cuts the stream.
    stack.edge.events.subscribe({
      readable(sub: Subscription) {
        for (let e = sub.shift(); e !== undefined; e = sub.shift()) if (e.event.type === 'run.finished') finished.push({ runId: e.event.runId, outcome: e.event.outcome });
      },
    });
    try {
      const long = await post(stack.edge.url, false, { 'x-mock-tokens': '200', 'x-mock-interval-ms': '20' });
      assert.equal(long.status, 200);
      const runId = String(long.headers['x-edge-run-id']);
      const report = await stack.edge.shutdown(200);
      assert.equal(report.aborted, 1);
      assert.match(await long.body, /"code":"shutting_down"/);
      await waitUntil(() => stack.edge.runs.get(runId)?.state === 'finished', 'the run record to finish');
      assert.equal(stack.edge.runs.get(runId)?.outcome, 'shutting_down', 'the run record says why it was cut');
      await waitUntil(() => finished.some((e) => e.runId === runId), 'run.finished');
      assert.deepEqual(
        finished.filter((e) => e.runId === runId).map((e) => e.outcome),
        ['shutting_down'],
      );
      await waitUntil(() => inFlight(stack.edge) === 0, 'its lease to be released');
      // The edge's own shutdown says nothing about the provider: no failure counted toward ejection.
      assert.equal(stack.edge.driver.scheduler.outlierStatus(stack.edge.driver.status().providers[0].id)?.consecutiveFailures ?? 0, 0);
      assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
    } finally {
      await stack.agent.stop();
      await stack.mock.close();
    }
  });
});

describe('the drain is announced only once every thread refuses', () => {
  test('after beginDrain, a request on a connection opened before it gets 503 shutting_down on any thread', async () => {
    const stack = await startOpsStack({ capacity: 4, mock: { ttftMs: 0 } });
    // Several kept-alive connections opened before the drain, so with I/O workers they sit on different threads.
    const agents = Array.from({ length: 4 }, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    try {
      for (const agent of agents) assert.equal((await post(stack.edge.url, agent, {}, false)).status, 200);
      // The step Edge takes before it logs 'draining': synchronous, no message to the workers.
      stack.edge.plane.beginDrain();
      for (const agent of agents) {
        const reply = await post(stack.edge.url, agent, {}, false);
        assert.equal(reply.status, 503, 'no thread serves a request once the drain is announced');
        assert.match(await reply.body, /"code":"shutting_down"/);
      }
      // In the route's own format: Anthropic's overloaded answer is 529 (its SDK's OverloadedError), as everywhere else.
      const messages = await post(stack.edge.url, agents[0], {}, false, '/v1/messages');
      assert.equal(messages.status, 529);
      assert.match(await messages.body, /"type":"overloaded_error"/);
    } finally {
      for (const agent of agents) agent.destroy();
      await stack.edge.shutdown(100);
      await stack.agent.stop();
      await stack.mock.close();
    }
  });
});

describe('a body that finishes after the drain began', () => {
  test('a request whose head came before the drain and whose body after it gets 503 shutting_down, not a stream cut later', async () => {
    const stack = await startOpsStack({ capacity: 4, mock: { ttftMs: 0 } });
    const socket = net.connect(Number(new URL(stack.edge.url).port), '127.0.0.1');
    try {
      await once(socket, 'connect');
      const body = JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'late body' }] });
      // Chunked: node:http reads this one, body as it comes.
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: edge\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n${(10).toString(16)}\r\n${body.slice(0, 10)}\r\n`);
      await new Promise((resolve) => setTimeout(resolve, 150));
      stack.edge.plane.beginDrain();
      const rest = body.slice(10);
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
      socket.write(`${Buffer.byteLength(rest).toString(16)}\r\n${rest}\r\n0\r\n\r\n`);
      await waitUntil(() => (answer.includes('\r\n\r\n') && answer.includes('shutting_down')) || answer.startsWith('HTTP/1.1 200'), 'an answer');
      assert.match(answer, /^HTTP\/1\.1 503 /, answer.slice(0, 200));
      assert.match(answer, /"code":"shutting_down"/);
      assert.match(answer, /connection: close/i);
      assert.equal(stack.mock.requestLog.filter((r) => r.body?.includes('late body') === true).length, 0, 'never sent to the provider');
    } finally {
      socket.destroy();
      await stack.edge.shutdown(100);
      await stack.agent.stop();
      await stack.mock.close();
    }
  });
});

describe('a node agent that leaves', () => {
  test('Leaving marks its node draining at the edge: no new requests go there, its open stream finishes', async () => {
    const stack = await startOpsStack({ capacity: 4, queueTimeoutMs: 800, mock: { ttftMs: 0 } });
    try {
      const seen: string[] = [];
      stack.edge.events.subscribe({
        readable(sub: Subscription) {
          for (let e = sub.shift(); e !== undefined; e = sub.shift()) seen.push(e.event.type);
        },
      });
      const open = await post(stack.edge.url, false, { 'x-mock-tokens': '15', 'x-mock-interval-ms': '30' });
      const stopping = stack.agent.stop();
      await waitUntil(() => stack.edge.driver.status().nodes.some((n) => n.draining), 'the node to be marked draining');
      const status = (await stack.admin('/admin/status')).json;
      assert.equal(status.providers[0].health, 'draining');
      // An operator cannot lift a drain the agent itself asked for: it would only refuse what came (node_leaving).
      await waitUntil(() => seen.includes('node.leaving'), 'the Leaving event');
      const undrain = await stack.admin(`/admin/nodes/${status.providers[0].node}/undrain`, { method: 'POST' });
      assert.equal(undrain.status, 409, JSON.stringify(undrain.json));
      assert.equal(undrain.json.error.code, 'node_leaving');
      assert.ok(stack.edge.driver.status().nodes.some((n) => n.draining), 'still draining');
      let queuedDone = false;
      const queued = post(stack.edge.url, false, {}, false).then((r) => {
        queuedDone = true;
        return r;
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(queuedDone, false, 'a new request is not sent to the leaving node');
      assert.equal(countTokens(await open.body), 15, 'the open stream ran to its end');
      await stopping;
      // No other node ever came: after its queue timeout it is refused, never sent to the leaving node.
      const refused = await queued;
      assert.equal(refused.status, 503);
      assert.match(await refused.body, /"code":"no_provider_available"/);
    } finally {
      await stack.edge.close();
      await stack.mock.close();
    }
  });
});

describe('a node agent whose stop grace runs out', () => {
  test('its last log lines say it aborted the open tunnel; the client gets an error in band', async () => {
    const mock = await startMockProvider({ ttftMs: 0 });
    const edge = await EdgeProcess.start(opsConfigObject({ capacity: 4 }));
    const lines: { msg: string; level: number; [key: string]: unknown }[] = [];
    const logger = pino<never>({ level: 'info' }, { write: (text: string) => void lines.push(JSON.parse(text) as { msg: string; level: number }) });
    const agent = agentWith(edge.grpcPort, mock.url, logger, 300);
    try {
      await registered(agent);
      // ~10 s of stream: the agent's 300 ms grace runs out first.
      const open = await post(edge.url, false, { 'x-mock-tokens': '500', 'x-mock-interval-ms': '20' });
      assert.equal(open.status, 200);
      await agent.stop();
      assert.match(await open.body, /"code":"node_disconnected"/);
      const overAt = lines.findIndex((l) => l.msg.startsWith('stop grace over'));
      assert.ok(overAt >= 0, `a line says the grace ran out; lines: ${lines.map((l) => l.msg).join(' | ')}`);
      assert.equal(lines[overAt].aborted, 1);
      const stopped = lines.at(-1);
      assert.equal(stopped?.msg, 'stopped');
      assert.deepEqual({ drained: stopped.drained, aborted: stopped.aborted }, { drained: false, aborted: 1 });
    } finally {
      await agent.stop();
      await edge.dispose();
      await mock.close();
    }
  });
});
