// grpc-js service definition for edge.v1.NodeTunnel, with protobuf-es codecs.
// Shared by the edge (server) and the node agent (client) so both sides
// encode exactly the same way.
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import type { ServiceDefinition } from '@grpc/grpc-js';
import {
  EdgeMessageSchema,
  NodeMessageSchema,
  type EdgeMessage,
  type NodeMessage,
} from '../gen/edge/v1/tunnel_pb.js';

function encodeNodeMessage(message: NodeMessage): Buffer {
  const bytes = toBinary(NodeMessageSchema, message);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function decodeNodeMessage(bytes: Buffer): NodeMessage {
  return fromBinary(NodeMessageSchema, bytes);
}

function encodeEdgeMessage(message: EdgeMessage): Buffer {
  const bytes = toBinary(EdgeMessageSchema, message);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function decodeEdgeMessage(bytes: Buffer): EdgeMessage {
  return fromBinary(EdgeMessageSchema, bytes);
}

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
