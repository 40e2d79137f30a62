// Scheduler records over a ring (src/shared/ring/fixed-records.ts): every kind
// round-trips through the ring in place, names cross once per ring, and a
// full ring is backpressure for names as for records.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ReleaseReason } from '../../src/contract/scheduler.js';
import type { AdmissionRejectCode } from '../../src/contract/scheduler-port.js';
import {
  RECORD_BYTES,
  RecordKind,
  RecordReader,
  RecordWriter,
  SchedulerRecord,
  decodeFairness,
  encodeFairness,
  rejectCodeCode,
  rejectCodeOf,
  releaseReasonCode,
  releaseReasonOf,
} from '../../src/contract/scheduler-records.js';
import { RingConsumer, RingProducer, createRing, recordBytes } from '../../src/shared/ring/spsc-ring.js';

function pair(capacity: number): { writer: RecordWriter; reader: RecordReader; producer: RingProducer; consumer: RingConsumer } {
  const buffer = createRing(capacity);
  const producer = new RingProducer(buffer);
  const consumer = new RingConsumer(buffer);
  return { writer: new RecordWriter(producer), reader: new RecordReader(consumer.view, consumer.bytes), producer, consumer };
}

/** Drains the ring and returns each scheduler record as a plain object. */
function receive(consumer: RingConsumer, reader: RecordReader): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const record = new SchedulerRecord();
  consumer.drainInPlace((offset, length) => {
    if (reader.decode(offset, length, record)) out.push({ ...record });
  });
  return out;
}

test('an admit carries its session key (53 bits) across the ring', () => {
  const { writer, reader, consumer } = pair(4096);
  const out = new SchedulerRecord().reset(RecordKind.admit);
  out.requestId = 5;
  out.session = Number.MAX_SAFE_INTEGER - 0xfedcba98;
  assert.equal(writer.write(out), true);
  const [admit] = receive(consumer, reader);
  assert.equal(admit.session, Number.MAX_SAFE_INTEGER - 0xfedcba98);
});

test('an admit carries its fair-queuing priority (negative too), tenant key and weight, its key\'s rate; a release its reported tokens', () => {
  const { writer, reader, consumer } = pair(4096);
  const admit = new SchedulerRecord().reset(RecordKind.admit);
  admit.requestId = 9;
  admit.rate = 10_000_000; // the most requests_per_minute takes
  encodeFairness(admit, { priority: -3, tenantKey: 0xfedcba98, weight: 7 });
  assert.equal(writer.write(admit), true);
  const plain = new SchedulerRecord().reset(RecordKind.admit);
  plain.requestId = 10;
  encodeFairness(plain, {});
  assert.equal(writer.write(plain), true);
  const release = new SchedulerRecord().reset(RecordKind.release);
  release.leaseId = 3;
  release.value = 1234;
  assert.equal(writer.write(release), true);
  const got: { priority: number; tenantKey: number; weight: number; rate: number }[] = [];
  const values: number[] = [];
  const record = new SchedulerRecord();
  consumer.drainInPlace((offset, length) => {
    if (!reader.decode(offset, length, record)) return;
    if (record.kind === RecordKind.admit) got.push({ ...decodeFairness(record), rate: record.rate });
    else values.push(record.value);
  });
  assert.deepEqual(got, [
    { priority: -3, tenantKey: 0xfedcba98, weight: 7, rate: 10_000_000 },
    { priority: 0, tenantKey: 0, weight: 1, rate: 0 },
  ]);
  assert.deepEqual(values, [1234]);
});

test('a grant crosses the ring with its names, ids up to 2^53 and fractional queuedMs intact', () => {
  const { writer, reader, consumer } = pair(4096);
  const out = new SchedulerRecord().reset(RecordKind.grant);
  out.requestId = 2 ** 53 - 1;
  out.leaseId = 4_294_967_297; // past u32: the scheduler's counter never wraps
  out.generation = 7;
  out.nodeId = writer.intern('gpu-node-1');
  out.providerId = writer.intern('ollama-a');
  out.nameId = writer.intern('llama3:8b-instruct ✓');
  out.value = 12.375;
  assert.equal(writer.write(out), true);

  const [grant] = receive(consumer, reader);
  assert.deepEqual(grant, {
    kind: RecordKind.grant,
    code: 0,
    worker: 0,
    generation: 7,
    requestId: 2 ** 53 - 1,
    leaseId: 4_294_967_297,
    nodeId: out.nodeId,
    providerId: out.providerId,
    rate: 0,
    nameId: out.nameId,
    session: 0,
    extraId: 0,
    aux: 0,
    value: 12.375,
  });
  assert.equal(reader.nameOf(out.nodeId), 'gpu-node-1');
  assert.equal(reader.nameOf(out.providerId), 'ollama-a');
  assert.equal(reader.nameOf(out.nameId), 'llama3:8b-instruct ✓');
  assert.equal(reader.nameOf(0), undefined);
});

test('every kind round-trips, and names are sent once per ring', () => {
  const { writer, reader, producer, consumer } = pair(4096);
  const r = new SchedulerRecord();
  const sent: Record<string, unknown>[] = [];
  const send = (): void => {
    assert.equal(writer.write(r), true);
    sent.push({ ...r });
  };
  r.reset(RecordKind.admit);
  r.requestId = 1;
  r.nameId = writer.intern('chat');
  r.nodeId = writer.intern('n1');
  r.value = 1234;
  send();
  const before = producer.usage().used;
  r.reset(RecordKind.admit);
  r.requestId = 2;
  r.nameId = writer.intern('chat'); // known: no second string record
  r.value = 5;
  send();
  assert.equal(producer.usage().used - before, recordBytes(RECORD_BYTES));
  r.reset(RecordKind.reject);
  r.requestId = 2;
  r.code = rejectCodeCode('queue_full');
  r.value = 3;
  send();
  r.reset(RecordKind.release);
  r.leaseId = 9;
  r.requestId = 1;
  r.code = releaseReasonCode('client_closed');
  send();
  r.reset(RecordKind.confirm);
  r.leaseId = 9;
  r.code = 1;
  send();
  r.reset(RecordKind.connect);
  r.nodeId = writer.intern('n1');
  r.generation = 3;
  send();
  r.reset(RecordKind.disconnect);
  r.nodeId = writer.intern('n2');
  r.generation = 3;
  send();
  // An admit of a key with max_concurrent: its name in providerId, its limit in generation.
  r.reset(RecordKind.admit);
  r.requestId = 3 * 64 + 5;
  r.nameId = writer.intern('chat');
  r.providerId = writer.intern('alice');
  r.generation = 1_000_000;
  send();
  r.reset(RecordKind.reject);
  r.requestId = 3 * 64 + 5;
  r.code = rejectCodeCode('too_many_concurrent_requests');
  r.value = 1;
  send();
  r.reset(RecordKind.keyRelease);
  r.requestId = 3 * 64 + 5;
  send();

  assert.deepEqual(receive(consumer, reader), sent);
  assert.equal(reader.nameOf(1), 'chat');
  assert.equal(reader.nameOf(2), 'n1');
  assert.equal(reader.nameOf(3), 'n2');
  assert.equal(reader.nameOf(4), 'alice');
  assert.equal(rejectCodeOf(sent[8].code as number), 'too_many_concurrent_requests');
  assert.equal(rejectCodeOf(sent[2].code as number), 'queue_full');
  assert.equal(releaseReasonOf(sent[3].code as number), 'client_closed');
});

test('every release reason and reject code has its own code and maps back', () => {
  const reasons: ReleaseReason[] = ['end', 'error', 'client_closed', 'send_failed', 'body_build_failed', 'timeout', 'fenced', 'stale_generation', 'provider_failed', 'run_cancelled', 'overloaded', 'shutting_down'];
  const codes: AdmissionRejectCode[] = ['model_not_found', 'node_not_found', 'queue_full', 'queue_timeout', 'no_provider_available', 'too_many_concurrent_requests'];
  assert.equal(new Set(reasons.map(releaseReasonCode)).size, reasons.length);
  assert.equal(new Set(codes.map(rejectCodeCode)).size, codes.length);
  for (const reason of reasons) assert.equal(releaseReasonOf(releaseReasonCode(reason)), reason);
  for (const code of codes) assert.equal(rejectCodeOf(rejectCodeCode(code)), code);
  assert.throws(() => releaseReasonOf(0), RangeError);
  assert.throws(() => rejectCodeOf(200), RangeError);
});

test('a full ring refuses names and records alike, and both succeed once drained', () => {
  const { writer, reader, consumer } = pair(256); // room for 3 records of 68 bytes (64 + 4 length)
  const r = new SchedulerRecord().reset(RecordKind.release);
  let written = 0;
  while (writer.write(r)) written++;
  assert.equal(written, 3);
  // 256 - 204 = 52 free: 'a-long-node-name-that-does-not-fit-now-xxxxx' needs 8 + 44 + 4.
  const name = 'a-long-node-name-that-does-not-fit-now-xxxxx';
  assert.equal(writer.intern(name), 0);
  assert.equal(receive(consumer, reader).length, 3);
  const id = writer.intern(name);
  assert.equal(id, 1, 'the refused name was not interned');
  r.reset(RecordKind.connect).nodeId = id;
  assert.equal(writer.write(r), true);
  const [connect] = receive(consumer, reader);
  assert.equal(reader.nameOf(connect.nodeId as number), name);
});

test('a record of the wrong size is refused, not misread', () => {
  const { producer, consumer, reader } = pair(256);
  assert.equal(producer.tryWrite(new Uint8Array(12)), true); // kind 0, 12 bytes
  const out = new SchedulerRecord();
  assert.throws(
    () => consumer.drainInPlace((offset, length) => reader.decode(offset, length, out)),
    /scheduler record of 12 bytes, expected 64/,
  );
});
