// Tunnels between I/O workers. When a client's worker (W1) is granted a node
// whose session lives in another worker (W2), the tunnel's bytes cross one
// SPSC ring pair W1 <-> W2, never the main thread:
//   W1 -> W2  open (TunnelRequest bytes), cancel, credit
//   W2 -> W1  headers, data, end, error (frames as the node sent them), refused
// W1 holds a PeerNode (the TunnelHost its ProxyExchange talks to); W2 opens
// the tunnel on the node's session with a PeerTunnel as its consumer, after
// the pre-send fence there: the session must be current and of the grant's
// generation, else `refused stale` (W1 asks the scheduler to re-admit).
// A full ring is backpressure, never loss: records wait in an ordered
// backlog per ring; the tunnel windows bound what can pile up.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import type { Logger } from 'pino';
import { FrameKind, TunnelFrameSchema, TunnelRequestSchema, type Header, type TunnelRequest } from '../../gen/edge/v1/tunnel_pb.js';
import { drainLoop } from '../../shared/ring/drain-loop.js';
import { RingConsumer, RingProducer } from '../../shared/ring/spsc-ring.js';
import type { PeerRouter } from '../data-plane.js';
import type { NodeGateway } from '../grpc/node-gateway.js';
import type { NodeSession } from '../grpc/node-session.js';
import { MAX_ERROR_CODE_CHARS } from '../grpc/frame-guard.js';
import { MAX_ERROR_MESSAGE_CHARS } from '../../shared/wire-limits.js';
import type { TunnelRequestFields } from '../tunnel/tunnel-host.js';
import type { SchedulerPort } from '../../contract/scheduler-port.js';
import type { TunnelConsumer } from '../tunnel/tunnel-consumer.js';
import type { TunnelHost } from '../tunnel/tunnel-host.js';
import { getU32, OPEN_FIXED_BYTES, OPEN_PART_LAST, PEER_HEADER_BYTES, PeerKind, putU32, REFUSED_OVERLOADED, REFUSED_STALE } from './peer-records.js';

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder();
/** Largest DATA piece per record: frames above it are split (order kept). */
const MAX_DATA_PIECE = 64 * 1024;

/** The tunnel's consumer on the client's worker; a refusal re-admits or fails the request. */
export interface PeerConsumer extends TunnelConsumer {
  onRefused(code: 'stale' | 'overloaded', open: number): void;
}

export interface PeerStats {
  /** Tunnels this worker opened on a node held by another worker. */
  tunnelsOut: number;
  /** Tunnels another worker opened through this worker's node sessions. */
  tunnelsIn: number;
  /** Records that waited for ring space. */
  backlogged: number;
}

/** One other worker: the ring to it and the ring from it. */
class PeerLink {
  readonly #producer: RingProducer;
  readonly consumer: RingConsumer;
  readonly #backlog: Uint8Array[] = [];
  #flushing = false;
  readonly #maxPiece: number;
  /** Client side: tunnels this worker opened through the peer, by id. */
  readonly outgoing = new Map<number, PeerConsumer>();
  /** Node side: tunnels the peer opened on sessions here, by the peer's id. */
  readonly incoming = new Map<number, PeerTunnel>();
  /** Node side: opens from the peer not yet on a session (waiting for a lane that registers); a
   * cancel that finds its id here removes it, and the open is dropped when the wait ends. */
  readonly pendingOpens = new Set<number>();
  /** Node side: pieces of open records too large for one ring record, by the peer's tunnel id, until the last piece. */
  readonly #openParts = new Map<number, Uint8Array[]>();
  #nextTunnelId = 1;
  /** Closed (shut down, or its peer replaced): what is left in its ring starts no new work. */
  #closed = false;

  readonly #links: PeerLinks;

  constructor(
    readonly peer: number,
    toPeer: SharedArrayBuffer,
    fromPeer: SharedArrayBuffer,
    links: PeerLinks,
  ) {
    this.#links = links;
    this.#producer = new RingProducer(toPeer);
    this.consumer = new RingConsumer(fromPeer);
    this.#maxPiece = Math.min(MAX_DATA_PIECE, this.#producer.maxRecordLength - PEER_HEADER_BYTES);
  }

  newTunnelId(): number {
    const id = this.#nextTunnelId;
    this.#nextTunnelId = id >= 0xffff_fffe ? 1 : id + 1;
    return id;
  }

  usage(): { used: number; capacity: number } {
    return this.#producer.usage();
  }

  close(): void {
    this.#closed = true;
    this.#producer.close();
    this.consumer.close();
  }

  // --- writing -----------------------------------------------------------------

  /** Space for one record: in the ring when nothing waits, else a backlog copy. */
  #begin(length: number): { target: Uint8Array; at: number } {
    if (this.#backlog.length === 0) {
      const at = this.#producer.reserve(length);
      if (at >= 0) return { target: this.#producer.bytes, at };
    }
    const copy = new Uint8Array(length);
    this.#backlog.push(copy);
    this.#links.stats.backlogged++;
    return { target: copy, at: 0 };
  }

  #end(target: Uint8Array): void {
    if (target === this.#producer.bytes) this.#producer.commit();
    else if (!this.#flushing) void this.#flush();
  }

  #header(target: Uint8Array, at: number, kind: number, code: number, tunnelId: number): void {
    target[at] = kind;
    target[at + 1] = code;
    target[at + 2] = 0;
    target[at + 3] = 0;
    putU32(target, at + 4, tunnelId);
  }

  /** Whether a simple record with this much payload fits one ring record. */
  fits(payloadLength: number): boolean {
    return PEER_HEADER_BYTES + 4 + payloadLength <= this.#producer.maxRecordLength;
  }

  sendSimple(kind: number, code: number, tunnelId: number, payload: Uint8Array | undefined, word = -1): void {
    const extra = word >= 0 ? 4 : 0;
    const length = PEER_HEADER_BYTES + extra + (payload?.length ?? 0);
    const { target, at } = this.#begin(length);
    this.#header(target, at, kind, code, tunnelId);
    if (word >= 0) putU32(target, at + PEER_HEADER_BYTES, word);
    if (payload !== undefined) target.set(payload, at + PEER_HEADER_BYTES + extra);
    this.#end(target);
  }

  sendData(tunnelId: number, bytes: Uint8Array): void {
    for (let from = 0; from < bytes.length || from === 0; from += this.#maxPiece) {
      const piece = bytes.subarray(from, Math.min(bytes.length, from + this.#maxPiece));
      this.sendSimple(PeerKind.data, 0, tunnelId, piece);
      if (bytes.length === 0) return;
    }
  }

  sendOpen(tunnelId: number, leaseId: number, generation: number, nodeId: string, request: Uint8Array): void {
    const node = utf8.encode(nodeId);
    const length = OPEN_FIXED_BYTES + node.length + request.length;
    // A body up to limits.body_bytes can outgrow one ring record (half the ring): the record goes in pieces.
    const whole = length > this.#producer.maxRecordLength;
    const { target, at } = whole ? { target: new Uint8Array(length), at: 0 } : this.#begin(length);
    this.#header(target, at, PeerKind.open, 0, tunnelId);
    new DataView(target.buffer, target.byteOffset + at + 8, 8).setFloat64(0, leaseId, true);
    putU32(target, at + 16, generation);
    target[at + 20] = node.length & 0xff;
    target[at + 21] = node.length >>> 8;
    target[at + 22] = 0;
    target[at + 23] = 0;
    target.set(node, at + OPEN_FIXED_BYTES);
    target.set(request, at + OPEN_FIXED_BYTES + node.length);
    if (!whole) {
      this.#end(target);
      return;
    }
    for (let from = 0; from < length; from += this.#maxPiece) {
      const to = Math.min(length, from + this.#maxPiece);
      this.sendSimple(PeerKind.openPart, to === length ? OPEN_PART_LAST : 0, tunnelId, target.subarray(from, to));
    }
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#backlog.length > 0) {
        const head = this.#backlog[0];
        if (this.#producer.tryWrite(head)) {
          this.#backlog.shift();
          continue;
        }
        if (!(await this.#producer.waitForSpace(head.length)) && this.#producer.closed) return;
      }
    } finally {
      this.#flushing = false;
    }
  }

  // --- reading -----------------------------------------------------------------

  readonly onRecord = (offset: number, length: number): void => {
    const bytes = this.consumer.bytes;
    const kind = bytes[offset];
    const tunnelId = getU32(bytes, offset + 4);
    const body = offset + PEER_HEADER_BYTES;
    const end = offset + length;
    // A closed ring is still drained: an open the dead peer left there belongs to a client that is
    // gone, its lease already released by the pool (as the main thread skips such records).
    if (this.#closed && (kind === PeerKind.open || kind === PeerKind.openPart)) return;
    switch (kind) {
      case PeerKind.open:
        // Copied: the decoded request's body is a view of what it was decoded from (protobuf-es
        // bytes fields are subarrays), and the ring's bytes are reused once this record is released.
        this.#links.openHere(this, tunnelId, bytes.slice(offset, end));
        return;
      case PeerKind.openPart: {
        // Copied: the ring's bytes are reused once this record is released. Pieces arrive in order, before any cancel.
        let parts = this.#openParts.get(tunnelId);
        if (parts === undefined) this.#openParts.set(tunnelId, (parts = []));
        parts.push(bytes.slice(body, end));
        if (bytes[offset + 1] !== OPEN_PART_LAST) return;
        this.#openParts.delete(tunnelId);
        this.#links.openHere(this, tunnelId, Buffer.concat(parts));
        return;
      }
      case PeerKind.cancel:
        if (this.pendingOpens.delete(tunnelId)) return; // the client left before the open was sent
        this.incoming.get(tunnelId)?.cancel(utf8Decoder.decode(bytes.subarray(body, end)));
        return;
      case PeerKind.credit:
        this.incoming.get(tunnelId)?.credit(getU32(bytes, body));
        return;
      default:
        this.#frame(kind, bytes[offset + 1], tunnelId, bytes, body, end);
    }
  };

  #frame(kind: number, code: number, tunnelId: number, bytes: Uint8Array, body: number, end: number): void {
    const consumer = this.outgoing.get(tunnelId);
    if (consumer === undefined) return; // cancelled here; late frames are expected
    switch (kind) {
      case PeerKind.headers: {
        const frame = fromBinary(TunnelFrameSchema, bytes.subarray(body, end));
        consumer.onHeaders(frame.status, frame.headers, frame.upstreamUs);
        return;
      }
      case PeerKind.data:
        // A copy: the ring's bytes are reused once this record is released.
        consumer.onData(Buffer.from(bytes.subarray(body, end)));
        return;
      case PeerKind.end:
        this.outgoing.delete(tunnelId);
        consumer.onEnd(end - body >= 4 ? getU32(bytes, body) : 0);
        return;
      case PeerKind.error: {
        this.outgoing.delete(tunnelId);
        const frame = fromBinary(TunnelFrameSchema, bytes.subarray(body, end));
        consumer.onError(frame.errorCode || 'upstream_error', frame.errorMessage);
        return;
      }
      case PeerKind.refused:
        this.outgoing.delete(tunnelId);
        consumer.onRefused(code === REFUSED_OVERLOADED ? 'overloaded' : 'stale', getU32(bytes, body));
        return;
      default:
        throw new Error(`peer ring: unknown record kind ${kind}`);
    }
  }
}

/** Client side: the node held by another worker, as an exchange sees it. */
class PeerNode implements TunnelHost {
  readonly openTunnels = -1;
  readonly #link: PeerLink;
  readonly #leaseId: number;
  readonly #links: PeerLinks;

  constructor(
    link: PeerLink,
    readonly nodeId: string,
    readonly generation: number,
    leaseId: number,
    links: PeerLinks,
  ) {
    this.#link = link;
    this.#leaseId = leaseId;
    this.#links = links;
  }

  openTunnel(consumer: TunnelConsumer, fields: TunnelRequestFields): number {
    const tunnelId = this.#link.newTunnelId();
    this.#link.outgoing.set(tunnelId, consumer as PeerConsumer);
    const request = toBinary(TunnelRequestSchema, create(TunnelRequestSchema, { ...fields, tunnelId }));
    this.#link.sendOpen(tunnelId, this.#leaseId, this.generation, this.nodeId, request);
    this.#links.stats.tunnelsOut++;
    return tunnelId;
  }

  cancelTunnel(tunnelId: number, reason: string): void {
    if (!this.#link.outgoing.delete(tunnelId)) return;
    this.#link.sendSimple(PeerKind.cancel, 0, tunnelId, utf8.encode(reason));
  }

  grantCredit(tunnelId: number, bytes: number): void {
    if (!this.#link.outgoing.has(tunnelId)) return;
    this.#link.sendSimple(PeerKind.credit, 0, tunnelId, undefined, bytes);
  }
}

/** An ERROR frame's text relayed between workers: at most this many UTF-16 units (3 bytes each, well inside a record). */
const MAX_ERROR_CHARS = MAX_ERROR_MESSAGE_CHARS;

/** Node side: relays one tunnel's frames from the node's session to the client's worker. */
class PeerTunnel implements TunnelConsumer {
  sessionTunnelId = 0;
  readonly #link: PeerLink;

  constructor(
    link: PeerLink,
    readonly tunnelId: number,
    readonly session: NodeSession,
  ) {
    this.#link = link;
  }

  onHeaders(status: number, headers: readonly Header[], upstreamUs: number): void {
    const frame = create(TunnelFrameSchema, { kind: FrameKind.HEADERS, status, headers: headers as Header[], upstreamUs });
    const encoded = toBinary(TunnelFrameSchema, frame);
    if (!this.#link.fits(encoded.length)) {
      // One ring record carries a head; a larger one (a node gone wrong) would throw in the ring
      // and take this worker, and every client on it, down. The request fails instead.
      this.cancel('response head too large');
      this.onError('node_protocol_error', `the node sent a response head of ${encoded.length} bytes, more than the edge relays between its workers`);
      return;
    }
    this.#link.sendSimple(PeerKind.headers, 0, this.tunnelId, encoded);
  }

  onData(bytes: Uint8Array): void {
    this.#link.sendData(this.tunnelId, bytes);
  }

  onEnd(upstreamUs: number): void {
    this.#link.incoming.delete(this.tunnelId);
    this.#link.sendSimple(PeerKind.end, 0, this.tunnelId, undefined, upstreamUs);
  }

  onError(code: string, message: string): void {
    this.#link.incoming.delete(this.tunnelId);
    // Bounded like a head must be (see onHeaders): the node's text is cut, never the worker.
    const frame = create(TunnelFrameSchema, { kind: FrameKind.ERROR, errorCode: code.slice(0, MAX_ERROR_CODE_CHARS), errorMessage: message.length > MAX_ERROR_CHARS ? `${message.slice(0, MAX_ERROR_CHARS)}…` : message });
    this.#link.sendSimple(PeerKind.error, 0, this.tunnelId, toBinary(TunnelFrameSchema, frame));
  }

  cancel(reason: string): void {
    this.#link.incoming.delete(this.tunnelId);
    this.session.cancelTunnel(this.sessionTunnelId, reason);
  }

  credit(bytes: number): void {
    this.session.grantCredit(this.sessionTunnelId, bytes);
  }
}

export interface PeerRings {
  /** toPeer[j]: this worker -> worker j (undefined for itself). */
  readonly toPeer: readonly (SharedArrayBuffer | undefined)[];
  readonly fromPeer: readonly (SharedArrayBuffer | undefined)[];
}

export class PeerLinks implements PeerRouter {
  readonly stats: PeerStats = { tunnelsOut: 0, tunnelsIn: 0, backlogged: 0 };
  readonly #links: (PeerLink | undefined)[] = [];
  #maxTunnelsPerNode = 0;

  readonly #nodes: NodeGateway;
  readonly #port: SchedulerPort;
  readonly #logger: Logger;

  constructor(rings: PeerRings, nodes: NodeGateway, port: SchedulerPort, logger: Logger) {
    this.#nodes = nodes;
    this.#port = port;
    this.#logger = logger;
    for (let j = 0; j < rings.toPeer.length; j++) {
      const to = rings.toPeer[j];
      const from = rings.fromPeer[j];
      this.#links.push(to !== undefined && from !== undefined ? new PeerLink(j, to, from, this) : undefined);
    }
  }

  setMaxTunnelsPerNode(limit: number): void {
    this.#maxTunnelsPerNode = limit;
  }

  run(): Promise<void>[] {
    const onError = (err: unknown): void => this.#logger.error({ err }, 'peer ring record failed');
    const loops: Promise<void>[] = [];
    for (const link of this.#links) if (link !== undefined) loops.push(drainLoop(link.consumer, link.onRecord, onError));
    return loops;
  }

  close(): void {
    for (const link of this.#links) link?.close();
  }

  /**
   * Worker `peer` exited and a new one runs on fresh rings. Tunnels it
   * opened on nodes here are cancelled (the node aborts upstream; their
   * leases were released by the pool); tunnels this worker opened on its
   * nodes fail as node_disconnected (those nodes' sessions died with it).
   */
  replacePeer(peer: number, toPeer: SharedArrayBuffer, fromPeer: SharedArrayBuffer): void {
    const old = this.#links[peer];
    if (old === undefined) return;
    old.close();
    old.pendingOpens.clear();
    const incoming = [...old.incoming.values()];
    old.incoming.clear();
    for (const tunnel of incoming) tunnel.cancel(`the client's worker ${peer} exited`);
    const outgoing = [...old.outgoing.values()];
    old.outgoing.clear();
    for (const consumer of outgoing) consumer.onError('node_disconnected', `the worker holding the node (${peer}) exited`);
    const link = new PeerLink(peer, toPeer, fromPeer, this);
    this.#links[peer] = link;
    void drainLoop(link.consumer, link.onRecord, (err: unknown) => this.#logger.error({ err }, 'peer ring record failed'));
    this.#logger.warn({ peer, cancelled: incoming.length, failed: outgoing.length }, 'peer worker replaced');
  }

  ringUsage(): { peer: number; used: number; capacity: number }[] {
    const out: { peer: number; used: number; capacity: number }[] = [];
    for (const link of this.#links) if (link !== undefined) out.push({ peer: link.peer, ...link.usage() });
    return out;
  }

  nodeHost(worker: number, nodeId: string, generation: number, leaseId: number): TunnelHost {
    const link = this.#links[worker];
    if (link === undefined) throw new Error(`no ring to worker ${worker}`);
    return new PeerNode(link, nodeId, generation, leaseId, this);
  }

  /** An `open` from a peer: fence here (the session must be current, of the grant's generation), then open. */
  openHere(link: PeerLink, tunnelId: number, record: Uint8Array): void {
    const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
    const leaseId = view.getFloat64(8, true);
    const generation = getU32(record, 16);
    const nodeLength = record[20] | (record[21] << 8);
    const nodeId = utf8Decoder.decode(record.subarray(OPEN_FIXED_BYTES, OPEN_FIXED_BYTES + nodeLength));
    // `record` is this worker's own copy: the request (body included, a view of it) outlives the ring record.
    const request = fromBinary(TunnelRequestSchema, record.subarray(OPEN_FIXED_BYTES + nodeLength));
    link.pendingOpens.add(tunnelId);
    this.#nodes.whenCurrent(nodeId, (session) => {
      // A cancel while the open waited for a registering lane: the client is gone and its lease
      // already released, so nothing is sent (the GPU would compute an answer nobody reads).
      if (link.pendingOpens.delete(tunnelId)) this.#openOn(link, tunnelId, leaseId, generation, session, request);
    });
  }

  #openOn(link: PeerLink, tunnelId: number, leaseId: number, generation: number, session: NodeSession | undefined, request: TunnelRequest): void {
    if (session === undefined || !session.isActive || session.generation !== generation) {
      link.sendSimple(PeerKind.refused, REFUSED_STALE, tunnelId, undefined, 0);
      return;
    }
    if (this.#maxTunnelsPerNode > 0 && session.openTunnels >= this.#maxTunnelsPerNode) {
      link.sendSimple(PeerKind.refused, REFUSED_OVERLOADED, tunnelId, undefined, session.openTunnels);
      return;
    }
    if (!this.#port.confirmSent(leaseId)) return;
    const tunnel = new PeerTunnel(link, tunnelId, session);
    link.incoming.set(tunnelId, tunnel);
    this.stats.tunnelsIn++;
    try {
      tunnel.sessionTunnelId = session.openTunnel(tunnel, {
        runId: request.runId,
        providerId: request.providerId,
        adapter: request.adapter,
        sessionId: request.sessionId,
        target: request.target,
        method: request.method,
        path: request.path,
        headers: request.headers,
        body: request.body,
        stream: request.stream,
        timeoutMs: request.timeoutMs,
        ttfbTimeoutMs: request.ttfbTimeoutMs,
        idleTimeoutMs: request.idleTimeoutMs,
        initialCredit: request.initialCredit,
        metadata: request.metadata,
      });
    } catch (err) {
      tunnel.onError('node_disconnected', `could not send to node ${session.nodeId}: ${(err as Error).message}`);
    }
  }
}
