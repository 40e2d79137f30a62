// GET /admin/events[?buffer=N][&runs=0]: node and run events as server-sent
// events; runs=0 leaves out run events (five per request), and while no
// subscriber wants them the data path does not build them at all.
// Each connection is one bus subscription with a bounded buffer (N events,
// default 1024). Events move from the buffer to the socket only while the
// socket takes them; when the client reads too slowly the socket's buffers
// fill, then this subscription's buffer, then its oldest events are
// dropped and counted, and the client gets an `event: dropped` notice with
// the count when it catches up. A client that reconnects with
// Last-Event-ID gets `event: resumed` (what was replayed, what is lost),
// then the events it missed that the bus still keeps, then live ones.
// Nothing here ever waits on the data path or makes it wait.
import type { ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_SUBSCRIBER_BUFFER, MAX_SUBSCRIBER_BUFFER, type EventBus, type Resumption, type Subscription, type SubscriptionReader } from '../events/event-bus.js';
import { knownParameters, sendAdminError } from './admin-errors.js';

/** Events written per turn of the event loop, so a long backlog never hogs it. */
const BATCH = 256;
/** A comment line this often keeps proxies from closing an idle stream. */
const KEEPALIVE_MS = 15_000;

export class SseStream implements SubscriptionReader {
  readonly subscription: Subscription;
  #waitingForDrain = false;
  #flushQueued = false;
  readonly #keepalive: NodeJS.Timeout;

  readonly #res: ServerResponse;

  constructor(bus: EventBus, res: ServerResponse, capacity: number, runs = true, lastEventId?: string) {
    this.#res = res;
    let resumption: Resumption | undefined;
    if (lastEventId === undefined) this.subscription = bus.subscribe(this, capacity, runs);
    else ({ subscription: this.subscription, resumption } = bus.resubscribe(this, capacity, runs, lastEventId));
    this.onDrain = this.onDrain.bind(this);
    this.onClose = this.onClose.bind(this);
    res.on('drain', this.onDrain);
    res.on('close', this.onClose);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(`: edge events, subscriber ${this.subscription.id}, buffer ${this.subscription.capacity}\nretry: 2000\n\n`);
    // A reconnect: what follows is the replay, and this says whether it is whole (missed 0) or not.
    if (resumption !== undefined) res.write(`event: resumed\ndata: ${JSON.stringify(resumption)}\n\n`);
    this.#keepalive = setInterval(keepalive, KEEPALIVE_MS, this);
    this.#keepalive.unref();
  }

  // SubscriptionReader: events are waiting.
  readable(): void {
    if (!this.#waitingForDrain) this.flush();
  }

  flush(): void {
    this.#flushQueued = false;
    this.#write(false);
  }

  /**
   * Writes what the subscription holds: a batch at a time, pausing while the
   * socket is full; or, as the stream ends (`all`), all of it at once.
   */
  #write(all: boolean): void {
    const res = this.#res;
    const sub = this.subscription;
    if (sub.closed || res.destroyed || res.writableEnded) return;
    res.cork();
    try {
      const dropped = sub.takeDropped();
      if (dropped > 0 && !res.write(`event: dropped\ndata: {"dropped":${dropped},"droppedTotal":${sub.dropped}}\n\n`) && !all) {
        this.#waitingForDrain = true;
        return;
      }
      for (let n = 0; all || n < BATCH; n++) {
        const event = sub.shift();
        if (event === undefined) return;
        if (!res.write(event.frame) && !all) {
          this.#waitingForDrain = true;
          return;
        }
      }
      if (sub.buffered > 0 && !this.#flushQueued) {
        this.#flushQueued = true;
        setImmediate(flushLater, this);
      }
    } finally {
      res.uncork();
    }
  }

  pingIfIdle(): void {
    if (!this.#waitingForDrain && !this.#res.destroyed) this.#res.write(': keepalive\n\n');
  }

  /**
   * Ends the stream (admin listener closing). What the bus handed over but
   * has not been written yet goes out first: the events of this very turn
   * (edge.draining on a drain with nothing open, what a drain's end
   * publishes) would otherwise be dropped, as the reader is woken a turn later.
   */
  end(): void {
    this.#write(true);
    this.subscription.close();
  }

  // SubscriptionReader: closed here (end, the client gone) or by the bus; the client is told by the stream's end, and reconnects.
  closed(): void {
    clearInterval(this.#keepalive);
    if (!this.#res.destroyed && !this.#res.writableEnded) this.#res.end();
  }

  onDrain(): void {
    this.#waitingForDrain = false;
    this.flush();
  }

  onClose(): void {
    this.subscription.close();
  }
}

function flushLater(stream: SseStream): void {
  stream.flush();
}

function keepalive(stream: SseStream): void {
  stream.pingIfIdle();
}

/** Event streams open at once on the admin listener. */
export const MAX_EVENT_STREAMS = 64;

const EVENTS_PARAMETERS: readonly string[] = ['buffer', 'runs'];
/** Digits only: Number() would also read 1e3, 0x10 or ' 5 '. */
const DECIMAL = /^\d{1,9}$/;

export function registerEventsRoute(app: FastifyInstance, bus: EventBus, streams: Set<SseStream>): void {
  app.get('/admin/events', (request: FastifyRequest<{ Querystring: Record<string, string | string[] | undefined> }>, reply: FastifyReply) => {
    // `?run=0` for runs=0 would otherwise stream every run event, unasked.
    if (!knownParameters(reply, '/admin/events', request.query, EVENTS_PARAMETERS)) return;
    const raw = request.query.buffer;
    const capacity = raw === undefined ? DEFAULT_SUBSCRIBER_BUFFER : DECIMAL.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > MAX_SUBSCRIBER_BUFFER) {
      sendAdminError(reply, 400, 'invalid_buffer', `buffer must be an integer from 1 to ${MAX_SUBSCRIBER_BUFFER}`);
      return;
    }
    const runs = request.query.runs;
    if (runs !== undefined && runs !== '0' && runs !== '1') {
      sendAdminError(reply, 400, 'invalid_runs', 'runs must be 0 (leave run events out) or 1 (the default)');
      return;
    }
    if (request.method === 'HEAD') {
      // fastify answers HEAD with this GET handler: the head alone, and no subscription left behind.
      reply.code(200).header('content-type', 'text/event-stream; charset=utf-8').header('cache-control', 'no-cache').send();
      return;
    }
    // Each event is written to every stream on the main thread, which the scheduler shares: a script that
    // opens streams and never closes them would slow every request.
    if (streams.size >= MAX_EVENT_STREAMS) {
      reply.header('retry-after', '5');
      sendAdminError(reply, 503, 'too_many_subscribers', `${MAX_EVENT_STREAMS} event streams are open already; close one (each open console tab holds one)`);
      return;
    }
    const lastEventId = request.headers['last-event-id'];
    reply.hijack();
    const stream = new SseStream(bus, reply.raw, capacity, runs !== '0', typeof lastEventId === 'string' && lastEventId !== '' ? lastEventId : undefined);
    streams.add(stream);
    reply.raw.on('close', () => streams.delete(stream));
  });
}
