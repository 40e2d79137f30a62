// SPSC SharedArrayBuffer ring (src/shared/ring/spsc-ring.ts): boundaries and
// wrap-around on one thread, then two threads: a 1M-record stress run with a
// ring far smaller than the data, and async wake-ups in both directions. The
// main thread never uses Atomics.wait here, as in the edge.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { CONSUMER_SLEEPING, HEADER_BYTES, PRODUCER_SLEEPING, READ, WRITE } from '../../src/shared/ring/layout.js';
import { RingConsumer, RingProducer, createRing, recordBytes } from '../../src/shared/ring/spsc-ring.js';
import type { StressJob, StressResult, WakeJob, WakeResult } from './ring-worker.js';
import { SizeStream, checkPayload, fillPayload } from './ring-worker-payload.js';

function ring(capacity: number): { producer: RingProducer; consumer: RingConsumer; buffer: SharedArrayBuffer } {
  const buffer = createRing(capacity);
  return { producer: new RingProducer(buffer), consumer: new RingConsumer(buffer), buffer };
}

function payload(length: number, tag: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (tag * 31 + i) & 0xff;
  return bytes;
}

function readAll(consumer: RingConsumer): Uint8Array[] {
  const out: Uint8Array[] = [];
  consumer.drain((view) => out.push(view.slice()));
  return out;
}

// --- one thread --------------------------------------------------------------

test('createRing accepts only power-of-two capacities, and the classes only its buffers', () => {
  for (const bad of [0, 32, 100, 96, 2 ** 31, 1.5 * 1024]) {
    assert.throws(() => createRing(bad), RangeError, `capacity ${bad}`);
  }
  assert.throws(() => new RingProducer(new SharedArrayBuffer(4096)), TypeError);
  assert.throws(() => new RingConsumer(new SharedArrayBuffer(4096)), TypeError);
  const { producer, consumer } = ring(1024);
  assert.equal(producer.capacity, 1024);
  assert.equal(consumer.capacity, 1024);
  assert.equal(producer.maxRecordLength, 508);
});

test('an empty ring reads nothing and reports all of its space free', () => {
  const { producer, consumer } = ring(256);
  assert.equal(consumer.read(), undefined);
  assert.equal(consumer.drain(() => assert.fail('no record expected')), 0);
  assert.equal(consumer.hasData(), false);
  assert.deepEqual(consumer.usage(), { capacity: 256, used: 0 });
  assert.deepEqual(producer.usage(), { capacity: 256, used: 0 });
  assert.equal(producer.freeBytes(), 256);
});

test('a full ring refuses the next record without writing it, and takes it once space is released', () => {
  const { producer, consumer } = ring(64);
  for (let i = 0; i < 4; i++) assert.equal(producer.tryWrite(payload(12, i)), true); // 16 bytes each
  assert.deepEqual(producer.usage(), { capacity: 64, used: 64 });
  assert.equal(producer.freeBytes(), 0);
  assert.equal(producer.canWrite(0), false);
  assert.equal(producer.tryWrite(payload(12, 9)), false);
  assert.equal(producer.tryWrite(new Uint8Array(0)), false);

  const first = consumer.read();
  assert.deepEqual(first, payload(12, 0));
  // A view from read() holds its space until the next call hands it back.
  assert.equal(producer.tryWrite(payload(12, 4)), false);
  consumer.release();
  assert.deepEqual(consumer.usage(), { capacity: 64, used: 48 });
  assert.equal(producer.tryWrite(payload(12, 4)), true);
  assert.deepEqual(
    readAll(consumer),
    [1, 2, 3, 4].map((tag) => payload(12, tag)),
  );
  assert.deepEqual(consumer.usage(), { capacity: 64, used: 0 });
});

test('a record exactly filling the tail is not wrapped; one byte more skips the tail as padding', () => {
  const { producer, consumer } = ring(128);
  for (let i = 0; i < 3; i++) assert.equal(producer.tryWrite(payload(28, i)), true); // 32 bytes each
  assert.equal(readAll(consumer).length, 3);
  // Cursor at 96, tail 32: a 28-byte payload (32 with its header) fills it.
  assert.equal(producer.tryWrite(payload(28, 3)), true);
  assert.deepEqual(consumer.usage(), { capacity: 128, used: 32 });
  const view = consumer.read();
  assert.equal(view?.byteOffset, consumer.bytes.byteOffset + 100);
  assert.deepEqual(view, payload(28, 3));
  consumer.release();
  // Cursor back at 0 with no padding; move it to 96 again.
  for (let i = 0; i < 3; i++) assert.equal(producer.tryWrite(payload(28, i)), true);
  assert.equal(readAll(consumer).length, 3);
  // 29 bytes (36 with header, rounded) do not fit the 32-byte tail: padding.
  assert.equal(producer.tryWrite(payload(29, 5)), true);
  assert.deepEqual(consumer.usage(), { capacity: 128, used: 32 + 36 });
  const wrapped = consumer.read();
  assert.equal(wrapped?.byteOffset, consumer.bytes.byteOffset + 4);
  assert.deepEqual(wrapped, payload(29, 5));
  consumer.release();
  assert.deepEqual(consumer.usage(), { capacity: 128, used: 0 });
});

test('records larger than capacity / 2 - 4 are rejected with a RangeError; the largest always fits an empty ring', () => {
  const { producer } = ring(256);
  assert.equal(producer.maxRecordLength, 124);
  assert.throws(() => producer.tryWrite(new Uint8Array(125)), {
    name: 'RangeError',
    message: /125 bytes .* maximum for a 256-byte ring is 124 bytes/,
  });
  assert.throws(() => producer.reserve(-1), RangeError);
  assert.throws(() => producer.reserve(1.5), RangeError);
  assert.throws(() => producer.tryWriteWith(Number.NaN, () => {}), RangeError);
  assert.throws(() => producer.canWrite(1e9), RangeError);
  // From every 4-byte cursor position, the largest record fits an empty ring.
  for (let start = 0; start < 256; start += 4) {
    const { producer, consumer } = ring(256);
    for (let at = 0; at < start; at += 4) assert.equal(producer.tryWrite(new Uint8Array(0)), true); // 4 bytes each
    assert.equal(readAll(consumer).length, start / 4);
    assert.equal(producer.tryWrite(payload(124, start)), true, `largest record at cursor ${start}`);
    assert.deepEqual(readAll(consumer), [payload(124, start)]);
  }
});

test('wrap-around over many laps keeps every record of every alignment intact and in order', () => {
  const capacity = 512;
  const { producer, consumer } = ring(capacity);
  // Model of the byte cursors: where each record must land, padding included.
  let write = 0;
  let read = 0;
  const pending: { length: number; tag: number; bytes: number }[] = [];
  let rng = 12345;
  const next = (n: number): number => {
    rng = (Math.imul(rng, 1103515245) + 12345) & 0x7fffffff;
    return rng % n;
  };
  let tag = 0;
  let laps = 0;
  const seenResidue = new Set<number>();
  for (let step = 0; step < 20_000; step++) {
    if (next(3) !== 0) {
      const length = next(producer.maxRecordLength + 1);
      const total = recordBytes(length);
      const tail = capacity - (write % capacity);
      const need = total <= tail ? total : tail + total;
      const fits = capacity - (write - read) >= need;
      assert.equal(producer.tryWrite(payload(length, tag)), fits, `step ${step}: write of ${length}`);
      if (fits) {
        seenResidue.add(length % 4);
        pending.push({ length, tag: tag++, bytes: need });
        write += need;
      }
    } else {
      const batch = 1 + next(4);
      let got = 0;
      consumer.drain((view) => {
        const expected = pending.shift();
        assert.ok(expected !== undefined, 'no record expected');
        assert.deepEqual(view, payload(expected.length, expected.tag));
        read += expected.bytes;
        got++;
      }, batch);
      assert.ok(got <= batch);
    }
    assert.deepEqual(producer.usage(), { capacity, used: write - read }, `step ${step}`);
    laps = Math.floor(read / capacity);
  }
  assert.ok(laps > 100, `only ${laps} laps`);
  assert.deepEqual([...seenResidue].sort(), [0, 1, 2, 3]);
});

test('cursors wrap past 2^31 and 2^32 (32-bit counters) without losing a record', () => {
  for (const start of [2 ** 31 - 1024, -1024]) {
    const buffer = createRing(256);
    const header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    header[WRITE] = header[READ] = start; // as if 2^31 or 2^32 - 1 KiB had passed
    const { producer, consumer } = { producer: new RingProducer(buffer), consumer: new RingConsumer(buffer) };
    let written = 0;
    let read = 0;
    for (let step = 0; step < 200; step++) {
      let fill = 0;
      while (fill < 32 && producer.tryWrite(payload(4 + (written % 50), written))) fill++, written++;
      assert.ok(fill < 32, 'wrote more than 256 bytes of records into a 256-byte ring');
      assert.equal(producer.canWrite(4 + (written % 50)), false);
      consumer.drain((view) => {
        assert.deepEqual(view, payload(4 + (read % 50), read));
        read++;
      });
      assert.deepEqual(consumer.usage(), { capacity: 256, used: 0 });
    }
    assert.equal(read, written);
    assert.ok(written * 8 > 2048, 'crossed the wrap point');
    assert.notEqual(Math.sign(header[WRITE]), Math.sign(start), 'the cursor crossed its sign boundary');
  }
});

test('reserve/commit: records stay invisible until commit, and one commit publishes several', () => {
  const { producer, consumer } = ring(256);
  for (let i = 0; i < 3; i++) {
    const offset = producer.reserve(8);
    assert.ok(offset >= 0);
    producer.view.setUint32(offset, i, true);
    producer.view.setUint32(offset + 4, i * 10, true);
  }
  assert.equal(consumer.read(), undefined);
  assert.equal(consumer.hasData(), false);
  producer.commit();
  const got: number[] = [];
  assert.equal(
    consumer.drainInPlace((offset, length) => {
      assert.equal(length, 8);
      got.push(consumer.view.getUint32(offset, true), consumer.view.getUint32(offset + 4, true));
    }),
    3,
  );
  assert.deepEqual(got, [0, 0, 1, 10, 2, 20]);
  // tryWriteWith encodes straight into the ring.
  assert.equal(
    producer.tryWriteWith(3, (target, offset) => target.set([7, 8, 9], offset)),
    true,
  );
  assert.deepEqual(consumer.read(), Uint8Array.of(7, 8, 9));
});

test('drain honours max, and a throwing handler consumes up to its record', () => {
  const { producer, consumer } = ring(256);
  for (let i = 0; i < 5; i++) producer.tryWrite(Uint8Array.of(i));
  const seen: number[] = [];
  assert.equal(
    consumer.drain((view) => seen.push(view[0]), 2),
    2,
  );
  assert.deepEqual(seen, [0, 1]);
  assert.throws(
    () =>
      consumer.drain((view) => {
        if (view[0] === 3) throw new Error('bad record');
        seen.push(view[0]);
      }),
    /bad record/,
  );
  assert.deepEqual(seen, [0, 1, 2]);
  assert.deepEqual(consumer.read(), Uint8Array.of(4));
  assert.equal(consumer.read(), undefined);
});

test('the producer notifies only a consumer that sleeps, once per sleep', async () => {
  const { producer, consumer } = ring(4096);
  for (let i = 0; i < 100; i++) producer.tryWrite(payload(16, i));
  assert.equal(producer.notifies, 0);
  assert.equal(await consumer.waitForData(), true); // data already there: no sleep
  assert.equal(readAll(consumer).length, 100);

  const waiting = consumer.waitForData(5_000);
  let wroteAt = 0;
  setImmediate(() => {
    wroteAt = performance.now();
    for (let i = 0; i < 10; i++) producer.tryWrite(payload(16, i));
  });
  assert.equal(await waiting, true);
  assert.ok(performance.now() - wroteAt < 1_000, 'woken by the write, not by the timeout');
  assert.equal(producer.notifies, 1);
  assert.equal(readAll(consumer).length, 10);
});

test('waits time out with false, and close() wakes them with false', async () => {
  const { producer, consumer } = ring(64);
  const started = performance.now();
  assert.equal(await consumer.waitForData(30), false);
  assert.ok(performance.now() - started >= 25);
  for (let i = 0; i < 4; i++) producer.tryWrite(payload(12, i));
  assert.equal(await producer.waitForSpace(12, 20), false);

  const space = producer.waitForSpace(12, 5_000);
  const closedAt = performance.now();
  setImmediate(() => consumer.close());
  assert.equal(await space, false);
  assert.ok(performance.now() - closedAt < 1_000, 'woken by close(), not by the timeout');
  assert.equal(producer.closed, true);
  // Committed records stay readable after close; then the wait reports false.
  assert.equal(readAll(consumer).length, 4);
  assert.equal(await consumer.waitForData(5_000), false);
});

// --- two threads -------------------------------------------------------------

/** The shared cursors and sleep flags, for a stall's message: which side waits, and on what. */
function headerState(buffer: SharedArrayBuffer): string {
  const header = new Int32Array(buffer, 0, HEADER_BYTES / 4);
  return `WRITE ${Atomics.load(header, WRITE)}, READ ${Atomics.load(header, READ)}, consumer sleeping ${Atomics.load(header, CONSUMER_SLEEPING)}, producer sleeping ${Atomics.load(header, PRODUCER_SLEEPING)}`;
}

function startWorker<T>(job: StressJob | WakeJob): { worker: Worker; next: () => Promise<T> } {
  const worker = new Worker(new URL('./ring-worker.js', import.meta.url), { workerData: job });
  const queue: T[] = [];
  let waiter: { resolve: (v: T) => void; reject: (e: unknown) => void } | undefined;
  let failure: unknown;
  worker.on('message', (message: T) => {
    if (waiter !== undefined) waiter.resolve(message);
    else queue.push(message);
    waiter = undefined;
  });
  const fail = (error: unknown): void => {
    failure ??= error;
    waiter?.reject(error);
    waiter = undefined;
  };
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`worker exited with code ${code}`)));
  const next = (): Promise<T> => {
    const queued = queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (failure !== undefined) return Promise.reject(failure);
    return new Promise<T>((resolve, reject) => (waiter = { resolve, reject }));
  };
  return { worker, next };
}

test('two threads: 1,000,000 records of 0-64 KiB through a 256 KiB ring arrive complete, in order, intact', async (t) => {
  const count = 1_000_000;
  const seed = 0x5eed;
  const buffer = createRing(256 * 1024);
  const consumer = new RingConsumer(buffer);
  const maxLength = 64 * 1024;
  assert.ok(maxLength <= consumer.capacity / 2 - 4);
  const { worker, next } = startWorker<StressResult>({ mode: 'produce', buffer, seed, count, maxLength });
  t.after(() => worker.terminate());

  const words = new Uint32Array(buffer);
  const sizes = new SizeStream(seed);
  let seq = 0;
  let bytes = 0;
  let large = 0;
  const verify = (view: Uint8Array): void => {
    const problem = checkPayload(view, words, 0, view.length, sizes.next(maxLength), seed, seq);
    if (problem !== undefined) assert.fail(problem);
    if (view.length > 16 * 1024) large++;
    bytes += view.length;
    seq++;
  };
  // Let the producer fill the ring first: it must find it full and wait.
  await delay(50);
  const started = performance.now();
  while (seq < count) {
    consumer.drain(verify, seq & 1 ? 64 : undefined);
    if (seq < count) assert.equal(await consumer.waitForData(10_000), true, `stalled at record ${seq}: ${headerState(buffer)}`);
  }
  const seconds = (performance.now() - started) / 1000;
  const producer = await next();
  assert.equal(consumer.read(), undefined, 'no record beyond the last one');
  assert.equal(producer.records, count);
  assert.ok(producer.fullWaits > 0, 'the producer never found the ring full');
  assert.ok(large >= 500, `only ${large} records over 16 KiB`);
  assert.ok(bytes > 100 * consumer.capacity, 'the ring wrapped many times');
  t.diagnostic(
    `${count} records, ${(bytes / 1e6).toFixed(0)} MB in ${seconds.toFixed(2)} s: ` +
      `${Math.round(count / seconds)} records/s, ${(bytes / 1e6 / seconds).toFixed(0)} MB/s; ` +
      `producer waited on a full ring ${producer.fullWaits} times, notified the consumer ${producer.notifies} times, ` +
      `consumer notified the producer ${consumer.notifies} times`,
  );
});

test('two threads, reversed: the main thread produces with waitForSpace, a worker verifies', async (t) => {
  const count = 200_000;
  const seed = 77;
  const maxLength = 16 * 1024;
  const buffer = createRing(64 * 1024);
  const producer = new RingProducer(buffer);
  const { worker, next } = startWorker<StressResult>({ mode: 'consume', buffer, seed, count, maxLength });
  t.after(() => worker.terminate());
  const words = new Uint32Array(buffer);
  const sizes = new SizeStream(seed);
  let fullWaits = 0;
  for (let seq = 0; seq < count; seq++) {
    const length = sizes.next(maxLength);
    let offset = producer.reserve(length);
    if (offset < 0) {
      fullWaits++;
      assert.equal(await producer.waitForSpace(length, 10_000), true, `no space at record ${seq}`);
      offset = producer.reserve(length);
    }
    fillPayload(producer.bytes, words, offset, length, seed, seq);
    producer.commit();
  }
  const result = await next();
  assert.equal(result.error, undefined);
  assert.equal(result.records, count);
  assert.ok(fullWaits > 0, 'the main thread never found the ring full');
  assert.ok(result.notifies > 0, 'the worker never woke the main thread');
});

test('two threads: waitForData resolves when another thread writes', async (t) => {
  const buffer = createRing(4096);
  const consumer = new RingConsumer(buffer);
  const { worker, next } = startWorker<WakeResult>({ mode: 'write-on-message', buffer });
  t.after(() => worker.terminate());
  const waiting = consumer.waitForData(5_000);
  let woke = false;
  void waiting.then(() => (woke = true));
  await delay(50);
  assert.equal(woke, false, 'resolved before anything was written');
  const wroteAt = performance.now();
  worker.postMessage(Uint8Array.of(1, 2, 3));
  assert.equal(await waiting, true);
  assert.ok(performance.now() - wroteAt < 1_000, 'woken by the write, not by the timeout');
  assert.deepEqual(consumer.read(), Uint8Array.of(1, 2, 3));
  assert.deepEqual(await next(), { records: 1, notifies: 1 });
  // Awake and busy: the next write notifies nobody.
  worker.postMessage(Uint8Array.of(4));
  assert.deepEqual(await next(), { records: 1, notifies: 1 });
  assert.deepEqual(consumer.read(), Uint8Array.of(4));
});

test('two threads: waitForSpace resolves after the consumer thread drains', async (t) => {
  const buffer = createRing(1024);
  const producer = new RingProducer(buffer);
  const { worker, next } = startWorker<WakeResult>({ mode: 'drain-on-message', buffer });
  t.after(() => worker.terminate());
  let written = 0;
  while (producer.tryWrite(payload(100, written))) written++;
  assert.equal(written, 9); // 9 x 104 bytes; the 10th does not fit
  const waiting = producer.waitForSpace(100, 5_000);
  let woke = false;
  void waiting.then(() => (woke = true));
  await delay(50);
  assert.equal(woke, false, 'resolved while the ring was full');
  const drainedAt = performance.now();
  worker.postMessage('drain');
  assert.equal(await waiting, true);
  assert.ok(performance.now() - drainedAt < 1_000, 'woken by the drain, not by the timeout');
  assert.equal(producer.tryWrite(payload(100, written)), true);
  assert.deepEqual(await next(), { records: 9, notifies: 1 });
});
