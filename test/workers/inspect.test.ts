import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inspectBody, rewriteModel, type InspectOk, type InspectResult } from '../../src/workers/http/inspect.js';
import { actualVerdict, expectedVerdict, isDuplicateMemberRejection } from './inspect-oracle.js';

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

function inspectOk(body: Uint8Array): InspectOk {
  const result = inspectBody(body);
  assert.ok(result.ok, `expected ok, got ${JSON.stringify(result)}`);
  return result;
}

/** Asserts the inspector's verdict equals JSON.parse's, and returns the result. */
function agrees(body: Uint8Array, label = Buffer.from(body).toString('utf8')): InspectResult {
  const result = inspectBody(body);
  assert.deepEqual(actualVerdict(result), expectedVerdict(body), `verdict for ${JSON.stringify(label)}: ${JSON.stringify(result)}`);
  if (!result.ok) {
    assert.ok(result.offset >= 0 && result.offset <= body.length, `offset in range for ${JSON.stringify(label)}`);
    assert.ok(result.message.length > 0);
  }
  return result;
}

// Each entry: a body and the reason it is in the corpus. The expected verdict
// is always JSON.parse's (see inspect-oracle.ts), never written by hand.
const CORPUS: readonly string[] = [
  // valid chat bodies
  '{"model":"llama3","messages":[{"role":"user","content":"hi"}]}',
  '{"model":"llama3","stream":true}',
  '{"model":"llama3","stream":false}',
  '{"stream":true,"model":"llama3"}',
  '{\r\n\t"model" :\t"llama3" ,\n "stream"\n:\ntrue\r\n}\n\t ',
  '  {"model":"m"}  ',
  // escaped quotes and backslashes right before the closing quote
  '{"model":"a\\\\"}',
  '{"model":"a\\""}',
  '{"model":"\\\\\\""}',
  '{"model":"\\"\\\\\\"\\\\"}',
  '{"x":"\\\\","model":"m"}',
  '{"x":"\\"","model":"m","y":"\\\\\\\\"}',
  // all escapes, in the value and in other strings
  '{"model":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u0041"}',
  '{"model":"m","content":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00E9\\uABCD"}',
  // \u escapes in the key "model" and "stream"
  '{"\\u006dodel":"x"}',
  '{"mod\\u0065l":"x"}',
  '{"\\u006D\\u006F\\u0064\\u0065\\u006C":"x","\\u0073tream":true}',
  '{"model\\u0000":"x"}',
  // keys that are not "model"
  '{"Model":"x"}',
  '{"models":"x"}',
  '{"mode":"x"}',
  '{"model ":"x"}',
  // nested model / stream keys are not the top-level ones
  '{"messages":[{"model":"inner","stream":true}],"model":"outer"}',
  '{"x":{"model":"inner"}}',
  '{"x":{"stream":true},"model":"m"}',
  '{"model":"m","x":[{"model":{"model":1}}]}',
  '{"model":"m","stream":{"stream":true}}',
  // stream values that are not the literal true
  '{"model":"m","stream":"true"}',
  '{"model":"m","stream":null}',
  '{"model":"m","stream":1}',
  '{"model":"m","stream":[true]}',
  '{"model":"m","stream":true,"stream":false}',
  '{"model":"m","stream":false,"stream":true}',
  // model that is not a non-empty string
  '{"model":""}',
  '{"model":1}',
  '{"model":null}',
  '{"model":true}',
  '{"model":["x"]}',
  '{"model":{"name":"x"}}',
  '{}',
  '{"messages":[]}',
  // not an object
  '[]',
  '[{"model":"m"}]',
  '"model"',
  '1',
  'null',
  'true',
  // numbers
  '{"model":"m","n":-0}',
  '{"model":"m","n":0}',
  '{"model":"m","n":1e5}',
  '{"model":"m","n":1E+5}',
  '{"model":"m","n":-1.5e-3}',
  '{"model":"m","n":0.0}',
  '{"model":"m","n":-0.0e0}',
  '{"model":"m","n":123456789012345678901234567890}',
  '{"model":"m","n":[0,1,-1,10,0.5]}',
  '{"model":"m","n":01}',
  '{"model":"m","n":-01}',
  '{"model":"m","n":00}',
  '{"model":"m","n":1.}',
  '{"model":"m","n":.5}',
  '{"model":"m","n":+1}',
  '{"model":"m","n":1e}',
  '{"model":"m","n":1e+}',
  '{"model":"m","n":-}',
  '{"model":"m","n":--1}',
  '{"model":"m","n":0x10}',
  '{"model":"m","n":NaN}',
  '{"model":"m","n":Infinity}',
  '{"model":"m","n":1.e5}',
  '{"model":"m","n":1e5.5}',
  '{"model":"m","n":- 1}',
  // literals
  '{"model":"m","a":[true,false,null]}',
  '{"model":"m","a":tru}',
  '{"model":"m","a":nul}',
  '{"model":"m","a":True}',
  '{"model":"m","a":NULL}',
  '{"model":"m","a":falsey}',
  // strings
  '{"model":"m","s":"\\x"}',
  '{"model":"m","s":"\\u12"}',
  '{"model":"m","s":"\\u12G4"}',
  '{"model":"m","s":"\\U0041"}',
  '{"model":"m","s":"\\\'"}',
  '{"model":"m","s":"tab\there"}',
  '{"model":"m","s":"line\nbreak"}',
  '{"model":"m","s":"nul\u0000"}',
  '{"model":"m","s":"unit\u001f"}',
  '{"model":"m","s":"del\u007f"}',
  '{"model":"m\u0001"}',
  '{"model":"m","s":\'single\'}',
  // lone surrogates are accepted, as JSON.parse does
  '{"model":"\\ud800"}',
  '{"model":"\\udc00x"}',
  '{"model":"\\ud800\\u0041","s":"\\udfff"}',
  '{"model":"\\ud83d\\ude00"}',
  // raw non-ASCII
  '{"model":"é😀中","s":"\u2028\u2029"}',
  '{"model":"m","é":"ü"}',
  // structure
  '{"model":"m",}',
  '{"model":"m","a":[1,2,],}',
  '[1,]',
  '{,}',
  '{"a":}',
  '[,1]',
  '[1,,2]',
  '{"a"::1}',
  '{"a" 1}',
  '{"model":"m" "b":2}',
  '{"model":"m";"b":2}',
  '{model:"m"}',
  '{"model":"m"}}',
  '{"model":"m"}]',
  '{"model":"m"}{}',
  '{"model":"m"} x',
  '{"model":"m"} // comment',
  '{"model":"m"}\u0000',
  '{"model":"m"',
  '{"model":',
  '{"model"',
  '{"mod',
  '{',
  '',
  '   ',
  '\n',
  '\uFEFF{"model":"m"}',
  '{"model":"m"}\uFEFF',
  '\u00a0{"model":"m"}',
  '{"model":"m","a":[[[]]],"b":{"c":{"d":{}}}}',
  '{"model":"m","a":[1 2]}',
  '{"model":"m","a":{"b":1]}',
  '{"model":"m","a":[1}',
];

test('every corpus body gets the same verdict as JSON.parse', () => {
  for (const text of CORPUS) agrees(bytes(text), text);
});

test('the decoded model matches JSON.parse, escapes and lone surrogates included', () => {
  for (const text of CORPUS) {
    const result = inspectBody(bytes(text));
    if (!result.ok) continue;
    const parsed = JSON.parse(text) as { model: string };
    assert.equal(result.model, parsed.model, text);
    assert.equal(JSON.parse(bytes(text).subarray(result.modelStart, result.modelEnd).toString('utf8')), parsed.model, `span of ${text}`);
  }
});

test('every proper prefix of a chat body is invalid, like JSON.parse says', () => {
  const body = bytes(
    '{"model":"llama3","messages":[{"role":"system","content":"Be \\"brief\\".\\n"},{"role":"user","content":"héllo 😀"}],' +
      '"temperature":-0.5e-2,"stream":true,"stop":null,"logprobs":false}',
  );
  assert.equal(inspectOk(body).stream, true);
  for (let end = 0; end < body.length; end++) {
    const prefix = body.subarray(0, end);
    const result = agrees(prefix, `prefix ${end}`);
    assert.equal(result.ok, false);
  }
});

test('invalid UTF-8 is invalid_json even where JSON.parse of the decoded text would accept it', () => {
  const cases: Array<[string, number[]]> = [
    ['lone continuation byte', [0x80]],
    ['overlong encoding of "/"', [0xc0, 0xaf]],
    ['overlong 3-byte', [0xe0, 0x80, 0xaf]],
    ['UTF-8 encoded surrogate', [0xed, 0xa0, 0x80]],
    ['above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['byte 0xF5', [0xf5, 0x80, 0x80, 0x80]],
    ['byte 0xFF', [0xff]],
    ['truncated 3-byte sequence', [0xe4, 0xb8]],
  ];
  for (const [what, bad] of cases) {
    const head = bytes('{"model":"m","s":"ok ');
    const body = Buffer.concat([head, Buffer.from(bad), bytes(' tail"}')]);
    // JSON.parse on the decoded text accepts these bodies (U+FFFD replaces the bytes)
    assert.doesNotThrow(() => JSON.parse(body.toString('utf8')), what);
    const result = inspectBody(body);
    assert.equal(result.ok, false, what);
    assert.equal(!result.ok && result.kind, 'invalid_json', what);
    assert.equal(!result.ok && result.offset, head.length, what);
    assert.match(!result.ok ? result.message : '', /UTF-8/, what);
    assert.deepEqual(actualVerdict(result), expectedVerdict(body), what);
  }
  // invalid UTF-8 in the model value itself, and in a key
  assert.equal(inspectBody(Buffer.from([...bytes('{"model":"'), 0xc3, ...bytes('"}')])).ok, false);
  assert.equal(inspectBody(Buffer.from([...bytes('{"'), 0xfe, ...bytes('":1,"model":"m"}')])).ok, false);
});

test('the earliest problem is the one reported', () => {
  // a structural error before ill-formed UTF-8
  const body = Buffer.from([...bytes('{"model":"m",,"s":"'), 0xff, ...bytes('"}')]);
  const result = inspectBody(body);
  assert.equal(!result.ok && result.offset, 13);
  assert.doesNotMatch(!result.ok ? result.message : '', /UTF-8/);
  // ill-formed UTF-8 before a structural error
  const later = Buffer.from([...bytes('{"s":"'), 0xff, ...bytes('","model":"m",,}')]);
  const second = inspectBody(later);
  assert.equal(!second.ok && second.offset, 6);
  assert.match(!second.ok ? second.message : '', /UTF-8/);
});

test('errors carry the byte offset of the problem and say what it is', () => {
  const cases: Array<[string, number, RegExp]> = [
    ['{"model":"m",}', 13, /expected a string key, found '}'/],
    ['{"model":"m","n":01}', 17, /leading zero/],
    ['{"model":"m" "n":1}', 13, /expected ',' or '}'/],
    ['{"model":"m","s":"a\u0001"}', 19, /control character \(byte 0x01\)/],
    ['{"model":"m","s":"\\q"}', 19, /invalid escape/],
    ['{"model":"m","s":"\\u00G0"}', 22, /not a hex digit/],
    ['{"model":"m","s":"abc', 17, /unterminated string/],
    ['{"model":"m"} x', 14, /after the JSON value/],
    ['{"model":"m"', 12, /unexpected end of input/],
    ['\uFEFF{"model":"m"}', 0, /byte order mark/],
    ['', 0, /empty body/],
  ];
  for (const [text, offset, message] of cases) {
    const result = inspectBody(bytes(text));
    assert.equal(result.ok, false, text);
    if (result.ok) continue;
    assert.equal(result.kind, 'invalid_json', text);
    assert.equal(result.offset, offset, `offset for ${JSON.stringify(text)}: ${result.message}`);
    assert.match(result.message, message, text);
    assert.match(result.message, new RegExp(`byte ${offset}\\b`), text);
  }
});

test('semantic errors name the kind and point at the value', () => {
  const cases: Array<[string, string, number]> = [
    ['[1]', 'not_object', 0],
    ['  "x"', 'not_object', 2],
    [' {"a":1}', 'missing_model', 1],
    ['{"a":1,"model":7}', 'model_not_string', 15],
    ['{"a":1,"model":{"x":"y"}}', 'model_not_string', 15],
    ['{"a":1,"model":""}', 'empty_model', 15],
  ];
  for (const [text, kind, offset] of cases) {
    const result = inspectBody(bytes(text));
    assert.deepEqual(!result.ok && [result.kind, result.offset], [kind, offset], text);
  }
  // invalid JSON wins over a semantic problem found earlier in the body
  const both = inspectBody(bytes('{"model":7,"a":}'));
  assert.equal(!both.ok && both.kind, 'invalid_json');
});

test('a duplicated top-level model is rejected, however the key is spelled', () => {
  for (const text of [
    '{"model":"alias","model":"other-served-name"}',
    '{"model":"alias","mo\\u0064el":"other"}',
    '{"\\u006dodel":1,"model":"alias"}',
  ]) {
    const body = bytes(text);
    assert.doesNotThrow(() => JSON.parse(text));
    const result = inspectBody(body);
    assert.equal(!result.ok && result.kind, 'invalid_json', text);
    assert.ok(isDuplicateMemberRejection(body, result), `${text}: ${JSON.stringify(result)}`);
  }
  // a nested duplicate is not top-level
  assert.equal(inspectOk(bytes('{"model":"a","x":{"model":"b","model":"c"}}')).model, 'a');
});

test('a duplicated top-level previous_response_id is rejected: the edge would pin to one, a provider might read the other', () => {
  for (const text of [
    '{"model":"m","previous_response_id":"resp_A","previous_response_id":null}',
    '{"model":"m","previous_response_id":"resp_A","input":"x","previous_response_id":"resp_B"}',
    '{"model":"m","previous_response_id":null,"previous_\\u0072esponse_id":"resp_B"}',
  ]) {
    const body = bytes(text);
    assert.doesNotThrow(() => JSON.parse(text));
    const result = inspectBody(body);
    assert.equal(!result.ok && result.kind, 'invalid_json', text);
    assert.match(!result.ok ? result.message : '', /duplicate top-level "previous_response_id"/);
    assert.ok(isDuplicateMemberRejection(body, result), `${text}: ${JSON.stringify(result)}`);
  }
  assert.equal(inspectOk(bytes('{"model":"m","x":{"previous_response_id":"a","previous_response_id":"b"},"previous_response_id":"resp_C"}')).previousResponseId, 'resp_C');
});

test('nesting up to maxDepth is accepted, deeper is too_deep, without recursion', () => {
  const nested = (depth: number): Buffer => bytes(`{"model":"m","x":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`);
  assert.equal(inspectBody(nested(64)).ok, true);
  const deep = inspectBody(nested(65));
  assert.deepEqual(!deep.ok && [deep.kind, deep.offset], ['too_deep', 17 + 63]);
  assert.equal(inspectBody(nested(3), 3).ok, true);
  assert.equal(!inspectBody(nested(4), 3).ok && (inspectBody(nested(4), 3) as { kind: string }).kind, 'too_deep');
  // objects count too
  const objects = bytes(`{"model":"m","a":${'{"a":'.repeat(70)}1${'}'.repeat(70)}}`);
  assert.equal(!inspectBody(objects).ok && (inspectBody(objects) as { kind: string }).kind, 'too_deep');
  assert.equal(inspectBody(objects, 100).ok, true);
  // far deeper than any stack would take
  const huge = bytes(`{"model":"m","x":${'['.repeat(200_000)}${']'.repeat(200_000)}}`);
  assert.equal(!inspectBody(huge).ok && (inspectBody(huge) as { kind: string }).kind, 'too_deep');
  assert.equal(inspectBody(huge, 300_000).ok, true);
  assert.throws(() => inspectBody(nested(2), 0), RangeError);
  assert.throws(() => inspectBody(nested(2), 1.5), RangeError);
});

test('long strings: a control byte, escape or quote anywhere is found', () => {
  // Long enough to cross every scanning tier (byte probe, word scan, native).
  const length = 700;
  const filler = 'abcdefghijklmnopqrstuvwxyz0123456789 é'.repeat(25).slice(0, length);
  const plain = bytes(filler);
  for (const offsetInBuffer of [0, 1, 2, 3]) {
    for (let at = 0; at < plain.length; at += 1) {
      if ((plain[at] & 0xc0) === 0x80) continue; // keep UTF-8 well-formed: only replace lead bytes
      const make = (patch: readonly number[]): Uint8Array => {
        const head = bytes('{"model":"m","s":"');
        const inner = Buffer.concat([plain.subarray(0, at), Buffer.from(patch), plain.subarray(at + (plain[at] >= 0xc0 ? 2 : 1))]);
        const body = Buffer.concat([head, inner, bytes('"}')]);
        // place the body at an unaligned offset inside a larger buffer whose
        // surrounding bytes are all control bytes and quotes
        const arena = new Uint8Array(body.length + 8).fill(0x01);
        arena[offsetInBuffer] = 0x22;
        arena.set(body, offsetInBuffer + 1);
        return arena.subarray(offsetInBuffer + 1, offsetInBuffer + 1 + body.length);
      };
      const control = inspectBody(make([0x0a]));
      assert.equal(!control.ok && control.offset, 18 + at, `control byte at ${at} (+${offsetInBuffer})`);
      if (at % 7 === 0) {
        assert.equal(inspectBody(make([0x5c, 0x6e])).ok, true, `escape at ${at}`);
        assert.equal(inspectBody(make([0x5c, 0x22])).ok, true, `escaped quote at ${at}`);
        const early = inspectBody(make([0x22]));
        assert.equal(!early.ok && early.kind, 'invalid_json', `quote at ${at} ends the string early`);
        assert.equal(inspectBody(make([])).ok, true);
      }
    }
  }
});

test('a Uint8Array that is not a Buffer and sits at an offset is inspected and rewritten', () => {
  const text = '{"model":"alias","messages":[{"role":"user","content":"' + 'x'.repeat(500) + '"}]}';
  const arena = new Uint8Array(text.length + 11).fill(0x22);
  new TextEncoder().encodeInto(text, arena.subarray(5));
  const body = arena.subarray(5, 5 + text.length);
  const info = inspectOk(body);
  assert.equal(info.model, 'alias');
  const out = rewriteModel(body, info, 'served');
  assert.deepEqual(JSON.parse(out.toString('utf8')), { ...JSON.parse(text), model: 'served' });
});

test('rewrite replaces only the model value: prefix and suffix bytes are identical', () => {
  const bodies = [
    '{"model":"alias","messages":[{"role":"user","content":"hi","model":"nested"}],"stream":true}',
    '{\n  "temperature": 0.7,\n  "model" : "alias" ,\n  "n": -0, "x": 1E+5\n}\n',
    '{"\\u006dodel":"a\\"li\\\\as","s":"\\ud800é"}',
    '{"model":"\\u0061lias"}',
  ];
  const served = ['meta-llama/Llama-3.1-70B-Instruct', 'a"b\\c', 'é😀中', 'x\u2028y', 'tab\tnl\n', '\ud800', '\u0000\u001f', 'm'];
  for (const text of bodies) {
    const body = bytes(text);
    const info = inspectOk(body);
    for (const name of served) {
      const out = rewriteModel(body, info, name);
      const encoded = bytes(JSON.stringify(name));
      assert.equal(out.length, body.length - (info.modelEnd - info.modelStart) + encoded.length);
      assert.ok(out.subarray(0, info.modelStart).equals(body.subarray(0, info.modelStart)), 'prefix unchanged');
      assert.ok(out.subarray(info.modelStart + encoded.length).equals(body.subarray(info.modelEnd)), 'suffix unchanged');
      assert.ok(out.subarray(info.modelStart, info.modelStart + encoded.length).equals(encoded), 'value is the JSON encoding');
      const original = JSON.parse(text) as Record<string, unknown>;
      assert.deepEqual(JSON.parse(out.toString('utf8')), { ...original, model: name });
      const again = inspectOk(out);
      assert.equal(again.model, name);
      assert.equal(again.stream, info.stream);
    }
  }
});

test('rewrite refuses an info that does not describe this body', () => {
  const body = bytes('{"model":"alias"}');
  const info = inspectOk(body);
  assert.throws(() => rewriteModel(bytes('{"x":1}'), info, 'served'), RangeError);
  assert.throws(() => rewriteModel(body, { ...info, modelEnd: 99 }, 'served'), RangeError);
});

test('the inspector keeps no state between bodies', () => {
  // A long body leaves cached search positions behind; a short one after it must not use them.
  const long = bytes(`{"model":"first","s":"${'a'.repeat(5000)}\\n${'b'.repeat(5000)}"}`);
  assert.equal(inspectOk(long).model, 'first');
  assert.equal(inspectOk(bytes('{"model":"second"}')).model, 'second');
  assert.equal(inspectBody(bytes('{"model":"x","s":"unterminated')).ok, false);
  assert.equal(inspectOk(long).model, 'first');
});

test('the same scan notes the routes\' required top-level fields and their shape', async () => {
  const m = await import('../../src/workers/http/inspect.js');
  const fields = (body: string): number => {
    const info = m.inspectBody(Buffer.from(body));
    assert.ok(info.ok, body);
    return info.fields;
  };
  assert.equal(fields('{"model":"x","messages":[],"max_tokens":12}'), m.FIELD_MESSAGES | m.FIELD_MESSAGES_ARRAY | m.FIELD_MAX_TOKENS | m.FIELD_MAX_TOKENS_INTEGER);
  assert.equal(fields('{"model":"x","messages":"hi","max_tokens":1.5}'), m.FIELD_MESSAGES | m.FIELD_MAX_TOKENS);
  assert.equal(fields('{"model":"x","max_tokens":-3}'), m.FIELD_MAX_TOKENS | m.FIELD_MAX_TOKENS_INTEGER);
  assert.equal(fields('{"model":"x","max_tokens":"3"}'), m.FIELD_MAX_TOKENS);
  assert.equal(fields('{"model":"x","nested":{"messages":[],"prompt":"p","input":1}}'), 0, 'only top-level members count');
  assert.equal(fields('{"model":"x","prompt":null,"input":[1]}'), m.FIELD_PROMPT | m.FIELD_INPUT);
  assert.equal(fields('{"model":"x","mess\\u0061ges":[]}'), m.FIELD_MESSAGES | m.FIELD_MESSAGES_ARRAY, 'escaped keys are the same key');
  const chained = m.inspectBody(Buffer.from('{"model":"x","previous_response_id":"resp_\\u0031"}'));
  assert.ok(chained.ok);
  assert.equal(chained.fields, m.FIELD_PREVIOUS_RESPONSE_ID | m.FIELD_PREVIOUS_RESPONSE_ID_STRING);
  assert.equal(chained.previousResponseId, 'resp_1');
  const numeric = m.inspectBody(Buffer.from('{"model":"x","previous_response_id":7}'));
  assert.ok(numeric.ok);
  assert.equal(numeric.fields, m.FIELD_PREVIOUS_RESPONSE_ID);
  assert.equal(numeric.previousResponseId, undefined);
  assert.equal(fields('{"model":"x","previous_response_id":null,"input":"i"}'), m.FIELD_INPUT, 'null is no previous response');
  assert.equal(fields('{"model":"x","conversation":{"id":"c"}}'), m.FIELD_CONVERSATION);
  assert.equal(fields('{"model":"x","conversation":null,"c\\u006fnversation":"c"}'), m.FIELD_CONVERSATION, 'escaped key; null adds nothing');
  // Repeated, a member is its last occurrence, as JSON.parse reads it: the earlier one's bits are gone.
  assert.equal(fields('{"model":"x","c\\u006fnversation":"c","conversation":null}'), 0, 'the later null is the value');
  assert.equal(fields('{"model":"x","messages":[],"messages":"hi"}'), m.FIELD_MESSAGES, 'a later string is no array');
  assert.equal(fields('{"model":"x","messages":"hi","messages":[]}'), m.FIELD_MESSAGES | m.FIELD_MESSAGES_ARRAY);
  assert.equal(fields('{"model":"x","max_tokens":8,"max_tokens":{"n":8}}'), m.FIELD_MAX_TOKENS, 'a later object is no integer');
  assert.equal(fields('{"model":"x","max_tokens":"8","max_tokens":8}'), m.FIELD_MAX_TOKENS | m.FIELD_MAX_TOKENS_INTEGER);
});

test('a top-level "store": false is noted (the response is not one to remember), whatever its spelling; nothing else is', async () => {
  const m = await import('../../src/workers/http/inspect.js');
  const notStored = (body: string): boolean => {
    const info = m.inspectBody(Buffer.from(body));
    assert.ok(info.ok, body);
    return (info.fields & m.FIELD_NOT_STORED) !== 0;
  };
  assert.equal(notStored('{"model":"x","input":"i","store":false}'), true);
  assert.equal(notStored('{ "store" :\n\tfalse , "model":"x"}'), true, 'whitespace around it');
  assert.equal(notStored('{"model":"x","st\\u006fre":false}'), true, 'an escaped key is the same key');
  assert.equal(notStored('{"model":"x","store":false,"store":false}'), true);
  assert.equal(notStored('{"model":"x"}'), false, 'absent: stored (the API\'s default)');
  for (const value of ['true', 'null', '"false"', '0', '[]', '{}']) assert.equal(notStored(`{"model":"x","store":${value}}`), false, value);
  assert.equal(notStored('{"model":"x","text":{"store":false},"input":[{"store":false}]}'), false, 'only the top level counts');
  assert.equal(notStored('{"model":"x","input":"\\"store\\":false"}'), false, 'inside a string');
  assert.equal(notStored('{"model":"x","stores":false,"stor":false}'), false);
  // Repeated, parsers disagree on which counts: stored unless every one says false.
  assert.equal(notStored('{"model":"x","store":true,"store":false}'), false);
  assert.equal(notStored('{"model":"x","store":false,"store":true}'), false);
});
