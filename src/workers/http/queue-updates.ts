// Queue position for a waiting streaming request (docs/scheduling.md): a
// client that sends `x-edge-queue-updates: 1` gets its 200 event-stream head as
// soon as the scheduler reports it queued, then an SSE comment
// `: queue position=N eta_ms=M` every second while it waits, then the stream.
// Comments are ignored by SSE clients (the openai SDK among them). The
// position comes from the scheduler through SchedulerPort.queryQueuePosition
// (a direct call in-process, one ring record each way from an I/O worker).
import type { IncomingMessage } from 'node:http';

export const QUEUE_UPDATE_INTERVAL_MS = 1_000;

/** Only a streaming request can take comments before its stream. */
export function wantsQueueUpdates(request: IncomingMessage, streaming: boolean): boolean {
  return streaming && request.headers['x-edge-queue-updates'] === '1';
}

export function queuePositionComment(position: number, etaMs: number | undefined): string {
  return etaMs === undefined ? `: queue position=${position}\n\n` : `: queue position=${position} eta_ms=${Math.round(etaMs)}\n\n`;
}

/** The last comment before the stream: how long it waited in all. */
export function queueDoneComment(queuedMs: number): string {
  return `: queue done queue_ms=${Math.round(queuedMs)}\n\n`;
}
