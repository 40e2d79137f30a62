// Keep-alive HTTP/1.1 connections to one provider, one request at a time
// each, handed out in O(1). undici's Pool looks for a free client by
// scanning all of them on every request: with thousands of long streams
// open (each holding a connection) that scan was the agent's largest
// dispatch cost (profiled while 10,000 streams ramped up). Here idle
// clients wait on a stack (the warmest is reused first) and requests beyond
// `connections` wait in FIFO order. The handler tells the pool when undici
// is done with its request (done()), exactly once.
import { Client, type Dispatcher } from 'undici';

/** A request's handler that learns which client carries it. */
export interface PooledHandler extends Dispatcher.DispatchHandler {
  pooledClient: Client | undefined;
}

class Waiting {
  constructor(
    readonly options: Dispatcher.DispatchOptions,
    readonly handler: PooledHandler,
  ) {}
}

export class UpstreamPool {
  readonly #origin: string;
  readonly #connections: number;
  readonly #idle: Client[] = [];
  readonly #all: Client[] = [];
  #waiting: Waiting[] = [];
  #waitingHead = 0;
  #destroyed = false;

  constructor(origin: string, connections: number) {
    this.#origin = origin;
    this.#connections = connections;
  }

  /** Requests waiting for a connection (all `connections` busy). */
  get waiting(): number {
    return this.#waiting.length - this.#waitingHead;
  }

  /** Connections carrying a request now. */
  get busy(): number {
    return this.#all.length - this.#idle.length;
  }

  dispatch(options: Dispatcher.DispatchOptions, handler: PooledHandler): void {
    if (this.#destroyed) throw new Error('upstream pool destroyed');
    const client = this.#idle.pop() ?? (this.#all.length < this.#connections ? this.#create() : undefined);
    if (client === undefined) {
      this.#waiting.push(new Waiting(options, handler));
      return;
    }
    handler.pooledClient = client;
    client.dispatch(options, handler);
  }

  /** `client`'s request is over (its handler got onResponseEnd or onResponseError): it takes the next one. */
  done(client: Client): void {
    if (this.#destroyed) return;
    if (this.#waitingHead < this.#waiting.length) {
      const next = this.#waiting[this.#waitingHead];
      this.#waiting[this.#waitingHead++] = undefined as unknown as Waiting;
      if (this.#waitingHead === this.#waiting.length) {
        this.#waiting = [];
        this.#waitingHead = 0;
      }
      next.handler.pooledClient = client;
      client.dispatch(next.options, next.handler);
      return;
    }
    this.#idle.push(client);
  }

  /** Closes every connection; requests in flight fail, waiting ones are never sent. */
  async destroy(): Promise<void> {
    this.#destroyed = true;
    this.#waiting = [];
    this.#waitingHead = 0;
    await Promise.all(this.#all.map((client) => client.destroy()));
  }

  #create(): Client {
    const client = new Client(this.#origin);
    this.#all.push(client);
    return client;
  }
}
