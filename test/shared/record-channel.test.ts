// RecordChannel (src/shared/ring/record-channel.ts): records sent in one
// event-loop turn become visible together, with one wake-up of a sleeping
// reader; a full ring is backpressure (records wait in order), never loss.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RecordKind, RecordReader, SchedulerRecord } from '../../src/contract/scheduler-records.js';
import { RecordChannel } from '../../src/contract/record-channel.js';
import { RingConsumer, RingProducer, createRing } from '../../src/shared/ring/spsc-ring.js';

function setup(capacity: number): { channel: RecordChannel; producer: RingProducer; consumer: RingConsumer; reader: RecordReader } {
  const buffer = createRing(capacity);
  const producer = new RingProducer(buffer);
  const consumer = new RingConsumer(buffer);
  return { channel: new RecordChannel(producer), producer, consumer, reader: new RecordReader(consumer.view, consumer.bytes) };
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Drains what is committed: [requestId, alias] per scheduler record. */
function receive(consumer: RingConsumer, reader: RecordReader): [number, string | undefined][] {
  const out: [number, string | undefined][] = [];
  const record = new SchedulerRecord();
  consumer.drainInPlace((offset, length) => {
    if (reader.decode(offset, length, record)) out.push([record.requestId, reader.nameOf(record.nameId)]);
  });
  return out;
}

function admit(channel: RecordChannel, requestId: number, alias: string): void {
  const r = new SchedulerRecord().reset(RecordKind.admit);
  r.requestId = requestId;
  channel.send(r, undefined, undefined, alias);
}

test('records sent in one turn are published together, after it, with one notify to a sleeping reader', async () => {
  const { channel, producer, consumer, reader } = setup(4096);
  const woken = consumer.waitForData(); // the reader sleeps
  admit(channel, 1, 'a');
  admit(channel, 2, 'b');
  admit(channel, 3, 'a');
  assert.equal(consumer.hasData(), false, 'nothing visible before the turn ends');
  assert.equal(producer.notifies, 0);
  assert.equal(await woken, true);
  assert.equal(producer.notifies, 1, 'three records (and two names), one wake-up');
  assert.deepEqual(receive(consumer, reader), [
    [1, 'a'],
    [2, 'b'],
    [3, 'a'],
  ]);
});

test('commit() publishes at once (what close paths rely on)', () => {
  const { channel, consumer, reader } = setup(4096);
  admit(channel, 7, 'x');
  channel.commit();
  assert.deepEqual(receive(consumer, reader), [[7, 'x']]);
});

test('a full ring holds records back in order and delivers every one as the reader drains', async () => {
  const { channel, consumer, reader } = setup(256); // a few 52-byte records fit
  const total = 40;
  for (let i = 1; i <= total; i++) admit(channel, i, `alias-${i % 3}`);
  assert.ok(channel.backlogged > 0, 'the ring filled up');
  const got: [number, string | undefined][] = [];
  while (got.length < total) {
    assert.equal(await consumer.waitForData(1000), true, `stalled after ${got.length} records`);
    got.push(...receive(consumer, reader));
  }
  await nextTurn();
  assert.equal(consumer.hasData(), false);
  assert.equal(channel.pending, 0);
  assert.deepEqual(
    got,
    Array.from({ length: total }, (_, k) => [k + 1, `alias-${(k + 1) % 3}`]),
  );
});
