// Graceful drain of one client listener and its data plane: no new
// connections, open requests may finish within the grace, then the rest end
// with 503 shutting_down; finished responses get a moment to flush. The main
// thread runs it for its own listener (workers.count 0); each I/O worker for its own.
import type { Server } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import type { DataPlane } from './data-plane.js';

const DRAIN_POLL_MS = 20;
/** After the last request ended, how long finished responses may take to flush before sockets are cut. */
const FLUSH_WAIT_MS = 2_000;

/** Returns how many requests were still open when the grace ran out (and were aborted). */
export async function drainListener(plane: DataPlane, server: Server, deadline: number): Promise<number> {
  plane.beginShutdown();
  // No new connections; idle kept-alive ones close now (Node's close() does
  // that). One busy with a response stays: a request that follows on it
  // gets a clear 503 shutting_down with Connection: close, not a reset.
  server.close();
  while (plane.openExchanges > 0 && performance.now() < deadline) await delay(DRAIN_POLL_MS);
  const open = plane.openExchanges;
  if (open > 0) plane.abortAll();
  // Those a grant found past another thread's grace ended before this one's: the drain cut them too.
  const aborted = open + plane.endedByGrace;
  const flushDeadline = performance.now() + FLUSH_WAIT_MS;
  for (;;) {
    server.closeIdleConnections();
    const connections = await new Promise<number>((resolve) => server.getConnections((err, n) => resolve(err ? 0 : n)));
    if (connections === 0 || performance.now() >= flushDeadline) break;
    await delay(DRAIN_POLL_MS);
  }
  server.closeAllConnections();
  return aborted;
}
