// A heartbeat refresh against a real edge and an idle node agent: lowering
// heartbeat.timeout_ms (and interval_ms) must not drop a node that still
// heartbeats at the interval it was told at Register. Each session is judged
// by the settings it was given; new sessions get the new ones.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { edgeConfigObject, sessionOf, startStack, type Stack } from '../helpers/stack.js';

const NODE = 'gpu-1';

describe('heartbeat settings lowered by config refresh', () => {
  let stack: Stack;
  let raw: Record<string, unknown>;
  before(async () => {
    const slow = (r: Record<string, unknown>): void => {
      r.heartbeat = { interval_ms: 1_000, timeout_ms: 5_000 };
    };
    raw = edgeConfigObject();
    slow(raw);
    stack = await startStack({ configure: slow });
  });
  after(async () => {
    await stack.close();
  });

  test('an idle node stays connected on its old settings', async () => {
    const before = await sessionOf(stack.edge, NODE);
    assert.ok(before, 'the node is connected');
    let reconnects = 0;
    stack.agent!.on('registered', () => reconnects++);
    const result = await stack.edge.refresh({ mode: 'apply', config: { ...raw, heartbeat: { interval_ms: 100, timeout_ms: 300 } } });
    assert.equal(result.status, 'applied', JSON.stringify(result));
    // Three of the old intervals: every check of the old session falls in this window.
    await new Promise((resolve) => setTimeout(resolve, 3_200));
    const afterRefresh = await sessionOf(stack.edge, NODE);
    assert.equal(afterRefresh?.generation, before.generation, 'the node kept its connection (no heartbeat timeout)');
    assert.equal(reconnects, 0, 'the agent never re-registered');
  });
});
