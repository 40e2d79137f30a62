// Passive outlier ejection through the real stack: a node with two providers
// for one alias, one of them (a plain HTTP server) answering 500 to every
// request. After five failures it is ejected: every later request goes to
// the healthy mock, status and events show the ejection, and an operator
// reset brings it back at once.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import type { EdgeEvent } from '../../src/contract/events.js';
import Anthropic from '@anthropic-ai/sdk';
import { inFlight, NODE_ID, NODE_TOKEN, startProvidersStack, testWorkers, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const ALIAS = 'llama3';

describe('a provider that fails every request', () => {
  let failing: Server;
  let failed = 0;
  let mock: MockProvider;
  let edge: RunningEdge;
  let stack: ProvidersStack;
  let events: EdgeEvent[] = [];
  before(async () => {
    failing = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        failed++;
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{"error":{"message":"boom"}}');
      });
    });
    failing.listen(0, '127.0.0.1');
    await once(failing, 'listening');
    mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
    // 'a-bad' sorts first, so it wins every tie until it is ejected.
    stack = await startProvidersStack(ALIAS, { 'a-bad': `http://127.0.0.1:${(failing.address() as AddressInfo).port}`, 'b-good': mock.url });
    ({ edge, events } = stack);
  });
  after(async () => {
    await stack.close();
    await mock.close();
    failing.close();
  });

  async function chat(): Promise<{ status: number; provider: string | null }> {
    const res = await fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    return { status: res.status, provider: res.headers.get('x-edge-provider') };
  }

  test('is ejected after five failures; its share moves to the other; a reset returns it', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) {
      const { status, provider } = await chat();
      outcomes.push(`${provider}:${status}`);
      // With I/O workers the lease's release trails the response: a slot still held would make the next pick a tie-break on load.
      await waitUntil(() => inFlight(edge) === 0, 'the lease to be released');
    }
    assert.deepEqual(outcomes.slice(0, 5), Array(5).fill('a-bad:500'), outcomes.join(' '));
    assert.deepEqual(outcomes.slice(5), Array(15).fill('b-good:200'), outcomes.join(' '));
    assert.equal(failed, 5, 'the ejected provider got no request after its fifth failure');

    const status = await edge.status();
    const bad = status.providers.find((p) => p.id === 'a-bad');
    assert.equal(bad?.health, 'ejected');
    assert.equal(bad?.outlier?.ejections, 1);
    assert.match(bad?.outlier?.reason ?? '', /5 consecutive failures/);
    const until = Date.parse(bad?.outlier?.until ?? '');
    assert.ok(until > Date.now() + 20_000 && until < Date.now() + 40_000, `ejected for about 30 s (until ${bad?.outlier?.until})`);
    await waitUntil(() => events.some((e) => e.type === 'provider.ejected' && e.provider === 'a-bad'), 'a provider.ejected event');
    const metrics = await edge.metrics.scrape();
    assert.match(metrics, /edge_provider_outlier_state\{provider="a-bad",node="gpu-1"\} 1/);

    assert.equal(edge.resetProvider('a-bad'), true);
    assert.equal((await chat()).provider, 'a-bad', 'back in rotation at once');
    assert.equal(edge.resetProvider('nope'), undefined);
  });
});

describe('an ejected provider that alone serves Messages', () => {
  // 'a-msg' fails every chat request but answers Messages; 'b-chat' serves chat only.
  let server: Server;
  let mock: MockProvider;
  let stack: ProvidersStack;
  let messagesServed = 0;
  before(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        if (req.url !== '/v1/messages') {
          res.writeHead(500).end('{"error":{"message":"boom"}}');
          return;
        }
        messagesServed++;
        const text = 'from a-msg';
        res.end(JSON.stringify({ id: 'msg_1', type: 'message', role: 'assistant', model: 'served-a-msg', content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 1, output_tokens: 3 } }));
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    stack = await startProvidersStack(ALIAS, { 'a-msg': url, 'b-chat': mock.url }, {}, { 'a-msg': ['chat', 'messages'], 'b-chat': ['chat'] });
  });
  after(async () => {
    await stack.close();
    await mock.close();
    server.close();
  });

  test('keeps answering Messages through the Anthropic SDK while chat goes to the other provider', async () => {
    const { edge } = stack;
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${edge.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.arrayBuffer();
      assert.equal(res.headers.get('x-edge-provider'), 'a-msg');
      await waitUntil(() => inFlight(edge) === 0, 'the lease to be released');
    }
    assert.equal((await edge.status()).providers.find((p) => p.id === 'a-msg')?.health, 'ejected');
    const anthropic = new Anthropic({ baseURL: edge.url, apiKey: 'unused', maxRetries: 0, timeout: 5_000 });
    const message = await anthropic.messages.create({ model: ALIAS, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
    assert.deepEqual(message.content, [{ type: 'text', text: 'from a-msg' }], 'served by the ejected provider instead of timing out in the queue');
    assert.equal(messagesServed, 1);
    const chat = await fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await chat.arrayBuffer();
    assert.equal(chat.status, 200);
    assert.equal(chat.headers.get('x-edge-provider'), 'b-chat', 'chat stays away from the ejected provider');
  });
});

describe('an ejected provider that a refresh removes', () => {
  let failing: Server;
  let mock: MockProvider;
  let stack: ProvidersStack;
  // A short ejection, so that the test sees the time it would have ended.
  const resilience = { outliers: { base_ejection_ms: 300, max_ejection_ms: 300 } };
  before(async () => {
    failing = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"boom"}}'));
    });
    failing.listen(0, '127.0.0.1');
    await once(failing, 'listening');
    mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
    stack = await startProvidersStack(ALIAS, { 'a-bad': `http://127.0.0.1:${(failing.address() as AddressInfo).port}`, 'b-good': mock.url }, {}, {}, { resilience });
  });
  after(async () => {
    await stack.close();
    await mock.close();
    failing.close();
  });

  async function chat(): Promise<string | null> {
    const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    return res.headers.get('x-edge-provider');
  }

  test('is forgotten: no half-open event for a provider the config no longer has', async () => {
    const { edge, events } = stack;
    for (let i = 0; i < 5; i++) {
      await chat();
      await waitUntil(() => inFlight(edge) === 0, 'the lease to be released');
    }
    const ejected = events.find((e) => e.type === 'provider.ejected' && e.provider === 'a-bad');
    assert.ok(ejected !== undefined, 'a-bad was ejected');
    const applied = await edge.refresh({
      mode: 'apply',
      config: {
        listen: { http: { port: 0 }, grpc: { port: 0 } },
        heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
        workers: { count: testWorkers() },
        resilience,
        nodes: [{ id: NODE_ID, token: NODE_TOKEN, providers: [{ id: 'b-good', capacity: 4 }] }],
        models: [{ alias: ALIAS, providers: { 'b-good': 'served-b-good' } }],
      },
    });
    assert.equal(applied.status, 'applied');
    // Only what is said once it is gone: a slow apply may outlast the ejection, whose end is then told while a-bad is still configured.
    const gone = events.length;
    const ejectionEnds = Date.now() + 400; // 300 ms, +10 % jitter at most
    await waitUntil(() => Date.now() > ejectionEnds, 'the time its ejection would have ended');
    // A scheduler call after that time runs its expiry.
    assert.equal(await chat(), 'b-good');
    assert.deepEqual(
      events.slice(gone).filter((e) => e.type.startsWith('provider.') && e.type !== 'provider.ejected').map((e) => e.type),
      [],
      'nothing is said of a provider that is gone',
    );
  });
});
