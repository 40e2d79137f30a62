// Every 429 and 503 the edge answers says when to come back (README,
// "Errors"): also the failures that carry no measured hint, here a node's
// ERROR session_busy (429) after dispatch, answered through the exchange's
// failure path rather than the queue's refusal. The official SDK reads the
// hint instead of falling back to its own backoff.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ALIAS, waitUntil, inFlight, type Stack } from '../helpers/stack.js';
import { stackWithFakeNode } from '../helpers/fake-node-stack.js';
import type { FakeNode } from '../workers/grpc/fake-node.js';

describe('retry hints on failures after dispatch', () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    ({ stack, node } = await stackWithFakeNode());
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  test('a node answering ERROR session_busy gives the client 429 with Retry-After and retry-after-ms', async () => {
    const pending = fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] }),
    });
    const tunnel = await node.nextTunnel();
    node.error(tunnel.tunnelId, 0, 'session_busy', 'the session is running another turn');
    const res = await pending;
    const body = (await res.json()) as { error: { code: string } };
    assert.equal(res.status, 429);
    assert.equal(body.error.code, 'session_busy');
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(res.headers.get('retry-after-ms'), '1000');
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease released');
  });

  test('the openai SDK waits out the hint and retries: the second try is served', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 1, timeout: 10_000 });
    const started = Date.now();
    const answer = client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] });
    const first = await node.nextTunnel();
    node.error(first.tunnelId, 0, 'session_busy');
    const second = await node.nextTunnel(5_000);
    const waited = Date.now() - started;
    node.headers(second.tunnelId, 0, [{ $typeName: 'edge.v1.Header', name: 'content-type', value: 'application/json' }]);
    node.data(second.tunnelId, 1, JSON.stringify({ id: 'c1', object: 'chat.completion', created: 0, model: ALIAS, choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] }));
    node.end(second.tunnelId, 2);
    assert.equal((await answer).choices[0].message.content, 'ok');
    // retry-after-ms 1000, which the SDK honours (without a hint it backs off about 0.5 s).
    assert.ok(waited >= 900, `the SDK retried after ${waited} ms`);
  });
});

describe("retry hints on a provider's own 429/503, relayed", () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    // No requeue: the provider's answer is relayed at once.
    ({ stack, node } = await stackWithFakeNode({ configure: (raw) => void (raw.resilience = { overload: { max_requeues: 0 } }) }));
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  test('the hints the provider left out are added (from its Retry-After or retry-after-ms, else 1 s); its own are kept', async () => {
    const cases: { status: number; sent: { name: string; value: string }[]; expect: [string | null, string | null] }[] = [
      { status: 429, sent: [], expect: ['1', '1000'] },
      { status: 503, sent: [{ name: 'retry-after', value: '2' }], expect: ['2', '2000'] },
      { status: 429, sent: [{ name: 'retry-after-ms', value: '250' }], expect: ['1', '250'] },
      // Only retry-after-ms: the Retry-After added agrees with it (not a default 1 s next to a longer wait).
      { status: 429, sent: [{ name: 'retry-after-ms', value: '3500' }], expect: ['4', '3500'] },
      // Not delta-seconds, yet what the SDKs read as seconds (parseFloat): never a hint of 0 ms.
      { status: 429, sent: [{ name: 'retry-after', value: '1.5' }], expect: ['1.5', '1500'] },
      // Unreadable: as if absent (1 s), not a past date of Date.parse's guessing.
      { status: 503, sent: [{ name: 'retry-after', value: '-5' }], expect: ['-5', '1000'] },
      { status: 503, sent: [{ name: 'retry-after', value: 'soon' }], expect: ['soon', '1000'] },
      // Too large for an integer's digits: the added hint is still a whole number of ms.
      { status: 429, sent: [{ name: 'retry-after', value: '99999999999999999999999' }], expect: ['99999999999999999999999', '2147483647'] },
    ];
    for (const c of cases) {
      const pending = fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'x' }] }),
      });
      // The provider's hold after an overload answer delays the next grant: wait for each tunnel.
      const tunnel = await node.nextTunnel(10_000);
      node.headers(tunnel.tunnelId, 0, [{ $typeName: 'edge.v1.Header', name: 'content-type', value: 'application/json' }, ...c.sent.map((h) => ({ $typeName: 'edge.v1.Header' as const, ...h }))], c.status);
      node.data(tunnel.tunnelId, 1, JSON.stringify({ error: { message: 'busy', type: 'rate_limit_error' } }));
      node.end(tunnel.tunnelId, 2);
      const res = await pending;
      await res.arrayBuffer();
      assert.equal(res.status, c.status);
      assert.deepEqual([res.headers.get('retry-after'), res.headers.get('retry-after-ms')], c.expect, JSON.stringify(c.sent));
    }
  });
});
