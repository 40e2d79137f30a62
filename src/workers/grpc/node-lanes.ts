// The streams ("lanes") of one node connection that live on this data
// plane. A node may open several streams so its tunnels spread over the
// edge's I/O workers; they share one generation, minted when the first of
// them registered. New tunnels go to the lane with the fewest open ones.
import type { NodeSession } from './node-session.js';

export class NodeLanes {
  readonly sessions: NodeSession[] = [];
  /** The node's Leaving was reported for this connection (once, whichever lane said it). */
  leaving = false;

  constructor(readonly generation: number) {}

  add(session: NodeSession): void {
    this.sessions.push(session);
  }

  /** Removes `session`; true when it was one of these lanes. */
  remove(session: NodeSession): boolean {
    const at = this.sessions.indexOf(session);
    if (at < 0) return false;
    this.sessions.splice(at, 1);
    return true;
  }

  has(session: NodeSession): boolean {
    return this.sessions.includes(session);
  }

  /** The lane for a new tunnel: the fewest open tunnels, the earliest lane on a tie. */
  pick(): NodeSession | undefined {
    const sessions = this.sessions;
    let best = sessions[0];
    for (let i = 1; i < sessions.length; i++) if (sessions[i].openTunnels < best.openTunnels) best = sessions[i];
    return best;
  }

  get openTunnels(): number {
    let open = 0;
    for (const session of this.sessions) open += session.openTunnels;
    return open;
  }
}
