// Sizes both ends of the node stream must agree on.

/** Largest request body the edge may accept (limits.body_bytes at most). */
export const MAX_REQUEST_BODY_BYTES = 63 * 1024 * 1024;

/** Largest request head the edge may accept (limits.max_header_bytes at most), counted as HTTP/1.1 text. */
export const MAX_REQUEST_HEAD_BYTES = 1024 * 1024;

/**
 * Largest gRPC message the agent accepts from the edge: one TunnelRequest
 * carries a whole body and the forwarded head. The head in protobuf costs
 * more than as HTTP text (a tag and a length per header, its name and its
 * value: under twice the text, since each header's text is 4 bytes or more),
 * and the rest (ids, deadlines, the served model name the rewrite puts in) fits in 64 KiB. A client at
 * both limits must not get the node's whole connection dropped.
 */
export const MAX_EDGE_TO_NODE_MESSAGE_BYTES = MAX_REQUEST_BODY_BYTES + 2 * MAX_REQUEST_HEAD_BYTES + 64 * 1024;

/**
 * Largest response head a node may relay in one HEADERS frame, counted as
 * HTTP/1.1 lines (`name: value` CRLF, for each header): the agent reads no
 * larger head from a provider, so a bigger frame is a node gone wrong.
 */
export const MAX_RESPONSE_HEAD_BYTES = 64 * 1024;
/**
 * An ERROR frame's text is kept to this many characters (UTF-16 code units):
 * it reaches the client, the run records and the event history. The edge cuts
 * a longer one at its end, so the agent fits what must be seen (a cli
 * command's last stderr lines) within it.
 */
export const MAX_ERROR_MESSAGE_CHARS = 4_096;
/** Digits of the longest content-length a HEADERS frame may carry: the edge refuses more (no body is 10^15 bytes). */
export const MAX_CONTENT_LENGTH_DIGITS = 15;

/**
 * Most streams one node connection may have: its first stream and the lanes
 * that join it. The agent's edge.streams is capped here; the edge refuses
 * joins past it (each lane holds a session, a heartbeat timer and a place in
 * every lane choice).
 */
export const MAX_NODE_STREAMS = 64;

/**
 * Most provider ids one Register may announce, and the longest of them
 * (UTF-8 bytes): the edge refuses a registration past either (the ids are
 * interned for the connection's life), so both configs refuse a node that
 * would have to announce more, rather than let it start and never register.
 */
export const MAX_ANNOUNCED_PROVIDERS = 1024;
export const MAX_PROVIDER_ID_BYTES = 256;
