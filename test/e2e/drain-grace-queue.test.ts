// The drain's grace runs out with a stream open and requests queued behind
// it, on different I/O workers: each thread ends its own exchanges when its
// grace is over, and the threads do not get there at the same instant (one
// was busy when the drain began: a GC pause, a CPU-bound moment). The lease
// the first thread releases must not grant a queued request of a thread that
// has not ended its own yet: it would reach the provider only to be cut.
process.env.EDGE_TEST_HOOKS = '1';
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import type { WorkerPool } from '../../src/main/worker-pool.js';
import { waitFor } from '../helpers/stack.js';
import { ALIAS, inFlight, startOpsStack, waitUntil } from '../main/admin/ops-stack.js';

interface Answer {
  readonly status: number;
  readonly body: string;
}

/** A chat completion on its own connection (so the kernel spreads them over the workers' listeners). */
function chat(url: string, stream: boolean, headers: Record<string, string> = {}): { head: Promise<number>; done: Promise<Answer> } {
  let onHead: (status: number) => void = () => undefined;
  const head = new Promise<number>((resolve) => (onHead = resolve));
  const done = new Promise<Answer>((resolve, reject) => {
    const req = http.request(`${url}/v1/chat/completions`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      onHead(res.statusCode ?? 0);
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: stream ? 'open' : 'queued' }] }));
  });
  return { head, done };
}

/** One edge, drained with the later worker stalled; fails when a queued request reached the provider. */
async function drainApart(): Promise<void> {
    const stack = await startOpsStack({ capacity: 1, queueTimeoutMs: 30_000, mock: { ttftMs: 0 }, configure: (raw) => (raw.workers = { count: 2 }) });
    const pool = stack.edge.plane as unknown as WorkerPool;
    try {
      await waitFor(async () => (await pool.inspect()).length === 2, 'both workers running');
      const open = chat(stack.edge.url, true, { 'x-mock-tokens': '500', 'x-mock-interval-ms': '20' });
      assert.equal(await open.head, 200);
      const holder = (await pool.inspect()).find((w) => w.tunnelBuffers.length === 1)?.worker;
      assert.ok(holder !== undefined, 'a worker holds the open stream');
      const later = 1 - holder;
      // Queued behind it until the later worker has some of them (the kernel picks a listener per connection).
      const queued: ReturnType<typeof chat>[] = [];
      const queuedOnLater = async (): Promise<number> => (await pool.inspect()).find((w) => w.worker === later)?.openExchanges ?? 0;
      while ((await queuedOnLater()) < 2) {
        assert.ok(queued.length < 64, 'no queued request landed on the other worker');
        queued.push(chat(stack.edge.url, false));
        await waitUntil(() => stack.edge.driver.status().providers[0].queued === queued.length, 'the request to be queued');
      }
      const sentBefore = stack.mock.requestLog.length;
      assert.equal(sentBefore, 1);

      // The later worker is busy when the drain begins: it starts its grace about a second after the holder.
      await pool.call(later, { type: 'testHook', hook: 'stall', ms: 1_000 });
      const report = await stack.edge.shutdown(100);
      assert.match((await open.done).body, /"code":"shutting_down"/);
      for (const q of queued) {
        const answer = await q.done;
        assert.equal(answer.status, 503, answer.body);
        assert.match(answer.body, /"code":"shutting_down"/);
      }
      assert.deepEqual(
        stack.mock.requestLog.slice(sentBefore).map((r) => r.body),
        [],
        'no queued request was sent to the provider after the grace ran out',
      );
      assert.equal(report.aborted, 1 + queued.length, 'every open request was ended by the drain');
      await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released');
      assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
    } finally {
      await stack.agent.stop();
      await stack.mock.close();
    }
}

describe('the drain grace runs out on one I/O worker before another', () => {
  // Three edges: where the kernel puts the connections and the node decides the order the later worker reads its
  // drain message and the grant in, and not every order sent the request before.
  test('no queued request of the later worker is sent to a provider: each gets 503 shutting_down', async () => {
    for (let round = 0; round < 3; round++) await drainApart();
  });
});
