// Differential test of the edge's reading of request bodies, through the
// real stack: generated bodies (valid and not) go to every proxied route,
// and the edge's answer is compared with what JSON.parse says the body is.
// A body JSON.parse accepts and the route may take must reach the provider
// byte for byte, except the top-level model's value, which must be exactly
// JSON.stringify(served name) of the alias JSON.parse reads; anything else
// must be refused at the edge with the status the API promises, and the
// provider must never see it. Bodies are built as prefix + model literal +
// suffix, so the expected rewrite comes from the generator, not from the
// scanner. Large bodies cross limits.offload_bytes (the piscina pool).
// Deterministic: BODY_FUZZ_SEED / BODY_FUZZ_RUNS to explore.
import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { ALIAS, PROVIDER_ID, SERVED, startStack, type Stack } from '../helpers/stack.js';
import { mulberry32 as prng } from '../helpers/prng.js';

const SEED = Number(process.env.BODY_FUZZ_SEED ?? 20240611);
const RUNS = Number(process.env.BODY_FUZZ_RUNS ?? 1000);
const MAX_DEPTH = 24;
const OFFLOAD_BYTES = 8 * 1024;

const ODD_ALIAS = 'odd-é\u2028/x';
const ODD_SERVED = 'we"ird\\/é\u2028\u0001x';
const SERVED_OF: Record<string, string> = { [ALIAS]: SERVED, [ODD_ALIAS]: ODD_SERVED };

type RouteName = 'chat' | 'completions' | 'embeddings' | 'messages' | 'responses';
const PATHS: Record<RouteName, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
  embeddings: '/v1/embeddings',
  messages: '/v1/messages',
  responses: '/v1/responses',
};

interface Generated {
  readonly route: RouteName;
  readonly prefix: Buffer;
  readonly modelLiteral: Buffer;
  readonly suffix: Buffer;
  /** Top-level members spelled "model" / "previous_response_id" (however escaped), as generated. */
  readonly modelKeys: number;
  readonly previousKeys: number;
  readonly note: string;
}

class Gen {
  constructor(readonly r: () => number) {}
  int(n: number): number {
    return Math.floor(this.r() * n);
  }
  chance(p: number): boolean {
    return this.r() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  ws(): string {
    return this.chance(0.7) ? '' : this.pick([' ', '\n', '\t', '\r\n  ', '    ', ' \t\n\r ']);
  }
  /** A JSON string literal for s, some characters escaped in any of the ways JSON allows. */
  str(s: string, escapeRate = 0.15): string {
    let out = '"';
    for (const ch of s) {
      const code = ch.codePointAt(0)!;
      const esc = this.chance(escapeRate);
      if (ch === '"' || ch === '\\' || code < 0x20) {
        if (esc || code < 0x20) out += this.uEscape(ch);
        else out += '\\' + ch;
      } else if (ch === '/' && esc) out += '\\/';
      else if (esc) out += this.uEscape(ch);
      else out += ch;
    }
    return out + '"';
  }
  uEscape(ch: string): string {
    let out = '';
    for (let i = 0; i < ch.length; i++) {
      const hex = ch.charCodeAt(i).toString(16).padStart(4, '0');
      out += '\\u' + (this.chance(0.5) ? hex : hex.toUpperCase());
    }
    return out;
  }
  key(name: string): string {
    return this.str(name, this.chance(0.2) ? 0.3 : 0);
  }
  text(max: number): string {
    const pieces = ['a', 'b', ' ', 'é', '😀', '\u2028', '"', '\\', '\n', '/', 'model', '"model":"x"', '\t', 'ü', '\u0000', '\u007f', '\ufeff'];
    let s = '';
    const n = this.int(max);
    for (let i = 0; i < n; i++) s += this.pick(pieces);
    return s;
  }
  /** Lone surrogates and other escapes only writable as escapes. */
  oddStringLiteral(): string {
    return this.pick(['"\\ud800"', '"\\udc00x"', '"\\uD83D\\uDE00"', '"a\\u0000b"', '"\\u2028\\u2029"', '"\\uFEFF"', '"\\/\\b\\f\\n\\r\\t"']);
  }
  number(): string {
    return this.pick(['0', '-0', '1', '-1', '1.5', '1e3', '1E+3', '-2.5e-3', '1'.repeat(400), '1e999', '-1e999', '123456789012345678901234567890.5e-400', '0.0000', '9007199254740993']);
  }
  value(depth: number): string {
    const k = this.int(depth > 3 ? 5 : 8);
    switch (k) {
      case 0: return this.str(this.text(12));
      case 1: return this.number();
      case 2: return this.pick(['true', 'false', 'null']);
      case 3: return this.oddStringLiteral();
      case 4: return this.str(this.text(6));
      case 5: {
        const n = this.int(4);
        const items: string[] = [];
        for (let i = 0; i < n; i++) items.push(this.ws() + this.value(depth + 1) + this.ws());
        return '[' + items.join(',') + ']';
      }
      default: {
        const n = this.int(4);
        const members: string[] = [];
        for (let i = 0; i < n; i++) {
          const name = this.pick(['model', 'stream', 'messages', 'session_id', 'x', 'mod\\u0065l', 'é', '']);
          const k2 = name.includes('\\') ? `"${name}"` : this.key(name);
          members.push(this.ws() + k2 + this.ws() + ':' + this.ws() + this.value(depth + 1) + this.ws());
        }
        return '{' + members.join(',') + '}';
      }
    }
  }
  nested(levels: number): string {
    let open = '';
    let close = '';
    for (let i = 0; i < levels; i++) {
      if (this.chance(0.5)) {
        open += '[';
        close = ']' + close;
      } else {
        open += '{"model":';
        close = '}' + close;
      }
    }
    return open + '1' + close;
  }
}

function generate(g: Gen): Generated {
  const route = g.pick(Object.keys(PATHS) as RouteName[]);
  const members: string[] = [];
  const notes: string[] = [];
  let previousKeys = 0;
  const add = (name: string, value: string): void => {
    if (name === 'previous_response_id') previousKeys++;
    members.push(g.ws() + g.key(name) + g.ws() + ':' + g.ws() + value + g.ws());
  };
  // Required fields, sometimes left out or mistyped.
  const required = g.chance(0.9);
  if (route === 'chat' || route === 'messages') {
    if (required) add('messages', g.chance(0.9) ? `[{"role":"user","content":${g.str(g.text(20))}}]` : g.pick(['"hi"', 'null', '{}']));
  } else if (route === 'completions') {
    if (required) add('prompt', g.chance(0.8) ? g.str(g.text(20)) : g.pick(['["a","b"]', '[1,2,3]', 'null']));
  } else if (route === 'embeddings') {
    if (required) add('input', g.chance(0.8) ? g.str(g.text(20) || 'x') : '["a","b"]');
  } else if (route === 'responses') {
    if (required) add('input', g.chance(0.8) ? g.str(g.text(20)) : '[{"role":"user","content":"hi"}]');
  }
  if (route === 'messages' && g.chance(0.9)) add('max_tokens', g.pick(['16', '16', '1', '-0', '"16"', 'null', '2.5']));
  // The fields the edge reads besides model.
  if (g.chance(0.3)) add('stream', g.pick(['true', 'false', 'null', '"true"', '1', '[true]', '{"stream":true}']));
  if (g.chance(0.15)) add('session_id', g.pick(['"sess-1"', 'null', '42', '""', '"h-0123456789abcdef0123456789abcdef"', '"é"', '{"session_id":"x"}']));
  if (g.chance(0.15)) add('metadata', g.pick(['{"session_id":"m-1"}', '{"session_id":7}', '{"session_id":null}', 'null', '"x"', '[1]', '{"user":"u"}']));
  if (g.chance(0.1)) add('store', g.pick(['false', 'true', 'null']));
  if (g.chance(0.1)) add('background', g.pick(['false', 'true', '"yes"']));
  if (route === 'responses' && g.chance(0.1)) add('previous_response_id', g.pick(['null', '42', '"resp_missing_1"']));
  // Noise: other members, nested "model"s, deep nesting near the limit, odd strings and numbers.
  const extras = g.int(4);
  for (let i = 0; i < extras; i++) add(g.pick(['user', 'temperature', 'n', 'extra', 'tools_x', 'é', '', 'Model', 'model ', 'MODEL']), g.value(0));
  if (g.chance(0.15)) {
    const levels = MAX_DEPTH - 3 + g.int(5); // the member's value sits at depth 2
    add('deep', g.nested(levels));
    notes.push(`deep ${levels}`);
  }
  if (g.chance(0.12)) {
    // Past 128 KiB a batch route's body is token-counted in the pool whatever offload_bytes says.
    const size = g.chance(0.2) ? 130 * 1024 + g.int(64 * 1024) : OFFLOAD_BYTES - 64 + g.int(4 * OFFLOAD_BYTES);
    const unit = g.pick(['a', 'é', '😀', 'ab\\n', '\\u00e9', ' ']);
    add('pad', '"' + unit.repeat(Math.ceil(size / unit.length)) + '"');
    notes.push('large');
  }
  // Duplicates: JSON.parse keeps the last one.
  let modelKeys = 1;
  const dup = g.chance(0.12) ? g.pick(['stream', 'messages', 'max_tokens', 'input', 'prompt', 'model', 'session_id', 'store', 'previous_response_id']) : undefined;
  if (dup !== undefined && !(dup === 'previous_response_id' && route !== 'responses')) {
    const v = dup === 'model' ? g.str(g.pick([ALIAS, ODD_ALIAS, 'nope'])) : dup === 'stream' ? g.pick(['true', 'false']) : dup === 'previous_response_id' ? 'null' : dup === 'max_tokens' ? g.pick(['8', '"x"', '2.5']) : dup === 'messages' ? g.pick(['[]', '"x"']) : dup === 'store' ? 'false' : g.pick(['"x"', 'null', '7']);
    add(dup, v);
    if (dup === 'model') modelKeys++;
    notes.push(`dup ${dup}`);
  }
  // The model member (sometimes missing, mistyped or an unknown alias).
  const modelChoice = g.int(20);
  let modelValue: string;
  if (modelChoice < 12) modelValue = g.str(ALIAS, g.chance(0.3) ? 0.3 : 0);
  else if (modelChoice < 16) modelValue = g.str(ODD_ALIAS, g.chance(0.5) ? 0.5 : 0);
  else if (modelChoice === 16) modelValue = g.pick(['"llama3 "', '"LLAMA3"', '""', '"llama\\u0033\\u0000"']);
  else if (modelChoice === 17) modelValue = g.pick(['null', '3', '["llama3"]', '{"model":"llama3"}']);
  else modelValue = g.str(ALIAS);
  const omitModel = modelChoice === 19 && g.chance(0.5) && modelKeys === 1;
  if (omitModel) modelKeys = 0;
  for (let i = members.length - 1; i > 0; i--) {
    const j = g.int(i + 1);
    [members[i], members[j]] = [members[j], members[i]];
  }
  const at = g.int(members.length + 1);
  const before = members.slice(0, at);
  const afterMembers = members.slice(at);
  const lead = g.ws();
  const trail = g.ws();
  let prefixText: string;
  let suffixText: string;
  if (omitModel) {
    prefixText = lead + '{' + members.join(',') + '}' + trail;
    suffixText = '';
    modelValue = '';
  } else {
    prefixText = lead + '{' + [...before, g.ws() + g.key('model') + g.ws() + ':' + g.ws()].join(',');
    suffixText = g.ws() + (afterMembers.length > 0 ? ',' + afterMembers.join(',') : '') + '}' + trail;
  }
  let prefix: Buffer = Buffer.from(prefixText, 'utf8');
  let suffix: Buffer = Buffer.from(suffixText, 'utf8');
  // Syntax damage, kept out of the model literal so the expected rewrite stays known.
  if (g.chance(0.25)) {
    const damage = g.pick([
      'bom', 'trailing garbage', 'trailing comma', 'nan', 'infinity', 'comment', 'line comment', 'raw control', 'bad utf8', 'overlong', 'surrogate utf8', 'truncated', 'single quotes', 'leading zero', 'second value', 'nul after', 'random byte',
    ] as const);
    notes.push(damage);
    const inSuffix = suffix.length > 1 && (prefix.length < 2 || g.chance(0.5));
    const target = inSuffix ? suffix : prefix;
    const pos = 1 + g.int(Math.max(1, target.length - 1));
    const insert = (bytes: Buffer): Buffer => Buffer.concat([target.subarray(0, pos), bytes, target.subarray(pos)]);
    let inserted: Buffer | undefined;
    switch (damage) {
      case 'bom': prefix = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), prefix]); break;
      case 'trailing garbage': suffix = Buffer.concat([suffix, Buffer.from(g.pick(['x', '}', ',', '{}', '\u0000', ']']))]); break;
      case 'trailing comma': suffix = Buffer.from(suffix.toString('latin1').replace(/\}(\s*)$/, ',}$1'), 'latin1'); break;
      case 'nan': suffix = Buffer.concat([Buffer.from(',"t":NaN'), suffix]); break;
      case 'infinity': suffix = Buffer.concat([Buffer.from(',"t":-Infinity'), suffix]); break;
      case 'comment': inserted = insert(Buffer.from('/* c */')); break;
      case 'line comment': inserted = insert(Buffer.from('// c\n')); break;
      case 'raw control': suffix = Buffer.concat([Buffer.from(',"t":"a\u0001b"'), suffix]); break;
      case 'bad utf8': suffix = Buffer.concat([Buffer.from(',"t":"a'), Buffer.from([g.pick([0xff, 0x80, 0xc3, 0xf5])]), Buffer.from('b"'), suffix]); break;
      case 'overlong': suffix = Buffer.concat([Buffer.from(',"t":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"'), suffix]); break;
      case 'surrogate utf8': suffix = Buffer.concat([Buffer.from(',"t":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"'), suffix]); break;
      case 'truncated': suffix = suffix.subarray(0, g.int(suffix.length)); break;
      case 'single quotes': suffix = Buffer.concat([Buffer.from(",'t':1"), suffix]); break;
      case 'leading zero': suffix = Buffer.concat([Buffer.from(',"t":01'), suffix]); break;
      case 'second value': suffix = Buffer.concat([suffix, Buffer.from(' {"model":"llama3"}')]); break;
      case 'nul after': suffix = Buffer.concat([suffix, Buffer.from([0])]); break;
      default: inserted = insert(Buffer.from([g.pick([0x7b, 0x7d, 0x5b, 0x5d, 0x22, 0x3a, 0x2c, 0x5c, 0x20, 0x0a, 0x00, 0x0b, 0x0c, 0xa0, 0x2f, 0x30, 0x2d, 0x2b, 0x2e, 0x65])]));
    }
    if (inserted !== undefined) {
      if (inSuffix) suffix = inserted;
      else prefix = inserted;
    }
  }
  return { route, prefix, modelLiteral: Buffer.from(modelValue, 'utf8'), suffix, modelKeys, previousKeys, note: notes.join(', ') };
}

interface Expected {
  readonly status: number;
  /** The bytes the provider must receive (accepted bodies). */
  readonly forwarded?: Buffer;
  readonly why: string;
  readonly stream?: boolean;
}

function depthOf(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  let d = 0;
  for (const x of Array.isArray(v) ? v : Object.values(v)) d = Math.max(d, depthOf(x));
  return d + 1;
}

const has = (o: Record<string, unknown>, k: string): boolean => Object.hasOwn(o, k);

/** What the edge must answer, from JSON.parse alone (and the generator's count of duplicated members). */
function expected(gen: Generated): Expected {
  const bytes = Buffer.concat([gen.prefix, gen.modelLiteral, gen.suffix]);
  if (!isUtf8(bytes)) return { status: 400, why: 'ill-formed UTF-8' };
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    return { status: 400, why: `JSON.parse: ${(err as Error).message}` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { status: 400, why: 'not an object' };
  if (depthOf(value) > MAX_DEPTH) return { status: 400, why: 'too deep' };
  const body = value as Record<string, unknown>;
  if (gen.modelKeys > 1) return { status: 400, why: 'duplicate model' };
  if (gen.previousKeys > 1) return { status: 400, why: 'duplicate previous_response_id' };
  if (!has(body, 'model')) return { status: 400, why: 'missing model' };
  if (typeof body.model !== 'string' || body.model === '') return { status: 400, why: 'model not a non-empty string' };
  const served = SERVED_OF[body.model];
  if (served === undefined || !Object.hasOwn(SERVED_OF, body.model)) return { status: 404, why: `unknown model ${JSON.stringify(body.model)}` };
  const present = (k: string): boolean => has(body, k);
  switch (gen.route) {
    case 'chat':
      if (!present('messages')) return { status: 400, why: 'no messages' };
      if (!Array.isArray(body.messages)) return { status: 400, why: 'messages not an array' };
      break;
    case 'completions':
      if (!present('prompt')) return { status: 400, why: 'no prompt' };
      break;
    case 'embeddings':
      if (!present('input')) return { status: 400, why: 'no input' };
      break;
    case 'messages':
      if (!present('messages')) return { status: 400, why: 'no messages' };
      if (!Array.isArray(body.messages)) return { status: 400, why: 'messages not an array' };
      if (!present('max_tokens')) return { status: 400, why: 'no max_tokens' };
      if (!Number.isInteger(body.max_tokens)) return { status: 400, why: 'max_tokens not an integer' };
      break;
    case 'responses': {
      const ctx = ['input', 'prompt'].some(present) || (present('previous_response_id') && body.previous_response_id !== null) || (present('conversation') && body.conversation !== null);
      if (!ctx) return { status: 400, why: 'no input' };
      if (present('previous_response_id') && body.previous_response_id !== null && typeof body.previous_response_id !== 'string') return { status: 400, why: 'previous_response_id not a string' };
      if (typeof body.previous_response_id === 'string') return { status: 400, why: 'previous response unknown' };
      break;
    }
  }
  const meta = body.metadata as { session_id?: unknown } | null | undefined;
  const session = body.session_id ?? (typeof meta === 'object' && meta !== null ? meta.session_id : undefined);
  if (session !== undefined && session !== null && typeof session !== 'string') return { status: 400, why: 'session id not a string' };
  const forwarded = Buffer.concat([gen.prefix, Buffer.from(JSON.stringify(served), 'utf8'), gen.suffix]);
  return { status: 200, forwarded, why: 'valid', stream: body.stream === true };
}

function cuts(g: Gen, body: Buffer): Buffer[] {
  const pieces: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const n = 1 + g.int(g.chance(0.5) ? 8 : Math.max(1, body.length >> 1));
    pieces.push(body.subarray(at, at + n));
    at += n;
  }
  return pieces;
}

describe(`request bodies: the edge reads them as JSON.parse does (workers ${process.env.EDGE_TEST_WORKERS ?? 0})`, () => {
  let stack: Stack;
  const dispatcher = new Agent({ connections: 4 });
  before(async () => {
    stack = await startStack({
      providerType: 'vllm',
      bodyBytes: 4 * 1024 * 1024,
      mock: { ttftMs: 0, tokens: 1, intervalMs: 0, bodyLogLimit: 64, logLimit: 64 },
      configure: (raw) => {
        // BODY_FUZZ_LEAN=0: through fastify's reader instead of the lean HTTP/1.1 one.
        if (process.env.BODY_FUZZ_LEAN === '0') ((raw.listen as Record<string, Record<string, unknown>>).http).lean_http1 = false;
        (raw.limits as Record<string, unknown>).offload_bytes = OFFLOAD_BYTES;
        (raw.limits as Record<string, unknown>).max_json_depth = MAX_DEPTH;
        (raw.models as unknown[]).push({ alias: ODD_ALIAS, providers: { [PROVIDER_ID]: ODD_SERVED } });
      },
    });
  });
  after(async () => {
    await dispatcher.close();
    await stack.close();
  });

  test(`${RUNS} generated bodies, every route: verdict, alias and forwarded bytes agree with JSON.parse`, async () => {
    const g = new Gen(prng(SEED));
    const failures: string[] = [];
    const tally: Record<string, number> = {};
    for (let run = 0; run < RUNS; run++) {
      const gen = generate(g);
      const exp = expected(gen);
      const body = Buffer.concat([gen.prefix, gen.modelLiteral, gen.suffix]);
      const requestId = `fuzz-${SEED}-${run}`;
      // Some go chunked, cut anywhere (inside a UTF-8 sequence, an escape, a key).
      const chunked = g.chance(0.25) ? cuts(g, body) : undefined;
      const res = await request(`${stack.edge.url}${PATHS[gen.route]}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': requestId, 'x-mock-tokens': '1' },
        body: chunked === undefined ? body : Readable.from(chunked),
        dispatcher,
      });
      const text = await res.body.text();
      const received = stack.mock.requestLog.find((r) => r.requestId === requestId);
      const kind = `${exp.status} ${exp.why.split(':')[0]}`;
      tally[kind] = (tally[kind] ?? 0) + 1;
      const where = `#${run} ${gen.route}${chunked === undefined ? '' : ' chunked'} [${gen.note}] expected ${exp.status} (${exp.why}), got ${res.statusCode}: ${text.slice(0, 200)}\n  body: ${JSON.stringify(body.length > 600 ? body.subarray(0, 300).toString('latin1') + '…' + body.subarray(-300).toString('latin1') : body.toString('latin1'))}`;
      if (exp.status !== 200) {
        if (res.statusCode !== exp.status) failures.push(where);
        else if (received !== undefined) failures.push(`${where}\n  but the provider received it`);
        continue;
      }
      // Admitted: what the provider then makes of the body (a null input, say) is its own answer.
      if (received === undefined) {
        failures.push(where);
        continue;
      }
      if (received?.body === undefined) {
        failures.push(`${where}\n  the provider's log has no body`);
        continue;
      }
      const streamed = String(res.headers['content-type']).startsWith('text/event-stream');
      if (res.statusCode === 200 && gen.route !== 'embeddings' && streamed !== exp.stream) failures.push(`${where}\n  streamed ${streamed}, JSON.parse's stream is ${exp.stream}`);
      if (!received.body.equals(exp.forwarded!)) {
        let i = 0;
        while (i < received.body.length && received.body[i] === exp.forwarded![i]) i++;
        failures.push(`${where}\n  forwarded bytes differ at ${i}: got ${JSON.stringify(received.body.subarray(Math.max(0, i - 20), i + 40).toString('latin1'))}, want ${JSON.stringify(exp.forwarded!.subarray(Math.max(0, i - 20), i + 40).toString('latin1'))}`);
      }
    }
    // What the run covered, for whoever widens the generator.
    console.log(JSON.stringify(tally));
    assert.equal(failures.length, 0, `${failures.length} disagreements:\n${failures.slice(0, 8).join('\n')}`);
  });
});
