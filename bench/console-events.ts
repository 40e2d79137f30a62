// The edge-side CPU an open console adds per request, measured without a
// network or a second process so a busy host's noise stays out: one
// subscriber on the real EventBus, served by the real SseStream into a
// socket-like sink that accepts everything, and for every "request" the
// two run events the data path publishes (run.started, run.finished),
// built, queued, serialised into SSE frames and written. Prints µs per
// request, the number to hold against the edge's whole cost per request.
//
//   npm run build && node dist/bench/console-events.js [requests]
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { SseStream } from '../src/main/admin/events-route.js';
import { EventBus } from '../src/main/events/event-bus.js';

/** Enough of a ServerResponse for SseStream: every write is taken at once. */
class NullResponse extends EventEmitter {
  destroyed = false;
  bytes = 0;
  writeHead(): this {
    return this;
  }
  write(chunk: string): boolean {
    this.bytes += chunk.length;
    return true;
  }
  cork(): void {}
  uncork(): void {}
  end(): void {}
}

async function run(requests: number, subscribed: boolean): Promise<number> {
  const bus = new EventBus();
  const res = new NullResponse();
  const stream = subscribed ? new SseStream(bus, res as unknown as ServerResponse, 1024) : undefined;
  const started = process.cpuUsage();
  // Batches of 256 requests per event-loop turn, as a busy edge would see them.
  for (let done = 0; done < requests; ) {
    for (let i = 0; i < 256 && done < requests; i++, done++) {
      if (!bus.active) continue; // the data path builds no event without a subscriber
      const runId = `run-bench-${done}`;
      bus.publish({ type: 'run.started', runId, requestId: `req-${done}`, model: 'llama3', node: 'gpu-1', provider: 'gpu-1-vllm', queueMs: 0.123 });
      bus.publish({ type: 'run.finished', runId, requestId: `req-${done}`, model: 'llama3', node: 'gpu-1', provider: 'gpu-1-vllm', status: 200, outcome: 'end', totalMs: 812.345, queueMs: 0.123, bytesOut: 4096 });
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise((resolve) => setImmediate(resolve));
  const used = process.cpuUsage(started);
  stream?.end();
  return (used.user + used.system) / requests;
}

const requests = Number(process.argv[2] ?? 200_000);
await run(20_000, true); // warm-up
const without = await run(requests, false);
const withConsole = await run(requests, true);
console.log(`${requests} requests: no subscriber ${without.toFixed(2)} µs/req, one console subscribed ${withConsole.toFixed(2)} µs/req (+${(withConsole - without).toFixed(2)} µs/req on the thread that owns the bus)`);
