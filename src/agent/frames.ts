// Builders for the node -> edge messages the agent sends. Plain typed literals
// instead of create(): a DATA frame is built per upstream chunk, and create()
// walks the schema reflectively (~250 ns) where a literal costs ~30 ns. The
// TunnelFrame type lists every field, so a field added to the proto fails the
// build here rather than encoding garbage.
import { FrameKind, type Header, type NodeMessage, type ProbeResult, type ProviderEndpoints, type TunnelFrame } from '../gen/edge/v1/tunnel_pb.js';
import type { ProbeVerdict } from './health-probes.js';

// Shared, never mutated: protobuf encoding only reads them.
const NO_HEADERS = Object.freeze([]) as unknown as Header[];
const NO_BYTES = new Uint8Array(0);

function frameMessage(frame: TunnelFrame): NodeMessage {
  return { $typeName: 'edge.v1.NodeMessage', msg: { case: 'frame', value: frame } };
}

/** `upstreamUs`: the provider's time to its response head, measured here (0 = not measured). */
export function headersFrame(tunnelId: number, seq: number, status: number, headers: Header[], upstreamUs = 0): NodeMessage {
  return frameMessage({
    $typeName: 'edge.v1.TunnelFrame',
    tunnelId,
    seq,
    kind: FrameKind.HEADERS,
    status,
    headers,
    data: NO_BYTES,
    errorCode: '',
    errorMessage: '',
    upstreamUs,
  });
}

/** `data` is referenced, not copied; it is only read when the message is encoded. */
export function dataFrame(tunnelId: number, seq: number, data: Uint8Array): NodeMessage {
  return frameMessage({
    $typeName: 'edge.v1.TunnelFrame',
    tunnelId,
    seq,
    kind: FrameKind.DATA,
    status: 0,
    headers: NO_HEADERS,
    data,
    errorCode: '',
    errorMessage: '',
    upstreamUs: 0,
  });
}

/** `upstreamUs`: the provider's time to its last byte, measured here (0 = not measured). */
export function endFrame(tunnelId: number, seq: number, upstreamUs = 0): NodeMessage {
  return frameMessage({
    $typeName: 'edge.v1.TunnelFrame',
    tunnelId,
    seq,
    kind: FrameKind.END,
    status: 0,
    headers: NO_HEADERS,
    data: NO_BYTES,
    errorCode: '',
    errorMessage: '',
    upstreamUs,
  });
}

export function errorFrame(tunnelId: number, seq: number, errorCode: string, errorMessage: string): NodeMessage {
  return frameMessage({
    $typeName: 'edge.v1.TunnelFrame',
    tunnelId,
    seq,
    kind: FrameKind.ERROR,
    status: 0,
    headers: NO_HEADERS,
    data: NO_BYTES,
    errorCode,
    errorMessage,
    upstreamUs: 0,
  });
}

/** `joinGeneration` 0: a new connection; otherwise an extra lane (stream `lane`) of that generation. */
/** `endpoints`: provider id -> the APIs it serves (announced so the edge routes each API only where it is served). */
export function registerMessage(
  nodeId: string,
  token: string,
  agentVersion: string,
  providerIds: string[],
  lane = 0,
  joinGeneration = 0,
  endpoints: ReadonlyMap<string, readonly string[]> = new Map(),
  capabilities: string[] = [],
  draining = false,
  probes: readonly ProbeVerdict[] = [],
  types: ReadonlyMap<string, string> = new Map(),
): NodeMessage {
  const providerEndpoints = providerEndpointsOf(endpoints, types);
  return {
    $typeName: 'edge.v1.NodeMessage',
    msg: { case: 'register', value: { $typeName: 'edge.v1.Register', nodeId, token, agentVersion, providerIds, lane, joinGeneration, providerEndpoints, capabilities, draining, probes: probeResults(probes) } },
  };
}

/** The node's providers from now on, announced as Register does (ids, each one's endpoints and type, the probe verdicts). */
export function announceMessage(providerIds: string[], endpoints: ReadonlyMap<string, readonly string[]>, probes: readonly ProbeVerdict[], types: ReadonlyMap<string, string>): NodeMessage {
  return { $typeName: 'edge.v1.NodeMessage', msg: { case: 'announce', value: { $typeName: 'edge.v1.Announce', providerIds, providerEndpoints: providerEndpointsOf(endpoints, types), probes: probeResults(probes) } } };
}

function providerEndpointsOf(endpoints: ReadonlyMap<string, readonly string[]>, types: ReadonlyMap<string, string>): ProviderEndpoints[] {
  return [...endpoints].map(([providerId, list]) => ({ $typeName: 'edge.v1.ProviderEndpoints' as const, providerId, endpoints: [...list], type: types.get(providerId) ?? '' }));
}

function probeResults(probes: readonly ProbeVerdict[]): ProbeResult[] {
  return probes.map((p): ProbeResult => ({ $typeName: 'edge.v1.ProbeResult', providerId: p.providerId, healthy: p.healthy, detail: p.detail }));
}

export function commandResultMessage(id: number, status: string, message: string, resultJson: string): NodeMessage {
  return { $typeName: 'edge.v1.NodeMessage', msg: { case: 'commandResult', value: { $typeName: 'edge.v1.CommandResult', id, status, message, resultJson } } };
}

export function heartbeatMessage(unixMs: number, probes: readonly ProbeVerdict[] = []): NodeMessage {
  return { $typeName: 'edge.v1.NodeMessage', msg: { case: 'heartbeat', value: { $typeName: 'edge.v1.Heartbeat', unixMs, probes: probeResults(probes) } } };
}

export function leavingMessage(reason: string): NodeMessage {
  return { $typeName: 'edge.v1.NodeMessage', msg: { case: 'leaving', value: { $typeName: 'edge.v1.Leaving', reason } } };
}
