// Property tests: inspectBody's verdict equals JSON.parse's (inspect-oracle.ts)
// on generated JSON, arbitrary text and mutated valid bodies, and the rewrite
// round-trips. Deterministic (fixed seed, FUZZ_SEED to explore others);
// FUZZ_RUNS scales the budget (default ~1-2 s on a small machine).
//
// Invalid UTF-8: JSON.parse only sees decoded text, where ill-formed bytes
// became U+FFFD and parse fine. The inspector rejects them as invalid_json
// (a gateway must not forward bytes the provider would decode differently),
// so the oracle treats any body that is not well-formed UTF-8 as invalid.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { inspectBody, rewriteModel } from '../../src/workers/http/inspect.js';
import { actualVerdict, expectedVerdict, isDuplicateMemberRejection } from './inspect-oracle.js';

const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed_2024);
const RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const options = { seed: SEED, numRuns: RUNS };

function assertAgrees(body: Uint8Array): void {
  const result = inspectBody(body);
  const expected = expectedVerdict(body);
  const actual = actualVerdict(result);
  if (isDuplicateMemberRejection(body, result) && expected.kind !== 'invalid_json' && expected.kind !== 'not_object') return;
  assert.deepEqual(actual, expected, `body ${JSON.stringify(Buffer.from(body).toString('latin1'))}: ${JSON.stringify(result)}`);
}

// Characters that make strings interesting to a JSON scanner.
const trickyChar = fc.constantFrom('"', '\\', '\n', '\t', '\u0000', '\u001f', '/', 'é', '😀', '\u2028', '\ud800', '\udc00', 'a', ' ', 'u');
const trickyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.string({ unit: trickyChar, maxLength: 30 }),
  // long enough to cross the scanner's word and native tiers
  fc.string({ unit: fc.oneof({ weight: 30, arbitrary: fc.constant('a') }, { weight: 1, arbitrary: trickyChar }), minLength: 200, maxLength: 900 }),
);
const jsonValue = fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' });

/** Chat-like request objects: top-level model and stream of any type, members in any order. */
const requestBody = fc
  .record({
    model: fc.oneof({ weight: 6, arbitrary: trickyString }, { weight: 1, arbitrary: jsonValue }),
    stream: fc.option(fc.oneof(fc.boolean(), jsonValue), { nil: undefined }),
    messages: fc.array(fc.record({ role: fc.constantFrom('user', 'system'), content: trickyString, model: fc.option(trickyString) }), { maxLength: 3 }),
    extra: fc.dictionary(fc.string({ unit: 'binary', maxLength: 8 }), jsonValue, { maxKeys: 3 }),
    order: fc.nat(),
    indent: fc.constantFrom(undefined, 0, 1, 2, '\t', '\r\n'),
  })
  .map(({ model, stream, messages, extra, order, indent }) => {
    const entries: Array<[string, unknown]> = [['messages', messages], ...Object.entries(extra).filter(([k]) => k !== 'model' && k !== 'stream')];
    entries.splice(order % (entries.length + 1), 0, ['model', model]);
    if (stream !== undefined) entries.splice((order >> 3) % (entries.length + 1), 0, ['stream', stream]);
    const obj: Record<string, unknown> = {};
    for (const [k, v] of entries) obj[k] = v;
    return Buffer.from(JSON.stringify(obj, null, indent), 'utf8');
  });

const INTERESTING_BYTES = [0x7b, 0x7d, 0x5b, 0x5d, 0x22, 0x3a, 0x2c, 0x5c, 0x20, 0x0a, 0x00, 0x1f, 0x30, 0x31, 0x2d, 0x2e, 0x65, 0x75, 0x74, 0x6e, 0x80, 0xc3, 0xed, 0xff];
const mutation = fc.oneof(
  fc.record({ op: fc.constant('set' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), byte: fc.oneof(fc.constantFrom(...INTERESTING_BYTES), fc.integer({ min: 0, max: 255 })) }),
  fc.record({ op: fc.constant('insert' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), byte: fc.constantFrom(...INTERESTING_BYTES) }),
  fc.record({ op: fc.constant('delete' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), byte: fc.integer({ min: 1, max: 4 }) }),
  fc.record({ op: fc.constant('truncate' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), byte: fc.constant(0) }),
);

function mutate(body: Buffer, mutations: ReadonlyArray<{ op: 'set' | 'insert' | 'delete' | 'truncate'; at: number; byte: number }>): Buffer {
  let out = body;
  for (const { op, at, byte } of mutations) {
    const i = Math.min(out.length, Math.floor(at * out.length));
    if (op === 'set' && i < out.length) {
      out = Buffer.from(out);
      out[i] = byte;
    } else if (op === 'insert') out = Buffer.concat([out.subarray(0, i), Buffer.from([byte]), out.subarray(i)]);
    else if (op === 'delete') out = Buffer.concat([out.subarray(0, i), out.subarray(i + byte)]);
    else if (op === 'truncate') out = out.subarray(0, i);
  }
  return out;
}

test('fuzz: generated JSON values get the same verdict as JSON.parse', () => {
  fc.assert(
    fc.property(jsonValue, fc.constantFrom(undefined, 2), (value, indent) => {
      assertAgrees(Buffer.from(JSON.stringify(value, null, indent) ?? 'null', 'utf8'));
      assertAgrees(Buffer.from(JSON.stringify({ model: value }), 'utf8'));
    }),
    options,
  );
});

test('fuzz: request bodies get the same verdict, model and stream as JSON.parse', () => {
  fc.assert(fc.property(requestBody, assertAgrees), options);
});

test('fuzz: arbitrary text and bytes get the same verdict as JSON.parse', () => {
  const jsonish = fc.string({ unit: fc.constantFrom(...'{}[]":,\\ \n0123456789-+.eEtruefalsnl'.split(''), 'model', 'stream', '"model":', '\\u00'), maxLength: 40 });
  fc.assert(
    fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 60 }), jsonish), (text) => assertAgrees(Buffer.from(text, 'utf8'))),
    options,
  );
  fc.assert(fc.property(fc.uint8Array({ maxLength: 60 }), assertAgrees), options);
});

test('fuzz: mutated valid bodies get the same verdict as JSON.parse', () => {
  fc.assert(fc.property(requestBody, fc.array(mutation, { minLength: 1, maxLength: 3 }), (body, mutations) => assertAgrees(mutate(body, mutations))), options);
});

test('fuzz: rewriting a valid body changes only model, to exactly the served name', () => {
  const validBody = requestBody.filter((body) => inspectBody(body).ok);
  fc.assert(
    fc.property(validBody, fc.string({ unit: 'binary', maxLength: 40 }), (body, served) => {
      const info = inspectBody(body);
      assert.ok(info.ok);
      const out = rewriteModel(body, info, served);
      assert.deepEqual(JSON.parse(out.toString('utf8')), { ...(JSON.parse(body.toString('utf8')) as object), model: served });
      assert.ok(out.subarray(0, info.modelStart).equals(body.subarray(0, info.modelStart)));
      assert.ok(out.subarray(out.length - (body.length - info.modelEnd)).equals(body.subarray(info.modelEnd)));
      const again = inspectBody(out);
      if (served === '') assert.equal(!again.ok && again.kind, 'empty_model');
      else assert.deepEqual(again.ok && [again.model, again.stream], [served, info.stream]);
    }),
    options,
  );
});
