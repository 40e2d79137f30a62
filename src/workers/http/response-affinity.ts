// Which provider made each stored Response (the Responses API keeps state on
// the provider: `previous_response_id`, GET and DELETE /v1/responses/{id}).
// The edge learns the id from the response stream it relays and remembers
// id -> provider in a bounded LRU with a TTL (contract/stored-responses.ts), so a follow-up goes to that
// provider and never silently to another one. Held per data-path thread:
// with I/O workers, every worker holds the whole map: a worker other than the one
// that relayed the first response learns it through the worker pool (the
// relaying worker posts it; the pool passes it on; a use is passed on alike,
// so every worker's LRU order is the same). A follow-up can land on another
// worker before that message does (the client read the response and sent it
// at once): an id unknown there is asked of the pool's copy before a 404
// (DataPlane.askForResponse), so it is never refused nor misrouted.

import { isResponseId } from '../../contract/stored-responses.js';
import { RESPONSE_BY_ID } from './api-routes.js';

/**
 * The id in a stored response's own path (`/v1/responses/{id}`, any query
 * aside), percent-decoded as the router decodes it for the lookup and as the
 * provider reads it: `%72esp_1` is `resp_1` to both.
 */
export function storedResponseIdOf(path: string): string | undefined {
  const query = path.indexOf('?');
  let id = RESPONSE_BY_ID.exec(query < 0 ? path : path.slice(0, query))?.[1];
  if (id !== undefined && id.includes('%')) {
    try {
      id = decodeURIComponent(id);
    } catch {
      return undefined;
    }
  }
  return id !== undefined && isResponseId(id) ? id : undefined;
}

const ID_IN_HEAD = /"id"\s*:\s*"([^"\\]{1,256})"/;

/**
 * The response id from the head of a Responses API body: the first `"id"`,
 * which is the response's own in both shapes (a JSON response object opens
 * with it; a stream opens with response.created carrying the response).
 */
export function responseIdFromHead(head: Buffer): string | undefined {
  const match = ID_IN_HEAD.exec(head.toString('latin1'));
  if (match === null) return undefined;
  // Copied from the bytes, not taken from the match: V8 keeps a substring as a
  // slice of the whole head's text (up to HEAD_BYTES and more), and the id
  // outlives the response in the stored-responses map (limits.stored_responses).
  const end = match.index + match[0].length - 1;
  return head.toString('latin1', end - match[1].length, end);
}
