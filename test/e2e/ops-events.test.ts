// The admin event stream under a stalled subscriber: one client opens
// /admin/events and reads nothing for 10 s while real requests flow and a
// second subscriber reads normally. The stalled one loses events (counted
// per subscriber and in /metrics, and announced to it when it reads
// again); the data path, lease accounting and the endpoint stay as they were.
//
// A busy edge publishes thousands of run events a second; this 2-core test
// box cannot drive that many real requests in 10 s, so a synthetic flood
// on the same bus stands in for the volume, alongside the real traffic.
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import type { EdgeEvent } from '../../src/contract/events.js';
import { ALIAS, inFlight, sample, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const STALL_MS = 10_000;
const FLOOD_EVERY_MS = 20;
// 16,000 events/s (~4 MB/s of SSE), what an edge at ~8k requests/s publishes.
// Loopback socket buffers grow to tens of MB, so the stalled reader needs
// that much before its own buffer can even start to overflow.
const FLOOD_PER_TICK = 320;

async function timedRequest(stack: OpsStack): Promise<{ ms: number; status: number; runId: string }> {
  const started = performance.now();
  const res = await fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.text();
  return { ms: performance.now() - started, status: res.status, runId: res.headers.get('x-edge-run-id') ?? '' };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** A subscriber that reads every event and notes when each real run.finished arrived. */
class LiveReader {
  readonly finishedAt = new Map<string, number>();
  events = 0;
  #buffer = '';
  readonly done: Promise<void>;
  readonly #abort = new AbortController();

  constructor(url: string) {
    this.done = this.#read(url).catch((err: unknown) => {
      if (!this.#abort.signal.aborted) throw err;
    });
  }

  async #read(url: string): Promise<void> {
    const res = await fetch(url, { signal: this.#abort.signal });
    assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    const decoder = new TextDecoder();
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      const text = this.#buffer + decoder.decode(chunk, { stream: true });
      let start = 0;
      let end: number;
      while ((end = text.indexOf('\n\n', start)) >= 0) {
        const frame = text.slice(start, end);
        start = end + 2;
        if (!frame.startsWith('id: ')) continue; // comments, notices
        this.events++;
        if (frame.includes('event: run.finished') && !frame.includes('"runId":"flood-')) {
          const data = frame.slice(frame.indexOf('data: ') + 6);
          this.finishedAt.set((JSON.parse(data) as { runId: string }).runId, performance.now());
        }
      }
      this.#buffer = text.slice(start);
    }
  }

  stop(): void {
    this.#abort.abort();
  }
}

test('a subscriber that reads nothing for 10 s loses events, counted, while requests and the event endpoint stay responsive', async (t) => {
  const stack = await startOpsStack({ capacity: 8, mock: { ttftMs: 0, tokens: 3, intervalMs: 1 } });
  const adminUrl = stack.edge.adminUrl as string;
  const stalled = new net.Socket();
  let flood: NodeJS.Timeout | undefined;
  let live: LiveReader | undefined;
  try {
    const baseline: number[] = [];
    for (let i = 0; i < 30; i++) baseline.push((await timedRequest(stack)).ms);

    // The stalled subscriber: asks for the stream with a small buffer, then never reads.
    await new Promise<void>((resolve) => stalled.connect(stack.edge.adminPort as number, '127.0.0.1', resolve));
    stalled.pause();
    stalled.write('GET /admin/events?buffer=64 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    live = new LiveReader(`${adminUrl}/admin/events`);
    await waitUntil(() => stack.edge.events.subscribers.size === 2, 'both subscribers');

    let floodSeq = 0;
    const bus = stack.edge.events;
    flood = setInterval(() => {
      for (let i = 0; i < FLOOD_PER_TICK; i++) {
        const event: EdgeEvent = { type: 'run.finished', runId: `flood-${floodSeq++}`, requestId: 'flood', model: 'flood', node: null, provider: null, status: 200, outcome: 'end', totalMs: 1, queueMs: 0, bytesOut: 0 };
        bus.publish(event);
      }
    }, FLOOD_EVERY_MS);

    const during: { ms: number; status: number; runId: string; doneAt: number }[] = [];
    const statusMs: number[] = [];
    const stallEnds = performance.now() + STALL_MS;
    while (performance.now() < stallEnds) {
      const r = await timedRequest(stack);
      during.push({ ...r, doneAt: performance.now() });
      if (during.length % 10 === 0) {
        const started = performance.now();
        const res = await stack.admin('/admin/status');
        statusMs.push(performance.now() - started);
        assert.equal(res.status, 200);
      }
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    clearInterval(flood);
    flood = undefined;

    // The stalled subscriber lost events and the loss is counted, per subscriber and in total.
    const status = (await stack.admin('/admin/status')).json;
    const subs = status.events.subscribers as { id: number; dropped: number; capacity: number }[];
    const stalledSub = subs.find((s) => s.capacity === 64);
    const liveSub = subs.find((s) => s.capacity !== 64);
    assert.ok(stalledSub && stalledSub.dropped > 0, `stalled subscriber dropped ${stalledSub?.dropped}`);
    assert.ok(liveSub && liveSub.dropped < stalledSub.dropped);
    const metrics = await stack.metrics();
    assert.ok((sample(metrics, 'edge_events_dropped_total') ?? 0) >= stalledSub.dropped);
    assert.equal(sample(metrics, 'edge_event_subscribers'), 2);

    // The data path: every request served, no slower than before in any way that matters.
    assert.ok(during.length >= 50, `only ${during.length} requests in ${STALL_MS} ms`);
    assert.ok(during.every((r) => r.status === 200));
    const base = median(baseline);
    const stalledMedian = median(during.map((r) => r.ms));
    assert.ok(stalledMedian < base * 3 + 10, `median latency ${stalledMedian.toFixed(1)} ms during the stall vs ${base.toFixed(1)} ms before`);
    // Leases: nothing left behind, invariants hold.
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease to be released (with workers the release record trails the response)');
    assert.equal(stack.edge.driver.status().liveLeases, 0);
    assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);

    // The endpoint stayed responsive: admin calls answered fast, and the live subscriber saw our runs promptly.
    assert.ok(Math.max(...statusMs) < 1_000, `slowest /admin/status ${Math.max(...statusMs).toFixed(0)} ms`);
    const last = during.at(-1)!;
    await waitUntil(() => live!.finishedAt.has(last.runId), 'the live subscriber to see the last run');
    const lags = during.filter((r) => live!.finishedAt.has(r.runId)).map((r) => (live!.finishedAt.get(r.runId) as number) - r.doneAt);
    assert.ok(lags.length >= during.length * 0.9, `the live subscriber saw ${lags.length} of ${during.length} runs`);
    assert.ok(median(lags) < 250, `median event delay ${median(lags).toFixed(0)} ms`);

    t.diagnostic(
      `requests ${during.length}, median ${stalledMedian.toFixed(1)} ms (before: ${base.toFixed(1)} ms); ` +
        `stalled dropped ${stalledSub.dropped}, live dropped ${liveSub.dropped} of ${bus.publishedTotal}; ` +
        `slowest status ${Math.max(...statusMs).toFixed(0)} ms; median event delay ${median(lags).toFixed(1)} ms`,
    );

    // When the stalled subscriber reads again it is told how much it missed.
    let tail = '';
    let notice: { dropped: number } | undefined;
    stalled.setEncoding('latin1');
    stalled.on('data', (chunk: string) => {
      if (notice !== undefined) return;
      // Keep a short tail across chunks so a notice split between two is still found.
      const text = tail + chunk;
      const match = /event: dropped\ndata: (\{[^\n]*\})\n/.exec(text);
      if (match !== null) notice = JSON.parse(match[1]) as { dropped: number };
      tail = text.slice(-256);
    });
    stalled.resume();
    await waitUntil(() => notice !== undefined, 'the dropped notice', 10_000);
    assert.ok((notice?.dropped ?? 0) > 0);
  } finally {
    if (flood) clearInterval(flood);
    live?.stop();
    stalled.destroy();
    await stack.close();
  }
});
