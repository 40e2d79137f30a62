// The Registered capability by which an edge says it takes Announce: a
// registered node's new provider set, sent when a config refresh on the node
// added or removed providers. Shared by the edge, which lists it, and the
// agent, which announces only to an edge that does (else the change waits
// for its next Register).
export const ANNOUNCE_CAPABILITY = 'announce';
