// Frames of all tunnels produced in one event-loop turn leave as one gRPC
// message (FrameBatch) at the end of that turn. grpc-js costs tens of µs per
// message on each side while a frame costs far less, and with thousands of
// slow streams nearly every token is its own frame: per-tunnel coalescing
// cannot merge them, but one turn's frames across tunnels can. A lone frame
// goes as a plain frame, and order is kept: frames in production order, and
// any other message flushes the pending batch before it is written.
//
// What waits: a stream's later DATA frames (past its first three) may wait up
// to `delayMs` (tunnels.batch_delay_ms) for company, so that with thousands
// of slow streams each message carries many tokens: a message costs the edge
// a wake-up and its relay a burst of client writes, per message rather than
// per token. Everything a user waits on leaves at the turn's end, taking any
// waiting frames along: HEADERS, END, ERROR and the first DATA frames (time
// to first byte, and the first token that OpenAI-style servers send after a
// role-only chunk). A slow stream's token is then up to `delayMs` later.
import { FrameKind, type Header, type NodeMessage, type TunnelFrame } from '../gen/edge/v1/tunnel_pb.js';

/** Frames per batch at most (bounds the edge's work per message as well). */
const MAX_BATCH_FRAMES = 1024;
/** Bytes per batch at most on our side, below whatever the edge accepts. */
const MAX_BATCH_BYTES = 256 * 1024;
/** Upper bound of one frame's encoding beside its data, headers and error text. */
const FRAME_OVERHEAD_BOUND = 40;
/** NodeMessage's own tag and length around the FrameBatch. */
const BATCH_ENVELOPE_BYTES = 16;

/** HEADERS is seq 0: DATA frames from this seq on are a stream's later ones. */
const FIRST_DEFERRABLE_SEQ = 4;

/** Whether the frame may wait for the batch delay: a stream's later DATA frames only. */
export function mayWait(frame: TunnelFrame): boolean {
  return frame.kind === FrameKind.DATA && frame.seq >= FIRST_DEFERRABLE_SEQ;
}

/** An upper bound of the frame's encoded size inside a batch (UTF-8: ≤ 3 bytes per UTF-16 unit). */
export function frameSizeBound(frame: TunnelFrame): number {
  let size = FRAME_OVERHEAD_BOUND + frame.data.byteLength + 3 * (frame.errorCode.length + frame.errorMessage.length);
  const headers: Header[] = frame.headers;
  for (let i = 0; i < headers.length; i++) size += 12 + 3 * (headers[i].name.length + headers[i].value.length);
  return size;
}

export class FrameBatcher {
  readonly #write: (message: NodeMessage) => void;
  readonly #maxBytes: number;
  readonly #delayMs: number;
  #frames: TunnelFrame[] = [];
  #bytes = 0;
  /** A flush at this turn's end is queued (setImmediate). */
  #turnQueued = false;
  /** Only frames that may wait are pending: a flush after the delay is armed. */
  #timer: NodeJS.Timeout | undefined;

  /**
   * `maxBytes`: the edge's limit (Registered.max_frame_batch_bytes); the batch stays below it and below our own cap.
   * `delayMs`: how long a stream's later DATA frames may wait (0: every frame leaves at the turn's end).
   */
  constructor(write: (message: NodeMessage) => void, maxBytes: number, delayMs = 0) {
    this.#write = write;
    this.#maxBytes = Math.min(maxBytes - BATCH_ENVELOPE_BYTES, MAX_BATCH_BYTES);
    this.#delayMs = delayMs;
  }

  /** Queues `frame` for the end of this turn (or, a later DATA frame, for the delay); a full batch goes out at once. */
  add(frame: TunnelFrame): void {
    const size = frameSizeBound(frame);
    if (this.#frames.length > 0 && (this.#bytes + size > this.#maxBytes || this.#frames.length >= MAX_BATCH_FRAMES)) this.flush();
    this.#frames.push(frame);
    this.#bytes += size;
    if (this.#turnQueued) return;
    if (this.#delayMs === 0 || !mayWait(frame)) {
      this.#turnQueued = true;
      setImmediate(flushAtTurnEnd, this);
    } else if (this.#timer === undefined) {
      this.#timer = setTimeout(flushAfterDelay, this.#delayMs, this);
    }
  }

  /** Writes what is pending: one frame alone, several as a FrameBatch. */
  flush(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    const frames = this.#frames;
    if (frames.length === 0) return;
    this.#frames = [];
    this.#bytes = 0;
    if (frames.length === 1) this.#write({ $typeName: 'edge.v1.NodeMessage', msg: { case: 'frame', value: frames[0] } });
    else this.#write({ $typeName: 'edge.v1.NodeMessage', msg: { case: 'frameBatch', value: { $typeName: 'edge.v1.FrameBatch', frames } } });
  }

  /** Drops what is pending (the stream is gone). */
  discard(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    this.#frames = [];
    this.#bytes = 0;
  }

  /** @internal the end-of-turn flush */
  flushScheduled(): void {
    this.#turnQueued = false;
    this.flush();
  }

  /** @internal the delay's flush */
  flushDelayed(): void {
    this.#timer = undefined;
    this.flush();
  }
}

function flushAtTurnEnd(batcher: FrameBatcher): void {
  batcher.flushScheduled();
}

function flushAfterDelay(batcher: FrameBatcher): void {
  batcher.flushDelayed();
}
