// The run wire (I/O worker -> main thread run records): what the main thread
// reads back is what the worker reported, names and run ids travel once, and
// the encoder's slots do not outlive their runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RUN_WIRE_NAME_LIMIT, RunWireDecoder, RunWireEncoder, type RunWireBatch } from '../../src/contract/run-wire.js';
import type { RunEvent } from '../../src/contract/events.js';

function lifecycle(n: number, extra: Partial<{ requestId: string; error: string; tokens: { prompt: number; completion: number } | null; node: string | null; outcome: string; model: string; key: string }> = {}): RunEvent[] {
  const runId = `run-abc-${n.toString(36)}`;
  const model = extra.model ?? 'llama3';
  const node = extra.node === undefined ? 'gpu-1' : extra.node;
  return [
    { type: 'run.queued', runId, requestId: extra.requestId ?? runId, model, session: 'default', ...(extra.key === undefined ? {} : { key: extra.key }), at: 1_700_000_000_000 + n },
    { type: 'run.dispatched', runId, model, node: 'gpu-1', provider: 'ollama-a', adapter: 'http', attempt: 1, queueMs: 0.125, at: 1_700_000_000_001 + n },
    { type: 'run.first_byte', runId, model, ttfbMs: 3.5, at: 1_700_000_000_004 + n },
    {
      type: 'run.finished',
      runId,
      requestId: extra.requestId ?? runId,
      model,
      node,
      provider: node === null ? null : 'ollama-a',
      status: extra.error === undefined ? 200 : 502,
      outcome: extra.outcome ?? 'end',
      totalMs: 9.25,
      queueMs: 0.125,
      bytesOut: 2048,
      at: 1_700_000_000_010 + n,
      tokens: extra.tokens === undefined ? { prompt: 12, completion: 34 } : extra.tokens,
      ...(extra.error === undefined ? {} : { error: extra.error }),
    },
  ];
}

/** As the event stream and the admin API see an event: its JSON. */
const json = (events: readonly RunEvent[]): unknown => JSON.parse(JSON.stringify(events));

/** What a batch costs on the wire after structured clone: its numbers and its strings. */
function roundTrip(encoder: RunWireEncoder, decoder: RunWireDecoder, events: RunEvent[]): { batch: RunWireBatch; decoded: RunEvent[] } {
  const batch = encoder.encode(events);
  const cloned = structuredClone(batch);
  return { batch, decoded: decoder.decode(cloned) };
}

test('a turn of reports reads back as the same events, in order', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const events = [...lifecycle(1), ...lifecycle(2, { requestId: 'client-tag-7', error: 'provider said no', tokens: null, outcome: 'error', key: 'team-a' }), ...lifecycle(4, { key: 'team-a' })];
  const { decoded } = roundTrip(encoder, decoder, events);
  assert.deepEqual(json(decoded), json(events));
  // The key's name travels once, as a name.
  assert.deepEqual(decoded.map((e) => (e.type === 'run.queued' ? e.key : null)).filter((k) => k !== null), [undefined, 'team-a', 'team-a']);
  assert.equal(encoder.openRuns, 0);
});

test('a run sent back to the queue and granted again reads back the same', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const [queued, dispatched, firstByte, finished] = lifecycle(3);
  const events: RunEvent[] = [
    queued,
    dispatched,
    { type: 'run.requeued', runId: queued.runId, model: 'llama3', reason: 'provider_overloaded', node: 'gpu-1', provider: 'ollama-a', at: 1_700_000_000_002 },
    { type: 'run.requeued', runId: queued.runId, model: 'llama3', reason: 'stale', node: null, provider: null, at: 1_700_000_000_002 },
    { ...dispatched, attempt: 2 } as RunEvent,
    firstByte,
    finished,
  ];
  assert.deepEqual(json(roundTrip(encoder, decoder, events).decoded), json(events));
  assert.equal(encoder.openRuns, 0);
});

test('names and run ids cross once: a later turn carries only numbers for known names and open runs', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const [queued, dispatched, firstByte, finished] = lifecycle(5);
  const first = roundTrip(encoder, decoder, [queued]);
  assert.deepEqual(first.batch.strings.includes('llama3'), true);
  assert.deepEqual(first.batch.strings.filter((s) => s === queued.runId).length, 1);
  const later = roundTrip(encoder, decoder, [dispatched, firstByte]);
  // The node, provider and adapter are new; the model and the run id are not.
  assert.deepEqual([...later.batch.strings].sort(), ['gpu-1', 'http', 'ollama-a']);
  const last = roundTrip(encoder, decoder, [finished]);
  assert.deepEqual(last.batch.strings, ['end']);
  assert.deepEqual(json([...first.decoded, ...later.decoded, ...last.decoded]), json(lifecycle(5)));
  const again = roundTrip(encoder, decoder, lifecycle(6));
  assert.deepEqual(again.batch.strings, [lifecycle(6)[0].runId]);
  assert.deepEqual(json(again.decoded), json(lifecycle(6)));
});

test('a freed slot is reused by the next run, which reads back under its own id', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const a = lifecycle(10);
  const b = lifecycle(11);
  const c = lifecycle(12);
  // c opens (slot 1), a opens (slot 2) and finishes; b then opens while c is still open beside it.
  const first = roundTrip(encoder, decoder, [c[0], ...a]);
  const second = roundTrip(encoder, decoder, [b[0], c[1], b[1], b[2], b[3], c[2], c[3]]);
  // The second batch opens with b's QUEUED op (op 1), its slot next: a's, 2.
  assert.deepEqual([second.batch.numbers[0], second.batch.numbers[1]], [1, 2]);
  assert.deepEqual(json([...first.decoded, ...second.decoded]), json([c[0], ...a, b[0], c[1], b[1], b[2], b[3], c[2], c[3]]));
  assert.equal(encoder.openRuns, 0);
  assert.deepEqual(decoder.openRuns(), []);
});

test('within one batch: a run finishes, the next takes its slot, and a late report of the first still reads as its own', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const a = lifecycle(30);
  const b = lifecycle(31);
  const late: RunEvent = { type: 'run.first_byte', runId: a[0].runId, model: 'llama3', ttfbMs: 1, at: 5 };
  const events = [a[0], a[3], b[0], late, b[1], b[3]];
  const { decoded } = roundTrip(encoder, decoder, events);
  assert.deepEqual(json(decoded), json(events));
});

test('the runs a worker leaves open are known to the decoder, with their model and queued time', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const a = lifecycle(40);
  const b = lifecycle(41, { model: 'qwen', requestId: 'client-tag-41' });
  roundTrip(encoder, decoder, [a[0], b[0], a[1], b[1], a[3]]);
  assert.deepEqual(decoder.openRuns(), [{ runId: b[0].runId, requestId: 'client-tag-41', model: 'qwen', queuedAt: (b[0] as { at: number }).at }]);
  assert.equal(encoder.openRuns, 1);
});

test("clients' sessions take at most half the name table: models met later still get names", () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const events: RunEvent[] = [];
  for (let i = 0; i < RUN_WIRE_NAME_LIMIT; i++) events.push({ type: 'run.queued', runId: `r-${i}`, requestId: `r-${i}`, model: 'llama3', session: `conversation-${i}`, at: i });
  roundTrip(encoder, decoder, events);
  const first = roundTrip(encoder, decoder, lifecycle(50, { model: 'model-met-late' }));
  assert.ok(first.batch.strings.includes('model-met-late'), 'sent once, with its NAME op');
  const again = roundTrip(encoder, decoder, lifecycle(51, { model: 'model-met-late' }));
  assert.ok(!again.batch.strings.includes('model-met-late'), 'then by id');
  assert.deepEqual(json(again.decoded), json(lifecycle(51, { model: 'model-met-late' })));
});

test('reports with no queued report before them, run.started, and a run without a node read back', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const refused = lifecycle(20, { node: null, outcome: 'queue_full', tokens: null })[3];
  const started: RunEvent = { type: 'run.started', runId: 'run-x-1', requestId: 'tag-1', model: 'llama3', node: 'gpu-1', provider: 'ollama-a', queueMs: 1 };
  const { decoded } = roundTrip(encoder, decoder, [refused, started]);
  assert.deepEqual(json(decoded), json([refused, started]));
  assert.equal(encoder.openRuns, 0);
});

test('past the name table bound, and for long names, texts go inline and still read back', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  const events: RunEvent[] = [];
  for (let i = 0; i < RUN_WIRE_NAME_LIMIT + 50; i++) events.push(...lifecycle(100 + i, { model: `model-${i}` }));
  events.push(...lifecycle(99_999, { model: 'm'.repeat(300) }));
  const { batch, decoded } = roundTrip(encoder, decoder, events);
  assert.equal(decoded.length, events.length);
  assert.deepEqual(json(decoded), json(events));
  // Each name past the bound goes inline once per report that names it (4 a run).
  assert.equal(batch.strings.filter((s) => s === `model-${RUN_WIRE_NAME_LIMIT + 10}`).length, 4);
  assert.equal(encoder.openRuns, 0);
});

test('a malformed batch is refused with a message, and nothing after it is misread', () => {
  const encoder = new RunWireEncoder();
  const decoder = new RunWireDecoder();
  assert.ok(!decoder.broken);
  // FIRST_BYTE of slot 3, which no queued report opened.
  assert.throws(() => decoder.decode({ type: 'runWire', numbers: new Float64Array([3, 3, 1, 1, 1]), strings: [] }), /slot 3 is not open/);
  assert.ok(decoder.broken);
  // A well-formed batch after it is refused too: the failed one may have defined names and slots it refers to.
  assert.throws(() => decoder.decode(encoder.encode(lifecycle(60))), /an earlier batch could not be read/);
  const other = new RunWireDecoder();
  assert.throws(() => other.decode({ type: 'runWire', numbers: new Float64Array([42]), strings: [] }), /unknown op 42/);
});
