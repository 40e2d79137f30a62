import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { test } from 'node:test';
import { EventBus, HISTORY, type Subscription, type SubscriptionReader } from '../../../src/main/events/event-bus.js';
import type { EdgeEvent } from '../../../src/contract/events.js';

function event(n: number): EdgeEvent {
  return { type: 'node.draining', node: `n${n}`, by: 'admin' };
}

class CountingReader implements SubscriptionReader {
  wakes = 0;
  readable(): void {
    this.wakes++;
  }
}

test('a full subscriber buffer drops its oldest events and counts them; the newest are kept', async () => {
  const bus = new EventBus();
  const reader = new CountingReader();
  const sub = bus.subscribe(reader, 3);
  for (let i = 1; i <= 5; i++) bus.publish(event(i));
  assert.equal(sub.buffered, 3);
  assert.equal(sub.dropped, 2);
  assert.equal(bus.droppedTotal, 2);
  assert.equal(sub.takeDropped(), 2);
  assert.equal(sub.takeDropped(), 0, 'each drop is reported once');
  const kept: string[] = [];
  for (let e = sub.shift(); e !== undefined; e = sub.shift()) kept.push((e.event as { node: string }).node);
  assert.deepEqual(kept, ['n3', 'n4', 'n5']);
  assert.equal(sub.delivered, 3);
});

test('a slow subscriber never affects another: each has its own buffer and drop count', () => {
  const bus = new EventBus();
  const slow = bus.subscribe(new CountingReader(), 2);
  const fast = bus.subscribe(new CountingReader(), 100);
  for (let i = 0; i < 50; i++) bus.publish(event(i));
  assert.equal(slow.dropped, 48);
  assert.equal(fast.dropped, 0);
  assert.equal(fast.buffered, 50);
});

test('the reader is woken once per batch, after the publishing code has returned', async () => {
  const bus = new EventBus();
  const reader = new CountingReader();
  bus.subscribe(reader, 10);
  for (let i = 0; i < 5; i++) bus.publish(event(i));
  assert.equal(reader.wakes, 0, 'publish never calls into the reader');
  await tick();
  assert.equal(reader.wakes, 1);
});

test('with no subscriber, publish does nothing; a closed subscription is gone', () => {
  const bus = new EventBus();
  assert.equal(bus.active, false);
  bus.publish(event(1));
  assert.equal(bus.publishedTotal, 0);
  const sub: Subscription = bus.subscribe(new CountingReader());
  assert.equal(bus.active, true);
  sub.close();
  assert.equal(bus.active, false);
  bus.publish(event(2));
  assert.equal(sub.buffered, 0);
});

test('an event is serialised once as an SSE frame and shared by every subscriber', () => {
  const bus = new EventBus();
  const a = bus.subscribe(new CountingReader());
  const b = bus.subscribe(new CountingReader());
  bus.publish({ type: 'config.applied', configVersion: 2, changedPaths: ['models[x].max_queue'] });
  const ea = a.shift();
  const eb = b.shift();
  assert.equal(ea, eb);
  const frame = ea?.frame ?? '';
  assert.match(frame, new RegExp(`^id: ${bus.boot}-1\nevent: config\\.applied\ndata: \\{.*\\}\n\n$`));
  const data = JSON.parse(frame.split('\n')[2].slice('data: '.length));
  assert.equal(data.configVersion, 2);
  assert.deepEqual(data.changedPaths, ['models[x].max_queue']);
  assert.equal(data.seq, 1);
});

test('a subscriber that leaves run events out gets node events, and while only such subscribers listen no run event is built', () => {
  const bus = new EventBus();
  const flips: boolean[] = [];
  bus.onActiveChange = (active) => flips.push(active);
  const nodesOnly = bus.subscribe(new CountingReader(), 16, false);
  assert.equal(bus.active, false, 'the data path skips run events');
  const run: EdgeEvent = { type: 'run.started', runId: 'r1', requestId: 'q1', model: 'm', node: 'n', provider: 'p', queueMs: 0 };
  bus.publish(run);
  bus.publish(event(1));
  assert.equal(bus.publishedTotal, 1, 'the run event was never built');
  assert.equal(nodesOnly.shift()?.event.type, 'node.draining');
  assert.equal(nodesOnly.buffered, 0);
  const all = bus.subscribe(new CountingReader(), 16);
  assert.equal(bus.active, true);
  // All five kinds a request makes: none may reach the node-only subscriber.
  const kinds: EdgeEvent[] = [
    { type: 'run.queued', runId: 'r1', requestId: 'q1', model: 'm', session: 'default', at: 1 },
    { type: 'run.dispatched', runId: 'r1', model: 'm', node: 'n', provider: 'p', adapter: 'http', attempt: 1, queueMs: 0, at: 2 },
    run,
    { type: 'run.first_byte', runId: 'r1', model: 'm', ttfbMs: 1, at: 3 },
    { type: 'run.finished', runId: 'r1', requestId: 'q1', model: 'm', node: 'n', provider: 'p', status: 200, outcome: 'end', totalMs: 1, queueMs: 0, bytesOut: 1 },
  ];
  for (const kind of kinds) bus.publish(kind);
  assert.deepEqual([1, 2, 3, 4, 5].map(() => all.shift()?.event.type), kinds.map((k) => k.type));
  assert.equal(nodesOnly.buffered, 0, 'still no run events for the node-only subscriber');
  all.close();
  nodesOnly.close();
  assert.deepEqual(flips, [true, false]);
});

function drain(sub: Subscription): string[] {
  const out: string[] = [];
  for (let e = sub.shift(); e !== undefined; e = sub.shift()) out.push(e.event.type === 'node.draining' ? e.event.node : e.event.type);
  return out;
}

test('a reconnect with Last-Event-ID gets the events after it, even those published while nobody listened', () => {
  const bus = new EventBus();
  // Node events only, as the console subscribes.
  const first = bus.subscribe(new CountingReader(), 16, false);
  bus.publish(event(1));
  bus.publish(event(2));
  const lastSeen = first.shift()?.frame.split('\n')[0].slice('id: '.length) ?? '';
  assert.equal(lastSeen, `${bus.boot}-1`);
  first.close();
  bus.publish(event(3)); // nobody listens
  const { subscription, resumption } = bus.resubscribe(new CountingReader(), 16, false, lastSeen);
  assert.deepEqual(resumption, { lastEventId: lastSeen, replayed: 2, missed: 0, restarted: false });
  assert.deepEqual(drain(subscription), ['n2', 'n3']);
  bus.publish(event(4));
  assert.deepEqual(drain(subscription), ['n4'], 'then live events, each once');
  subscription.close();
});

test('run events are not built while nobody wants them: a run subscriber back after such a gap is told its replay is not whole', () => {
  const bus = new EventBus();
  const runs = bus.subscribe(new CountingReader(), 16);
  bus.publish({ type: 'run.first_byte', runId: 'r1', model: 'm', ttfbMs: 1, at: 3 });
  const lastSeen = runs.shift()?.frame.split('\n')[0].slice('id: '.length) ?? '';
  runs.close();
  bus.publish({ type: 'run.first_byte', runId: 'r2', model: 'm', ttfbMs: 1, at: 4 }); // not built: nobody wants runs
  bus.publish(event(1));
  const back = bus.resubscribe(new CountingReader(), 16, true, lastSeen);
  assert.deepEqual(back.resumption, { lastEventId: lastSeen, replayed: 1, missed: null, restarted: false });
  back.subscription.close();
});

test('a replay larger than the new subscription\'s buffer: the newest that fit are replayed, and the rest are reported missed, not dropped', () => {
  const bus = new EventBus();
  const first = bus.subscribe(new CountingReader(), 16, false);
  bus.publish(event(1));
  const lastSeen = first.shift()?.frame.split('\n')[0].slice('id: '.length) ?? '';
  first.close();
  for (let n = 2; n <= 11; n++) bus.publish(event(n)); // ten after it
  const back = bus.resubscribe(new CountingReader(), 4, false, lastSeen);
  assert.deepEqual(back.resumption, { lastEventId: lastSeen, replayed: 4, missed: 6, restarted: false });
  assert.deepEqual(drain(back.subscription), ['n8', 'n9', 'n10', 'n11']);
  assert.equal(back.subscription.dropped, 0, 'nothing counted as a slow reader\'s drop');
  back.subscription.close();
});

test('run events never push node events out of the history', () => {
  const bus = new EventBus();
  const all = bus.subscribe(new CountingReader(), 16);
  bus.publish(event(1));
  for (let i = 0; i < HISTORY * 2; i++) bus.publish({ type: 'run.first_byte', runId: `r${i}`, model: 'm', ttfbMs: 1, at: i });
  all.close();
  const back = bus.resubscribe(new CountingReader(), 16, false, `${bus.boot}-0`);
  assert.deepEqual(back.resumption, { lastEventId: `${bus.boot}-0`, replayed: 1, missed: 0, restarted: false });
  assert.deepEqual(drain(back.subscription), ['n1']);
  back.subscription.close();
});

test('a reconnect older than the history is told it lost events; another boot\'s id is a restart', () => {
  const bus = new EventBus();
  for (let n = 1; n <= HISTORY + 10; n++) bus.publish(event(n));
  const stale = bus.resubscribe(new CountingReader(), HISTORY, false, `${bus.boot}-5`);
  assert.deepEqual(stale.resumption, { lastEventId: `${bus.boot}-5`, replayed: HISTORY, missed: null, restarted: false });
  assert.equal(drain(stale.subscription)[0], 'n11', 'the oldest kept event comes first');
  stale.subscription.close();
  const whole = bus.resubscribe(new CountingReader(), HISTORY, false, `${bus.boot}-${HISTORY}`);
  assert.deepEqual(whole.resumption, { lastEventId: `${bus.boot}-${HISTORY}`, replayed: 10, missed: 0, restarted: false });
  whole.subscription.close();

  const other = bus.resubscribe(new CountingReader(), 4, false, 'abcdef01-3');
  assert.equal(other.resumption.restarted, true);
  assert.equal(other.resumption.missed, null);
  other.subscription.close();

  const fresh = new EventBus();
  fresh.publish(event(1));
  const restarted = fresh.resubscribe(new CountingReader(), 16, false, `${bus.boot}-900`);
  assert.deepEqual(restarted.resumption, { lastEventId: `${bus.boot}-900`, replayed: 1, missed: null, restarted: true });
  assert.deepEqual(drain(restarted.subscription), ['n1'], 'everything this boot published');
  restarted.subscription.close();

  const future = fresh.resubscribe(new CountingReader(), 16, false, `${fresh.boot}-99`);
  assert.deepEqual(future.resumption, { lastEventId: `${fresh.boot}-99`, replayed: 0, missed: null, restarted: false });
  future.subscription.close();
});

test('a runs=0 reconnect is replayed node events only', () => {
  const bus = new EventBus();
  const all = bus.subscribe(new CountingReader());
  bus.publish(event(1));
  bus.publish({ type: 'run.first_byte', runId: 'r1', model: 'm', ttfbMs: 1, at: 3 });
  bus.publish(event(2));
  const { subscription, resumption } = bus.resubscribe(new CountingReader(), 16, false, `${bus.boot}-0`);
  assert.equal(resumption.replayed, 2);
  assert.deepEqual(drain(subscription), ['n1', 'n2']);
  subscription.close();
  all.close();
});
