// Retiring a node session after a refresh removed its node or changed its
// token: the scheduler already sends it nothing new (draining); the session
// is closed once its open tunnels are done, or when the grace runs out, and
// whatever is still open then is fenced like any disconnect.
import type { NodeSession } from '../../workers/grpc/node-session.js';

const RETIRE_POLL_MS = 50;

export function retireSession(session: NodeSession, graceMs: number, reason: string): void {
  const deadline = performance.now() + graceMs;
  // Rare (a refresh), so a timer with a closure is fine here.
  const timer = setInterval(() => {
    if (session.isActive && session.openTunnels > 0 && performance.now() < deadline) return;
    clearInterval(timer);
    session.close(`retired: ${reason}`);
  }, RETIRE_POLL_MS);
  timer.unref();
}
