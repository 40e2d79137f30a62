// Server-sent events over fetch(): EventSource cannot send an Authorization
// header, and the admin token must never go in a URL, so the console reads
// text/event-stream bodies itself. Used for /admin/events and for the try-it
// box's streamed chat completion.

export interface SseMessage {
  readonly event: string;
  readonly data: string;
}

/** Splits a text/event-stream body into messages (event + data lines); comments and ids are skipped. */
export async function readSse(body: ReadableStream<Uint8Array>, onMessage: (message: SseMessage) => void, signal?: AbortSignal): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const abort = (): void => void reader.cancel().catch(() => undefined);
  signal?.addEventListener('abort', abort, { once: true });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let end = buffer.indexOf('\n\n');
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        dispatch(block, onMessage);
        end = buffer.indexOf('\n\n');
      }
    }
    if (buffer.trim() !== '') dispatch(buffer, onMessage);
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}

function dispatch(block: string, onMessage: (message: SseMessage) => void): void {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length > 0) onMessage({ event, data: data.join('\n') });
}
