// A node's restart, as its only provider's clients see it. A request the
// agent refused because it was already leaving (ERROR node_leaving) waits
// for the node to come back, as a request arriving a moment later does,
// instead of failing with 503 because no other provider was up. A node that
// registers drained (an operator's command it still obeys), or with its
// provider's health probe failing, is sent none of the requests waiting
// for it, not even by the connect's own pump.
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { heartbeatMessage, leavingMessage, registerMessage } from '../../src/agent/frames.js';
import { ALIAS, inFlight, NODE_ID, NODE_TOKEN, PROVIDER_ID, queueDepth, startStack, waitUntil, type Stack } from '../helpers/stack.js';
import { FakeNode, JSON_HEADERS } from '../workers/grpc/fake-node.js';

function chat(stack: Stack): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

function answer(node: FakeNode, tunnelId: number, text: string): void {
  node.headers(tunnelId, 0, JSON_HEADERS);
  node.data(tunnelId, 1, JSON.stringify({ id: 'c', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] }));
  node.end(tunnelId, 2);
}


async function connected(stack: Stack, draining = false, failing = false): Promise<FakeNode> {
  const node = new FakeNode(stack.edge.grpcPort);
  const probes = failing ? [{ providerId: PROVIDER_ID, healthy: false, detail: 'connect ECONNREFUSED' }] : [];
  node.send(registerMessage(NODE_ID, NODE_TOKEN, 'fake-node/1', [PROVIDER_ID], 0, 0, new Map(), [], draining, probes));
  await node.registered();
  return node;
}

describe('a restart of the only node', () => {
  let stack: Stack;
  const nodes: FakeNode[] = [];
  before(async () => {
    stack = await startStack({ startAgent: false, capacity: 4, queueTimeoutMs: 5_000 });
  });
  afterEach(async () => {
    for (const node of nodes.splice(0)) node.close();
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  });
  after(async () => {
    await stack.close();
  });

  test('a request refused as the node left (node_leaving) is served by the node once it is back, as a later one is', async () => {
    const old = await connected(stack);
    nodes.push(old);
    const caught = chat(stack);
    const t = await old.nextTunnel();
    // The agent had begun leaving when the request reached it.
    old.send(leavingMessage('shutdown'));
    old.error(t.tunnelId, 0, 'node_leaving', 'the node is shutting down');
    // Sent once the edge knows (else it could go to the old node, which here, unlike an agent, would not refuse it).
    await waitUntil(() => queueDepth(stack.edge) === 1, 'the refused request back in the queue');
    const later = chat(stack);
    await waitUntil(() => queueDepth(stack.edge) === 2, 'the later request queued behind it');
    old.close();
    const fresh = await connected(stack);
    nodes.push(fresh);
    for (let i = 0; i < 2; i++) answer(fresh, (await fresh.nextTunnel()).tunnelId, 'back');
    const [first, second] = await Promise.all([caught, later]);
    assert.equal(first.status, 200, await first.clone().text());
    assert.equal(second.status, 200);
    assert.equal(((await first.json()) as { choices: { message: { content: string } }[] }).choices[0].message.content, 'back');
    await second.arrayBuffer();
    assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
  });

  test("a request cut by its node's stop says the node was leaving, not that it was lost", async () => {
    const old = await connected(stack);
    nodes.push(old);
    const res = fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const t = await old.nextTunnel();
    old.headers(t.tunnelId, 0);
    old.data(t.tunnelId, 1, `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content: 'par' }, finish_reason: null }] })}\n\n`);
    // An agent's stop: Leaving, then (its grace over with this tunnel still open) the end of its stream.
    old.send(leavingMessage('shutdown'));
    old.call.end();
    const text = await (await res).text();
    assert.match(text, /"code":"node_disconnected"/);
    assert.match(text, /node closed the stream while leaving \(shutdown\)/, text);
  });

  test('a node that registers drained gets none of the waiting requests; they go to it once it registers undrained', async () => {
    const waiting = [chat(stack), chat(stack), chat(stack)];
    await waitUntil(() => queueDepth(stack.edge) === 3, 'three requests queued');
    const drained = await connected(stack, true);
    nodes.push(drained);
    await assert.rejects(drained.nextTunnel(400), /no TunnelRequest arrived/, 'a drained node is sent nothing');
    drained.close();
    const fresh = await connected(stack);
    nodes.push(fresh);
    for (let i = 0; i < 3; i++) answer(fresh, (await fresh.nextTunnel()).tunnelId, 'ok');
    for (const res of await Promise.all(waiting)) {
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
  });

  test("a node that registers with its provider's probe failing gets none of the waiting requests until a heartbeat says it passes", async () => {
    const waiting = [chat(stack), chat(stack)];
    await waitUntil(() => queueDepth(stack.edge) === 2, 'two requests queued');
    const node = await connected(stack, false, true);
    nodes.push(node);
    await assert.rejects(node.nextTunnel(400), /no TunnelRequest arrived/, 'a provider failing its probe is sent nothing');
    node.send(heartbeatMessage(Date.now(), [{ providerId: PROVIDER_ID, healthy: true, detail: '' }]));
    for (let i = 0; i < 2; i++) answer(node, (await node.nextTunnel()).tunnelId, 'ok');
    for (const res of await Promise.all(waiting)) {
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
  });
});
