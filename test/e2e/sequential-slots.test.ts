// A client that reads its answer and sends its next request at once must
// find the provider slot free, even when that request lands on another I/O
// worker: with max_queue 0 a slot still held would be a 429 queue_full the
// client did nothing to earn. Runs in every mode; it is only a race with
// I/O workers (EDGE_TEST_WORKERS > 0), where the lease's release and the
// next admission reach the main thread over different workers' rings.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Agent, fetch as undiciFetch } from 'undici';
import { ALIAS, inFlight, startStack, waitUntil, type Stack } from '../helpers/stack.js';

const ROUNDS = 300;

describe('one provider slot, no queue, one client at a time', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 1, maxQueue: 0, mock: { ttftMs: 0, tokens: 2, intervalMs: 0 } });
  });
  after(async () => {
    await stack.close();
  });

  test(`${ROUNDS} requests one after another, each on a new connection: every one served`, async () => {
    const statuses = new Map<number, number>();
    for (let i = 0; i < ROUNDS; i++) {
      // A new connection each time, so the kernel spreads them over the workers.
      const dispatcher = new Agent({ connections: 1, pipelining: 0 });
      const res = await undiciFetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: ALIAS, stream: i % 2 === 0, messages: [{ role: 'user', content: 'next' }] }),
        dispatcher,
      });
      await res.arrayBuffer();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      void dispatcher.close().catch(() => undefined);
    }
    assert.deepEqual(Object.fromEntries(statuses), { 200: ROUNDS });
    await waitUntil(() => inFlight(stack.edge) === 0, 'the last lease released');
  });
});
