// The main thread's run records: what GET /admin/runs lists and keeps.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EdgeEvent, RunEvent } from '../../../src/contract/events.js';
import { RunStore } from '../../../src/main/runs/run-store.js';

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
