// Worker side of the ring tests (test/shared/ring.test.ts). One mode per test,
// chosen by workerData.mode; results go back with postMessage. Waits here are
// async too (waitForSpace/waitForData), as on the main thread.
import { parentPort, workerData } from 'node:worker_threads';
import { RingConsumer, RingProducer } from '../../src/shared/ring/spsc-ring.js';
import { SizeStream, checkPayload, fillPayload } from './ring-worker-payload.js';

export interface StressJob {
  mode: 'produce' | 'consume';
  buffer: SharedArrayBuffer;
  seed: number;
  count: number;
  maxLength: number;
}
export interface StressResult {
  records: number;
  fullWaits: number;
  notifies: number;
  ms: number;
  error?: string;
}
export interface WakeJob {
  mode: 'write-on-message' | 'drain-on-message';
  buffer: SharedArrayBuffer;
}
export interface WakeResult {
  records: number;
  notifies: number;
}

const port = parentPort;
if (port === null) throw new Error('ring-worker.ts runs as a worker thread');
const job = workerData as StressJob | WakeJob;

switch (job.mode) {
  case 'produce':
    port.postMessage(await produce(job));
    break;
  case 'consume':
    port.postMessage(await consume(job));
    break;
  case 'write-on-message': {
    const producer = new RingProducer(job.buffer);
    port.on('message', (payload: Uint8Array) => {
      producer.tryWrite(payload);
      port.postMessage({ records: 1, notifies: producer.notifies } satisfies WakeResult);
    });
    break;
  }
  case 'drain-on-message': {
    const consumer = new RingConsumer(job.buffer);
    port.on('message', () => {
      const records = consumer.drain(() => {});
      port.postMessage({ records, notifies: consumer.notifies } satisfies WakeResult);
    });
    break;
  }
}

/** Writes job.count records encoded in place (reserve/commit), committing in
 * batches of up to 8; a full ring is waited out, never skipped. */
async function produce(job: StressJob): Promise<StressResult> {
  const producer = new RingProducer(job.buffer);
  const words = new Uint32Array(job.buffer);
  const sizes = new SizeStream(job.seed);
  const started = performance.now();
  let fullWaits = 0;
  for (let seq = 0; seq < job.count; seq++) {
    const length = sizes.next(job.maxLength);
    let offset = producer.reserve(length);
    if (offset < 0) {
      fullWaits++;
      if (!(await producer.waitForSpace(length, 10_000))) throw new Error(`producer: no space after 10 s at record ${seq}`);
      offset = producer.reserve(length);
    }
    fillPayload(producer.bytes, words, offset, length, job.seed, seq);
    if ((seq & 7) === 7) producer.commit();
  }
  producer.commit();
  return { records: job.count, fullWaits, notifies: producer.notifies, ms: performance.now() - started };
}

/** Reads and verifies job.count records with drainInPlace, in batches of
 * varying size. Stops at the first bad record and reports it. */
async function consume(job: StressJob): Promise<StressResult> {
  const consumer = new RingConsumer(job.buffer);
  const words = new Uint32Array(job.buffer);
  const sizes = new SizeStream(job.seed);
  const started = performance.now();
  let seq = 0;
  let error: string | undefined;
  const verify = (offset: number, length: number): void => {
    if (error !== undefined) return;
    error = checkPayload(consumer.bytes, words, offset, length, sizes.next(job.maxLength), job.seed, seq);
    seq++;
  };
  while (seq < job.count && error === undefined) {
    consumer.drainInPlace(verify, 1 + (seq % 97));
    if (seq < job.count && !(await consumer.waitForData(10_000))) error = `consumer: no data after 10 s at record ${seq}`;
  }
  if (error === undefined && consumer.read() !== undefined) error = `consumer: a record beyond the ${job.count} written`;
  const result: StressResult = { records: seq, fullWaits: 0, notifies: consumer.notifies, ms: performance.now() - started };
  if (error !== undefined) result.error = error;
  return result;
}
