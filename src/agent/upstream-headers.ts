// Header filtering between the edge and a provider. Hop-by-hop headers belong
// to one connection and never cross the agent; the client's credentials never
// reach a provider (the provider's own key is bound instead).
import type { Header } from '../gen/edge/v1/tunnel_pb.js';
import { isHopByHop, nominatesNothingMore } from '../shared/hop-by-hop.js';

/** Response headers as undici parses them: lower-case names, repeated ones as arrays. */
export type ResponseHeaders = Record<string, string | string[] | undefined>;

// Request-only: host and content-length belong to the upstream request Http1Client
// builds, expect too (it writes the body with the head, never awaiting a 100); authorization, x-api-key, api-key
// (Azure's) and x-goog-api-key (Gemini's) are a client's credentials; accept-encoding is the agent's own (below).
const REQUEST_ONLY: ReadonlySet<string> = new Set(['host', 'content-length', 'expect', 'authorization', 'x-api-key', 'api-key', 'x-goog-api-key', 'accept-encoding']);

export { isHopByHop };

/**
 * The edge's request headers as undici's flat [name, value, ...] list (its
 * cheapest form), minus hop-by-hop and client credentials, plus the provider's
 * `authorization` when it has one and `accept-encoding: identity`.
 */
export function upstreamRequestHeaders(headers: readonly Header[], authorization: string | undefined): string[] {
  const nominated = connectionNominated(headers);
  const out: string[] = [];
  for (let i = 0; i < headers.length; i++) {
    const header = headers[i];
    const name = header.name.toLowerCase();
    if (isHopByHop(name) || REQUEST_ONLY.has(name)) continue;
    if (nominated !== undefined && nominated.has(name)) continue;
    out.push(name, header.value);
  }
  if (authorization !== undefined) out.push('authorization', authorization);
  // The edge reads the answer (SSE events, usage, a response id, an error appended mid-stream)
  // and relays it as is: it must be plain bytes, whatever the client would accept.
  out.push('accept-encoding', 'identity');
  return out;
}

/** Response headers for a HEADERS frame, one entry per value, minus hop-by-hop. */
export function frameResponseHeaders(headers: ResponseHeaders): Header[] {
  const nominated = headers.connection === undefined ? undefined : tokensOf(headers.connection);
  const out: Header[] = [];
  for (const name in headers) {
    if (isHopByHop(name) || (nominated !== undefined && nominated.has(name))) continue;
    const value = headers[name];
    if (value === undefined) continue;
    if (typeof value === 'string') out.push(headerOf(name, value));
    else for (let i = 0; i < value.length; i++) out.push(headerOf(name, value[i]));
  }
  return out;
}

/** The same from parsed pairs (lower-case names, in order, one entry per value): no record in between. */
export function frameResponseHeaderPairs(names: readonly string[], values: readonly string[]): Header[] {
  let nominated: Set<string> | undefined;
  for (let i = 0; i < names.length; i++) {
    if (names[i] === 'connection' && !nominatesNothingMore(values[i])) nominated = tokensOf(values[i], nominated);
  }
  const out: Header[] = [];
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (isHopByHop(name) || (nominated !== undefined && nominated.has(name))) continue;
    out.push(headerOf(name, values[i]));
  }
  return out;
}

function headerOf(name: string, value: string): Header {
  return { $typeName: 'edge.v1.Header', name, value };
}

/** Names a `Connection` header declares hop-by-hop (RFC 9110 7.6.1); undefined when there is none. */
function connectionNominated(headers: readonly Header[]): Set<string> | undefined {
  let nominated: Set<string> | undefined;
  for (let i = 0; i < headers.length; i++) {
    const header = headers[i];
    if (header.name.length === 10 && header.name.toLowerCase() === 'connection') {
      nominated = tokensOf(header.value, nominated);
    }
  }
  return nominated;
}

function tokensOf(value: string | string[], into: Set<string> = new Set()): Set<string> {
  const values = typeof value === 'string' ? [value] : value;
  for (const v of values) {
    for (const token of v.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '') into.add(name);
    }
  }
  return into;
}
