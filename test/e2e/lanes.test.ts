// A node agent with several streams ("lanes") to the edge: one connection,
// one generation, tunnels spread over the lanes (and with I/O workers over
// the workers holding them). A lane that drops fails only its own tunnels
// and comes back in the same generation; the first stream dropping ends the
// connection, and everything comes back under a new generation; a lane may
// join only the current generation. Every stream that completes is checked
// to be its client's own (x-request-id and token count stamped on each chunk
// by the mock, and matching the mock's log): tunnels spread over lanes must
// never cross.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertLogged, assertOwnStream, clientRequestId } from '../helpers/identity.js';
import { ALIAS, edgeConfigObject, inFlight, NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack, waitFor, waitUntil, type Stack } from '../helpers/stack.js';
import { FakeNode } from '../workers/grpc/fake-node.js';

const STREAMS = 3;

interface Lane {
  readonly generation: number;
  readonly lane: number;
  readonly joined: boolean;
  readonly openTunnels: number;
}

async function lanesOf(stack: Stack): Promise<Lane[]> {
  return (await stack.edge.inspect()).sessions.filter((s) => s.nodeId === NODE_ID);
}

/** All STREAMS lanes registered in one generation, exactly one of them the anchor. */
async function waitForLanes(stack: Stack, above = 0): Promise<number> {
  let generation = 0;
  await waitFor(async () => {
    const lanes = await lanesOf(stack);
    generation = lanes[0]?.generation ?? 0;
    return lanes.length === STREAMS && generation > above && lanes.every((l) => l.generation === generation) && lanes.filter((l) => !l.joined).length === 1;
  }, `${STREAMS} lanes in one generation above ${above}`);
  return generation;
}

let opened = 0;

/**
 * A streaming chat request that has delivered its first chunk; `done` settles
 * when the stream ends (true: whole, and checked to be this client's own).
 * Each stream asks for its own token count (tokens plus 0-4), so a crossed one cannot pass.
 */
async function openStream(stack: Stack, baseTokens: number): Promise<{ done: Promise<boolean> }> {
  const n = opened++;
  const requestId = clientRequestId('lanes', n);
  const tokens = baseTokens + (n % 5);
  const res = await fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': requestId, 'x-mock-tokens': String(tokens), 'x-mock-interval-ms': '40', 'x-mock-ttft-ms': '0' },
    body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'lanes' }] }),
  });
  assert.equal(res.status, 200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const first = await reader.read();
  assert.equal(first.done, false);
  const done = (async (): Promise<boolean> => {
    let text = Buffer.from(first.value ?? new Uint8Array()).toString();
    try {
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        text += Buffer.from(chunk.value).toString();
      }
    } catch {
      return false;
    }
    if (!text.includes('data: [DONE]')) return false;
    assertLogged(stack.mock.requestLog, assertOwnStream(text, requestId, tokens), requestId, tokens);
    return true;
  })();
  return { done };
}

describe('a node with several streams (lanes)', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 40, agentStreams: STREAMS });
  });
  after(async () => {
    await stack.close();
  });

  test('one connection, one generation, and tunnels spread over more than one lane', async () => {
    const generation = await waitForLanes(stack);
    assert.equal(stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.generation, generation);
    const streams = await Promise.all(Array.from({ length: 12 }, () => openStream(stack, 15)));
    const busy = (await lanesOf(stack)).filter((l) => l.openTunnels > 0).length;
    assert.ok(busy >= 2, `tunnels on ${busy} lane(s)`);
    assert.deepEqual(await Promise.all(streams.map((s) => s.done)), streams.map(() => true));
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  });

  test('a lane that drops fails only its own tunnels and comes back in the same generation', async () => {
    const generation = await waitForLanes(stack);
    // With I/O workers, which lane a tunnel takes depends on the worker each request lands on:
    // nine streams can all miss lane 1, so more are opened (while the first still run) until it holds some.
    const streams: { done: Promise<boolean> }[] = [];
    let onLane1 = -1;
    for (let round = 0; round < 4 && onLane1 <= 0; round++) {
      streams.push(...(await Promise.all(Array.from({ length: 9 }, () => openStream(stack, 40)))));
      onLane1 = (await lanesOf(stack)).find((l) => l.lane === 1)?.openTunnels ?? -1;
    }
    assert.ok(onLane1 > 0, `lane 1 holds tunnels (${onLane1})`);
    stack.agent?.dropLane(1);
    const outcomes = await Promise.all(streams.map((s) => s.done));
    assert.equal(outcomes.filter((ok) => !ok).length, onLane1, `lane 1 held ${onLane1} tunnels; those failed, the rest completed`);
    assert.equal(await waitForLanes(stack), generation, 'the lane re-joined the same generation');
    assert.equal(stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.generation, generation, 'the connection was never interrupted');
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released, the failed ones included');
  });

  test("requests a dropped lane held before their first byte are retried on the same provider over the lanes still up", async () => {
    await waitForLanes(stack);
    // Whole answers come after 20 tokens of 40 ms: no byte before the lane drops. The node has one provider, so a
    // retry held off it (as if the provider had failed) would have nowhere to go and fail with node_disconnected.
    const ask = async (): Promise<number> => {
      const res = await fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-mock-tokens': '20', 'x-mock-interval-ms': '40', 'x-mock-ttft-ms': '0' },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'whole' }] }),
      });
      await res.arrayBuffer();
      return res.status;
    };
    const answers: Promise<number>[] = [];
    let onLane1 = 0;
    for (let round = 0; round < 4 && onLane1 === 0; round++) {
      answers.push(...Array.from({ length: 6 }, ask));
      await waitUntil(() => inFlight(stack.edge) === answers.length, 'every request dispatched');
      onLane1 = (await lanesOf(stack)).find((l) => l.lane === 1)?.openTunnels ?? 0;
    }
    assert.ok(onLane1 > 0, 'lane 1 holds requests');
    stack.agent?.dropLane(1);
    assert.deepEqual(await Promise.all(answers), answers.map(() => 200), `the ${onLane1} on lane 1 were served again, over the others`);
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  });

  test('the first stream dropping ends the connection; it comes back whole under a new generation', async () => {
    const generation = await waitForLanes(stack);
    stack.agent?.dropConnection();
    const next = await waitForLanes(stack, generation);
    assert.ok(next > generation);
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'again' }] }),
    });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  });

  test('stopping the agent lets the open streams of every lane finish', async () => {
    await waitForLanes(stack);
    const streams = await Promise.all(Array.from({ length: 9 }, () => openStream(stack, 15)));
    const busy = (await lanesOf(stack)).filter((l) => l.openTunnels > 0).length;
    const stopped = stack.agent?.stop();
    assert.deepEqual(await Promise.all(streams.map((s) => s.done)), streams.map(() => true), `all complete (tunnels were on ${busy} lanes)`);
    await stopped;
    await waitFor(async () => (await lanesOf(stack)).length === 0, 'every stream closed');
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
    await stack.startAgent(); // for the next test
  });

  test('a lane may join only the current generation', async () => {
    const generation = await waitForLanes(stack);
    const stale = new FakeNode(stack.edge.grpcPort);
    const current = new FakeNode(stack.edge.grpcPort);
    try {
      stale.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID], 7, generation + 1000);
      await assert.rejects(stale.registered(), /not current/);
      current.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID], 7, generation);
      assert.equal(await current.registered(), generation);
      await waitFor(async () => (await lanesOf(stack)).length === STREAMS + 1, 'the extra lane listed');
    } finally {
      stale.close();
      current.close();
    }
    await waitFor(async () => (await lanesOf(stack)).length === STREAMS, 'the extra lane gone, the connection untouched');
    assert.equal(stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.generation, generation);
  });

  test('a lane that closes while its join is being answered leaves the connection alone', async () => {
    const generation = await waitForLanes(stack);
    // Closed 0-3 ms after its Register: some close before the edge reads it, some while main answers, some after.
    for (let i = 0; i < 24; i++) {
      const lane = new FakeNode(stack.edge.grpcPort);
      lane.register(NODE_ID, NODE_TOKEN, [], 9, generation);
      await new Promise((resolve) => setTimeout(resolve, i % 4));
      lane.close();
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.generation, generation, 'no new generation');
    assert.equal(await waitForLanes(stack), generation);
    assert.equal(stack.agent?.isConnected(), true);
  });

  // Last: the agent cannot register again once its token changed.
  test('a token change retires the connection, but its lanes\' open streams finish first', async () => {
    await waitForLanes(stack);
    const streams = await Promise.all(Array.from({ length: 12 }, () => openStream(stack, 15)));
    assert.ok((await lanesOf(stack)).filter((l) => l.openTunnels > 0).length >= 2, 'tunnels on several lanes');
    const raw = edgeConfigObject({ capacity: 40 }) as { nodes: { token: string }[] };
    raw.nodes[0].token = 'rotated-while-streaming';
    const result = await stack.edge.refresh({ mode: 'apply', config: raw });
    assert.equal(result.status, 'applied', JSON.stringify(result.reasons));
    assert.deepEqual(await Promise.all(streams.map((s) => s.done)), streams.map(() => true), 'every open stream ran to its end');
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  });
});
