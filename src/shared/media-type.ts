// Media types are case-insensitive (RFC 9110 8.3.1): a provider's
// `Text/Event-Stream` is as much a stream as `text/event-stream`.

const EVENT_STREAM = 'text/event-stream';

/** A content-type value names an event stream. The value as sent is tried first; only a `t`/`T` miss is lower-cased. */
export function isEventStreamType(value: string): boolean {
  if (value.startsWith(EVENT_STREAM)) return true;
  return (value.charCodeAt(0) | 0x20) === 0x74 && value.slice(0, EVENT_STREAM.length).toLowerCase() === EVENT_STREAM;
}
