// Provider and node faults through the real stack: each becomes a distinct
// error for the client (502/504, or an error event mid-stream), the lease is
// released, and a failure before the first response byte is retried once on
// another provider, invisibly to the client.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { createServer as createTlsServer } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import OpenAI from 'openai';
import type { NodeAgent } from '../../src/agent/agent.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { hasOpenssl, makeTestPki } from '../helpers/certs.js';
import { openExchanges, sessionOf, startRegisteredAgent, testWorkers, waitFor, waitUntil } from '../helpers/stack.js';

const ALIAS = 'llama3';

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createNetServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Accepts, reads the request, then resets the connection before any response byte. */
async function resettingServer(): Promise<{ server: NetServer; url: string; requests: () => number }> {
  let requests = 0;
  const server = createNetServer((socket: Socket) => {
    socket.once('data', () => {
      requests++;
      socket.resetAndDestroy();
    });
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => requests };
}

/** Sends 200 headers and half a JSON body, then goes silent (until its client goes away). */
async function stallingServer(): Promise<{ server: HttpServer; url: string; closed: () => number }> {
  let closed = 0;
  const server = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":"chatcmpl-stall","choices":[');
    });
    res.on('close', () => closed++);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, closed: () => closed };
}

interface Fleet {
  readonly edge: RunningEdge;
  readonly agents: NodeAgent[];
}

/** Edge with node-a (provider a-up at aUrl) and, optionally, node-b (b-mock at the mock). */
async function fleet(aUrl: string, bUrl: string | undefined, limits: Record<string, number> = {}): Promise<Fleet> {
  const nodes = [{ id: 'node-a', token: 'ta', providers: [{ id: 'a-up', capacity: 4 }] }];
  const providers: Record<string, string> = { 'a-up': 'served-a' };
  if (bUrl !== undefined) {
    nodes.push({ id: 'node-b', token: 'tb', providers: [{ id: 'b-mock', capacity: 4 }] });
    providers['b-mock'] = 'served-b';
  }
  const edge = await startEdge(
    parseEdgeConfig(
      {
        listen: { http: { port: 0 }, grpc: { port: 0 } },
        heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
        workers: { count: testWorkers() },
        limits,
        nodes,
        models: [{ alias: ALIAS, providers }],
      },
      'test',
    ),
    { logger: silentLogger() },
  );
  const agents: NodeAgent[] = [];
  for (const [node, id, url] of [['a', 'a-up', aUrl], ['b', 'b-mock', bUrl]] as const) {
    if (url === undefined) continue;
    agents.push(
      await startRegisteredAgent({
        edge: { address: `127.0.0.1:${edge.grpcPort}` },
        node: { id: `node-${node}`, token: `t${node}` },
        providers: [{ id, type: 'openai_compat', base_url: url }],
        reconnect: { initial_ms: 50, max_ms: 200 },
      }),
    );
  }
  return { edge, agents };
}

function chat(edge: RunningEdge, body: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }], ...body }),
  });
}

async function errorCode(res: Response): Promise<string> {
  return ((await res.json()) as { error: { code: string } }).error.code;
}

function inFlight(edge: RunningEdge): number {
  return edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0);
}

async function clean(edge: RunningEdge): Promise<void> {
  await waitUntil(() => inFlight(edge) === 0, 'every lease released');
  assert.deepEqual(edge.driver.scheduler.checkInvariants(), []);
  assert.equal(await openExchanges(edge), 0);
}

describe('faults on the tunnel path', () => {
  let mock: MockProvider;
  let current: Fleet | undefined;
  const closers: (() => Promise<void>)[] = [];

  before(async () => {
    mock = await startMockProvider({ ttftMs: 0, tokens: 4, intervalMs: 1 });
  });
  beforeEach(async () => {
    if (current) {
      await Promise.all(current.agents.map((a) => a.stop()));
      await current.edge.close();
      current = undefined;
    }
    for (const close of closers.splice(0)) await close();
  });
  after(async () => {
    if (current) {
      await Promise.all(current.agents.map((a) => a.stop()));
      await current.edge.close();
    }
    for (const close of closers.splice(0)) await close();
    await mock.close();
  });

  test('connection refused: 502 upstream_connect_failed alone; retried invisibly when another provider exists', async () => {
    const port = await closedPort();
    current = await fleet(`http://127.0.0.1:${port}`, undefined);
    const alone = await chat(current.edge);
    assert.equal(alone.status, 502);
    assert.equal(await errorCode(alone), 'upstream_connect_failed');
    await clean(current.edge);
    await Promise.all(current.agents.map((a) => a.stop()));
    await current.edge.close();

    current = await fleet(`http://127.0.0.1:${port}`, mock.url);
    const before = mock.stats.completed;
    const sdk = new OpenAI({ baseURL: `${current.edge.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const { data, response } = await sdk.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    assert.equal(response.headers.get('x-edge-provider'), 'b-mock', 'a-up refused, b-mock served');
    assert.equal(data.object, 'chat.completion');
    assert.equal(mock.stats.completed, before + 1);
    await clean(current.edge);
  });

  test('an https provider whose certificate the node does not trust: 502 upstream_connect_failed alone; retried invisibly when another provider exists', { skip: hasOpenssl() ? false : 'the openssl CLI is not installed' }, async () => {
    // A private CA the agent was not given (NODE_EXTRA_CA_CERTS): the handshake fails before the request is sent,
    // as a refused port does, and for every request alike.
    const pki = makeTestPki();
    let handshakes = 0;
    const tls = createTlsServer({ cert: readFileSync(pki.serverCert), key: readFileSync(pki.serverKey) }, (socket) => socket.destroy());
    tls.on('tlsClientError', () => handshakes++);
    tls.listen(0, '127.0.0.1');
    await once(tls, 'listening');
    closers.push(async () => {
      await new Promise<void>((resolve) => tls.close(() => resolve()));
      pki.remove();
    });
    const url = `https://127.0.0.1:${(tls.address() as AddressInfo).port}`;
    current = await fleet(url, undefined);
    const alone = await chat(current.edge);
    assert.equal(alone.status, 502);
    const body = (await alone.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'upstream_connect_failed');
    assert.match(body.error.message, /TLS handshake.*certificate/);
    await clean(current.edge);
    await Promise.all(current.agents.map((a) => a.stop()));
    await current.edge.close();

    current = await fleet(url, mock.url);
    const tried = handshakes;
    const before = mock.stats.completed;
    for (let i = 0; i < 3; i++) {
      const res = await chat(current.edge);
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(res.headers.get('x-edge-provider'), 'b-mock');
      await res.arrayBuffer();
    }
    assert.ok(handshakes > tried, 'a-up was tried');
    assert.equal(mock.stats.completed, before + 3);
    await clean(current.edge);
  });

  test('reset before headers: 502 upstream_reset alone; retried once on another provider', async () => {
    const reset = await resettingServer();
    closers.push(() => new Promise((resolve) => reset.server.close(() => resolve())));
    current = await fleet(reset.url, undefined);
    const alone = await chat(current.edge);
    assert.equal(alone.status, 502);
    assert.equal(await errorCode(alone), 'upstream_reset');
    await clean(current.edge);
    await Promise.all(current.agents.map((a) => a.stop()));
    await current.edge.close();

    current = await fleet(reset.url, mock.url);
    const seen = reset.requests();
    const res = await chat(current.edge, { stream: true });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-edge-provider'), 'b-mock');
    assert.ok((await res.text()).includes('[DONE]'));
    assert.equal(reset.requests(), seen + 1, 'a-up was tried exactly once');
    await clean(current.edge);
  });

  test('a provider error status is relayed as is, never retried', async () => {
    current = await fleet(mock.url, mock.url);
    const requests = mock.stats.requests;
    const res = await chat(current.edge, {}, { 'x-mock-fail': 'status:500' });
    assert.equal(res.status, 500);
    await res.arrayBuffer();
    assert.equal(mock.stats.requests, requests + 1);
    await clean(current.edge);
  });

  test('reset mid-stream: the SSE stream ends with an upstream_reset error event (the SDK raises), no retry', async () => {
    current = await fleet(mock.url, undefined);
    const requests = mock.stats.requests;
    const sdk = new OpenAI({ baseURL: `${current.edge.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = await sdk.chat.completions.create(
      { model: ALIAS, stream: true, messages: [] },
      { headers: { 'x-mock-fail': 'reset-mid-stream', 'x-mock-tokens': '10' } },
    );
    let chunks = 0;
    const err = await (async () => {
      for await (const _ of stream) chunks++;
    })().catch((e: unknown) => e);
    assert.ok(chunks > 0, 'some chunks arrived before the reset');
    assert.ok(err instanceof OpenAI.APIError, `got ${String(err)}`);
    assert.match(String((err as Error).message), /closed the connection|reset/i);
    assert.equal(mock.stats.requests, requests + 1, 'bytes had reached the client: no retry');
    await clean(current.edge);
  });

  for (const [when, limits, fail] of [
    ['with the provider\'s head', {}, 'close-mid-event'],
    // The edge's keepalive commits its own 200 event-stream head before the provider's arrives.
    ['after keepalives committed the head', { sse_keepalive_ms: 40 }, 'slow-headers:150,close-mid-event'],
  ] as const) {
    test(`provider connection closed inside an SSE event (${when}): the half event never reaches the client, the error event parses on its own`, async () => {
      current = await fleet(mock.url, undefined, limits);
      const headers = { 'x-mock-fail': fail, 'x-mock-tokens': '10' };
      // The SDK: every chunk it yields is whole, and the end is its APIError, not a JSON SyntaxError.
      const sdk = new OpenAI({ baseURL: `${current.edge.url}/v1`, apiKey: 'x', maxRetries: 0 });
      const stream = await sdk.chat.completions.create({ model: ALIAS, stream: true, messages: [] }, { headers });
      const seqs: number[] = [];
      const err = await (async () => {
        for await (const chunk of stream) seqs.push((chunk as unknown as { mock: { seq: number } }).mock.seq);
      })().catch((e: unknown) => e);
      assert.ok(err instanceof OpenAI.APIError, `got ${String(err)}`);
      assert.match(String((err as Error).message), /closed the connection|reset/i);
      assert.deepEqual(seqs, [0, 1, 2, 3], 'the whole events before the cut, in order');
      // The bytes: every event is whole JSON (keepalive comments aside), the last one the edge's error.
      const res = await chat(current.edge, { stream: true }, headers);
      const events = (await res.text()).split('\n\n').filter((e) => e !== '' && !e.startsWith(':'));
      const bodies = events.map((e) => {
        assert.match(e, /^data: /, `an event is one data line: ${JSON.stringify(e)}`);
        return JSON.parse(e.slice(6)) as { error?: { code: string } };
      });
      assert.equal(bodies.at(-1)?.error?.code, 'upstream_reset');
      assert.equal(bodies.length, 5);
      await clean(current.edge);
    });
  }

  test('reset mid-body of a non-streaming response: the client gets the head and the body so far, then the cut; never a truncated 200 that looks whole', async () => {
    current = await fleet(mock.url, undefined);
    // Also when HEADERS, DATA and ERROR land in one batch (with I/O workers, often): the cut used to
    // drop the head and body written in that turn, and the client got an empty reply.
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) {
      outcomes.push(
        await chat(current.edge, {}, { 'x-mock-fail': 'reset-mid-stream' }).then(
          async (res) => {
            assert.equal(res.status, 200);
            return res.text().then(() => 'complete', () => 'cut after the head');
          },
          () => 'cut before the head',
        ),
      );
    }
    assert.deepEqual(outcomes, Array(20).fill('cut after the head'));
    await clean(current.edge);
  });

  test('silence after the headers of a non-streaming response: idle timeout cuts the client connection and cancels upstream', async () => {
    const stall = await stallingServer();
    closers.push(() => new Promise((resolve) => { stall.server.closeAllConnections(); stall.server.close(() => resolve()); }));
    current = await fleet(stall.url, undefined, { idle_timeout_ms: 200 });
    const res = await chat(current.edge);
    assert.equal(res.status, 200);
    await assert.rejects(res.text());
    await waitUntil(() => stall.closed() === 1, 'the upstream request to be aborted');
    await clean(current.edge);
  });

  test('slow headers past ttfb_timeout_ms: 504 first_byte_timeout (not retried: the provider may still be working)', async () => {
    current = await fleet(mock.url, mock.url, { ttfb_timeout_ms: 150 });
    const requests = mock.stats.requests;
    const res = await chat(current.edge, {}, { 'x-mock-fail': 'slow-headers:3000' });
    assert.equal(res.status, 504);
    assert.equal(await errorCode(res), 'first_byte_timeout');
    assert.equal(mock.stats.requests, requests + 1);
    await clean(current.edge);
    await mock.waitFor(() => mock.stats.inFlight === 0, 3_000);
  });

  test('node lost mid-stream: error event node_disconnected; node lost before the first byte: retried on the other node', async () => {
    current = await fleet(mock.url, mock.url);
    const [agentA] = current.agents;
    // Mid-stream.
    const res = await chat(current.edge, { stream: true }, { 'x-mock-tokens': '50', 'x-mock-interval-ms': '20' });
    assert.equal(res.status, 200);
    const provider = res.headers.get('x-edge-provider');
    assert.equal(provider, 'a-up', 'ties go to the lowest provider id');
    setTimeout(() => agentA.dropConnection(), 100);
    const text = await res.text();
    assert.match(text, /"code":"node_disconnected"/);
    await clean(current.edge);
    await waitUntil(() => agentA.isConnected(), 'node-a to reconnect');
    // Before the first byte.
    const pending = chat(current.edge, { stream: true }, { 'x-mock-fail': 'slow-headers:300' });
    await waitFor(async () => (await sessionOf(current!.edge, 'node-a'))?.openTunnels === 1, 'the request to reach node-a');
    agentA.dropConnection();
    const retried = await pending;
    assert.equal(retried.status, 200);
    assert.equal(retried.headers.get('x-edge-provider'), 'b-mock');
    assert.ok((await retried.text()).includes('[DONE]'));
    await clean(current.edge);
  });
});
