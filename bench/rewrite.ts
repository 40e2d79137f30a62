// Body-rewrite microbenchmark: what the edge does to every request body
// (validate the JSON, find the top-level `model`, replace its value with the
// provider's served name, every other byte copied) against the obvious
// alternative, JSON.parse + JSON.stringify. Bodies of 2 KB, 200 KB and 2 MB,
// in two shapes: `prose` (the bench harness's body: one ASCII message) and
// `mixed` (many messages with escapes and non-ASCII text, as chat histories
// have). Every case first checks that both methods produce the same JSON.
//   npm run bench:rewrite [-- --quick] [-- --save[=DIR]]
// Prints a table and one JSON line; --save also writes
// bench/results/<stamp>-rewrite.json with the machine and commit.
import { deepStrictEqual } from 'node:assert/strict';
import os from 'node:os';
import { chatBody } from './harness/bodies.js';
import { saveMicroResult } from './harness/micro-result.js';
import { inspectBody, rewriteModel, type InspectOk } from '../src/workers/http/inspect.js';

const ALIAS = 'chat';
const SERVED = 'meta-llama/Llama-3.1-8B-Instruct';
const SIZES = [2 * 1024, 200 * 1024, 2 * 1024 * 1024];

export interface RewriteCase {
  readonly shape: 'prose' | 'mixed';
  readonly bytes: number;
  /** inspectBody + rewriteModel: the edge's whole per-body cost. */
  readonly inspectRewriteUs: number;
  /** rewriteModel alone (the offsets already known). */
  readonly rewriteOnlyUs: number;
  /** JSON.parse + set model + JSON.stringify + Buffer.from. */
  readonly parseStringifyUs: number;
  /** parseStringifyUs / inspectRewriteUs. */
  readonly speedup: number;
}

/** A chat history of `bytes` or a little more: alternating turns with newlines, quotes and non-ASCII text. */
function mixedBody(bytes: number): Buffer {
  const turn = 'Voilà: the café’s menu ✓ — "quoted" text,\n\tindented code { x: 1 } and an emoji 🙂. ';
  const messages: { role: string; content: string }[] = [{ role: 'system', content: 'You are a helpful assistant.\nAnswer briefly.' }];
  const head = `{"model":${JSON.stringify(ALIAS)},"stream":false,"messages":`;
  // head + '[' + messages joined by ',' + ']}': counted as they are added, not re-serialised each time.
  let size = Buffer.byteLength(head) + 3 + Buffer.byteLength(JSON.stringify(messages[0]));
  for (let i = 0; size < bytes; i++) {
    const message = { role: i % 2 === 0 ? 'user' : 'assistant', content: turn.repeat(1 + (i % 12)) };
    messages.push(message);
    size += 1 + Buffer.byteLength(JSON.stringify(message));
  }
  return Buffer.from(`${head}${JSON.stringify(messages)}}`);
}

let sink = 0;

function inspectRewrite(body: Buffer): Buffer {
  const info = inspectBody(body);
  if (!info.ok) throw new Error(`inspectBody: ${info.kind} ${info.message}`);
  return rewriteModel(body, info, SERVED);
}

function parseStringify(body: Buffer): Buffer {
  const parsed = JSON.parse(body.toString('utf8')) as { model: string };
  parsed.model = SERVED;
  return Buffer.from(JSON.stringify(parsed));
}

/** Median µs per call over batches filling `budgetMs`, after a warm-up of a fifth of it. */
function timeUs(fn: () => Buffer, budgetMs: number): number {
  const warmUntil = performance.now() + budgetMs / 5;
  let perBatch = 1;
  while (performance.now() < warmUntil) {
    const t0 = performance.now();
    for (let i = 0; i < perBatch; i++) sink += fn().length;
    if (performance.now() - t0 < 2) perBatch *= 2;
  }
  const samples: number[] = [];
  const until = performance.now() + budgetMs;
  while (performance.now() < until || samples.length < 5) {
    const t0 = performance.now();
    for (let i = 0; i < perBatch; i++) sink += fn().length;
    samples.push(((performance.now() - t0) * 1000) / perBatch);
  }
  samples.sort((a, b) => a - b);
  return samples[samples.length >> 1];
}

function round(n: number): number {
  return n >= 100 ? Math.round(n) : Math.round(n * 100) / 100;
}

function measure(shape: RewriteCase['shape'], size: number, budgetMs: number): RewriteCase {
  const body = shape === 'prose' ? chatBody(ALIAS, size) : mixedBody(size);
  // Both methods must agree on the result before either is timed.
  const rewritten = inspectRewrite(body);
  deepStrictEqual(JSON.parse(rewritten.toString('utf8')), JSON.parse(parseStringify(body).toString('utf8')));
  if (rewritten.length !== body.length - Buffer.byteLength(JSON.stringify(ALIAS)) + Buffer.byteLength(JSON.stringify(SERVED))) {
    throw new Error('rewriteModel changed bytes other than the model value');
  }
  const info = inspectBody(body) as InspectOk;
  const inspectRewriteUs = timeUs(() => inspectRewrite(body), budgetMs);
  const rewriteOnlyUs = timeUs(() => rewriteModel(body, info, SERVED), budgetMs);
  const parseStringifyUs = timeUs(() => parseStringify(body), budgetMs);
  return {
    shape,
    bytes: body.length,
    inspectRewriteUs: round(inspectRewriteUs),
    rewriteOnlyUs: round(rewriteOnlyUs),
    parseStringifyUs: round(parseStringifyUs),
    speedup: Math.round((parseStringifyUs / inspectRewriteUs) * 10) / 10,
  };
}

function main(): void {
  const started = new Date();
  const quick = process.argv.includes('--quick');
  const budgetMs = quick ? 60 : 400;
  const text = [
    `body rewrite: ${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${os.availableParallelism()} cores, Node ${process.version}, median of batches over ${budgetMs} ms per method`,
    'shape   body bytes   inspect+rewrite µs   rewrite only µs   JSON.parse+stringify µs   speedup',
  ];
  console.log(text[0]);
  console.log(text[1]);
  const results: RewriteCase[] = [];
  for (const shape of ['prose', 'mixed'] as const) {
    for (const size of SIZES) {
      const r = measure(shape, size, budgetMs);
      results.push(r);
      const line = `${shape.padEnd(6)}  ${String(r.bytes).padStart(10)}  ${String(r.inspectRewriteUs).padStart(19)}  ${String(r.rewriteOnlyUs).padStart(16)}  ${String(r.parseStringifyUs).padStart(24)}  ${`${r.speedup}x`.padStart(8)}`;
      text.push(line);
      console.log(line);
    }
  }
  if (sink === 0) throw new Error('nothing measured');
  console.log(JSON.stringify({ bench: 'rewrite', results }));
  const file = saveMicroResult('rewrite', started, results, text);
  if (file !== undefined) console.log(`saved ${file}`);
}

main();
