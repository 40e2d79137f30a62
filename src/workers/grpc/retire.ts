// Retiring a node session after a refresh removed its node or changed its
// token: the scheduler already sends it nothing new (draining); the session
// is closed once its open tunnels are done, or when the grace runs out, and
// whatever is still open then is fenced like any disconnect.
import type { NodeSession } from './node-session.js';

const RETIRE_POLL_MS = 50;

/**
 * The streams of one node connection on this thread: each extra lane closes
 * once idle; the anchor (whose end ends the connection and fences the other
 * lanes) closes last, once it and every lane here are idle, or at the grace.
 * `holdAnchor`: the connection has lanes on other workers, which this
 * thread cannot see (they retire in parallel there, each when idle): the
 * anchor then stays until the grace ends, so it never cuts their tunnels
 * (unless the main thread, once those lanes have closed, retires it again
 * without holdAnchor).
 */
export function retireLanes(lanes: readonly NodeSession[], graceMs: number, reason: string, holdAnchor = false): void {
  const deadline = performance.now() + graceMs;
  // A copy: closing a lane takes it out of the live list the caller passed.
  const streams = [...lanes];
  // Rare (a refresh), so a timer with a closure is fine here.
  const timer = setInterval(() => {
    const late = performance.now() >= deadline;
    let anchor: NodeSession | undefined;
    let open = 0;
    let lanesLeft = 0;
    for (const stream of streams) {
      if (!stream.isActive) continue;
      if (stream.joinGeneration === 0) {
        anchor = stream;
        open += stream.openTunnels;
      } else if (stream.openTunnels === 0 || late) {
        stream.close(`retired: ${reason}`);
      } else {
        open += stream.openTunnels;
        lanesLeft++;
      }
    }
    if (anchor === undefined) {
      // Only lanes here: each closes once idle (above), or with the anchor's fence.
      if (lanesLeft === 0 || late) clearInterval(timer);
      return;
    }
    if ((open > 0 || holdAnchor) && !late) return;
    clearInterval(timer);
    anchor.close(`retired: ${reason}`);
  }, RETIRE_POLL_MS);
  timer.unref();
}
