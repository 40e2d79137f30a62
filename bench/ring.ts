// Microbenchmark of the SPSC SharedArrayBuffer ring (src/shared/ring/): a
// worker thread produces, the main thread consumes with async waits only,
// as the edge's scheduler does. Prints one JSON line.
//   npm run bench:ring [-- --records=N] [-- --save[=DIR]] (--save: bench/results/<stamp>-ring.json)
import os from 'node:os';
import { saveMicroResult } from './harness/micro-result.js';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { RecordKind, RecordReader, RecordWriter, SchedulerRecord } from '../src/contract/scheduler-records.js';
import { RingConsumer, RingProducer, createRing } from '../src/shared/ring/spsc-ring.js';

interface Job {
  kind: 'stream' | 'echo';
  buffer: SharedArrayBuffer;
  back?: SharedArrayBuffer;
  records: number;
  size: number;
  batch: number;
}

interface Result {
  case: string;
  records: number;
  recordBytes: number;
  ms: number;
  recordsPerSec: number;
  nsPerRecord: number;
  mbPerSec: number;
  producerFullWaits?: number;
  consumerWakeups?: number;
}

if (isMainThread) await main();
else await work(workerData as Job);

async function main(): Promise<void> {
  const started = new Date();
  const arg = process.argv.find((a) => a.startsWith('--records='));
  const small = arg === undefined ? 2_000_000 : Number(arg.slice('--records='.length));
  const results: Result[] = [];
  results.push(sameThread(small, 32));
  results.push(schedulerRecords(small));
  results.push(await stream('32B tryWrite -> drain (views)', small, 32, 1, 'views'));
  results.push(await stream('32B tryWrite -> drainInPlace', small, 32, 1, 'inPlace'));
  results.push(await stream('32B reserve x16 + commit -> drainInPlace', small, 32, 16, 'inPlace'));
  results.push(await stream('4KB tryWrite -> drain (views)', Math.ceil(small / 10), 4096, 1, 'views'));
  results.push(await pingPong(20_000));
  console.log(
    JSON.stringify({ bench: 'ring', node: process.version, cpus: os.cpus().length, cpu: os.cpus()[0]?.model, results }),
  );
  const text = results.map(
    (r) =>
      `${r.case}: ${r.records.toLocaleString('en')} records, ${r.nsPerRecord} ns/record, ${r.recordsPerSec.toLocaleString('en')} records/s` +
      (r.consumerWakeups === undefined ? '' : `, ${r.consumerWakeups.toLocaleString('en')} consumer wake-ups`),
  );
  for (const line of text) console.log(line);
  const saved = saveMicroResult('ring', started, results, text);
  if (saved !== undefined) console.log(`saved ${saved}`);
}

/** Write and drain on one thread: the CPU cost of the ring code alone. */
function sameThread(records: number, size: number): Result {
  const buffer = createRing(1 << 20);
  const producer = new RingProducer(buffer);
  const consumer = new RingConsumer(buffer);
  const payload = new Uint8Array(size).fill(7);
  let sum = 0;
  const handler = (offset: number, length: number): void => {
    sum += consumer.bytes[offset] + length;
  };
  const started = performance.now();
  for (let i = 0; i < records; ) {
    while (i < records && producer.tryWrite(payload)) i++;
    consumer.drainInPlace(handler);
  }
  consumer.drainInPlace(handler);
  if (sum !== records * (size + 7)) throw new Error('sameThread: lost records');
  return result(`${size}B write+drain, one thread`, records, size, performance.now() - started);
}

/** Scheduler records encoded and decoded in place (DataView), one thread. */
function schedulerRecords(records: number): Result {
  const buffer = createRing(1 << 20);
  const consumer = new RingConsumer(buffer);
  const writer = new RecordWriter(new RingProducer(buffer));
  const reader = new RecordReader(consumer.view, consumer.bytes);
  const out = new SchedulerRecord().reset(RecordKind.grant);
  out.nodeId = writer.intern('node-1');
  out.providerId = writer.intern('provider-1');
  out.nameId = writer.intern('llama3:8b');
  const got = new SchedulerRecord();
  let sum = 0;
  const handler = (offset: number, length: number): void => {
    if (reader.decode(offset, length, got)) sum += got.requestId;
  };
  const started = performance.now();
  for (let i = 0; i < records; ) {
    for (; i < records; i++) {
      out.requestId = i;
      out.leaseId = i + 1;
      if (!writer.write(out)) break;
    }
    consumer.drainInPlace(handler);
  }
  consumer.drainInPlace(handler);
  if (sum !== (records * (records - 1)) / 2) throw new Error('schedulerRecords: lost records');
  return result('48B scheduler record encode+decode, one thread', records, 48, performance.now() - started);
}

async function stream(name: string, records: number, size: number, batch: number, mode: 'views' | 'inPlace'): Promise<Result> {
  const buffer = createRing(1 << 20);
  const consumer = new RingConsumer(buffer);
  const worker = new Worker(new URL(import.meta.url), { workerData: { kind: 'stream', buffer, records, size, batch } satisfies Job });
  const done = new Promise<{ fullWaits: number }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  let count = 0;
  let bytes = 0;
  const onView = (view: Uint8Array): void => {
    count++;
    bytes += view.length + view[0];
  };
  const onRecord = (offset: number, length: number): void => {
    count++;
    bytes += length + consumer.bytes[offset];
  };
  let wakeups = 0;
  await new Promise((resolve) => worker.once('online', resolve));
  const started = performance.now();
  worker.postMessage('go');
  while (count < records) {
    if (mode === 'views') consumer.drain(onView);
    else consumer.drainInPlace(onRecord);
    if (count < records && !consumer.hasData()) {
      wakeups++;
      await consumer.waitForData();
    }
  }
  const ms = performance.now() - started;
  const { fullWaits } = await done;
  await worker.terminate();
  if (bytes !== records * (size + 7)) throw new Error(`${name}: lost or corrupt records`);
  return { ...result(name, records, size, ms), producerFullWaits: fullWaits, consumerWakeups: wakeups };
}

/** Round trips of one 32-byte record over two rings, both sides sleeping in
 * waitForData between records: the cost of a cross-thread wake-up pair. */
async function pingPong(rounds: number): Promise<Result> {
  const there = createRing(4096);
  const back = createRing(4096);
  const producer = new RingProducer(there);
  const consumer = new RingConsumer(back);
  const worker = new Worker(new URL(import.meta.url), {
    workerData: { kind: 'echo', buffer: there, back, records: rounds, size: 32, batch: 1 } satisfies Job,
  });
  await new Promise((resolve) => worker.once('online', resolve));
  const payload = new Uint8Array(32);
  const started = performance.now();
  for (let i = 0; i < rounds; i++) {
    producer.tryWrite(payload);
    while (consumer.read() === undefined) await consumer.waitForData();
  }
  const ms = performance.now() - started;
  await worker.terminate();
  return result('32B ping-pong round trip (2 wake-ups)', rounds, 32, ms);
}

async function work(job: Job): Promise<void> {
  const port = parentPort!;
  if (job.kind === 'echo') {
    const consumer = new RingConsumer(job.buffer);
    const producer = new RingProducer(job.back!);
    for (let i = 0; i < job.records; i++) {
      let view = consumer.read();
      while (view === undefined) {
        await consumer.waitForData();
        view = consumer.read();
      }
      producer.tryWrite(view);
    }
    return;
  }
  await new Promise((resolve) => port.once('message', resolve));
  const producer = new RingProducer(job.buffer);
  const payload = new Uint8Array(job.size).fill(7);
  let fullWaits = 0;
  if (job.batch === 1) {
    for (let i = 0; i < job.records; i++) {
      if (!producer.tryWrite(payload)) {
        fullWaits++;
        await producer.waitForSpace(job.size);
        producer.tryWrite(payload);
      }
    }
  } else {
    for (let i = 0; i < job.records; i++) {
      let offset = producer.reserve(job.size);
      if (offset < 0) {
        fullWaits++;
        await producer.waitForSpace(job.size); // commits what is reserved first
        offset = producer.reserve(job.size);
      }
      producer.bytes.set(payload, offset);
      if (i % job.batch === job.batch - 1) producer.commit();
    }
    producer.commit();
  }
  port.postMessage({ fullWaits });
}

function result(name: string, records: number, size: number, ms: number): Result {
  return {
    case: name,
    records,
    recordBytes: size,
    ms: Math.round(ms),
    recordsPerSec: Math.round((records / ms) * 1000),
    nsPerRecord: Math.round((ms * 1e6) / records),
    mbPerSec: Math.round((records * size) / ms / 1000),
  };
}
