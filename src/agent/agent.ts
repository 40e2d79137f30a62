// The node agent's lifecycle: keep one registered connection to the edge up
// for as long as the agent runs, reconnecting with capped exponential backoff
// and full jitter (reset by each successful registration). A rejected
// registration (bad token, unknown node) will not fix itself, so it is
// retried at the slowest pace only, jittered (between half the maximum delay
// and the maximum) so a fenced fleet does not come back in lock-step. With edge.streams > 1 the connection
// gets extra streams ("lanes") once registered: each joins the connection's
// generation, and one that drops is re-opened while the connection lives.
// The first stream anchors the connection: when it drops, so do the lanes,
// and the whole connection is re-established.
import { EventEmitter } from 'node:events';
import { pino, type Logger } from 'pino';
import { Backoff, upperHalfJitter } from './backoff.js';
import type { AgentConfig } from './config.js';
import { EdgeConnection, type ConnectionOwner } from './edge-connection.js';
import { Upstreams } from './upstreams.js';
import { diagnoseEdgeDial } from './tls.js';
import { HealthProbes, type ProbeVerdict } from './health-probes.js';
import type { Command } from '../gen/edge/v1/tunnel_pb.js';
import { REQUEST_BATCH_CAPABILITY } from '../shared/request-batch.js';
import { COMMANDS_CAPABILITY } from '../shared/node-commands.js';
import { ANNOUNCE_CAPABILITY } from '../shared/announce.js';
import { runAgentCommand, type AgentCommandAnswer, type CliProviderHook, type CommandContext } from './commands.js';

/** What grpc-js says when a dial fails for a reason it does not name (a refused certificate, TLS on one side only). */
const DIAL_FAILURES_WITHOUT_REASON = /Failed to connect|wrong version number/;

export interface NodeAgentOptions {
  logger?: Logger;
  /** How long stop() lets open tunnels finish after Leaving before aborting them; default 10 s. */
  stopGraceMs?: number;
  /** The reconnect jitter's source of randomness in [0, 1) (tests pin it); default Math.random. */
  random?: () => number;
  /**
   * Re-read by the refresh_config command (the CLI passes --config), and for
   * its node.token before each reconnect; absent: refresh_config fails.
   */
  reloadConfig?: () => Promise<AgentConfig>;
  /** The cli-provider runner's hook for restart_provider; absent: unsupported. */
  cli?: CliProviderHook;
  /**
   * Test hook: 'legacy' registers without the commands capability and ignores
   * commands (an agent that predates them); 'silent' announces it but never
   * answers (a hung agent).
   */
  commandMode?: 'answer' | 'legacy' | 'silent';
}

export interface NodeAgentEvents {
  registered: [generation: number];
  rejected: [reason: string];
  disconnected: [reason: string];
  /** Why dialling the edge fails, when grpc-js did not say (logged once per distinct reason). */
  'dial-diagnosis': [diagnosis: string];
  /** The edge committed a config change; the paths are the ones that concern this node. */
  'config-refresh': [changedPaths: readonly string[], configVersion: number];
  /** A command from the edge was answered. */
  command: [kind: string, answer: AgentCommandAnswer];
}

const DEFAULT_STOP_GRACE_MS = 10_000;
/** After the final half-close, how long to wait for the edge to end the stream. */
const STOP_END_WAIT_MS = 1_000;
/** How long a reconnect waits for the config file's node.token before it dials with the token it has. */
const TOKEN_REREAD_MS = 2_000;
/** How long a registered connection must last before a disconnect starts the reconnect backoff over. */
const STABLE_CONNECTION_MS = 10_000;

export class NodeAgent extends EventEmitter<NodeAgentEvents> implements ConnectionOwner {
  #config: AgentConfig;
  /** Active health probes; their verdicts ride on the anchor stream's heartbeats. */
  readonly #probes = new HealthProbes(() => this.#config, () => this.#connection?.heartbeatNow());
  readonly #log: Logger;
  readonly #options: NodeAgentOptions;
  #draining = false;
  readonly #commandContext: CommandContext;
  readonly #stopGraceMs: number;
  readonly #upstreams: Upstreams;
  readonly #backoff: Backoff;
  /** When the current connection registered (performance.now()); 0 while it has not. */
  #registeredAt = 0;
  /** stop() was called (#stopping is its promise). */
  #stopRequested = false;
  readonly #random: () => number;
  #connection: EdgeConnection | undefined;
  /** Extra lanes of the current connection, by lane index (0 is #connection). */
  readonly #lanes: (EdgeConnection | undefined)[] = [];
  readonly #laneTimers: (NodeJS.Timeout | undefined)[] = [];
  /** Per extra lane: its reconnect backoff (one that keeps failing must not re-dial several times a second) and when it registered. */
  #laneBackoffs: Backoff[] = [];
  readonly #laneRegisteredAt: number[] = [];
  /** A join was refused in this generation: its lanes are not re-opened until a new connection (no retry loop). */
  #laneRefusedIn = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;
  /** The current connection was rejected: the next attempt waits the maximum delay. */
  #rejected = false;
  /** A dial diagnosis is running (diagnoseEdgeDial), and the last one logged: each distinct reason is logged once until a registration. */
  #diagnosing = false;
  #lastDiagnosis: string | undefined;
  #started = false;
  #stopping: Promise<void> | undefined;

  constructor(config: AgentConfig, options: NodeAgentOptions = {}) {
    super();
    this.#config = config;
    this.#options = options;
    this.#log = (options.logger ?? pino({ level: config.logLevel, name: 'node-agent' })).child({ nodeId: config.node.id });
    this.#stopGraceMs = options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    this.#upstreams = new Upstreams(config.providers, (message, detail) => this.#log.warn(detail, message));
    this.#random = options.random ?? Math.random;
    this.#backoff = new Backoff(config.reconnect.initialMs, config.reconnect.maxMs, this.#random);
    this.#commandContext = {
      logger: this.#log,
      upstreams: this.#upstreams,
      config: () => this.#config,
      setConfig: (config) => {
        this.#config = config;
      },
      reload: this.#options.reloadConfig,
      setDraining: (draining) => {
        this.#draining = draining;
        this.#log.info({ draining }, draining ? 'draining (operator command): no new tunnels' : 'undrained (operator command)');
      },
      openTunnels: () => this.#streams().reduce((n, s) => n + s.openTunnels, 0),
      // restart_provider: the runner's hook if the embedder gave one, else end the provider's running processes here.
      cli: this.#options.cli ?? { restartProvider: async (providerId) => this.#endProviderRuns(providerId) },
      // Between connections, or while Register awaits its answer, the next Register (or onRegistered) tells the edge.
      canAnnounce: () => this.#connection?.registered !== true || this.#connection.edgeTakes(ANNOUNCE_CAPABILITY),
      announce: () => {
        // A withdrawn provider's verdict must not ride on the Announce or the heartbeats after it; an added one is probed now.
        this.#probes.providersChanged();
        this.#connection?.announce();
      },
    };
  }

  /** The generation of the current registered connection; undefined while not registered. */
  get generation(): number | undefined {
    return this.#connection?.registered === true ? this.#connection.generation : undefined;
  }

  isConnected(): boolean {
    return this.#connection?.registered === true;
  }

  /** Dials the edge and keeps a connection up until stop(). */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#probes.start();
    this.#connect();
  }

  /** Sends Leaving, lets open tunnels finish (up to the grace period), aborts the rest, closes. No reconnect after. */
  stop(): Promise<void> {
    // Set before #stop() runs: it may close a stream that has not registered at once, and
    // onClosed must not take that for a drop to reconnect after.
    this.#stopRequested = true;
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  /** Drained by an operator command: no new tunnels, open ones finish. */
  get draining(): boolean {
    return this.#draining;
  }

  /** The config the agent runs by (a refresh_config may have applied provider changes). */
  get config(): AgentConfig {
    return this.#config;
  }

  /** Test hook: drops the current connection abruptly, as a network failure would; the agent reconnects by itself. */
  dropConnection(): void {
    this.#connection?.close('dropped (test hook)');
  }

  /** Test hook: drops one extra lane (1 .. edge.streams - 1); the agent re-opens it. */
  dropLane(lane: number): void {
    this.#lanes[lane]?.close('dropped (test hook)');
  }

  // --- ConnectionOwner ---------------------------------------------------------

  onRegistered(connection: EdgeConnection, generation: number): void {
    if (connection.lane > 0) {
      this.#laneRegisteredAt[connection.lane] = performance.now();
      this.#log.debug({ lane: connection.lane, generation }, 'lane registered');
      return;
    }
    if (connection !== this.#connection) return;
    // The backoff starts over only once this connection has lasted (see onClosed).
    this.#registeredAt = performance.now();
    this.#lastDiagnosis = undefined;
    this.#log.info({ generation, edge: this.#config.edge.address, streams: this.#config.edge.streams ?? 1 }, 'registered with the edge');
    this.emit('registered', generation);
    this.#laneBackoffs = [];
    // The edge starts the connection from the verdicts its Register carried, as they were when it was written:
    // one that changed while the handshake took its time (a provider back, or one failing) must not wait for the next tick.
    if (this.#probes.verdicts().length > 0) connection.heartbeatNow();
    for (let lane = 1; lane < (this.#config.edge.streams ?? 1); lane++) this.#openLane(lane, generation);
  }

  onConfigRefresh(connection: EdgeConnection, changedPaths: readonly string[], configVersion: number): void {
    // The edge tells one stream of the connection, whichever.
    if (connection === this.#connection || this.#lanes[connection.lane] === connection) this.emit('config-refresh', changedPaths, configVersion);
  }

  probeVerdicts(): readonly ProbeVerdict[] {
    return this.#probes.verdicts();
  }

  capabilities(): string[] {
    const capabilities = this.#options.commandMode === 'legacy' ? [] : [COMMANDS_CAPABILITY];
    // tunnels.batch_frames: false turns batching off in both directions (one gRPC message per frame and per request).
    if (this.#config.tunnels.batchFrames) capabilities.push(REQUEST_BATCH_CAPABILITY);
    return capabilities;
  }

  onCommand(_connection: EdgeConnection, command: Command): Promise<AgentCommandAnswer> | undefined {
    const mode = this.#options.commandMode ?? 'answer';
    if (mode !== 'answer') return undefined;
    return runAgentCommand(this.#commandContext, command.kind, command.args, command.deadlineMs).then((answer) => {
      this.emit('command', command.kind, answer);
      return answer;
    });
  }


  onRejected(connection: EdgeConnection, reason: string): void {
    if (connection.lane > 0) {
      // A join the edge does not take (its generation ended, or the node is being retired):
      // no lane is re-opened in this generation; a new connection opens them again.
      this.#laneRefusedIn = connection.joinGeneration;
      this.#log.warn({ lane: connection.lane, reason }, 'the edge refused an extra stream');
      return;
    }
    if (connection !== this.#connection) return;
    this.#rejected = true;
    this.#log.error({ reason, edge: this.#config.edge.address }, 'the edge rejected the registration; check node.id and node.token');
    this.emit('rejected', reason);
  }

  onClosed(connection: EdgeConnection, reason: string): void {
    if (connection.lane > 0) {
      this.#laneClosed(connection, reason);
      return;
    }
    if (connection !== this.#connection) return;
    this.#connection = undefined;
    this.#closeLanes('the first stream closed');
    this.emit('disconnected', reason);
    if (this.#stopRequested) return;
    // A connection that lasted starts the backoff over; one dropped soon after registering does not:
    // two agents with one node id supersede each other at once, and must not do it every few ms.
    if (this.#registeredAt > 0 && performance.now() - this.#registeredAt >= STABLE_CONNECTION_MS) this.#backoff.reset();
    this.#registeredAt = 0;
    const delayMs = this.#rejected ? this.#backoff.slowest() : this.#backoff.next();
    this.#rejected = false;
    this.#log.warn({ reason, delayMs }, 'disconnected from the edge; reconnecting');
    this.#reconnectTimer = setTimeout(onReconnectTimer, delayMs, this);
    if (DIAL_FAILURES_WITHOUT_REASON.test(reason)) this.#diagnoseDial();
  }

  /** grpc-js gave no reason, or OpenSSL's own: one plain TLS connection may say it plainly (a refused certificate, TLS on one side only). */
  #diagnoseDial(): void {
    if (this.#diagnosing) return;
    this.#diagnosing = true;
    const { address, tls } = this.#config.edge;
    void diagnoseEdgeDial(address, tls).then((diagnosis) => {
      this.#diagnosing = false;
      if (diagnosis === undefined || diagnosis === this.#lastDiagnosis || this.#stopRequested) return;
      this.#lastDiagnosis = diagnosis;
      this.#log.error({ edge: address, diagnosis }, `cannot connect to the edge: ${diagnosis}`);
      this.emit('dial-diagnosis', diagnosis);
    });
  }

  /** Timer callback: the backoff delay after a disconnect has passed. */
  onReconnectDue(): void {
    this.#reconnectTimer = undefined;
    if (this.#stopRequested) return;
    if (this.#options.reloadConfig === undefined) this.#connect();
    else void this.#rereadToken(this.#options.reloadConfig).then(() => {
      if (!this.#stopRequested && this.#connection === undefined) this.#connect();
    });
  }

  /** Timer callback: re-open a lane that dropped, if its connection still lives. */
  onLaneDue(lane: number, generation: number): void {
    this.#laneTimers[lane] = undefined;
    this.#openLane(lane, generation);
  }

  // --- internals ------------------------------------------------------------------

  /**
   * A rotated node.token is taken from the config file at the next dial: the
   * edge retires a connection whose token it changed, and the agent comes back
   * with the new one, no restart. Only the token: anything else of the file
   * waits for refresh_config, and a file that does not load (or is slow) keeps
   * the token the agent has.
   */
  async #rereadToken(reload: () => Promise<AgentConfig>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      // Unref: a stop() meanwhile must not wait for it.
      timer = setTimeout(resolve, TOKEN_REREAD_MS, undefined).unref();
    });
    try {
      const next = await Promise.race([reload(), late]);
      if (next === undefined) {
        this.#log.warn({ waitedMs: TOKEN_REREAD_MS }, 'the config file did not load in time; dialing with the node.token the agent has');
        return;
      }
      const current = this.#config;
      if (next.node.id !== current.node.id || next.node.token === current.node.token) return;
      this.#config = { ...current, node: { ...current.node, token: next.node.token } };
      this.#log.info('node.token changed in the config file; registering with the new one');
    } catch (err) {
      this.#log.warn({ err: (err as Error).message }, 'the config file does not load; dialing with the node.token the agent has');
    } finally {
      clearTimeout(timer);
    }
  }

  #connect(): void {
    const connection = new EdgeConnection(this.#config, this.#upstreams, this, this.#log);
    this.#connection = connection;
    try {
      connection.open();
    } catch (err) {
      // Nothing to dial with yet (edge.tls files that never loaded): tried again at the backoff's pace, never thrown from a timer.
      this.#connection = undefined;
      const delayMs = this.#backoff.next();
      this.#log.error({ err: (err as Error).message, delayMs }, 'could not dial the edge; retrying');
      this.emit('disconnected', (err as Error).message);
      this.#reconnectTimer = setTimeout(onReconnectTimer, delayMs, this);
    }
  }

  #openLane(lane: number, generation: number): void {
    const anchor = this.#connection;
    if (this.#stopRequested || anchor === undefined || !anchor.registered || anchor.generation !== generation) return;
    if (this.#lanes[lane] !== undefined) return;
    const connection = new EdgeConnection(this.#config, this.#upstreams, this, this.#log.child({ lane }), lane, generation);
    this.#lanes[lane] = connection;
    connection.open();
  }

  #laneClosed(connection: EdgeConnection, reason: string): void {
    const lane = connection.lane;
    if (this.#lanes[lane] !== connection) return;
    this.#lanes[lane] = undefined;
    const anchor = this.#connection;
    if (this.#stopRequested || anchor === undefined || !anchor.registered || anchor.generation !== connection.joinGeneration) return;
    if (this.#laneRefusedIn === connection.joinGeneration) return;
    let backoff = this.#laneBackoffs[lane];
    if (backoff === undefined) this.#laneBackoffs[lane] = backoff = new Backoff(this.#config.reconnect.initialMs, this.#config.reconnect.maxMs, this.#random);
    const registeredAt = this.#laneRegisteredAt[lane] ?? 0;
    if (registeredAt > 0 && performance.now() - registeredAt >= STABLE_CONNECTION_MS) backoff.reset();
    this.#laneRegisteredAt[lane] = 0;
    // At the initial pace at first (jittered in its upper half), widening while the lane keeps failing.
    const delayMs = Math.max(upperHalfJitter(this.#config.reconnect.initialMs, this.#random), backoff.next());
    this.#log.warn({ lane, reason, delayMs }, 'an extra stream to the edge closed; re-opening it');
    this.#laneTimers[lane] = setTimeout(onLaneTimer, delayMs, this, lane, connection.joinGeneration);
  }

  #closeLanes(reason: string): void {
    for (let lane = 1; lane < this.#lanes.length; lane++) {
      clearTimeout(this.#laneTimers[lane]);
      this.#laneTimers[lane] = undefined;
      const connection = this.#lanes[lane];
      this.#lanes[lane] = undefined;
      connection?.close(reason);
    }
  }

  /** restart_provider for a cli provider: its running processes' groups are killed and their runs end with an ERROR. */
  #endProviderRuns(providerId: string): string {
    let ended = 0;
    for (const stream of this.#streams()) ended += stream.endProviderTunnels(providerId, `provider ${providerId} restarted by an operator command`);
    // Runs, not processes: a run waiting for its session's turn has none yet.
    return `${providerId}: ${ended} run${ended === 1 ? '' : 's'} ended`;
  }

  /** Every stream of the current connection, the first included. */
  #streams(): EdgeConnection[] {
    const streams: EdgeConnection[] = [];
    if (this.#connection !== undefined) streams.push(this.#connection);
    for (const lane of this.#lanes) if (lane !== undefined) streams.push(lane);
    return streams;
  }

  async #stop(): Promise<void> {
    this.#probes.stop();
    clearTimeout(this.#reconnectTimer);
    for (const timer of this.#laneTimers) clearTimeout(timer);
    const streams = this.#streams();
    const registered = streams.filter((s) => s.registered);
    let aborted = 0;
    if (registered.length > 0) {
      this.#log.info({ openTunnels: registered.reduce((n, s) => n + s.openTunnels, 0), streams: registered.length }, 'leaving: finishing open tunnels');
      for (const stream of registered) stream.leave('shutdown');
      await Promise.all(registered.map((stream) => stream.whenIdle(this.#stopGraceMs)));
      // What the grace left open is aborted by end() below: said here, so the last lines tell a clean stop from a cut one.
      aborted = registered.reduce((n, s) => n + s.openTunnels, 0);
      if (aborted > 0) this.#log.warn({ aborted, graceMs: this.#stopGraceMs }, 'stop grace over: the tunnels still open are aborted');
      // Lanes first: ending the first stream ends the connection and with it any lane still open.
      await Promise.all(registered.filter((s) => s.lane > 0).map((stream) => stream.end(STOP_END_WAIT_MS)));
      if (this.#connection?.registered === true) await this.#connection.end(STOP_END_WAIT_MS);
    }
    // Whatever is left (a lane still registering when stop began, one that registered since): closed now.
    for (const stream of this.#streams()) stream.close('stopped');
    for (const stream of streams) stream.close('stopped');
    await this.#upstreams.destroy();
    this.#log.info({ drained: aborted === 0, aborted }, 'stopped');
  }
}

function onReconnectTimer(agent: NodeAgent): void {
  agent.onReconnectDue();
}

function onLaneTimer(agent: NodeAgent, lane: number, generation: number): void {
  agent.onLaneDue(lane, generation);
}
