// One node connection (one gRPC bidi stream): the registration handshake,
// heartbeats both ways, and the tunnels open on it. Frames are checked for
// order here, so consumers only ever see HEADERS? DATA* (END | ERROR).
// Silence is measured on the monotonic clock: a wall-clock step (NTP, a VM
// resumed) must not drop every node at once.
import { performance } from 'node:perf_hooks';
import type { LogThrottle } from '../../shared/log-throttle.js';
import { create } from '@bufbuild/protobuf';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import {
  EdgeMessageSchema,
  type Announce,
  FrameKind,
  type EdgeMessage,
  type NodeMessage,
  type ProbeResult,
  type Register,
  type TunnelFrame,
} from '../../gen/edge/v1/tunnel_pb.js';
import type { TunnelConsumer } from '../tunnel/tunnel-consumer.js';
import { cancelMessage, creditMessage, tunnelRequestMessage } from './edge-messages.js';
import { RequestBatcher } from './request-batcher.js';
import { REQUEST_BATCH_CAPABILITY } from '../../shared/request-batch.js';
import { ANNOUNCE_CAPABILITY } from '../../shared/announce.js';
import type { TunnelHost, TunnelRequestFields } from '../tunnel/tunnel-host.js';
import { admitFrame, cutText, MAX_AGENT_VERSION_CHARS, MAX_ERROR_CODE_CHARS, SessionGuard, type FrameProblem, type ProtocolStats } from './frame-guard.js';
import { MAX_ERROR_MESSAGE_CHARS } from '../../shared/wire-limits.js';
import { CommandWaiters } from './command-waiters.js';
import { COMMANDS_CAPABILITY, type NodeCommandResult } from '../../shared/node-commands.js';

export type NodeCall = ServerDuplexStream<NodeMessage, EdgeMessage>;

/** Frames one FrameBatch may carry (four times what the agent sends). */
export const MAX_BATCH_FRAMES = 4096;

/** What a session needs from the edge around it. */
/** The rejection of an unknown node id and of a wrong token alike. */
export const UNKNOWN_NODE_OR_TOKEN = 'unknown node id or bad token';

/** A claimed node id is logged this long at most: it comes from a peer that has not proved anything. */
const LOGGED_ID_CHARS = 128;
/** Registered.capabilities: what this edge takes beyond the base protocol. */
const EDGE_CAPABILITIES = [ANNOUNCE_CAPABILITY];

export interface SessionHost {
  readonly heartbeatIntervalMs: number;
  readonly heartbeatTimeoutMs: number;
  readonly registerTimeoutMs: number;
  /** Checks credentials and asks the scheduler to activate the node (session.activate follows, maybe
   * synchronously, or session.reject), or returns a rejection reason at once. */
  register(session: NodeSession, register: Register): string | undefined;
  /** Called once when an active session ends, whatever the cause. */
  unregister(session: NodeSession, reason: string): void;
  /** Called once when any session ends (registered or not). */
  forget(session: NodeSession): void;
  readonly logger: Logger;
  /** Where protocol violations and drops are counted. */
  readonly protocolStats: ProtocolStats;
  /** How often a rejection for credentials is logged (a peer guessing tokens must not flood the log). */
  readonly credentialRejections: LogThrottle;
  /** How often a stream that never registered is logged (anyone who reaches the listener can open them). */
  readonly registerTimeoutLog: LogThrottle;
  /** Largest DATA payload a node may put in one frame (limits.max_frame_bytes). */
  readonly maxFrameBytes: number;
  /** The node said Leaving: it finishes open tunnels and wants no new ones. */
  leaving?(session: NodeSession, reason: string): void;
  /** The node's heartbeat carried its active health probe results. */
  probed?(session: NodeSession, probes: readonly ProbeResult[]): void;
  /** The anchor of an active connection announced the providers it offers from now on. */
  announce?(session: NodeSession, update: Announce): void;
}

class OpenTunnel {
  nextSeq = 0;
  sawHeaders = false;
  /** DATA bytes the node may still send: initial_credit plus the credit granted (Infinity: no window). Held here, on the
   * node's thread, so a node that ignores its window fails the tunnel as a counted violation before its bytes pile up anywhere. */
  credit: number;
  constructor(
    readonly consumer: TunnelConsumer,
    initialCredit: number,
  ) {
    this.credit = initialCredit > 0 ? initialCredit : Infinity;
  }
}

type SessionState = 'registering' | 'active' | 'closed';

let lastSerial = 0;

export class NodeSession implements TunnelHost {
  /** Names this session in the scheduler's asynchronous connect answer. */
  readonly serial = ++lastSerial;
  nodeId = '';
  generation = 0;
  /** The node's stream index (0 = its first); informational. */
  lane = 0;
  /** Non-zero: this stream joins that generation as an extra lane instead of starting a new connection. */
  joinGeneration = 0;
  /** Register said the agent is drained by an operator command (it keeps that across reconnects). */
  registeredDraining = false;
  /** The providers its Register announced (checked and bounded there): what its probe results may name. */
  providerIds: ReadonlySet<string> = new Set();
  agentVersion = '';
  /** A Leaving was acted on: any later one on this stream is ignored. */
  #leavingSaid = false;
  /** What the agent said when it began leaving: the stream's end then names it (a stopped agent's grace ran out). */
  #leavingReason: string | undefined;
  /** Register.capabilities: what the agent understands beyond the base protocol. */
  capabilities: readonly string[] = [];
  readonly remoteAddress: string;
  connectedAtMs = 0;
  #state: SessionState = 'registering';
  /** A Register came: any later one is a duplicate, also while the first one's answer is awaited (with workers it comes from the scheduler's thread). */
  #registerSeen = false;
  readonly #tunnels = new Map<number, OpenTunnel>();
  #nextTunnelId = 1;
  /** Tunnel ids wrapped past 2^32-1: every non-zero id may then have been opened. */
  #idsWrapped = false;
  readonly #guard: SessionGuard;
  /** performance.now() of the last message from the node. */
  #lastSeenAt = performance.now();
  /**
   * Tunnels the edge cancelled (or failed for a bad frame), so their frames
   * already in flight count as late, not as violations. Two generations,
   * rotated once per heartbeat timeout: an id is remembered for at least
   * that long, and the sets stay bounded by the cancel rate.
   */
  #cancelledIds = new Set<number>();
  #cancelledIdsBefore = new Set<number>();
  #cancelledRotatedAt = performance.now();

  /** Wall-clock time of the last message from the node (heartbeats included); the console shows its age. */
  get lastSeenAtMs(): number {
    return Date.now() - (performance.now() - this.#lastSeenAt);
  }
  #heartbeatTimer: NodeJS.Timeout | undefined;
  /** The silence limit this node was told at Register. A refresh changes the edge's settings for
   * sessions registered after it; judging this one by a new, shorter limit would drop an idle node
   * that still heartbeats at the interval it was given. */
  #toldTimeoutMs = 0;
  /** A silence past the limit is to be judged again after this turn's socket reads. */
  #silenceRecheck = false;
  /** performance.now() when a write to the node last completed. Writes queue without bound in grpc-js while the node
   * does not read its stream, each TunnelRequest with its body: a node that takes nothing (not even the heartbeat
   * that is written every interval) for the silence limit is dropped as a silent one is. A slow link that still
   * takes what is queued, one message after another, is not; one message longer than the limit to pass (a body of
   * megabytes) is judged as nothing taken, as the agent judges the edge silent meanwhile (its heartbeats wait behind it). */
  #lastTakenAt = performance.now();
  readonly #taken = (): void => {
    this.#lastTakenAt = performance.now();
  };
  readonly #commands = new CommandWaiters(() => this.nodeId);
  /** Set at Register for an agent that takes batched TunnelRequests; every other write flushes it first. */
  #requestBatcher: RequestBatcher | undefined;

  readonly #call: NodeCall;
  readonly #host: SessionHost;

  /** A close's reason, saying the node had announced it was leaving when it had: its open requests were cut by its stop, not a crash. */
  #afterLeaving(reason: string): string {
    return this.#leavingReason === undefined ? reason : `${reason} while leaving (${this.#leavingReason})`;
  }

  constructor(call: NodeCall, host: SessionHost) {
    this.#call = call;
    this.#host = host;
    this.remoteAddress = call.getPeer();
    this.#guard = new SessionGuard(host.protocolStats);
    call.on('data', (message: NodeMessage) => this.#onMessage(message));
    call.on('end', () => this.close(this.#afterLeaving('node closed the stream')));
    call.on('cancelled', () => this.close(this.#afterLeaving('connection lost')));
    call.on('error', (err: Error) => this.close(`stream error: ${err.message}`));
    // Until Register arrives the heartbeat timer doubles as the register deadline.
    this.#heartbeatTimer = setTimeout(onRegisterTimeout, host.registerTimeoutMs, this);
  }

  get isRegistering(): boolean {
    return this.#state === 'registering';
  }

  get isActive(): boolean {
    return this.#state === 'active';
  }

  get openTunnels(): number {
    return this.#tunnels.size;
  }

  /** Sends a tunnel request; returns the tunnel id. Throws if the stream is gone. */
  openTunnel(consumer: TunnelConsumer, fields: TunnelRequestFields): number {
    if (this.#state !== 'active') throw new Error(`node ${this.nodeId} session is ${this.#state}`);
    const tunnelId = this.#nextTunnelId++;
    if (this.#nextTunnelId > 0xffff_ffff) {
      this.#nextTunnelId = 1;
      this.#idsWrapped = true;
    }
    const message = tunnelRequestMessage(tunnelId, fields);
    if (this.#requestBatcher !== undefined && message.msg.case === 'tunnelRequest') {
      // Tracked at once; a write failing at the end of the turn closes the session, which fails it as node_disconnected.
      this.#requestBatcher.add(message.msg.value);
      // A full batch is written inside add(): had that write failed, the session is closed and this request dropped with it.
      if (this.#state !== 'active') throw new Error(`node ${this.nodeId} session is ${this.#state}`);
      this.#tunnels.set(tunnelId, new OpenTunnel(consumer, fields.initialCredit));
      return tunnelId;
    }
    // Written before it is tracked: a write that throws leaves no tunnel behind.
    this.#call.write(message, this.#taken);
    this.#tunnels.set(tunnelId, new OpenTunnel(consumer, fields.initialCredit));
    return tunnelId;
  }

  /** Widens a tunnel's window by `bytes` the client has taken. */
  grantCredit(tunnelId: number, bytes: number): void {
    const tunnel = this.#tunnels.get(tunnelId);
    if (this.#state !== 'active' || tunnel === undefined) return;
    tunnel.credit += bytes;
    this.#send(creditMessage(tunnelId, bytes));
  }

  /** Tells the node which config paths that concern it changed (a notice; the node needs no answer). */
  sendConfigRefresh(changedPaths: readonly string[], configVersion: number): void {
    if (this.#state !== 'active') return;
    this.#send(create(EdgeMessageSchema, { msg: { case: 'configRefresh', value: { changedPaths: [...changedPaths], configVersion } } }));
  }

  /**
   * Sends an operator command and resolves with the node's answer, `timeout`
   * after deadlineMs, or `unsupported` at once for an agent that did not
   * announce the commands capability (it would ignore the message).
   */
  sendCommand(kind: string, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<NodeCommandResult> {
    if (this.#state !== 'active') return Promise.resolve({ node: this.nodeId, kind, status: 'not_connected', message: `node ${this.nodeId} session is ${this.#state}` });
    if (!this.capabilities.includes(COMMANDS_CAPABILITY)) {
      return Promise.resolve({ node: this.nodeId, kind, status: 'unsupported', message: `the agent (version ${this.agentVersion || 'unknown'}) predates node commands; upgrade it to use them` });
    }
    return this.#commands.send(kind, args, deadlineMs, (message) => {
      this.#requestBatcher?.flush();
      this.#call.write(message, this.#taken);
    });
  }

  /** Stops a tunnel from the edge side: no more frames reach its consumer; the node aborts upstream. */
  cancelTunnel(tunnelId: number, reason: string): void {
    if (!this.#tunnels.delete(tunnelId) || this.#state !== 'active') return;
    this.#cancelledIds.add(tunnelId);
    // The request it cancels goes first (#send flushes the batch); a failed write closes the session.
    this.#send(cancelMessage(tunnelId, reason));
  }

  /** Ends the session; open tunnels fail with node_disconnected. Idempotent. */
  close(reason: string): void {
    if (this.#state === 'closed') return;
    const wasActive = this.#state === 'active';
    this.#state = 'closed';
    this.#requestBatcher?.discard();
    if (this.#heartbeatTimer) clearTimeout(this.#heartbeatTimer);
    this.#heartbeatTimer = undefined;
    const open = [...this.#tunnels.values()];
    this.#tunnels.clear();
    if (wasActive) this.#host.unregister(this, reason);
    this.#host.forget(this);
    this.#commands.failAll(reason);
    for (const tunnel of open) tunnel.consumer.onError('node_disconnected', `node ${this.nodeId} disconnected: ${reason}`);
    try {
      this.#call.end();
    } catch {
      // already torn down by the transport
    }
    if (wasActive) this.#host.logger.info({ node: this.nodeId, generation: this.generation, lane: this.lane, reason, failedTunnels: open.length }, 'node session closed');
    // Never registered: anyone who reaches the listener can cause this, once per connection, with any claimed id. A refusal
    // or a missed Register was said already (throttled, the id cut short), so this is no info line of its own.
    else this.#host.logger.debug({ node: this.nodeId.slice(0, LOGGED_ID_CHARS), peer: this.remoteAddress, reason }, 'unregistered node stream closed');
  }

  /** @internal the silence seen by heartbeat(), judged again after the socket was read */
  silenceRechecked(): void {
    this.#silenceRecheck = false;
    if (this.#state !== 'active') return;
    const now = performance.now();
    if (now - this.#lastSeenAt > this.#toldTimeoutMs) {
      this.#host.protocolStats.heartbeatTimeouts++;
      this.close('heartbeat timeout');
    } else if (now - this.#lastTakenAt > this.#toldTimeoutMs) {
      this.#host.protocolStats.stalledReaders++;
      this.#host.logger.warn({ node: this.nodeId, generation: this.generation, lane: this.lane, stalledMs: Math.round(now - this.#lastTakenAt) }, 'node does not read its stream; closing');
      this.close(`not reading its stream (nothing the edge sent was taken for ${Math.round(now - this.#lastTakenAt)} ms)`);
    }
  }

  /** @internal register timer */
  registerTimedOut(): void {
    if (this.#state !== 'registering') return;
    this.#host.protocolStats.registerTimeouts++;
    const leftOut = this.#host.registerTimeoutLog.take();
    if (leftOut !== undefined) this.#host.logger.warn({ peer: this.remoteAddress, ...(leftOut > 0 ? { silentSinceLastLine: leftOut } : {}) }, 'node sent no Register in time; closing');
    this.close('no register message in time');
  }

  /** @internal heartbeat timer */
  heartbeat(): void {
    if (this.#state !== 'active') return;
    const now = performance.now();
    if ((now - this.#lastSeenAt > this.#toldTimeoutMs || now - this.#lastTakenAt > this.#toldTimeoutMs) && !this.#silenceRecheck) {
      // Timers run before the loop polls sockets: after a stall (a long GC, a
      // long turn) the node's heartbeats may be waiting unread. It is judged
      // once they are read, so a stall of ours never drops every node at once.
      this.#silenceRecheck = true;
      setImmediate(onSilenceRecheck, this);
    }
    // The told timeout, not the config's: a refresh that lowered it must not shorten this session's memory.
    if (now - this.#cancelledRotatedAt >= this.#toldTimeoutMs) {
      this.#cancelledRotatedAt = now;
      const spent = this.#cancelledIdsBefore;
      spent.clear();
      this.#cancelledIdsBefore = this.#cancelledIds;
      this.#cancelledIds = spent;
    }
    this.#send(create(EdgeMessageSchema, { msg: { case: 'heartbeat', value: { unixMs: Date.now() } } }));
  }

  /** The batcher's end-of-turn write: a failure closes the session (its tunnels, the batched ones included, fail with it). */
  #writeBatch(message: EdgeMessage): void {
    if (this.#state === 'closed') return;
    if (message.msg.case === 'tunnelRequestBatch') this.#host.protocolStats.requestBatches++;
    try {
      this.#call.write(message, this.#taken);
    } catch (err) {
      this.close(`write failed: ${(err as Error).message}`);
    }
  }

  #send(message: EdgeMessage): void {
    try {
      this.#requestBatcher?.flush();
      this.#call.write(message, this.#taken);
    } catch (err) {
      this.close(`write failed: ${(err as Error).message}`);
    }
  }

  #onMessage(message: NodeMessage): void {
    this.#lastSeenAt = performance.now();
    const msg = message.msg;
    switch (msg.case) {
      case 'frame':
        this.#receiveFrame(msg.value);
        return;
      case 'frameBatch':
        this.#onFrameBatch(msg.value.frames);
        return;
      case 'heartbeat':
        if (msg.value.probes.length > 0 && this.#state === 'active') this.#host.probed?.(this, msg.value.probes);
        return;
      case 'register':
        this.#onRegister(msg.value);
        return;
      case 'announce':
        // The anchor speaks for the connection (its lanes carry only tunnels); before Registered there is nothing to change.
        if (this.#state === 'active' && this.joinGeneration === 0) this.#host.announce?.(this, msg.value);
        else this.#host.protocolStats.misplacedAnnounces++;
        return;
      case 'commandResult':
        this.#commands.answer(msg.value);
        return;
      case 'leaving': {
        // The agent says it once per stream: each more would log and publish node.leaving again (the event
        // history keeps 1,024 of them), and its text is cut as an ERROR frame's is.
        if (this.#leavingSaid) return;
        this.#leavingSaid = this.#state === 'active';
        const reason = cutText(msg.value.reason, MAX_ERROR_MESSAGE_CHARS);
        this.#leavingReason = reason;
        this.#host.logger.info({ node: this.nodeId, reason }, 'node is leaving');
        if (this.#state === 'active') this.#host.leaving?.(this, reason);
        return;
      }
      default:
        return;
    }
  }

  #onRegister(register: Register): void {
    if (this.#state !== 'registering' || this.#registerSeen) {
      this.#host.protocolStats.duplicateRegisters++;
      this.#host.logger.warn({ node: this.nodeId }, 'node sent register twice on one stream; ignored');
      return;
    }
    this.#registerSeen = true;
    if (this.#heartbeatTimer) clearTimeout(this.#heartbeatTimer);
    this.#heartbeatTimer = undefined;
    this.nodeId = register.nodeId;
    // Shown in the node.connected event (kept in the event history), the status and the log, on every reconnect.
    this.agentVersion = cutText(register.agentVersion, MAX_AGENT_VERSION_CHARS);
    this.capabilities = register.capabilities;
    if (register.capabilities.includes(REQUEST_BATCH_CAPABILITY)) this.#requestBatcher = new RequestBatcher((message) => this.#writeBatch(message));
    this.lane = register.lane;
    this.joinGeneration = register.joinGeneration;
    this.registeredDraining = register.draining;
    this.providerIds = new Set(register.providerIds);
    const rejection = this.#host.register(this, register);
    if (rejection !== undefined) this.reject(rejection);
  }

  /** Registration refused (bad credentials, or a node the scheduler does not know). */
  reject(rejection: string): void {
    if (this.#state !== 'registering') return;
    this.#host.protocolStats.rejectedRegistrations++;
    const leftOut = rejection === UNKNOWN_NODE_OR_TOKEN ? this.#host.credentialRejections.take() : 0;
    if (leftOut !== undefined) {
      this.#host.logger.warn({ node: this.nodeId.slice(0, LOGGED_ID_CHARS), peer: this.remoteAddress, reason: rejection, ...(leftOut > 0 ? { rejectedSinceLastLine: leftOut } : {}) }, 'node rejected');
    }
    this.#send(create(EdgeMessageSchema, { msg: { case: 'rejected', value: { reason: rejection } } }));
    this.close(`rejected: ${rejection}`);
  }

  /** Makes this session the node's current connection; Registered goes out before any tunnel. */
  activate(generation: number): void {
    this.generation = generation;
    this.#state = 'active';
    // The node's heartbeats start when it reads Registered: silence is counted from here, not from
    // its Register (which main may have taken a while to answer).
    this.#lastSeenAt = performance.now();
    this.#lastTakenAt = this.#lastSeenAt;
    this.connectedAtMs = Date.now();
    const intervalMs = this.#host.heartbeatIntervalMs;
    this.#toldTimeoutMs = this.#host.heartbeatTimeoutMs;
    this.#send(
      create(EdgeMessageSchema, {
        msg: {
          case: 'registered',
          value: {
            generation,
            heartbeatIntervalMs: intervalMs,
            heartbeatTimeoutMs: this.#toldTimeoutMs,
            // The node listener's gRPC message limit bounds a batch as it bounds one frame.
            maxFrameBatchBytes: this.#host.maxFrameBytes,
            maxFrameBytes: this.#host.maxFrameBytes,
            capabilities: EDGE_CAPABILITIES,
          },
        },
      }),
    );
    this.#heartbeatTimer = setInterval(onHeartbeat, intervalMs, this);
    this.#host.logger.info({ node: this.nodeId, generation, peer: this.remoteAddress, agentVersion: this.agentVersion }, 'node connected');
  }

  /** Each frame as if it came alone; a fence on the way drops the rest (late frames). */
  #onFrameBatch(frames: readonly TunnelFrame[]): void {
    this.#host.protocolStats.frameBatches++;
    if (frames.length > MAX_BATCH_FRAMES && this.#state === 'active') {
      // Many tiny frames in one message would hold this thread; agents send at most 1,024.
      this.#fence(`a frame batch of ${frames.length} frames (at most ${MAX_BATCH_FRAMES})`);
      return;
    }
    for (let i = 0; i < frames.length; i++) this.#receiveFrame(frames[i]);
  }

  #receiveFrame(frame: TunnelFrame): void {
    if (this.#state === 'active') this.#onFrame(frame);
    else if (this.#state === 'registering') this.#host.protocolStats.framesBeforeRegister++;
    else this.#host.protocolStats.lateFrames++; // in flight when the session closed
  }

  #onFrame(frame: TunnelFrame): void {
    const tunnel = this.#tunnels.get(frame.tunnelId);
    if (!tunnel) {
      // Cancelled here (late frames are expected after a cancel), ended by the node itself, or never opened.
      const id = frame.tunnelId;
      const opened = id !== 0 && (this.#idsWrapped || id < this.#nextTunnelId);
      const kind = !opened ? 'unknown' : this.#cancelledIds.has(id) || this.#cancelledIdsBefore.has(id) ? 'cancelled' : 'ended';
      if (this.#guard.strayFrame(kind)) {
        this.#fence(kind === 'unknown' ? `frames for tunnel ids it was never given (last: ${id})` : `frames after END or ERROR (last: tunnel ${id})`);
      }
      return;
    }
    const problem = admitFrame(tunnel, frame, this.#host.maxFrameBytes);
    if (problem !== undefined) {
      this.#failTunnel(frame.tunnelId, tunnel, problem);
      return;
    }
    switch (frame.kind) {
      case FrameKind.HEADERS:
        tunnel.consumer.onHeaders(frame.status, frame.headers, frame.upstreamUs);
        return;
      case FrameKind.DATA:
        if (frame.data.byteLength > tunnel.credit) {
          this.#failTunnel(frame.tunnelId, tunnel, { stat: 'windowOverruns', message: `a DATA frame of ${frame.data.byteLength} bytes past the flow-control window (${tunnel.credit} bytes of credit left)` });
          return;
        }
        tunnel.credit -= frame.data.byteLength;
        tunnel.consumer.onData(frame.data);
        return;
      case FrameKind.END:
        this.#tunnels.delete(frame.tunnelId);
        tunnel.consumer.onEnd(frame.upstreamUs);
        return;
      case FrameKind.ERROR: {
        this.#tunnels.delete(frame.tunnelId);
        const message = frame.errorMessage;
        tunnel.consumer.onError(frame.errorCode.slice(0, MAX_ERROR_CODE_CHARS) || 'upstream_error', cutText(message, MAX_ERROR_MESSAGE_CHARS));
        return;
      }
      default:
        this.#tunnels.delete(frame.tunnelId);
        tunnel.consumer.onError('node_protocol_error', `unknown frame kind ${String(frame.kind)}`);
    }
  }

  /** A bad frame for an open tunnel: that tunnel fails (CANCEL to the node); other tunnels go on. */
  #failTunnel(tunnelId: number, tunnel: OpenTunnel, problem: FrameProblem): void {
    this.#tunnels.delete(tunnelId);
    this.#cancelledIds.add(tunnelId);
    const fence = this.#guard.tunnelViolation(problem);
    this.#host.logger.warn({ node: this.nodeId, generation: this.generation, tunnel: tunnelId, problem: problem.message }, 'bad frame from node; tunnel failed');
    this.#send(cancelMessage(tunnelId, `protocol error: ${problem.message}`));
    tunnel.consumer.onError('node_protocol_error', `the node broke the frame protocol: ${problem.message}`);
    if (fence) this.#fence(`repeated protocol errors (last: ${problem.message})`);
  }

  /** Closes a session that keeps breaking the protocol; its open tunnels fail with node_disconnected. */
  #fence(why: string): void {
    if (this.#state === 'closed') return;
    this.#host.protocolStats.nodesFenced++;
    this.#host.logger.error({ node: this.nodeId, generation: this.generation, peer: this.remoteAddress, violations: this.#guard.violationCount }, `node fenced: ${why}`);
    // Rejected tells the agent why, and makes it reconnect at its slowest pace.
    this.#send(create(EdgeMessageSchema, { msg: { case: 'rejected', value: { reason: `fenced for protocol violations: ${why}` } } }));
    this.close(`fenced for protocol violations: ${why}`);
  }
}

function onHeartbeat(session: NodeSession): void {
  session.heartbeat();
}

function onSilenceRecheck(session: NodeSession): void {
  session.silenceRechecked();
}

function onRegisterTimeout(session: NodeSession): void {
  session.registerTimedOut();
}
