// The main thread's run records: what GET /admin/runs lists and keeps.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EdgeEvent, RunEvent } from '../../../src/contract/events.js';
import { FINISHED_CURSOR, nextCursor, RunStore } from '../../../src/main/runs/run-store.js';

class Bus {
  active = false;
  readonly events: EdgeEvent[] = [];
  publish(event: EdgeEvent): void {
    this.events.push(event);
  }
}

function queued(id: string, model = 'm'): RunEvent {
  return { type: 'run.queued', runId: id, requestId: `req-${id}`, model, session: '', at: 1_000 } as RunEvent;
}
function dispatched(id: string): RunEvent {
  return { type: 'run.dispatched', runId: id, model: 'm', node: 'n1', provider: 'p1', adapter: 'openai', attempt: 1, queueMs: 2, at: 1_002 } as RunEvent;
}
function finished(id: string, outcome = 'end'): RunEvent {
  return { type: 'run.finished', runId: id, model: 'm', node: null, provider: null, outcome, status: 200, bytesOut: 10, totalMs: 5, at: 1_005 } as RunEvent;
}

test('open runs list latest queued first, then finished ones latest finished first; each record follows its run', () => {
  const store = new RunStore(new Bus(), 10);
  for (const id of ['a', 'b', 'c', 'd']) store.run(queued(id, id === 'c' ? 'other' : 'm'));
  store.run(dispatched('b'));
  store.run(finished('c'));
  store.run(finished('a', 'client_closed'));
  assert.deepEqual(store.list().map((r) => r.id), ['d', 'b', 'a', 'c']);
  assert.deepEqual(store.list({ state: 'finished' }).map((r) => r.id), ['a', 'c']);
  assert.deepEqual(store.list({ state: 'running' }).map((r) => r.id), ['b']);
  assert.deepEqual(store.list({ model: 'other' }).map((r) => r.id), ['c']);
  assert.deepEqual(store.list({ limit: 3 }).map((r) => r.id), ['d', 'b', 'a']);
  const b = store.get('b');
  assert.equal(b?.state, 'running');
  assert.equal(b?.node, 'n1');
  assert.equal(store.get('a')?.outcome, 'client_closed');
  assert.equal(store.size, 4);
  // A late event for a finished run changes nothing; a second finish is not kept twice.
  store.run(dispatched('a'));
  store.run(finished('a'));
  assert.equal(store.get('a')?.state, 'finished');
  assert.equal(store.get('a')?.outcome, 'client_closed');
  assert.deepEqual(store.list({ state: 'finished' }).map((r) => r.id), ['a', 'c']);
});

test('finished runs are kept up to maxFinished, the oldest dropped first and counted; open runs are never dropped', () => {
  const store = new RunStore(new Bus(), 3);
  store.run(queued('open-1'));
  for (let i = 0; i < 8; i++) {
    store.run(queued(`r${i}`));
    store.run(finished(`r${i}`));
  }
  assert.deepEqual(store.list({ state: 'finished' }).map((r) => r.id), ['r7', 'r6', 'r5']);
  assert.equal(store.evicted, 5);
  assert.equal(store.get('r4'), undefined);
  assert.equal(store.get('open-1')?.state, 'queued');
  assert.equal(store.size, 4);
  assert.deepEqual(store.list().map((r) => r.id), ['open-1', 'r7', 'r6', 'r5']);
});

test('with a subscriber, each event goes on to the bus, and a dispatch also as run.started', () => {
  const bus = new Bus();
  bus.active = true;
  const store = new RunStore(bus);
  store.runs([queued('x'), dispatched('x'), finished('x')]);
  assert.deepEqual(bus.events.map((e) => e.type), ['run.queued', 'run.dispatched', 'run.started', 'run.finished']);
  assert.equal((bus.events[2] as { requestId: string }).requestId, 'req-x');
});

test('a finished run reads back every field, across column growth and the ring wrapping, and list filters see them', () => {
  // 200 kept: the columns start at 64 slots and double twice; 450 runs wrap the ring.
  const store = new RunStore(new Bus(), 200);
  for (let i = 0; i < 450; i++) {
    const id = `r${i}`;
    store.run({ type: 'run.queued', runId: id, requestId: i % 2 === 0 ? id : `client-${i}`, model: i % 3 === 0 ? 'm3' : 'm', session: `s${i % 5}`, key: i % 4 === 1 ? 'team-a' : undefined, at: 1_000 + i } as RunEvent);
    if (i % 7 !== 0) store.run({ type: 'run.dispatched', runId: id, model: 'm', node: `n${i % 2}`, provider: 'p1', adapter: 'http', attempt: 1 + (i % 2), queueMs: i / 10, at: 1_001 + i } as RunEvent);
    if (i % 4 !== 0) store.run({ type: 'run.first_byte', runId: id, model: 'm', ttfbMs: i / 4, at: 1_002 + i } as RunEvent);
    store.run({
      type: 'run.finished',
      runId: id,
      requestId: id,
      model: 'm',
      node: null,
      provider: null,
      outcome: i % 7 === 0 ? 'no_provider' : 'end',
      status: i % 7 === 0 ? 503 : 200,
      bytesOut: i * 3,
      totalMs: i / 2,
      queueMs: 0,
      at: 1_005 + i,
      tokens: i % 2 === 0 ? { prompt: i, completion: i + 1 } : null,
      error: i % 7 === 0 ? `none for ${id}` : undefined,
    } as RunEvent);
  }
  assert.equal(store.size, 200);
  assert.equal(store.evicted, 250);
  assert.equal(store.get('r249'), undefined);
  assert.deepEqual(store.get('r264'), {
    id: 'r264', requestId: 'r264', model: 'm3', session: 's4', key: null, state: 'finished', node: 'n0', provider: 'p1', adapter: 'http', attempts: 1,
    queuedAt: 1_264, dispatchedAt: 1_265, firstByteAt: null, finishedAt: 1_269, queueMs: 26.4, ttfbMs: null, totalMs: 132,
    outcome: 'end', status: 200, bytesOut: 792, tokens: { prompt: 264, completion: 265 }, error: null,
  });
  assert.deepEqual(store.get('r441'), {
    id: 'r441', requestId: 'client-441', model: 'm3', session: 's1', key: 'team-a', state: 'finished', node: null, provider: null, adapter: null, attempts: 0,
    queuedAt: 1_441, dispatchedAt: null, firstByteAt: 1_443, finishedAt: 1_446, queueMs: 0, ttfbMs: 110.25, totalMs: 220.5,
    outcome: 'no_provider', status: 503, bytesOut: 1_323, tokens: null, error: 'none for r441',
  });
  const newest = store.list({ state: 'finished', limit: 1_000 }).map((r) => r.id);
  assert.equal(newest.length, 200);
  assert.deepEqual(newest.slice(0, 3), ['r449', 'r448', 'r447']);
  assert.equal(newest[199], 'r250');
  const filtered = store.list({ state: 'finished', model: 'm3', node: 'n1', session: 's3', limit: 1_000 }).map((r) => r.id);
  // i ≡ 0 (mod 3), odd (n1), ≡ 3 (mod 5): i ≡ 3 (mod 30); kept (≥ 250) and dispatched (not ≡ 0 mod 7, which drops 273).
  assert.deepEqual(filtered, ['r423', 'r393', 'r363', 'r333', 'r303']);
  // i ≡ 1 (mod 4) and ≡ 0 (mod 3): i ≡ 9 (mod 12), kept: 261 … 441.
  const keyed = store.list({ state: 'finished', model: 'm3', key: 'team-a', limit: 1_000 }).map((r) => Number(r.id.slice(1)));
  assert.deepEqual(keyed, Array.from({ length: 16 }, (_, k) => 441 - 12 * k));
});

test('a page after a run that finished since the page before still lists the open runs queued before it', () => {
  const store = new RunStore(new Bus(), 10);
  const at = (event: RunEvent, t: number): RunEvent => ({ ...event, at: t }) as RunEvent;
  store.run(at(queued('a'), 1_000));
  store.run(at(queued('b'), 2_000));
  store.run(at(queued('c'), 3_000));
  assert.deepEqual(store.list({ limit: 2 }).map((r) => r.id), ['c', 'b']);
  store.run(finished('b'));
  // The next page, after b: a is still open and older than b, so it follows.
  assert.deepEqual(store.list({ limit: 2, before: 'b' }).map((r) => r.id), ['a']);
});

test('paging with each page\'s next cursor lists every run once and ends, whatever finished between pages', () => {
  const store = new RunStore(new Bus(), 10);
  const at = (event: RunEvent, t: number): RunEvent => ({ ...event, at: t }) as RunEvent;
  // An open run queued before a finished one: with a bare id as the cursor, the pages went a, b, a, b, … for ever.
  store.run(at(queued('a'), 1_000));
  store.run(at(queued('b'), 2_000));
  store.run(finished('b'));
  const seen: string[] = [];
  let before: string | undefined;
  let beforeFinished = false;
  for (let page = 0; page < 10; page++) {
    const runs = store.list({ limit: 1, before, beforeFinished });
    seen.push(...runs.map((r) => r.id));
    const next = nextCursor(runs, 1);
    if (next === null) break;
    beforeFinished = next.startsWith(FINISHED_CURSOR);
    before = beforeFinished ? next.slice(FINISHED_CURSOR.length) : next;
  }
  assert.deepEqual(seen, ['a', 'b']);
});

test('a page after a run that finished since lists the runs queued before it that finished after it, in the same millisecond too', () => {
  const store = new RunStore(new Bus(), 10);
  // Queued within one millisecond, as under load: their wall-clock marks tie.
  store.run(queued('a'));
  store.run(queued('b'));
  store.run(queued('c'));
  store.run(queued('d'));
  const first = store.list({ limit: 2 });
  assert.deepEqual(first.map((r) => r.id), ['d', 'c']);
  assert.equal(nextCursor(first, 2), 'c');
  // Between the pages c finishes, then b: b was never listed, and comes after c.
  store.run(finished('c'));
  store.run(finished('b'));
  assert.deepEqual(store.list({ limit: 5, before: 'c' }).map((r) => r.id), ['a', 'b']);
  // d, listed on the first page, finishing after c is not listed again.
  store.run(finished('d'));
  assert.deepEqual(store.list({ limit: 5, before: 'c' }).map((r) => r.id), ['a', 'b']);
});

test('a run.finished that names no provider is published naming where the record says the run went: still there, or last before a requeue', () => {
  const bus = new Bus();
  bus.active = true;
  const store = new RunStore(bus, 10);
  // Cut on its provider (an I/O worker's exit reports no provider), and ended in the queue after a requeue.
  for (const id of ['cut', 'requeued']) {
    store.run(queued(id));
    store.run(dispatched(id));
  }
  store.run({ type: 'run.requeued', runId: 'requeued', model: 'm', reason: 'provider_overloaded', node: 'n1', provider: 'p1', at: 1_003 } as RunEvent);
  store.run(finished('cut', 'worker_exited'));
  store.run(finished('requeued', 'queue_timeout'));
  const published = bus.events.filter((e) => e.type === 'run.finished') as { runId: string; node: string | null; provider: string | null }[];
  assert.deepEqual(published.map((e) => [e.runId, e.node, e.provider]), [['cut', 'n1', 'p1'], ['requeued', 'n1', 'p1']]);
  assert.deepEqual(['cut', 'requeued'].map((id) => [store.get(id)?.node, store.get(id)?.provider]), [['n1', 'p1'], ['n1', 'p1']]);
});
