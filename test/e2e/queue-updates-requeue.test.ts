// Queue updates for a stream sent back to the queue (docs/scheduling.md,
// docs/hardening.md "Overload: 429 and 503"): a request that asked for
// `x-edge-queue-updates: 1` and whose provider answered 429 with a
// Retry-After waits in its queue again, for that hold. It is told so at
// once (its 200 event-stream head and a `: queue position` comment), then
// every second while it waits, as any waiter that asked; and its stream
// follows once the hold is over. Before, the updates stopped at its first
// grant and the client heard nothing for the whole hold (up to 60 s).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ALIAS, inFlight, startStack, waitUntil, type Stack } from '../helpers/stack.js';

describe('queue updates of a stream an overloaded provider sent back to the queue', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack({ capacity: 1, maxQueue: 8, queueTimeoutMs: 20_000, mock: { ttftMs: 0, tokens: 2, intervalMs: 1 } });
  });
  after(async () => {
    await stack.close();
  });

  test('its head and a position come at once, comments every second of the hold, then its stream', async () => {
    await waitUntil(() => inFlight(stack.edge) === 0, 'no lease left');
    stack.mock.misbehave({ fail: 'status:429,retry-after:2', count: 1 });
    const started = Date.now();
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-edge-queue-updates': '1' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const headAfterMs = Date.now() - started;
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-edge-queue-updates'), '1', 'the head the queue updates committed');
    assert.ok(headAfterMs < 1_500, `the head came as it went back to the queue, not after the provider's 2 s hold (${headAfterMs} ms)`);
    const body = await res.text();
    const positions = [...body.matchAll(/^: queue position=(\d+)/gm)].map((m) => Number(m[1]));
    assert.ok(positions.length >= 2, `a comment at once and each second of the hold: ${JSON.stringify(body.slice(0, 300))}`);
    assert.ok(positions.every((p) => p === 1), `alone in its queue: ${positions.join(',')}`);
    assert.match(body, /^: queue done queue_ms=\d+$/m);
    assert.ok(body.lastIndexOf(': queue') < body.indexOf('data:'), 'every comment before the stream');
    assert.match(body, /data: \[DONE\]/, 'then the provider\'s whole stream');
    assert.equal(stack.mock.stats.failuresInjected, 1, 'it was sent back once');
    await waitUntil(() => inFlight(stack.edge) === 0, 'its lease released');
  });
});
