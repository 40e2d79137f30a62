// What an exchange and the data plane need from the node end of a tunnel:
// the node's session on this thread (NodeSession), or a handle on a session
// that lives in another worker (PeerNode, over a worker <-> worker ring).
import type { TunnelConsumer } from './tunnel-consumer.js';

/** What the edge sends a node to open one tunnel (protobuf TunnelRequest, less the ids). */
export interface TunnelRequestFields {
  readonly runId: string;
  readonly providerId: string;
  readonly target: string;
  readonly method: string;
  readonly path: string;
  readonly headers: { name: string; value: string }[];
  readonly body: Uint8Array;
  readonly stream: boolean;
  readonly timeoutMs: number;
  /** The node's own limits on the provider (TunnelRequest.ttfb_timeout_ms / idle_timeout_ms); 0 = none. */
  readonly ttfbTimeoutMs: number;
  readonly idleTimeoutMs: number;
  /** Flow-control window for the response body, bytes; 0 = unlimited. */
  readonly initialCredit: number;
  /** Carried to the node as TunnelRequest.metadata (request_id for its logs). */
  readonly metadata?: Record<string, string>;
}

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
