// One attempt at a connection to the edge: a fresh grpc-js client and its
// Connect stream, registration, heartbeats and the half-open watchdog, and
// the tunnels running on it. It never reconnects itself; it reports to its
// owner (the NodeAgent) once, when it closes, and the owner decides.
import { MAX_EDGE_TO_NODE_MESSAGE_BYTES } from '../shared/wire-limits.js';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { ProbeVerdict } from './health-probes.js';
import type { EdgeMessage, NodeMessage, TunnelRequest } from '../gen/edge/v1/tunnel_pb.js';
import { CONNECT_PATH, decodeEdgeMessage, encodeNodeMessage } from '../shared/node-tunnel-service.js';
import type { AgentConfig } from './config.js';
import { FrameBatcher } from './frame-batcher.js';
import { ANNOUNCE_CAPABILITY } from '../shared/announce.js';
import { announceMessage, commandResultMessage, errorFrame, heartbeatMessage, leavingMessage, registerMessage } from './frames.js';
import type { Command } from '../gen/edge/v1/tunnel_pb.js';
import type { AgentCommandAnswer } from './commands.js';
import type { TunnelErrorCode } from './tunnel-errors.js';
import { TunnelExecutor, type FrameSink } from './tunnel-executor.js';
import type { Upstreams } from './upstreams.js';
import { AGENT_VERSION } from './version.js';
import { edgeCredentials, tlsChannelOptions } from './tls.js';

export interface ConnectionOwner {
  onRegistered(connection: EdgeConnection, generation: number): void;
  onRejected(connection: EdgeConnection, reason: string): void;
  /** Called exactly once per connection, whatever closed it. */
  onClosed(connection: EdgeConnection, reason: string): void;
  /** The edge committed a config change; `changedPaths` are the ones that concern this node. */
  onConfigRefresh?(connection: EdgeConnection, changedPaths: readonly string[], configVersion: number): void;
  /** Register.capabilities this agent announces (["commands"] when it answers Command). */
  capabilities?(): string[];
  /** An operator command; undefined = leave it unanswered (the edge reports a timeout). */
  onCommand?(connection: EdgeConnection, command: Command): Promise<AgentCommandAnswer> | undefined;
  /** The active health probes' verdicts, sent with the anchor stream's heartbeats. */
  probeVerdicts?(): readonly ProbeVerdict[];
  /** Drained by command: new tunnels are refused with node_leaving. */
  readonly draining?: boolean;
}

const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  // Every attempt gets its own TCP connection: the default global subchannel
  // pool would hand a fresh client the very transport we are abandoning.
  'grpc.use_local_subchannel_pool': 1,
  // HTTP/2 pings notice a dead transport even while a tunnel is silent.
  'grpc.keepalive_time_ms': 20_000,
  'grpc.keepalive_timeout_ms': 10_000,
  'grpc.keepalive_permit_without_calls': 1,
  // A TunnelRequest carries the whole client body (the default cap is 4 MiB).
  'grpc.max_receive_message_length': MAX_EDGE_TO_NODE_MESSAGE_BYTES,
  'grpc.enable_retries': 0,
};

/** No Registered/Rejected within this long: the edge is not answering. */
const REGISTER_TIMEOUT_MS = 10_000;
/** Used when Registered leaves the heartbeat settings at 0. */
const DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000;
const DEFAULT_HEARTBEAT_TIMEOUT_MS = 15_000;

type ConnectCall = grpc.ClientDuplexStream<NodeMessage, EdgeMessage>;

export class EdgeConnection implements FrameSink {
  readonly #config: AgentConfig;
  readonly #upstreams: Upstreams;
  readonly #owner: ConnectionOwner;
  readonly #log: Logger;
  #client: grpc.Client | undefined;
  #call: ConnectCall | undefined;
  readonly #tunnels = new Map<number, TunnelExecutor>();
  /** Tunnels paused because the stream's buffer is full; resumed on 'drain'. */
  #drainWaiters: TunnelExecutor[] = [];
  /** A write returned false and no 'drain' came since: tunnels pause. */
  #congested = false;
  /** Set at Registered when the edge accepts FrameBatch; frames then leave once per turn. */
  #batcher: FrameBatcher | undefined;
  #generation: number | undefined;
  /** Registered.max_frame_bytes: no DATA payload may be larger (0 = the edge did not say). */
  #maxFrameBytes = 0;
  /** Registered.capabilities: what the edge takes beyond the base protocol (empty until Registered, and from an older edge). */
  #edgeCapabilities: readonly string[] = [];
  /** Upstreams.version when Register was written: a provider change while it awaited Registered is announced then. */
  #registeredVersion = 0;
  #leaving = false;
  /** False once the stream is half-closed or closed: nothing more may be written. */
  #writable = false;
  #closed = false;
  #registerTimer: NodeJS.Timeout | undefined;
  #heartbeatTimer: NodeJS.Timeout | undefined;
  #heartbeatTimeoutMs = DEFAULT_HEARTBEAT_TIMEOUT_MS;
  /** Set by every message from the edge; the heartbeat tick reads and clears it (cheaper than a timer reset per message). */
  #heard = false;
  #lastHeardAt = 0;
  #silenceRecheck = false;
  #onIdle: (() => void) | undefined;
  #onStatus: (() => void) | undefined;

  /**
   * `lane` / `joinGeneration`: 0 / 0 opens a new connection (a new
   * generation); otherwise this stream joins generation `joinGeneration` as
   * extra lane `lane` and ends only its own tunnels when it closes.
   */
  constructor(
    config: AgentConfig,
    upstreams: Upstreams,
    owner: ConnectionOwner,
    logger: Logger,
    readonly lane = 0,
    readonly joinGeneration = 0,
  ) {
    this.#config = config;
    this.#upstreams = upstreams;
    this.#owner = owner;
    this.#log = logger;
    this.onMessage = this.onMessage.bind(this);
    this.onCallError = this.onCallError.bind(this);
    this.onCallStatus = this.onCallStatus.bind(this);
    this.onDrain = this.onDrain.bind(this);
  }

  get generation(): number | undefined {
    return this.#generation;
  }

  get registered(): boolean {
    return this.#generation !== undefined && !this.#closed;
  }

  /** The edge listed `capability` in its Registered. */
  edgeTakes(capability: string): boolean {
    return this.#edgeCapabilities.includes(capability);
  }

  /** Announce (anchor stream, registered, to an edge that takes it): the providers the node offers from now on. */
  announce(): void {
    if (this.#generation === undefined || this.lane !== 0) return;
    this.send(announceMessage(this.#upstreams.ids(), this.#upstreams.endpoints(), this.#owner.probeVerdicts?.() ?? [], this.#upstreams.types()));
  }

  get openTunnels(): number {
    return this.#tunnels.size;
  }

  /** Dials the edge and sends Register. */
  open(): void {
    const { edge, node } = this.#config;
    this.#client = new grpc.Client(
      edge.address,
      edgeCredentials(edge.tls, (err) => this.#log.warn({ err: err.message }, 'edge.tls files do not load (a renewal halfway?); dialing with the last good ones')),
      edge.tls?.serverName === undefined ? CHANNEL_OPTIONS : { ...CHANNEL_OPTIONS, ...tlsChannelOptions(edge.tls) },
    );
    const call: ConnectCall = this.#client.makeBidiStreamRequest(CONNECT_PATH, encodeNodeMessage, decodeEdgeMessage);
    this.#call = call;
    call.on('data', this.onMessage);
    call.on('error', this.onCallError);
    call.on('status', this.onCallStatus);
    call.on('drain', this.onDrain);
    this.#writable = true;
    this.#registeredVersion = this.#upstreams.version;
    call.write(registerMessage(node.id, node.token, AGENT_VERSION, this.#upstreams.ids(), this.lane, this.joinGeneration, this.#upstreams.endpoints(), this.#owner.capabilities?.() ?? [], this.#owner.draining === true, this.lane === 0 ? (this.#owner.probeVerdicts?.() ?? []) : [], this.#upstreams.types()));
    this.#registerTimer = setTimeout(onRegisterTimeout, REGISTER_TIMEOUT_MS, this);
  }

  /** Tells the edge we are shutting down; tunnels that arrive from now on get ERROR node_leaving. */
  leave(reason: string): void {
    if (this.#closed || this.#leaving) return;
    this.#leaving = true;
    this.send(leavingMessage(reason));
  }

  /** Resolves once no tunnel is open, or after waitMs. */
  whenIdle(waitMs: number): Promise<void> {
    if (this.#tunnels.size === 0 || this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, waitMs);
      this.#onIdle = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /**
   * Aborts tunnels still open (their grace is over), half-closes the stream so
   * everything written is flushed, waits up to waitMs for the edge to finish
   * the stream, then closes.
   */
  async end(waitMs: number): Promise<void> {
    if (this.#closed || this.#call === undefined) return;
    const call = this.#call;
    this.#cancelTunnels('the node is shutting down');
    this.#batcher?.flush();
    this.#writable = false;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, waitMs);
      this.#onStatus = () => {
        clearTimeout(timer);
        resolve();
      };
      call.end();
    });
    this.close('stopped');
  }

  /** Closes at once: running upstream requests are aborted (the edge fails their tunnels itself). */
  close(reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#writable = false;
    clearTimeout(this.#registerTimer);
    clearInterval(this.#heartbeatTimer);
    this.#batcher?.discard();
    this.#cancelTunnels('connection to the edge closed');
    this.#call?.cancel();
    this.#client?.close();
    this.#onIdle?.();
    this.#onStatus?.();
    this.#owner.onClosed(this, reason);
  }

  // --- FrameSink ----------------------------------------------------------------

  send(message: NodeMessage): boolean {
    const batcher = this.#batcher;
    if (batcher !== undefined) {
      if (message.msg.case === 'frame') {
        if (this.#writable) batcher.add(message.msg.value);
        return !this.#congested;
      }
      batcher.flush();
    }
    this.#writeNow(message);
    return !this.#congested;
  }

  /** Writes one message now, past the batcher; an arrow field so the batcher holds it bound, allocated once. */
  readonly #writeNow = (message: NodeMessage): void => {
    if (!this.#writable || this.#call === undefined) return;
    if (!this.#call.write(message)) this.#congested = true;
  };

  /** Ends every open tunnel of a provider with an ERROR (its cli processes are killed); returns how many. */
  endProviderTunnels(providerId: string, message: string): number {
    let ended = 0;
    for (const tunnel of [...this.#tunnels.values()]) {
      if (tunnel.providerId !== providerId) continue;
      tunnel.terminate('upstream_reset', message);
      ended++;
    }
    return ended;
  }

  resumeOnDrain(tunnel: TunnelExecutor): void {
    this.#drainWaiters.push(tunnel);
  }

  tunnelFinished(tunnel: TunnelExecutor, errorCode?: TunnelErrorCode, errorMessage?: string): void {
    this.#tunnels.delete(tunnel.tunnelId);
    if (errorCode !== undefined) {
      this.#log.warn({ tunnelId: tunnel.tunnelId, runId: tunnel.runId, requestId: tunnel.requestId, providerId: tunnel.providerId, adapter: tunnel.adapter, sessionId: tunnel.sessionId, errorCode, errorMessage }, 'tunnel failed');
    } else if (this.#log.isLevelEnabled('debug')) {
      this.#log.debug({ tunnelId: tunnel.tunnelId, runId: tunnel.runId, requestId: tunnel.requestId }, 'tunnel finished');
    }
    if (this.#tunnels.size === 0 && this.#onIdle !== undefined) {
      const onIdle = this.#onIdle;
      this.#onIdle = undefined;
      onIdle();
    }
  }

  // --- stream events (bound once per connection) --------------------------------

  onMessage(message: EdgeMessage): void {
    if (this.#closed) return;
    this.#heard = true;
    const msg = message.msg;
    switch (msg.case) {
      case 'tunnelRequest':
        this.#startTunnel(msg.value);
        break;
      case 'tunnelRequestBatch': {
        // One turn's requests of the edge, in order: each as if it came alone (a cancel could not have overtaken them).
        const requests = msg.value.requests;
        for (let i = 0; i < requests.length && !this.#closed; i++) this.#startTunnel(requests[i]);
        break;
      }
      case 'cancel':
        this.#tunnels.get(msg.value.tunnelId)?.cancel(msg.value.reason);
        break;
      case 'credit':
        this.#tunnels.get(msg.value.tunnelId)?.addCredit(msg.value.bytes);
        break;
      case 'heartbeat':
        break;
      case 'registered':
        this.#onRegistered(msg.value.generation, msg.value.heartbeatIntervalMs, msg.value.heartbeatTimeoutMs, msg.value.maxFrameBatchBytes, msg.value.maxFrameBytes, msg.value.capabilities);
        break;
      case 'rejected':
        this.#owner.onRejected(this, msg.value.reason);
        this.close(`rejected: ${msg.value.reason}`);
        break;
      case 'command':
        this.#runCommand(msg.value);
        break;
      case 'configRefresh':
        this.#log.info({ changedPaths: msg.value.changedPaths, configVersion: msg.value.configVersion }, 'edge config refreshed');
        this.#owner.onConfigRefresh?.(this, msg.value.changedPaths, msg.value.configVersion);
        break;
      default:
        this.#log.warn('ignoring an empty or unknown message from the edge');
    }
  }

  onCallError(err: grpc.ServiceError): void {
    // 'status' follows and closes the connection; this listener keeps the error from being thrown.
    if (!this.#closed) this.#log.debug({ code: err.code, details: err.details }, 'edge stream error');
  }

  onCallStatus(status: grpc.StatusObject): void {
    this.#onStatus?.();
    // OK is the edge ending the stream itself (it is stopping, or retired or superseded this connection): grpc-js's
    // details for it only repeat "OK", which read as a failure in the log ("stream ended: OK OK").
    this.close(status.code === grpc.status.OK ? 'the edge ended the stream (OK)' : `stream ended: ${grpc.status[status.code] ?? status.code} ${status.details}`.trimEnd());
  }

  onDrain(): void {
    this.#congested = false;
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    // A resumed tunnel may fill the buffer again at once and queue itself on the fresh list.
    for (let i = 0; i < waiters.length; i++) waiters[i].resume();
  }

  // --- timers ---------------------------------------------------------------------

  registerTimedOut(): void {
    this.#registerTimer = undefined;
    if (this.#generation === undefined) this.close(`no answer to Register within ${REGISTER_TIMEOUT_MS} ms`);
  }

  heartbeatTick(): void {
    const now = performance.now();
    if (this.#heard) {
      this.#heard = false;
      this.#lastHeardAt = now;
    } else if (now - this.#lastHeardAt >= this.#heartbeatTimeoutMs && !this.#silenceRecheck) {
      // Timers run before the loop polls sockets: after a stall of ours the
      // edge's heartbeats may be waiting unread. Judged once they are read.
      this.#silenceRecheck = true;
      setImmediate(onSilenceRecheck, this);
    }
    this.heartbeatNow();
  }

  /** The silence heartbeatTick() saw, judged again after this turn's socket reads. */
  silenceRechecked(): void {
    this.#silenceRecheck = false;
    if (this.#closed || this.#heard) return;
    const silent = performance.now() - this.#lastHeardAt;
    // Half-open TCP: the socket looks fine but the edge is gone.
    if (silent >= this.#heartbeatTimeoutMs) this.close(`nothing from the edge for ${Math.round(silent)} ms (heartbeat timeout ${this.#heartbeatTimeoutMs} ms)`);
  }

  /** A heartbeat now, carrying the probe verdicts on the anchor stream (a verdict change does not wait for the tick). */
  heartbeatNow(): void {
    if (this.#generation === undefined) return;
    this.send(heartbeatMessage(Date.now(), this.lane === 0 ? (this.#owner.probeVerdicts?.() ?? []) : []));
  }

  // --- internals --------------------------------------------------------------------

  #onRegistered(generation: number, intervalMs: number, timeoutMs: number, maxFrameBatchBytes: number, maxFrameBytes: number, capabilities: readonly string[]): void {
    if (this.#generation !== undefined) {
      this.#log.warn({ generation }, 'ignoring a second Registered on the same stream');
      return;
    }
    clearTimeout(this.#registerTimer);
    this.#generation = generation;
    this.#maxFrameBytes = maxFrameBytes;
    this.#edgeCapabilities = capabilities;
    this.#heartbeatTimeoutMs = timeoutMs > 0 ? timeoutMs : DEFAULT_HEARTBEAT_TIMEOUT_MS;
    this.#lastHeardAt = performance.now();
    this.#heard = false;
    if (maxFrameBatchBytes > 0 && this.#config.tunnels.batchFrames) this.#batcher = new FrameBatcher(this.#writeNow, maxFrameBatchBytes, this.#config.tunnels.batchDelayMs);
    this.#heartbeatTimer = setInterval(onHeartbeatTick, intervalMs > 0 ? intervalMs : DEFAULT_HEARTBEAT_INTERVAL_MS, this);
    if (this.lane === 0 && this.#upstreams.version !== this.#registeredVersion) {
      // A config refresh added or removed providers after Register went out: the edge registered the old set.
      if (!this.edgeTakes(ANNOUNCE_CAPABILITY)) {
        // An edge that predates Announce hears of them only at a Register: one now, before any tunnel is under way
        // (else it would send a removed provider requests once its grace here is over, until some reconnect).
        this.close('providers changed while registering with an edge that predates Announce: registering again with them');
        return;
      }
      this.announce();
    }
    this.#owner.onRegistered(this, generation);
  }

  #cancelTunnels(reason: string): void {
    for (const tunnel of this.#tunnels.values()) tunnel.cancel(reason);
    this.#tunnels.clear();
    this.#drainWaiters = [];
  }

  #runCommand(command: Command): void {
    this.#log.info({ commandId: command.id, kind: command.kind, args: command.args }, 'command from the edge');
    const answer = this.#owner.onCommand?.(this, command);
    if (answer === undefined) return;
    answer.then(
      (a) => this.send(commandResultMessage(command.id, a.status, a.message, a.result === undefined ? '' : JSON.stringify(a.result))),
      (err: Error) => this.send(commandResultMessage(command.id, 'failed', err.message, '')),
    );
  }

  #startTunnel(request: TunnelRequest): void {
    if (this.#owner.draining === true) {
      this.send(errorFrame(request.tunnelId, 0, 'node_leaving', 'the node is draining (operator command)'));
      return;
    }
    if (this.#leaving) {
      this.send(errorFrame(request.tunnelId, 0, 'node_leaving', 'the node is shutting down'));
      return;
    }
    if (this.#tunnels.has(request.tunnelId)) {
      // The edge reused a live id; answering would interleave two seq streams under one id.
      this.#log.error({ tunnelId: request.tunnelId }, 'ignoring a TunnelRequest for a tunnel id that is still running');
      return;
    }
    const tunnel = new TunnelExecutor(request, this, this.#config.tunnels, this.#maxFrameBytes);
    this.#tunnels.set(request.tunnelId, tunnel);
    if (this.#log.isLevelEnabled('debug')) {
      this.#log.debug({ tunnelId: tunnel.tunnelId, runId: tunnel.runId, requestId: tunnel.requestId, providerId: tunnel.providerId, adapter: tunnel.adapter, sessionId: tunnel.sessionId }, 'tunnel started');
    }
    tunnel.start(this.#upstreams);
  }
}

function onRegisterTimeout(connection: EdgeConnection): void {
  connection.registerTimedOut();
}

function onHeartbeatTick(connection: EdgeConnection): void {
  connection.heartbeatTick();
}

function onSilenceRecheck(connection: EdgeConnection): void {
  connection.silenceRechecked();
}
