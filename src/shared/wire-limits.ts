// Sizes both ends of the node stream must agree on.

/** Largest gRPC message the agent accepts from the edge (one TunnelRequest carries a whole body). */
export const MAX_EDGE_TO_NODE_MESSAGE_BYTES = 64 * 1024 * 1024;

/** Largest request body the edge may accept: a TunnelRequest's other fields fit in the rest. */
export const MAX_REQUEST_BODY_BYTES = MAX_EDGE_TO_NODE_MESSAGE_BYTES - 1024 * 1024;
