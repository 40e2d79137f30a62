// What the edge passes on from a client to a provider: end-to-end headers
// only (hop-by-hop ones are shared with the agent), never credentials.
import { isHopByHop } from '../../shared/hop-by-hop.js';

/** Request headers the edge does not forward to a provider. */
const NOT_FORWARDED_UPSTREAM = new Set([
  'host',
  'content-length', // the body is rewritten; the agent sets the real length
  'authorization', // the client's credentials never reach a provider
  'x-api-key', // nor an Anthropic client's
  'cookie',
  'x-edge-node',
  'expect',
]);

export { isHopByHop };

export function isForwardedUpstream(lowerName: string): boolean {
  return !isHopByHop(lowerName) && !NOT_FORWARDED_UPSTREAM.has(lowerName) && !lowerName.startsWith('x-edge-');
}
