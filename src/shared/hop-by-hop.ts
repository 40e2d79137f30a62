// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
// plus the legacy names proxies still send. Neither the edge nor the agent
// passes them on, in either direction.

const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
]);

/** `lowerName` must already be lower-case. */
export function isHopByHop(lowerName: string): boolean {
  return HOP_BY_HOP.has(lowerName) || lowerName.startsWith('proxy-');
}

/**
 * True for the `Connection` values nearly every message carries (keep-alive,
 * close): the only header they could name is hop-by-hop already, so there is
 * nothing more to drop and no set of nominees to build per message.
 */
export function nominatesNothingMore(connectionValue: string): boolean {
  if (connectionValue.length > 10) return false;
  const value = connectionValue.toLowerCase();
  return value === 'keep-alive' || value === 'close';
}
