// A provider that compresses its event stream though the agent asked for
// identity (some OpenAI-compatible servers behind a gzip proxy do): the
// edge cannot see events in compressed bytes, so it relays them as they
// come, labelled as the provider sent them. Before, it held them waiting
// for a blank line that compressed bytes never hold, and the client got
// the whole stream at its end.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, createGzip } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import type { NodeAgent } from '../../src/agent/agent.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { silentLogger } from '../../src/shared/logger.js';
import { NODE_ID, NODE_TOKEN, openExchanges, startProvidersStack, startRegisteredAgent, testWorkers, waitUntil, type ProvidersStack } from '../helpers/stack.js';

describe('a gzip-compressed event stream', () => {
  let provider: Server;
  let stack: ProvidersStack;
  /** Resolves the provider's wait between its first event and the rest. */
  let clientGotFirst: () => void = () => {};

  before(async () => {
    provider = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
        const gzip = createGzip();
        gzip.pipe(res);
        const event = (text: string): void => {
          gzip.write(`data: {"choices":[{"delta":{"content":"${text}"}}]}\n\n`);
          gzip.flush();
        };
        event('first');
        // The rest only once the client has read the first: an edge holding it would never be answered.
        new Promise<void>((resolve) => (clientGotFirst = resolve)).then(() => {
          event('second');
          gzip.end('data: [DONE]\n\n');
        });
      });
    });
    provider.listen(0, '127.0.0.1');
    await once(provider, 'listening');
    stack = await startProvidersStack('gz', { p1: `http://127.0.0.1:${(provider.address() as AddressInfo).port}` });
  });
  after(async () => {
    provider?.closeAllConnections();
    await stack?.close();
    provider?.close();
  });

  test('reaches the client event by event, still compressed and labelled so, and nothing is left open', async () => {
    const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gz', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-encoding'), 'gzip');
    // fetch decodes gzip as it streams.
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    const firstSeen = (async () => {
      while (!text.includes('first')) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    })();
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error(`the first event never arrived alone (got ${JSON.stringify(text)})`)), 5_000).unref());
    await Promise.race([firstSeen, timeout]).catch(async (err: unknown) => {
      await reader.cancel();
      throw err;
    });
    assert.match(text, /"first"/);
    clientGotFirst();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    assert.match(text, /"second"/);
    assert.match(text, /data: \[DONE\]\n\n$/);
    await waitUntil(() => stack.edge.driver.status().providers.every((p) => p.inFlight === 0), 'the lease released');
    assert.equal(await openExchanges(stack.edge), 0);
  });
});

// With sse_keepalive_ms the edge may have committed its own 200 event-stream
// head (no content-encoding) before the provider's head arrives: compressed
// bytes can then no longer be labelled as such. Written into the stream,
// the client read binary garbage where events belong.
describe('a compressed answer after keepalives began the stream', () => {
  let provider: Server;
  let edge: RunningEdge;
  let agent: NodeAgent;
  /** Resolved by the test once the client read a keepalive: the provider's head comes only then. */
  let keepaliveSeen: () => void = () => {};

  before(async () => {
    provider = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        void new Promise<void>((resolve) => (keepaliveSeen = resolve)).then(() => {
          if (req.headers['x-test'] === 'error') {
            res.writeHead(400, { 'content-type': 'application/json', 'content-encoding': 'br' });
            res.end(brotliCompressSync(JSON.stringify({ error: { message: 'the prompt is too long', type: 'invalid_request_error' } })));
            return;
          }
          res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
          const gzip = createGzip();
          gzip.pipe(res);
          gzip.write('data: {"choices":[{"delta":{"content":"first"}}]}\n\n');
          gzip.end('data: [DONE]\n\n');
        });
      });
    });
    provider.listen(0, '127.0.0.1');
    await once(provider, 'listening');
    edge = await startEdge(
      parseEdgeConfig(
        {
          listen: { http: { port: 0 }, grpc: { port: 0 } },
          limits: { sse_keepalive_ms: 30 },
          heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
          workers: { count: testWorkers() },
          nodes: [{ id: NODE_ID, token: NODE_TOKEN, providers: [{ id: 'p1', capacity: 4 }] }],
          models: [{ alias: 'gz', providers: { p1: 'served-p1' } }],
        },
        'test',
      ),
      { logger: silentLogger() },
    );
    agent = await startRegisteredAgent({
      edge: { address: `127.0.0.1:${edge.grpcPort}` },
      node: { id: NODE_ID, token: NODE_TOKEN },
      providers: [{ id: 'p1', type: 'openai_compat', base_url: `http://127.0.0.1:${(provider.address() as AddressInfo).port}` }],
      reconnect: { initial_ms: 50, max_ms: 200 },
    });
  });
  after(async () => {
    provider?.closeAllConnections();
    await agent?.stop();
    await edge?.close();
    provider?.close();
  });

  /** The stream's events, after the provider was let go at the first keepalive the client read. */
  async function events(headers: Record<string, string>): Promise<string[]> {
    const res = await fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'gz', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-encoding'), null, "the edge's own head, uncompressed");
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (text.includes(': keepalive')) keepaliveSeen();
    }
    return text.split('\n\n').filter((e) => e !== '' && !e.startsWith(':'));
  }

  test('a 2xx gzip stream: one error event that says why, never compressed bytes; nothing is left open', async () => {
    const got = await events({});
    assert.equal(got.length, 1, `only the error event: ${JSON.stringify(got)}`);
    assert.match(got[0], /^data: /);
    const body = JSON.parse(got[0].slice(6)) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'upstream_error');
    assert.match(body.error.message, /content-encoding: gzip/);
    await waitUntil(() => edge.driver.status().providers.every((p) => p.inFlight === 0), 'the lease released');
    assert.equal(await openExchanges(edge), 0);
  });

  test("a br-compressed error answer: the in-band error carries the provider's message", async () => {
    const got = await events({ 'x-test': 'error' });
    assert.equal(got.length, 1, JSON.stringify(got));
    const body = JSON.parse(got[0].slice(6)) as { error: { type: string; message: string } };
    assert.equal(body.error.type, 'invalid_request_error');
    assert.equal(body.error.message, 'the provider answered HTTP 400: the prompt is too long');
    await waitUntil(() => edge.driver.status().providers.every((p) => p.inFlight === 0), 'the lease released');
  });
});
