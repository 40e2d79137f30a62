// grpc-js service definition for edge.v1.NodeTunnel. Shared by the edge
// (server) and the node agent (client) so both sides encode exactly the same
// way: the hot messages through the hand-written codec (tunnel-codec.ts), the
// rest through the generated protobuf-es code.
import type { ServiceDefinition } from '@grpc/grpc-js';
import { decodeEdgeMessage, decodeNodeMessage, encodeEdgeMessage, encodeNodeMessage } from './tunnel-codec.js';

export const CONNECT_PATH = '/edge.v1.NodeTunnel/Connect';

export const nodeTunnelService = {
  connect: {
    path: CONNECT_PATH,
    requestStream: true,
    responseStream: true,
    requestSerialize: encodeNodeMessage,
    requestDeserialize: decodeNodeMessage,
    responseSerialize: encodeEdgeMessage,
    responseDeserialize: decodeEdgeMessage,
    originalName: 'Connect',
  },
} satisfies ServiceDefinition;

export { encodeNodeMessage, decodeNodeMessage, encodeEdgeMessage, decodeEdgeMessage };
