// A refusal answered before its request's body was read (over
// limits.body_bytes, no valid API key, Expect: 100-continue refused) closes
// the connection, so that the body is never taken in. Closed at once, the
// socket still holds bytes the client sent, and the kernel answers a close
// with unread bytes by a reset: a client still uploading (the SDKs send the
// whole body without Expect) gets EPIPE or ECONNRESET instead of the answer,
// and the SDKs retry that "connection error", the whole body each time. So
// the close lingers, as servers do for this (nginx's lingering_close): the
// answer goes out and the write side ends, what the client still sends is
// read and dropped (node:http dumps the refused body), and the socket closes
// when the client ends its side, or LINGER_MS after the answer at most.
import type { ServerResponse } from 'node:http';
import { Socket } from 'node:net';

/** The longest a refused upload is read and dropped after its answer. */
export const LINGER_MS = 5_000;

/** Answers `response` with `Connection: close`, closing its socket only once the client stopped sending (or after LINGER_MS). */
export function closeAfterAnswer(response: ServerResponse): void {
  response.setHeader('connection', 'close');
  const socket = response.socket;
  // node:http ends a `Connection: close` response's socket with destroySoon(): a lingering one instead.
  if (socket !== null && socket.destroySoon === Socket.prototype.destroySoon) socket.destroySoon = lingeringDestroySoon;
}

function lingeringDestroySoon(this: Socket): void {
  if (this.writable) this.end();
  if (this.destroyed) return;
  // The client's FIN (it sent all it meant to) closes the socket by itself: both sides have ended.
  const timer = setTimeout(destroyLingering, LINGER_MS, this);
  this.once('close', () => clearTimeout(timer));
}

function destroyLingering(socket: Socket): void {
  socket.destroy();
}
