// The Register capability by which an agent says it takes several
// TunnelRequests in one EdgeMessage (tunnel_request_batch). Shared by the edge,
// which batches only for agents that announce it, and the agent.
export const REQUEST_BATCH_CAPABILITY = 'request_batch';
