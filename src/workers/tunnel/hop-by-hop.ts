// What the edge passes on from a client to a provider: end-to-end headers
// only (hop-by-hop ones are shared with the agent, plus any the client names
// in `Connection`), never credentials; and back from a provider: never a
// header in the edge's own `x-edge-` namespace, nor a CORS one.
import { isHopByHop, nominatesNothingMore } from '../../shared/hop-by-hop.js';

/** Request headers the edge does not forward to a provider. */
const NOT_FORWARDED_UPSTREAM = new Set([
  'host',
  'content-length', // the body is rewritten; the agent sets the real length
  'authorization', // the client's credentials never reach a provider
  'x-api-key', // nor an Anthropic client's
  'api-key', // nor an Azure OpenAI client's
  'x-goog-api-key', // nor a Gemini client's
  'cookie',
  'x-edge-node',
  'expect',
  'accept-encoding', // the answer must reach the edge uncompressed (the agent asks for identity)
  // They pick the account the provider's key bills and reads (OpenAI's organization and project): the
  // operator's key, so the operator's choice, never a client's.
  'openai-organization',
  'openai-project',
]);

export { isHopByHop };

export function isForwardedUpstream(lowerName: string): boolean {
  return !isHopByHop(lowerName) && !NOT_FORWARDED_UPSTREAM.has(lowerName) && !lowerName.startsWith('x-edge-');
}

/**
 * A provider's response header the edge relays: end-to-end, not one of the
 * edge's own `x-edge-*` (it adds those), and no `access-control-*`: which
 * pages may read an answer is the edge's policy (config `cors`), not the
 * provider's (vLLM allows every origin by default).
 */
export function isRelayedDownstream(lowerName: string): boolean {
  return !isHopByHop(lowerName) && !lowerName.startsWith('x-edge-') && !lowerName.startsWith('access-control-');
}

/**
 * Lower-case names a raw header list's `Connection` headers nominate as
 * hop-by-hop (RFC 9110 7.6.1); undefined when there is no `Connection`
 * header (the common case costs one length check per header).
 */
export function connectionNominated(raw: readonly string[]): Set<string> | undefined {
  let nominated: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if (name.length !== 10 || name.toLowerCase() !== 'connection' || nominatesNothingMore(raw[i + 1])) continue;
    for (const token of raw[i + 1].split(',')) {
      const nominee = token.trim().toLowerCase();
      if (nominee !== '') (nominated ??= new Set()).add(nominee);
    }
  }
  return nominated;
}
