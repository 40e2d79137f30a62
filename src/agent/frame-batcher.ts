// Frames of all tunnels produced in one event-loop turn leave as one gRPC
// message (FrameBatch) at the end of that turn. grpc-js costs tens of µs per
// message on each side while a frame costs far less, and with thousands of
// slow streams nearly every token is its own frame: per-tunnel coalescing
// cannot merge them, but one turn's frames across tunnels can. No delay is
// added (the batch goes out in the same turn's check phase), a lone frame
// goes as a plain frame, and order is kept: frames in production order, and
// any other message flushes the pending batch before it is written.
import type { Header, NodeMessage, TunnelFrame } from '../gen/edge/v1/tunnel_pb.js';

/** Frames per batch at most (bounds the edge's work per message as well). */
const MAX_BATCH_FRAMES = 1024;
/** Bytes per batch at most on our side, below whatever the edge accepts. */
const MAX_BATCH_BYTES = 256 * 1024;
/** Upper bound of one frame's encoding beside its data, headers and error text. */
const FRAME_OVERHEAD_BOUND = 40;
/** NodeMessage's own tag and length around the FrameBatch. */
const BATCH_ENVELOPE_BYTES = 16;

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
  #frames: TunnelFrame[] = [];
  #bytes = 0;
  #scheduled = false;

  /** `maxBytes`: the edge's limit (Registered.max_frame_batch_bytes); the batch stays below it and below our own cap. */
  constructor(write: (message: NodeMessage) => void, maxBytes: number) {
    this.#write = write;
    this.#maxBytes = Math.min(maxBytes - BATCH_ENVELOPE_BYTES, MAX_BATCH_BYTES);
  }

  /** Queues `frame` for the end of this turn; a full batch goes out at once. */
  add(frame: TunnelFrame): void {
    const size = frameSizeBound(frame);
    if (this.#frames.length > 0 && (this.#bytes + size > this.#maxBytes || this.#frames.length >= MAX_BATCH_FRAMES)) this.flush();
    this.#frames.push(frame);
    this.#bytes += size;
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(flushAtTurnEnd, this);
    }
  }

  /** Writes what is pending: one frame alone, several as a FrameBatch. */
  flush(): void {
    const frames = this.#frames;
    if (frames.length === 0) return;
    this.#frames = [];
    this.#bytes = 0;
    if (frames.length === 1) this.#write({ $typeName: 'edge.v1.NodeMessage', msg: { case: 'frame', value: frames[0] } });
    else this.#write({ $typeName: 'edge.v1.NodeMessage', msg: { case: 'frameBatch', value: { $typeName: 'edge.v1.FrameBatch', frames } } });
  }

  /** Drops what is pending (the stream is gone). */
  discard(): void {
    this.#frames = [];
    this.#bytes = 0;
  }

  /** @internal the end-of-turn flush */
  flushScheduled(): void {
    this.#scheduled = false;
    this.flush();
  }
}

function flushAtTurnEnd(batcher: FrameBatcher): void {
  batcher.flushScheduled();
}
