// What an exchange and the data plane need from the node end of a tunnel:
// the node's session on this thread (NodeSession), or a handle on a session
// that lives in another worker (PeerNode, over a worker <-> worker ring).
import type { TunnelRequestFields } from '../grpc/node-session.js';
import type { TunnelConsumer } from './tunnel-consumer.js';

export interface TunnelHost {
  readonly nodeId: string;
  readonly generation: number;
  /** Tunnels open on it; -1 where this thread cannot know (a session in another worker). */
  readonly openTunnels: number;
  /** Sends a tunnel request; returns the tunnel id. Throws if the stream is gone. */
  openTunnel(consumer: TunnelConsumer, fields: TunnelRequestFields): number;
  cancelTunnel(tunnelId: number, reason: string): void;
  grantCredit(tunnelId: number, bytes: number): void;
}
