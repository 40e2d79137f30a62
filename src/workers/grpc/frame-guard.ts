// What a node may send on its stream, checked frame by frame, and what the
// edge does about a node that breaks the rules: a bad frame for an open
// tunnel fails that tunnel only; a frame for no open tunnel is dropped (a
// violation unless the edge cancelled that tunnel, when frames already in
// flight are expected); a node that keeps breaking the rules is fenced (its
// session closed). Every case is counted in ProtocolStats, which the
// metrics exporter reads.
import { validateHeaderName, validateHeaderValue } from 'node:http';
import { FrameKind, type Header, type TunnelFrame } from '../../gen/edge/v1/tunnel_pb.js';
import { MAX_CONTENT_LENGTH_DIGITS, MAX_RESPONSE_HEAD_BYTES } from '../../shared/wire-limits.js';

/** An ERROR frame's code is kept to this many characters (its text to MAX_ERROR_MESSAGE_CHARS): both reach
 * the client, the run records (the last thousand of them) and the event history, so a node must not make them megabytes. */
export const MAX_ERROR_CODE_CHARS = 256;
/** Register.agent_version is kept to this many characters: it goes in every node.connected event, the status and the log. */
export const MAX_AGENT_VERSION_CHARS = 128;

/** A node's text cut to `max` characters, marked when cut. */
export function cutText(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** Violations one session may commit before the edge closes it. */
export const MAX_SESSION_VIOLATIONS = 16;

/** Counters since the edge started, one per kind of protocol event. */
export class ProtocolStats {
  /** Frames naming a tunnel id this session never opened (a violation). */
  unknownTunnelFrames = 0;
  /** Frames for a tunnel the edge cancelled (or failed) moments ago, or in flight when the session closed: dropped (expected, not a violation). */
  lateFrames = 0;
  /** Frames for a tunnel the node itself already ended with END or ERROR (a violation). */
  framesAfterEnd = 0;
  /** Frames whose seq was not the next one (gap or duplicate): the tunnel failed. */
  outOfOrderFrames = 0;
  /** Frames breaking HEADERS? DATA* (END | ERROR) (DATA or END before HEADERS, HEADERS twice, unknown kind): the tunnel failed. */
  badFrameSequences = 0;
  /** Frames sent before the session was registered: dropped. */
  framesBeforeRegister = 0;
  /** A second Register on a registered stream: ignored. */
  duplicateRegisters = 0;
  /** Announce on a lane, or before Registered: ignored (only a registered connection's anchor speaks for it). */
  misplacedAnnounces = 0;
  /** Announce naming more providers, or a longer id, than Register may: ignored, the providers stay as they were. */
  refusedAnnounces = 0;
  /** Health probe results naming a provider the node's Register did not announce: dropped. */
  unknownProbes = 0;
  /** Provider ids outside the config announced at Register past MAX_UNCONFIGURED_PROVIDER_IDS distinct ones: ignored. */
  droppedProviderIds = 0;
  /** Sessions that sent no Register in time. */
  registerTimeouts = 0;
  /** Register refused (unknown node, bad token). */
  rejectedRegistrations = 0;
  /** Lanes refused because their connection already had MAX_NODE_STREAMS streams (counted in rejectedRegistrations too). */
  laneLimitRejections = 0;
  /** Sessions replaced by a newer connection of the same node. */
  supersededSessions = 0;
  /** Sessions dropped for silence (half-open TCP). */
  heartbeatTimeouts = 0;
  /** Sessions dropped because the node took nothing the edge sent (not even a heartbeat) for the silence limit: it stopped reading its stream. */
  stalledReaders = 0;
  /** DATA frames over limits.max_frame_bytes, or HEADERS over MAX_RESPONSE_HEAD_BYTES: the tunnel failed. */
  oversizedFrames = 0;
  /** DATA past the tunnel's flow-control window (its initial credit plus the credit granted since): the tunnel failed. */
  windowOverruns = 0;
  /** Sessions closed because they broke the protocol too often. */
  nodesFenced = 0;
  /** FrameBatch messages received (not a violation: how much batching the nodes achieve). */
  frameBatches = 0;
  /** TunnelRequestBatch messages sent (how many turns dispatched several requests to one node at once). */
  requestBatches = 0;

  snapshot(): Record<string, number> {
    return { ...(this as unknown as Record<string, number>) };
  }
}

/** A tunnel's position in its frame sequence. */
export interface FrameOrder {
  nextSeq: number;
  sawHeaders: boolean;
}

export interface FrameProblem {
  readonly stat: 'outOfOrderFrames' | 'badFrameSequences' | 'oversizedFrames' | 'windowOverruns';
  readonly message: string;
}

/**
 * Admits `frame` as the next frame of its tunnel and advances `order`, or
 * returns what is wrong with it (and leaves `order` as it was).
 */
export function admitFrame(order: FrameOrder, frame: TunnelFrame, maxDataBytes: number): FrameProblem | undefined {
  if (frame.seq !== order.nextSeq) {
    return { stat: 'outOfOrderFrames', message: `frame ${frame.seq} arrived where ${order.nextSeq} was expected` };
  }
  switch (frame.kind) {
    case FrameKind.HEADERS:
      if (order.sawHeaders) return { stat: 'badFrameSequences', message: 'a second HEADERS frame' };
      {
        // Bounded like the agent bounds a provider's head: a larger one would be written to the client
        // as it is, or fail between workers, depending on where the client landed.
        const bytes = headBytes(frame.headers);
        if (bytes > MAX_RESPONSE_HEAD_BYTES) return { stat: 'oversizedFrames', message: `a HEADERS frame of ${bytes} header bytes (limit ${MAX_RESPONSE_HEAD_BYTES})` };
        // The client's response head is written from these: anything Node
        // would refuse to write must fail this tunnel, never the process.
        const problem = headersProblem(frame.status, frame.headers);
        if (problem !== undefined) return { stat: 'badFrameSequences', message: problem };
      }
      order.sawHeaders = true;
      break;
    case FrameKind.DATA:
      if (!order.sawHeaders) return { stat: 'badFrameSequences', message: 'a DATA frame before HEADERS' };
      if (frame.data.byteLength > maxDataBytes) {
        return { stat: 'oversizedFrames', message: `a DATA frame of ${frame.data.byteLength} bytes (limit ${maxDataBytes})` };
      }
      break;
    case FrameKind.END:
      if (!order.sawHeaders) return { stat: 'badFrameSequences', message: 'END before HEADERS' };
      break;
    case FrameKind.ERROR:
      break;
    default:
      return { stat: 'badFrameSequences', message: `unknown frame kind ${String(frame.kind)}` };
  }
  order.nextSeq++;
  return undefined;
}

/** The head's size as HTTP/1.1 lines: `name: value` CRLF per header. */
function headBytes(headers: readonly Header[]): number {
  let bytes = 0;
  for (let i = 0; i < headers.length; i++) bytes += headers[i].name.length + headers[i].value.length + 4;
  return bytes;
}

/** Why a HEADERS frame cannot become an HTTP response head, or undefined when it can. */
export function headersProblem(status: number, headers: readonly Header[]): string | undefined {
  if (!Number.isInteger(status) || status < 200 || status > 999) return `HEADERS with status ${status}`;
  let lengths = 0;
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i].name;
    try {
      validateHeaderName(name);
      validateHeaderValue(name, headers[i].value);
    } catch {
      return `HEADERS with an invalid header ${JSON.stringify(name.slice(0, 64))}`;
    }
    // The client frames the body by it: one plain decimal, or a client and the edge could read the body's end apart.
    if (name.length === 14 && (name.charCodeAt(0) | 0x20) === 0x63 && name.toLowerCase() === 'content-length') {
      if (++lengths > 1) return 'HEADERS with more than one content-length';
      if (!DECIMAL_LENGTH.test(headers[i].value)) return `HEADERS with content-length ${JSON.stringify(headers[i].value.slice(0, 32))}, not a decimal byte count`;
    }
  }
  return undefined;
}

const DECIMAL_LENGTH = new RegExp(`^\\d{1,${MAX_CONTENT_LENGTH_DIGITS}}$`);

/** One session's record of violations; says when the node has to go. */
export class SessionGuard {
  #violations = 0;

  constructor(readonly stats: ProtocolStats) {}

  get violationCount(): number {
    return this.#violations;
  }

  /**
   * A frame for no open tunnel: one the edge cancelled (a late frame, sent
   * before the node heard of the cancel), one the node already ended itself
   * (nothing may follow END or ERROR), or one never opened. True when the
   * node must now be fenced.
   */
  strayFrame(kind: 'cancelled' | 'ended' | 'unknown'): boolean {
    if (kind === 'cancelled') {
      this.stats.lateFrames++;
      return false;
    }
    if (kind === 'ended') this.stats.framesAfterEnd++;
    else this.stats.unknownTunnelFrames++;
    return this.#violation();
  }

  /** A tunnel failed for a bad frame. True when the node must now be fenced. */
  tunnelViolation(problem: FrameProblem): boolean {
    this.stats[problem.stat]++;
    return this.#violation();
  }

  #violation(): boolean {
    return ++this.#violations > MAX_SESSION_VIOLATIONS;
  }
}
