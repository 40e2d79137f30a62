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
import { inFlight, startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

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
