// The A2A task store's bound: when full, finished records go oldest first,
// as many as it takes (a2a.max_tasks may have been lowered by a refresh);
// only running tasks can fill it. And a subscriber that reads late gets its
// unread deltas merged, without changing what another subscriber reads.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Message } from '@a2a-js/sdk';
import { COMPLETED, TaskEntry, TaskStore } from '../../src/workers/a2a/task-store.js';

function userMessage(): Message {
  return { messageId: randomUUID(), contextId: '', taskId: '', role: 1, parts: [], metadata: undefined, extensions: [], referenceTaskIds: [] };
}

function entry(store: TaskStore): TaskEntry {
  return new TaskEntry(store.newId(), 'ctx', 'writer', undefined, userMessage());
}

test('a2a.max_tasks lowered below the finished records held: the next task still gets in', () => {
  const store = new TaskStore(-1, 20);
  const finished: TaskEntry[] = [];
  for (let i = 0; i < 20; i++) {
    const e = entry(store);
    assert.equal(store.add(e), true);
    e.finish(COMPLETED, undefined, 3_600_000);
    finished.push(e);
  }
  store.setMaxTasks(5);
  const next = entry(store);
  assert.equal(store.add(next), true, 'finished records make room, however many');
  assert.equal(store.size, 5);
  assert.equal(store.get(next.id), next);
  assert.equal(store.get(finished[19].id), finished[19], 'the newest finished ones are kept');
  assert.equal(store.get(finished[0].id), undefined, 'the oldest went first');
  // Running tasks are never dropped: two of them fill a store of two.
  const small = new TaskStore(-1, 2);
  assert.equal(small.add(entry(small)), true);
  assert.equal(small.add(entry(small)), true);
  assert.equal(small.add(entry(small)), false);
});

test('a subscriber that reads late gets its unread deltas as one update; one that keeps up gets each, unchanged', async () => {
  const store = new TaskStore(-1, 10);
  const task = entry(store);
  store.add(task);
  const prompt = task.subscribe();
  const late = task.subscribe();
  const promptTexts: string[] = [];
  const reading = (async () => {
    for await (const event of prompt) if (event.payload?.$case === 'artifactUpdate') promptTexts.push(String(event.payload.value.artifact?.parts[0]?.content?.value));
  })();
  for (const text of ['a', 'b', 'c']) {
    task.delta(text);
    await Promise.resolve();
  }
  task.finish(COMPLETED, undefined, 1_000);
  await reading;
  // The closing empty chunk (lastChunk) after the deltas.
  assert.deepEqual(promptTexts, ['a', 'b', 'c', '']);
  const lateEvents = [];
  for await (const event of late) lateEvents.push(event);
  // working, then one update holding a, b and c (not appended: the first delta replaces), then completed.
  assert.deepEqual(lateEvents.map((e) => e.payload?.$case), ['statusUpdate', 'artifactUpdate', 'statusUpdate']);
  const merged = lateEvents[1].payload;
  assert.equal(merged?.$case === 'artifactUpdate' ? merged.value.artifact?.parts[0]?.content?.value : '', 'abc');
  assert.equal(merged?.$case === 'artifactUpdate' ? merged.value.append : true, false);
  assert.equal(merged?.$case === 'artifactUpdate' ? merged.value.lastChunk : false, true, 'the closing chunk folded in: the merged update is the last');
  assert.equal(task.text, 'abc');
});

test('a2a.max_task_bytes: finished records go oldest first once their text passes the bound; the newest stays; running ones are not counted', () => {
  // Each record also holds its client message (~150 characters of JSON here), and 400 of answer.
  const store = new TaskStore(-1, 100, 1_500);
  const finish = (answer: string): TaskEntry => {
    const e = entry(store);
    assert.equal(store.add(e), true);
    e.delta(answer);
    e.finish(COMPLETED, undefined, 3_600_000);
    return e;
  };
  const first = finish('a'.repeat(400));
  const second = finish('b'.repeat(400));
  assert.equal(store.size, 2);
  const running = entry(store);
  store.add(running);
  running.delta('r'.repeat(5_000));
  assert.equal(store.get(first.id), first, 'a running task\'s text does not count');
  const third = finish('c'.repeat(400));
  assert.equal(store.get(first.id), undefined, 'the oldest finished went');
  assert.equal(store.get(second.id), second);
  assert.equal(store.get(third.id), third);
  assert.ok(store.finishedChars <= 1_500, `${store.finishedChars}`);
  // A record larger than the whole bound is kept while it is the newest (GetTask right after it finished finds it).
  const huge = finish('h'.repeat(2_000));
  assert.equal(store.get(huge.id), huge);
  assert.equal(store.get(second.id), undefined);
  assert.equal(store.get(third.id), undefined);
  // Then the running one finishes: its text counts, and the huge one goes.
  running.finish(COMPLETED, undefined, 3_600_000);
  assert.equal(store.get(huge.id), undefined);
  assert.equal(store.get(running.id), running, 'itself over the bound, it is the newest: kept');
});

test('a2a.max_task_bytes counts all a client message holds: a small text beside large metadata or a data part counts as large', () => {
  const store = new TaskStore(-1, 100, 100_000);
  const blob = 'm'.repeat(60_000);
  const withMetadata = (): Message => ({ ...userMessage(), parts: [{ content: { $case: 'text', value: 'hi' }, metadata: undefined, filename: '', mediaType: '' }], metadata: { blob } });
  const withData = (): Message => ({ ...userMessage(), parts: [{ content: { $case: 'data', value: { blob } }, metadata: undefined, filename: '', mediaType: 'application/json' }] });
  const kept: TaskEntry[] = [];
  for (const make of [withMetadata, withData, withMetadata]) {
    const e = new TaskEntry(store.newId(), 'ctx', 'writer', undefined, make());
    assert.equal(store.add(e), true);
    e.finish(COMPLETED, undefined, 3_600_000);
    kept.push(e);
  }
  assert.ok(store.finishedChars <= 100_000, `finished records hold ${store.finishedChars} characters, over the bound`);
  assert.equal(store.get(kept[0].id), undefined, 'the oldest went');
  assert.equal(store.get(kept[2].id), kept[2], 'the newest stays');
});

test('a finished record lets go of its run: the sink, its exchange and request body are not kept for the TTL', async () => {
  // Records are bounded by a2a.max_tasks and their text by a2a.max_task_bytes; the run's request body
  // (the context's earlier turns included) is counted by neither, so a finished record must not hold it.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const store = new TaskStore(-1, 10);
  const task = entry(store);
  store.add(task);
  // As the handler sets it: a closure over the run's sink (made in a function of its own, so this test's scope holds none).
  const released = ((): WeakRef<object> => {
    const sink = { body: Buffer.alloc(1024 * 1024), cancel: (): void => undefined };
    task.cancelRun = () => sink.cancel();
    return new WeakRef(sink);
  })();
  task.finish(COMPLETED, undefined, 3_600_000);
  for (let i = 0; i < 5 && released.deref() !== undefined; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  assert.equal(store.get(task.id), task, 'the record is kept');
  assert.equal(released.deref(), undefined, 'its run is collectable');
});
