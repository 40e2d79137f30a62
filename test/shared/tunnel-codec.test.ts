// The hand-written tunnel codec against the generated protobuf-es code, the
// schema's reference: for random hot messages (tunnel requests and their batches, frames, frame
// batches, credits, cancels) it must encode byte for byte what toBinary
// encodes, and decode to exactly what fromBinary builds; everything else
// (other cases, unknown fields, garbage) must decode as fromBinary decodes it,
// errors included. Deterministic (fixed seed; FUZZ_SEED to explore others).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import fc from 'fast-check';
import {
  EdgeMessageSchema,
  FlowCreditSchema,
  FrameBatchSchema,
  HeaderSchema,
  NodeMessageSchema,
  TunnelCancelSchema,
  TunnelFrameSchema,
  TunnelRequestBatchSchema,
  TunnelRequestSchema,
  type EdgeMessage,
  type NodeMessage,
} from '../../src/gen/edge/v1/tunnel_pb.js';
import { decodeEdgeMessage, decodeNodeMessage, encodeEdgeMessage, encodeNodeMessage } from '../../src/shared/tunnel-codec.js';

const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed_c0de);
const RUNS = Number(process.env.FUZZ_RUNS ?? 1500);
const params = { seed: SEED, numRuns: RUNS };

const uint32 = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 0xffff_ffff }));
// Long ones too: the writer takes strings under 128 units, and header entries under 128 bytes, in one optimistic pass.
const text = fc.oneof(
  fc.constant(''),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.string({ minLength: 55, maxLength: 140 }),
  fc.string({ unit: 'binary', minLength: 55, maxLength: 140 }),
);
const bytes = fc.oneof(fc.constant(new Uint8Array(0)), fc.uint8Array({ maxLength: 300 }));
const header = fc.record({ name: text, value: text }).map((h) => create(HeaderSchema, h));
const headers = fc.array(header, { maxLength: 4 });

const request = fc
  .record({
    runId: text,
    tunnelId: uint32,
    providerId: text,
    adapter: fc.integer({ min: 0, max: 4 }),
    target: text,
    method: text,
    path: text,
    headers,
    body: bytes,
    stream: fc.boolean(),
    timeoutMs: uint32,
    metadata: fc.dictionary(text, text, { maxKeys: 3 }),
    sessionId: text,
    initialCredit: uint32,
    ttfbTimeoutMs: uint32,
    idleTimeoutMs: uint32,
  })
  .map((r) => create(TunnelRequestSchema, r));

const frame = fc
  .record({ tunnelId: uint32, seq: uint32, kind: fc.integer({ min: 0, max: 4 }), status: uint32, headers, data: bytes, errorCode: text, errorMessage: text, upstreamUs: uint32 })
  .map((f) => create(TunnelFrameSchema, f));

const edgeMessage: fc.Arbitrary<EdgeMessage> = fc.oneof(
  request.map((value) => create(EdgeMessageSchema, { msg: { case: 'tunnelRequest', value } })),
  fc.array(request, { maxLength: 4 }).map((requests) => create(EdgeMessageSchema, { msg: { case: 'tunnelRequestBatch', value: create(TunnelRequestBatchSchema, { requests }) } })),
  fc.record({ tunnelId: uint32, bytes: uint32 }).map((c) => create(EdgeMessageSchema, { msg: { case: 'credit', value: create(FlowCreditSchema, c) } })),
  fc.record({ tunnelId: uint32, reason: text }).map((c) => create(EdgeMessageSchema, { msg: { case: 'cancel', value: create(TunnelCancelSchema, c) } })),
  fc.double({ noNaN: true }).map((unixMs) => create(EdgeMessageSchema, { msg: { case: 'heartbeat', value: { unixMs } } })),
  fc.constant(create(EdgeMessageSchema, {})),
);

const nodeMessage: fc.Arbitrary<NodeMessage> = fc.oneof(
  frame.map((value) => create(NodeMessageSchema, { msg: { case: 'frame', value } })),
  fc.array(frame, { maxLength: 5 }).map((frames) => create(NodeMessageSchema, { msg: { case: 'frameBatch', value: create(FrameBatchSchema, { frames }) } })),
  text.map((reason) => create(NodeMessageSchema, { msg: { case: 'leaving', value: { reason } } })),
  fc.constant(create(NodeMessageSchema, {})),
);

/** fromBinary's answer, or the error it throws. */
function reference<Desc extends DescMessage>(schema: Desc, input: Buffer): MessageShape<Desc> | Error {
  try {
    return fromBinary(schema, input);
  } catch (err) {
    return err as Error;
  }
}

function ours<T>(decode: (bytes: Uint8Array) => T, input: Buffer): T | Error {
  try {
    return decode(input);
  } catch (err) {
    return err as Error;
  }
}

function sameDecoding(actual: unknown, expected: unknown): void {
  if (expected instanceof Error) {
    assert.ok(actual instanceof Error, 'fromBinary throws, so must the codec');
    return;
  }
  assert.deepStrictEqual(actual, expected);
}

test('EdgeMessage: byte-identical to toBinary, decodes to what fromBinary builds', () => {
  fc.assert(
    fc.property(edgeMessage, (message) => {
      const generated = Buffer.from(toBinary(EdgeMessageSchema, message));
      assert.deepStrictEqual(encodeEdgeMessage(message), generated);
      assert.deepStrictEqual(decodeEdgeMessage(generated), fromBinary(EdgeMessageSchema, generated));
    }),
    params,
  );
});

test('NodeMessage: byte-identical to toBinary, decodes to what fromBinary builds', () => {
  fc.assert(
    fc.property(nodeMessage, (message) => {
      const generated = Buffer.from(toBinary(NodeMessageSchema, message));
      assert.deepStrictEqual(encodeNodeMessage(message), generated);
      assert.deepStrictEqual(decodeNodeMessage(generated), fromBinary(NodeMessageSchema, generated));
    }),
    params,
  );
});

test('strings and header entries at the one-byte length boundary (127/128 bytes, ASCII or not) encode as toBinary does', () => {
  const ascii = (n: number): string => 'a'.repeat(n);
  const wide = (n: number): string => `é${'a'.repeat(Math.max(0, n - 1))}`;
  for (const make of [ascii, wide]) {
    const headers = [];
    // An entry of name + value is 2 + n + 2 + v bytes (ASCII): around 128 in total.
    for (let total = 124; total <= 130; total++) headers.push(create(HeaderSchema, { name: make(10), value: make(total - 14) }));
    for (let n = 125; n <= 130; n++) headers.push(create(HeaderSchema, { name: make(n), value: '' }), create(HeaderSchema, { name: '', value: make(n) }));
    const request = create(TunnelRequestSchema, { runId: make(127), providerId: make(128), path: make(126), headers, metadata: { [make(127)]: make(128) } });
    const frame = create(TunnelFrameSchema, { tunnelId: 1, kind: 1, status: 200, headers, errorMessage: make(127) });
    for (const message of [create(EdgeMessageSchema, { msg: { case: 'tunnelRequest', value: request } }), create(EdgeMessageSchema, { msg: { case: 'tunnelRequestBatch', value: create(TunnelRequestBatchSchema, { requests: [request, request] }) } })]) {
      assert.deepStrictEqual(encodeEdgeMessage(message), Buffer.from(toBinary(EdgeMessageSchema, message)));
    }
    const node = create(NodeMessageSchema, { msg: { case: 'frameBatch', value: create(FrameBatchSchema, { frames: [frame, frame] }) } });
    assert.deepStrictEqual(encodeNodeMessage(node), Buffer.from(toBinary(NodeMessageSchema, node)));
  }
});

test('unknown fields, repeated oneof fields, truncation and garbage decode as fromBinary decodes them', () => {
  const tail = fc.uint8Array({ minLength: 1, maxLength: 12 });
  fc.assert(
    fc.property(edgeMessage, nodeMessage, tail, fc.nat(), (edge, node, extra, cut) => {
      for (const [encoded, schema, decode] of [
        [Buffer.from(toBinary(EdgeMessageSchema, edge)), EdgeMessageSchema, decodeEdgeMessage],
        [Buffer.from(toBinary(NodeMessageSchema, node)), NodeMessageSchema, decodeNodeMessage],
      ] as const) {
        const variants = [Buffer.concat([encoded, extra]), Buffer.concat([encoded, encoded]), encoded.subarray(0, cut % (encoded.length + 1)), Buffer.from(extra)];
        // An unknown field inside the hot message: its length prefix grows by the field's size.
        if (encoded.length > 2 && encoded[1] < 0x70) variants.push(Buffer.concat([Buffer.from([encoded[0], encoded[1] + 3]), encoded.subarray(2), Buffer.from([0xf8, 0x07, 0x01])]));
        for (const input of variants) sameDecoding(ours(decode as (b: Uint8Array) => unknown, input), reference(schema, input));
      }
    }),
    params,
  );
});

test('a decoded request keeps its body as a view of the received bytes (no copy)', () => {
  const body = Buffer.alloc(4096, 7);
  const encoded = encodeEdgeMessage(create(EdgeMessageSchema, { msg: { case: 'tunnelRequest', value: create(TunnelRequestSchema, { tunnelId: 9, body }) } }));
  const decoded = decodeEdgeMessage(encoded);
  assert.equal(decoded.msg.case, 'tunnelRequest');
  const got = decoded.msg.value as { body: Uint8Array };
  assert.equal(got.body.buffer, encoded.buffer);
  assert.deepStrictEqual(Buffer.from(got.body), body);
});
