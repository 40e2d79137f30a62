// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
// plus the ones the gateway must never pass along in either direction.

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Request headers the edge does not forward to a provider. */
const NOT_FORWARDED_UPSTREAM = new Set([
  ...HOP_BY_HOP,
  'host',
  'content-length', // the body is rewritten; the agent sets the real length
  'authorization', // the client's credentials never reach a provider
  'cookie',
  'x-edge-node',
  'expect',
]);

export function isHopByHop(lowerName: string): boolean {
  return HOP_BY_HOP.has(lowerName);
}

export function isForwardedUpstream(lowerName: string): boolean {
  return !NOT_FORWARDED_UPSTREAM.has(lowerName) && !lowerName.startsWith('x-edge-');
}
