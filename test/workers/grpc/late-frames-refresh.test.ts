// Frames a node had in flight when the edge cancelled their tunnel are late,
// not violations, for at least the heartbeat.timeout_ms the session was
// told at Registered: a refresh that lowers heartbeat.timeout_ms applies to
// later sessions only, so it must not shorten a connected session's memory
// of the tunnels it cancelled (their late frames would then count towards
// fencing the node).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ALIAS, edgeConfigObject, NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack, waitFor, type Stack } from '../../helpers/stack.js';
import { FakeNode } from './fake-node.js';

let stack: Stack;
before(async () => {
  stack = await startStack({ startAgent: false });
});
after(async () => {
  await stack.close();
});

test('a refresh that lowers heartbeat.timeout_ms does not shorten a connected session\'s memory of cancelled tunnels', async () => {
  assert.deepEqual(stack.config.heartbeat, { intervalMs: 200, timeoutMs: 1_000 }, 'the stack helper sets these');
  const node = new FakeNode(stack.edge.grpcPort);
  try {
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    await node.registered();
    const raw = edgeConfigObject({});
    const refreshed = await stack.edge.refresh({ mode: 'apply', config: { ...raw, heartbeat: { interval_ms: 10, timeout_ms: 20 } } });
    assert.equal(refreshed.status, 'applied', JSON.stringify(refreshed));

    const abort = new AbortController();
    const pending = fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      signal: abort.signal,
    });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, 'data: a\n\n');
    const res = await pending;
    await (res.body as ReadableStream<Uint8Array>).getReader().read();
    abort.abort();
    await node.waitFor((m) => m.msg.case === 'cancel' && m.msg.value.tunnelId === t.tunnelId);
    const heartbeats = (): number => node.received.filter((m) => m.msg.case === 'heartbeat').length;
    // Three of the session's heartbeats (its told interval, 200 ms): well inside its told timeout of 1 s.
    const seen = heartbeats();
    await waitFor(async () => heartbeats() >= seen + 3, 'three more heartbeats from the edge');
    const stats = async (): Promise<Record<string, number>> => (await stack.edge.inspect()).protocolStats;
    const before = { ...(await stats()) };
    node.data(t.tunnelId, 2, 'data: b\n\n');
    await waitFor(async () => {
      const now = await stats();
      return now.lateFrames + now.framesAfterEnd > before.lateFrames + before.framesAfterEnd;
    }, 'the late frame to be counted');
    const now = await stats();
    assert.equal(now.framesAfterEnd, before.framesAfterEnd, 'a frame of a tunnel cancelled within the told timeout is no violation');
    assert.equal(now.lateFrames, before.lateFrames + 1, 'counted as a late frame');
  } finally {
    node.close();
  }
});
