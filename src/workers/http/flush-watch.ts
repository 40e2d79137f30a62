// The deadline on a node:http response's last write (the lean connection
// has its own, in lean-http1.ts): a client that stopped reading but keeps
// its connection would otherwise hold the socket and the bytes waiting for
// it for as long as it likes. Module functions and one symbol: no closure
// per response.
import type { ServerResponse } from 'node:http';

/** Who sets the deadline and counts the cuts (ClientServer). */
export interface FlushOwner {
  /** limits.idle_timeout_ms; 0 = no deadline. */
  readonly flushTimeoutMs: number;
  clientStalled(): void;
}

const kFlushOwner = Symbol('edge.flushOwner');
type FlushWatched = ServerResponse & { [kFlushOwner]?: FlushOwner };

/** Watches `response`'s end: called for each node:http response, before anything is written. */
export function watchLastWrite(response: ServerResponse, owner: FlushOwner): void {
  (response as FlushWatched)[kFlushOwner] = owner;
  // 'prefinish' comes once per response: on() spares once()'s wrapper.
  response.on('prefinish', onPrefinish);
}

/**
 * The response was ended: if its last bytes still wait in the socket (the
 * client slow, or no longer reading), node's socket timeout (which counts
 * any progress) cuts the connection after flushTimeoutMs. Cleared once the
 * bytes are out.
 */
function onPrefinish(this: FlushWatched): void {
  const socket = this.socket;
  const owner = this[kFlushOwner];
  if (socket === null || owner === undefined || owner.flushTimeoutMs <= 0 || this.writableFinished || socket.writableLength === 0) return;
  socket.setTimeout(owner.flushTimeoutMs);
  // Handled here (node:http would destroy the socket itself, uncounted).
  this.once('timeout', cutStalled);
  // Before node:http's own 'finish' listener, which detaches the socket (and sets the keep-alive timer, or,
  // with a pipelined request waiting, leaves ours armed for the next response).
  this.prependOnceListener('finish', clearSocketTimeout);
}

function cutStalled(this: FlushWatched): void {
  this[kFlushOwner]?.clientStalled();
  this.socket?.destroy();
}

function clearSocketTimeout(this: ServerResponse): void {
  this.socket?.setTimeout(0);
}
