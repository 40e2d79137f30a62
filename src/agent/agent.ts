// The node agent's lifecycle: keep one registered connection to the edge up
// for as long as the agent runs, reconnecting with capped exponential backoff
// and full jitter (reset by each successful registration). A rejected
// registration (bad token, unknown node) will not fix itself, so it is
// retried at the maximum delay only.
import { EventEmitter } from 'node:events';
import { pino, type Logger } from 'pino';
import { Backoff } from './backoff.js';
import type { AgentConfig } from './config.js';
import { EdgeConnection, type ConnectionOwner } from './edge-connection.js';
import { Upstreams } from './upstreams.js';

export interface NodeAgentOptions {
  logger?: Logger;
  /** How long stop() lets open tunnels finish after Leaving before aborting them; default 10 s. */
  stopGraceMs?: number;
}

export interface NodeAgentEvents {
  registered: [generation: number];
  rejected: [reason: string];
  disconnected: [reason: string];
  /** The edge committed a config change; the paths are the ones that concern this node. */
  'config-refresh': [changedPaths: readonly string[], configVersion: number];
}

const DEFAULT_STOP_GRACE_MS = 10_000;
/** After the final half-close, how long to wait for the edge to end the stream. */
const STOP_END_WAIT_MS = 1_000;

export class NodeAgent extends EventEmitter<NodeAgentEvents> implements ConnectionOwner {
  readonly #config: AgentConfig;
  readonly #log: Logger;
  readonly #stopGraceMs: number;
  readonly #upstreams: Upstreams;
  readonly #backoff: Backoff;
  #connection: EdgeConnection | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  /** The current connection was rejected: the next attempt waits the maximum delay. */
  #rejected = false;
  #started = false;
  #stopping: Promise<void> | undefined;

  constructor(config: AgentConfig, options: NodeAgentOptions = {}) {
    super();
    this.#config = config;
    this.#log = (options.logger ?? pino({ level: config.logLevel, name: 'node-agent' })).child({ nodeId: config.node.id });
    this.#stopGraceMs = options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    this.#upstreams = new Upstreams(config.providers);
    this.#backoff = new Backoff(config.reconnect.initialMs, config.reconnect.maxMs);
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
    this.#connect();
  }

  /** Sends Leaving, lets open tunnels finish (up to the grace period), aborts the rest, closes. No reconnect after. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  /** Test hook: drops the current connection abruptly, as a network failure would; the agent reconnects by itself. */
  dropConnection(): void {
    this.#connection?.close('dropped (test hook)');
  }

  // --- ConnectionOwner ---------------------------------------------------------

  onRegistered(connection: EdgeConnection, generation: number): void {
    if (connection !== this.#connection) return;
    this.#backoff.reset();
    this.#log.info({ generation, edge: this.#config.edge.address }, 'registered with the edge');
    this.emit('registered', generation);
  }

  onConfigRefresh(connection: EdgeConnection, changedPaths: readonly string[], configVersion: number): void {
    if (connection === this.#connection) this.emit('config-refresh', changedPaths, configVersion);
  }

  onRejected(connection: EdgeConnection, reason: string): void {
    if (connection !== this.#connection) return;
    this.#rejected = true;
    this.#log.error({ reason, edge: this.#config.edge.address }, 'the edge rejected the registration; check node.id and node.token');
    this.emit('rejected', reason);
  }

  onClosed(connection: EdgeConnection, reason: string): void {
    if (connection !== this.#connection) return;
    this.#connection = undefined;
    this.emit('disconnected', reason);
    if (this.#stopping !== undefined) return;
    const delayMs = this.#rejected ? this.#config.reconnect.maxMs : this.#backoff.next();
    this.#rejected = false;
    this.#log.warn({ reason, delayMs }, 'disconnected from the edge; reconnecting');
    this.#reconnectTimer = setTimeout(onReconnectTimer, delayMs, this);
  }

  /** Timer callback: the backoff delay after a disconnect has passed. */
  onReconnectDue(): void {
    this.#reconnectTimer = undefined;
    if (this.#stopping === undefined) this.#connect();
  }

  // --- internals ------------------------------------------------------------------

  #connect(): void {
    const connection = new EdgeConnection(this.#config, this.#upstreams, this, this.#log);
    this.#connection = connection;
    connection.open();
  }

  async #stop(): Promise<void> {
    clearTimeout(this.#reconnectTimer);
    const connection = this.#connection;
    if (connection !== undefined) {
      if (connection.registered) {
        this.#log.info({ openTunnels: connection.openTunnels }, 'leaving: finishing open tunnels');
        connection.leave('shutdown');
        await connection.whenIdle(this.#stopGraceMs);
        await connection.end(STOP_END_WAIT_MS);
      } else {
        connection.close('stopped');
      }
    }
    await this.#upstreams.destroy();
    this.#log.info('stopped');
  }
}

function onReconnectTimer(agent: NodeAgent): void {
  agent.onReconnectDue();
}
