// Keep-alive HTTP/1.1 connections to one provider, one request at a time
// each, handed out in O(1). undici's Pool looks for a free client by
// scanning all of them on every request: with thousands of long streams
// open (each holding a connection) that scan was the agent's largest
// dispatch cost (profiled while 10,000 streams ramped up). Here idle
// clients wait on a stack (the warmest is reused first) and requests beyond
// `connections` wait in FIFO order. The handler tells the pool when the
// client is done with its request (done()), exactly once. Each connection
// is the agent's own Http1Client (http and https), which takes undici's
// dispatch handlers.
import type { Dispatcher } from 'undici';
import { Http1Client } from './http1-client.js';

/** One connection carrying one request at a time. */
export interface UpstreamClient {
  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): unknown;
  destroy(): Promise<void>;
}

/** A request's handler that learns which client carries it. */
export interface PooledHandler extends Dispatcher.DispatchHandler {
  pooledClient: UpstreamClient | undefined;
  /** Cancelled while it waited: never sent (handing it a client would only abort that client's socket). */
  readonly abandoned: boolean;
}

/** Compact the waiting FIFO once this many entries before its head are spent. */
const COMPACT_AFTER = 1024;

/**
 * A request waiting for a connection. Cancelled, it lets go of its body
 * and handler at once: all connections may stay busy with long streams for
 * minutes, and a cancelled waiter would otherwise pin its request body
 * (up to the body limit) until one frees.
 */
export class PoolTicket {
  constructor(
    public options: Dispatcher.DispatchOptions | undefined,
    public handler: PooledHandler | undefined,
  ) {}

  cancel(): void {
    this.options = undefined;
    this.handler = undefined;
  }
}

export class UpstreamPool {
  readonly #origin: string;
  readonly #connections: number;
  readonly #idle: UpstreamClient[] = [];
  readonly #all: UpstreamClient[] = [];
  #waiting: PoolTicket[] = [];
  #waitingHead = 0;
  /** Clients handed back during their callbacks, re-used once those return. */
  #returned: UpstreamClient[] = [];
  #handOffQueued = false;
  #destroyed = false;
  /** Replaced by a new pool: serves what it already has, then closes each connection as it frees. */
  #retiring = false;

  constructor(origin: string, connections: number) {
    this.#origin = origin;
    this.#connections = connections;
  }

  /** Requests waiting for a connection (all `connections` busy). */
  get waiting(): number {
    let live = 0;
    for (let i = this.#waitingHead; i < this.#waiting.length; i++) if (this.#waiting[i].handler !== undefined) live++;
    return live;
  }

  /** Connections carrying a request now. */
  get busy(): number {
    return this.#all.length - this.#idle.length;
  }

  /**
   * Replaced (a refresh_config with a new base URL, pool size or key): idle
   * connections close now, busy ones when their request ends and no waiting
   * one needs them. Without it each refresh would leave its idle connections
   * open for as long as the agent runs (Ollama's server never times them out).
   */
  retire(): void {
    this.#retiring = true;
    for (const client of this.#idle) this.#close(client);
    this.#idle.length = 0;
  }

  /** Retired, and every connection closed: nothing left to keep. */
  get retired(): boolean {
    return this.#retiring && this.#all.length === 0;
  }

  /** Sends the request on a free connection, or queues it: the ticket then cancels the wait (undefined: sent). */
  dispatch(options: Dispatcher.DispatchOptions, handler: PooledHandler): PoolTicket | undefined {
    if (this.#destroyed) throw new Error('upstream pool destroyed');
    const client = this.#idle.pop() ?? (this.#all.length < this.#connections ? this.#create() : undefined);
    if (client === undefined) {
      const ticket = new PoolTicket(options, handler);
      this.#waiting.push(ticket);
      return ticket;
    }
    handler.pooledClient = client;
    client.dispatch(options, handler);
    return undefined;
  }

  /**
   * `client`'s request is over (its handler got onResponseEnd or
   * onResponseError): it takes the next one. Called from inside the
   * client's callback (its socket's read or error handling still on the
   * stack), so the hand-off waits for a microtask.
   */
  done(client: UpstreamClient): void {
    if (this.#destroyed) return;
    this.#returned.push(client);
    if (!this.#handOffQueued) {
      this.#handOffQueued = true;
      queueMicrotask(this.#handOff);
    }
  }

  readonly #handOff = (): void => {
    this.#handOffQueued = false;
    const returned = this.#returned;
    this.#returned = [];
    for (const client of returned) {
      if (this.#destroyed) return;
      const next = this.#nextWaiting();
      if (next === undefined) {
        if (this.#retiring) this.#close(client);
        else this.#idle.push(client);
        continue;
      }
      const { options, handler } = next as { options: Dispatcher.DispatchOptions; handler: PooledHandler };
      next.cancel(); // spent: the FIFO no longer holds the request
      handler.pooledClient = client;
      client.dispatch(options, handler);
    }
  };

  /** The oldest waiting request still wanted; spent entries are dropped and the FIFO compacted. */
  #nextWaiting(): PoolTicket | undefined {
    while (this.#waitingHead < this.#waiting.length) {
      const next = this.#waiting[this.#waitingHead];
      this.#waiting[this.#waitingHead++] = undefined as unknown as PoolTicket;
      if (this.#waitingHead === this.#waiting.length) {
        this.#waiting = [];
        this.#waitingHead = 0;
      } else if (this.#waitingHead >= COMPACT_AFTER && this.#waitingHead * 2 >= this.#waiting.length) {
        this.#waiting = this.#waiting.slice(this.#waitingHead);
        this.#waitingHead = 0;
      }
      if (next.handler !== undefined && next.options !== undefined && !next.handler.abandoned) return next;
    }
    return undefined;
  }

  /** Closes every connection; requests in flight fail, waiting ones are never sent. */
  async destroy(): Promise<void> {
    this.#destroyed = true;
    this.#waiting = [];
    this.#waitingHead = 0;
    await Promise.all(this.#all.map((client) => client.destroy()));
  }

  #close(client: UpstreamClient): void {
    const at = this.#all.indexOf(client);
    if (at >= 0) this.#all.splice(at, 1);
    void client.destroy();
  }

  #create(): UpstreamClient {
    const client = new Http1Client(this.#origin);
    this.#all.push(client);
    return client;
  }
}
