// A data path's state as tests and status read it, the same shape whether
// it runs on the main thread or in an I/O worker (then sent by postMessage).
import type { DataPlane } from './data-plane.js';
import type { NodeGateway } from './grpc/node-gateway.js';
import type { PlaneInspection } from '../contract/io-protocol.js';
import type { PeerLinks } from './peer/peer-links.js';

export function inspectPlane(
  worker: number,
  plane: DataPlane,
  nodes: NodeGateway,
  peers: PeerLinks | undefined,
  lean: PlaneInspection['lean'],
  a2aRelayedStreams: PlaneInspection['a2aRelayedStreams'],
  rings: PlaneInspection['rings'] = [],
): PlaneInspection {
  const sessions: PlaneInspection['sessions'] = [];
  for (const s of nodes.sessions()) {
    sessions.push({ nodeId: s.nodeId, generation: s.generation, lane: s.lane, joined: s.joinGeneration > 0, openTunnels: s.openTunnels, agentVersion: s.agentVersion, remoteAddress: s.remoteAddress, connectedAtMs: s.connectedAtMs, lastSeenMs: s.lastSeenAtMs });
  }
  return {
    worker,
    openExchanges: plane.openExchanges,
    requests: plane.begunTotal,
    tunnelBuffers: plane.tunnelBuffers(),
    sessions,
    protocolStats: { ...nodes.protocolStats } as unknown as Record<string, number>,
    crossTunnelsOut: peers?.stats.tunnelsOut ?? 0,
    crossTunnelsIn: peers?.stats.tunnelsIn ?? 0,
    a2aRelayedStreams,
    rings,
    lean,
  };
}
