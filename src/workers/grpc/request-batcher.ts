// TunnelRequests dispatched to one node in one event-loop turn leave as one
// gRPC message (TunnelRequestBatch) at the end of that turn: the mirror of
// the agent's FrameBatcher. grpc-js and HTTP/2 cost the same per message on
// both sides whatever its size, and under load the scheduler grants several
// requests per turn (one per client socket that became readable). Nothing is
// delayed: the batch goes out in the same turn's check phase (setImmediate),
// a lone request goes as a plain tunnel_request, and the session flushes the
// batch before writing anything else, so a cancel or credit never overtakes
// its request. Only for agents that announced REQUEST_BATCH_CAPABILITY.
import type { EdgeMessage, TunnelRequest } from '../../gen/edge/v1/tunnel_pb.js';

/** Requests per batch at most: bounds the agent's work per message. */
const MAX_BATCH_REQUESTS = 64;
/**
 * Bodies and forwarded headers per batch at most: a batch never outgrows
 * what one large request may be on its own. Headers count too: with
 * limits.max_header_bytes up to 1 MiB, 64 heads alone would pass the
 * message size the agent accepts.
 */
const MAX_BATCH_BYTES = 256 * 1024;

/** A request's size as the batch bound counts it: its body and its headers' names and values. */
function requestBytes(request: TunnelRequest): number {
  let size = request.body.byteLength;
  const headers = request.headers;
  for (let i = 0; i < headers.length; i++) size += headers[i].name.length + headers[i].value.length;
  return size;
}

export class RequestBatcher {
  readonly #write: (message: EdgeMessage) => void;
  #requests: TunnelRequest[] = [];
  #bytes = 0;
  #scheduled = false;

  constructor(write: (message: EdgeMessage) => void) {
    this.#write = write;
  }

  /** Queues `request` for the end of this turn; a full batch goes out at once. */
  add(request: TunnelRequest): void {
    const size = requestBytes(request);
    if (this.#requests.length > 0 && (this.#bytes + size > MAX_BATCH_BYTES || this.#requests.length >= MAX_BATCH_REQUESTS)) this.flush();
    this.#requests.push(request);
    this.#bytes += size;
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(flushAtTurnEnd, this);
    }
  }

  /** Writes what is pending: one request alone, several as a TunnelRequestBatch. */
  flush(): void {
    const requests = this.#requests;
    if (requests.length === 0) return;
    this.#requests = [];
    this.#bytes = 0;
    if (requests.length === 1) this.#write({ $typeName: 'edge.v1.EdgeMessage', msg: { case: 'tunnelRequest', value: requests[0] } });
    else this.#write({ $typeName: 'edge.v1.EdgeMessage', msg: { case: 'tunnelRequestBatch', value: { $typeName: 'edge.v1.TunnelRequestBatch', requests } } });
  }

  /** Drops what is pending (the session is gone; its tunnels fail with it). */
  discard(): void {
    this.#requests = [];
    this.#bytes = 0;
  }

  /** @internal the end-of-turn flush */
  flushScheduled(): void {
    this.#scheduled = false;
    this.flush();
  }
}

function flushAtTurnEnd(batcher: RequestBatcher): void {
  batcher.flushScheduled();
}
