// A provider whose health probe already fails when a config refresh adds it
// (the node announced it before the edge's config had it) starts out of
// rotation: the node's next heartbeat tells the scheduler, which would
// otherwise have started it healthy and kept it so until the verdict changed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { heartbeatMessage } from '../../src/agent/frames.js';
import { ALIAS, edgeConfigObject, NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack, waitUntil, type Stack } from '../helpers/stack.js';
import { FakeNode } from '../workers/grpc/fake-node.js';

const LATE = 'gpu-1-added-later';

describe('health verdicts of a provider a refresh adds', () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    stack = await startStack({ startAgent: false });
    node = new FakeNode(stack.edge.grpcPort);
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID, LATE]);
    await node.registered();
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  test('a provider failing its probe when it is added gets no request', async () => {
    const failing = () => node.send(heartbeatMessage(Date.now(), [{ providerId: LATE, healthy: false, detail: 'connection refused' }, { providerId: PROVIDER_ID, healthy: true, detail: '' }]));
    failing(); // before the edge knows LATE: the scheduler has no such provider yet
    await new Promise((resolve) => setTimeout(resolve, 100));
    const raw = edgeConfigObject();
    (raw.nodes as { providers: Record<string, unknown>[] }[])[0].providers.push({ id: LATE, type: 'openai_compat', capacity: 4 });
    (raw.models as Record<string, unknown>[]).push({ alias: 'late-only', queue_timeout_ms: 300, providers: { [LATE]: 'served-late' } });
    const result = await stack.edge.refresh({ mode: 'apply', config: raw });
    assert.equal(result.status, 'applied', JSON.stringify(result));
    failing(); // the same verdict again: unchanged for the node, news for the scheduler
    await waitUntil(() => stack.edge.driver.status().providers.find((p) => p.id === LATE)?.unhealthy === true, `${LATE} out of rotation`, 3_000);
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'late-only', messages: [{ role: 'user', content: 'x' }] }),
    });
    // It waits for a provider that passes, none comes: refused, and never sent to the failing one.
    assert.equal(res.status, 503, await res.clone().text());
    const error = ((await res.json()) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'no_provider_available');
    // Its node is connected: the message must not send the operator looking for a network problem.
    assert.doesNotMatch(error.message, /is connected;/);
    assert.match(error.message, /is available: none is connected, or each is drained, disabled, unhealthy or ejected/);
    assert.equal(node.received.filter((m) => m.msg.case === 'tunnelRequest' || m.msg.case === 'tunnelRequestBatch').length, 0, 'nothing was sent to the failing provider');
    assert.ok(stack.edge.driver.status().providers.some((p) => p.id === PROVIDER_ID && p.unhealthy !== true), `${ALIAS}'s provider still healthy`);
  });
});
