// An I/O worker that exits while the edge drains is not replaced: a
// replacement would open the client listener again (each worker listens on
// the shared port), so a draining edge would take new client connections,
// which the drain promises to refuse (load balancers and health checks go by
// that), and the replacement, never told to drain, would hold them until the
// edge closes.
process.env.EDGE_TEST_HOOKS = '1';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import type { WorkerPool } from '../../src/main/worker-pool.js';
import { createLogger } from '../../src/shared/logger.js';
import { inFlight, startStack, streamOnOwnConnection, waitFor, waitUntil } from '../helpers/stack.js';

/** 'refused' once nothing listens on the port; 'accepted' while something does. */
function dial(port: number): Promise<'refused' | 'accepted'> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('accepted');
    });
    socket.once('error', () => resolve('refused'));
  });
}

test('a worker that exits during the drain is not replaced: the client listener stays closed', async () => {
  const lines: string[] = [];
  const logger = createLogger('edge', 'info', { destination: { write: (line: string) => void lines.push(line) } });
  const stack = await startStack({ logger, capacity: 64, configure: (raw) => void (raw.workers = { count: 2 }) });
  const pool = stack.edge.plane as unknown as WorkerPool;
  const holder = (await pool.inspect()).find((p) => p.sessions.length > 0)?.worker;
  assert.ok(holder !== undefined, 'a worker holds the node');
  const victim = 1 - holder;
  // Streams on their own connections until the node's worker holds one: it keeps the drain going
  // after the other worker exits (5 s, well past the replacement a bug would start).
  const open: ReturnType<typeof streamOnOwnConnection>[] = [];
  try {
    for (let round = 0; round < 10; round++) {
      open.push(streamOnOwnConnection(stack, 100), streamOnOwnConnection(stack, 100));
      await waitUntil(() => inFlight(stack.edge) === open.length, `${open.length} leases`);
      if (((await pool.inspect()).find((p) => p.worker === holder)?.openExchanges ?? 0) > 0) break;
    }
    assert.ok(((await pool.inspect()).find((p) => p.worker === holder)?.openExchanges ?? 0) > 0, "the node's worker holds a stream");
    const report = stack.edge.shutdown(10_000);
    await waitFor(async () => (await dial(stack.edge.httpPort)) === 'refused', 'the client listener to close');
    await pool.call(victim, { type: 'testHook', hook: 'crash' }).catch(() => undefined);
    // The pool's last word on the exited worker: replaced, or not (the stream, 5 s, keeps the drain open meanwhile).
    await waitUntil(() => lines.some((l) => /"msg":"I\/O worker (replaced|not replaced|could not be replaced)/.test(l)), 'the pool to settle the exited worker');
    assert.ok(!lines.some((l) => l.includes('"msg":"I/O worker replaced"')), 'no worker started during the drain');
    assert.equal(await dial(stack.edge.httpPort), 'refused', 'a draining edge takes no new client connection');
    // The clients leave: nothing holds the drain any more.
    for (const o of open) await o.dispatcher.destroy();
    await report;
  } finally {
    for (const o of open) if (!o.dispatcher.destroyed) await o.dispatcher.destroy();
    await stack.close();
  }
});
