// Micro-benchmark of the tunnel codec: the messages one closed-loop request
// puts on the gRPC stream (a tunnel request with a 2 KB body; a headers, a
// data and an end frame, alone and as one batch), encoded and decoded by the
// generated protobuf-es code and by src/shared/tunnel-codec.ts. Single
// thread, CPU-bound, so it reads the same on a busy machine as on an idle
// one, unlike the end-to-end figures.
//
//   node dist/bench/profile/codec-micro.js [--ms 400]
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { EdgeMessageSchema, FrameKind, NodeMessageSchema, TunnelFrameSchema, TunnelRequestSchema } from '../../src/gen/edge/v1/tunnel_pb.js';
import { decodeEdgeMessage, decodeNodeMessage, encodeEdgeMessage, encodeNodeMessage } from '../../src/shared/tunnel-codec.js';
import { chatBody } from '../harness/bodies.js';

const at = process.argv.indexOf('--ms');
const budgetMs = at >= 0 ? Number(process.argv[at + 1]) : 400;

const h = (name: string, value: string) => ({ name, value });
const request = create(EdgeMessageSchema, {
  msg: {
    case: 'tunnelRequest',
    value: create(TunnelRequestSchema, {
      runId: 'run_01JD5Z8K3Q4W7E2R9T6Y1U0I8O',
      tunnelId: 123_456,
      providerId: 'bench-mock',
      adapter: 3,
      target: 'bench-model-served',
      method: 'POST',
      path: '/v1/chat/completions',
      headers: [h('content-type', 'application/json'), h('user-agent', 'autocannon'), h('accept', '*/*'), h('x-request-id', 'req_8f1c2a')],
      body: chatBody('bench-model-served', 2048),
      timeoutMs: 600_000,
      metadata: { model: 'bench-model' },
      initialCredit: 1_048_576,
      ttfbTimeoutMs: 60_000,
      idleTimeoutMs: 60_000,
    }),
  },
});
const frame = (seq: number, kind: FrameKind, extra: object) => create(TunnelFrameSchema, { tunnelId: 123_456, seq, kind, ...extra });
const headers = frame(0, FrameKind.HEADERS, { status: 200, headers: [h('content-type', 'application/json'), h('content-length', '412'), h('date', 'Tue, 01 Dec 2026 15:00:00 GMT'), h('x-request-id', 'req_8f1c2a')] });
const data = frame(1, FrameKind.DATA, { data: Buffer.alloc(412, 'a') });
const end = frame(2, FrameKind.END, {});
const single = create(NodeMessageSchema, { msg: { case: 'frame', value: headers } });
const batch = create(NodeMessageSchema, { msg: { case: 'frameBatch', value: { frames: [headers, data, end] } } });

function time(label: string, fn: () => unknown): number {
  for (let i = 0; i < 20_000; i++) fn();
  let n = 0;
  const start = process.hrtime.bigint();
  const stop = start + BigInt(budgetMs) * 1_000_000n;
  let now = start;
  while (now < stop) {
    for (let i = 0; i < 1000; i++) fn();
    n += 1000;
    now = process.hrtime.bigint();
  }
  const ns = Number(now - start) / n;
  console.log(`${label.padEnd(44)} ${(ns / 1000).toFixed(2).padStart(7)} µs`);
  return ns;
}

const requestBytes = Buffer.from(toBinary(EdgeMessageSchema, request));
const singleBytes = Buffer.from(toBinary(NodeMessageSchema, single));
const batchBytes = Buffer.from(toBinary(NodeMessageSchema, batch));
let sink = 0;
const cases: [string, () => unknown, () => unknown][] = [
  ['encode tunnel request (2 KB body)', () => toBinary(EdgeMessageSchema, request), () => encodeEdgeMessage(request)],
  ['decode tunnel request (2 KB body)', () => fromBinary(EdgeMessageSchema, requestBytes), () => decodeEdgeMessage(requestBytes)],
  ['encode headers frame', () => toBinary(NodeMessageSchema, single), () => encodeNodeMessage(single)],
  ['decode headers frame', () => fromBinary(NodeMessageSchema, singleBytes), () => decodeNodeMessage(singleBytes)],
  ['encode batch (headers+data+end)', () => toBinary(NodeMessageSchema, batch), () => encodeNodeMessage(batch)],
  ['decode batch (headers+data+end)', () => fromBinary(NodeMessageSchema, batchBytes), () => decodeNodeMessage(batchBytes)],
];
for (const [label, generated, ours] of cases) {
  const g = time(`${label}, protobuf-es`, () => (sink += (generated() as { length?: number }).length ?? 1));
  const o = time(`${label}, tunnel-codec`, () => (sink += (ours() as { length?: number }).length ?? 1));
  console.log(`${''.padEnd(44)} ${(g / o).toFixed(1)}x faster`);
}
if (sink === 0) console.log('');
