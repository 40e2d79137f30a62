// The session a request names: the x-edge-session header, else the body's
// top-level session_id, else metadata.session_id, read only when the
// inspector's one pass saw one of those members (FIELD_SESSION).
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { requestTagOf } from '../../src/workers/data-plane.js';
import { readLeanHead } from '../../src/workers/http/lean-head.js';
import { FIELD_SESSION, inspectBody } from '../../src/workers/http/inspect.js';
import { SESSION_HEADER, sessionIdOf, sessionKeyOf } from '../../src/workers/http/session-id.js';

function sessionOf(body: string, headers: Record<string, string> = {}): string | undefined {
  const bytes = Buffer.from(body);
  const info = inspectBody(bytes);
  assert.ok(info.ok, body);
  return sessionIdOf({ headers } as unknown as IncomingMessage, bytes, info.fields);
}

test('a top-level session_id or metadata member is noted by the inspector, of any value, at the top level only', () => {
  const fields = (body: string): number => {
    const info = inspectBody(Buffer.from(body));
    assert.ok(info.ok, body);
    return info.fields & FIELD_SESSION;
  };
  assert.equal(fields('{"model":"x","session_id":"s"}'), FIELD_SESSION);
  assert.equal(fields('{"model":"x","metadata":{"user_id":"u"}}'), FIELD_SESSION);
  assert.equal(fields('{"model":"x","session_id":null}'), FIELD_SESSION);
  assert.equal(fields('{"model":"x","sessi\\u006fn_id":"s"}'), FIELD_SESSION, 'an escaped key is the same key');
  assert.equal(fields('{"model":"x","messages":[{"role":"user","content":"\\"session_id\\": \\"s\\""}]}'), 0, 'mentioned in a message');
  assert.equal(fields('{"model":"x","extra":{"session_id":"s","metadata":{}}}'), 0, 'nested deeper');
});

test('the session comes from the header, then session_id, then metadata.session_id', () => {
  assert.equal(sessionOf('{"model":"x","session_id":"from-body"}', { [SESSION_HEADER]: 'from-header' }), 'from-header');
  assert.equal(sessionOf('{"model":"x","session_id":"top","metadata":{"session_id":"meta"}}'), 'top');
  assert.equal(sessionOf('{"model":"x","metadata":{"session_id":"meta"}}'), 'meta');
  assert.equal(sessionOf('{"model":"x","sessi\\u006fn_id":"escaped"}'), 'escaped', 'JSON.parse reads an escaped key, so the edge does');
  assert.equal(sessionOf('{"model":"x","metadata":{"user_id":"u"}}'), '', 'metadata without a session_id');
  assert.equal(sessionOf('{"model":"x","messages":[{"role":"user","content":"my \\"session_id\\": \\"s\\""}]}'), '', 'a message that mentions one names none');
  assert.equal(sessionOf('{"model":"x","session_id":""}'), '');
  assert.equal(sessionOf('{"model":"x"}'), '');
});

test('a header that could not name a session, or a body value that is not a string, is refused (undefined: 400)', () => {
  assert.equal(sessionOf('{"model":"x","session_id":7}'), undefined);
  assert.equal(sessionOf('{"model":"x"}', { [SESSION_HEADER]: 'tab\there' }), undefined);
});

test('a body value the API allows but no directory could be named after is named by its digest, the same every time', () => {
  for (const body of ['{"model":"x","session_id":"a\\nb"}', `{"model":"x","metadata":{"session_id":"${'s'.repeat(257)}"}}`, '{"model":"x","metadata":{"session_id":"café"}}']) {
    const id = sessionOf(body);
    assert.match(id ?? '', /^h-[0-9a-f]{32}$/, body);
    assert.equal(sessionOf(body), id);
  }
  assert.notEqual(sessionOf('{"model":"x","session_id":"café"}'), sessionOf('{"model":"x","session_id":"cafe\u0301"}'));
});

test('an id shaped like a digest is digested itself: nobody can name another\'s digested session', () => {
  const digested = sessionOf('{"model":"x","session_id":"café"}') ?? '';
  assert.match(digested, /^h-[0-9a-f]{32}$/);
  assert.notEqual(sessionOf(`{"model":"x","session_id":"${digested}"}`), digested);
  assert.notEqual(sessionOf('{"model":"x"}', { [SESSION_HEADER]: digested }), digested);
  assert.match(sessionOf('{"model":"x"}', { [SESSION_HEADER]: digested }) ?? '', /^h-[0-9a-f]{32}$/);
});

test('a session id and a request tag read off a lean head hold only their own characters, not the head', () => {
  // Both outlive the request (the run records intern up to 4096 names and keep finished runs; each
  // worker's run wire keeps 2048 session names): were they slices of the head's text, as the lean
  // reader cuts its values, each would hold its whole head (up to limits.max_header_bytes).
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const HEADS = 200;
  const LIMIT = 1 << 20;
  const padding = 'p'.repeat(128 * 1024); // 200 heads of 128 KB: 25 MB if kept
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept: string[] = [];
  for (let i = 0; i < HEADS; i++) {
    const n = String(i).padStart(24, '0');
    const bytes = Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nX-Edge-Session: session-${n}\r\nX-Request-Id: tag-${n}\r\nX-Pad: ${padding}\r\nContent-Length: 2\r\n\r\n{}`, 'latin1');
    const head = readLeanHead(bytes, LIMIT, ['/v1/chat/completions']);
    assert.ok(head !== undefined);
    const request = { headers: head.headers } as unknown as IncomingMessage;
    kept.push(sessionIdOf(request, Buffer.from('{}'), 0) as string, requestTagOf(request, 'run-1'));
  }
  gc();
  const grown = process.memoryUsage().heapUsed - before;
  assert.deepEqual(kept.slice(-2), [`session-${String(HEADS - 1).padStart(24, '0')}`, `tag-${String(HEADS - 1).padStart(24, '0')}`]);
  assert.ok(grown < 4 * 1024 * 1024, `${HEADS} session ids and tags hold ${(grown / 1048576).toFixed(1)} MB of heap`);
});

test('the session key is 53 bits of 64-bit FNV-1a: ids that share a 32-bit hash get keys of their own', () => {
  assert.equal(sessionKeyOf(''), 0, 'no session');
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c, of "foobar" 0x85944171f73967e8: the key is its top 53 bits.
  assert.equal(sessionKeyOf('a'), Number(0xaf63dc4c8601ec8cn >> 11n));
  assert.equal(sessionKeyOf('foobar'), Number(0x85944171f73967e8n >> 11n));
  // 'sess-tin' and 'sess-145c0' share their 32-bit FNV-1a (the key once was that, so one moved the other's node).
  assert.notEqual(sessionKeyOf('sess-tin'), sessionKeyOf('sess-145c0'));
  for (const id of ['x', 'k0123456789abcdef.conversation', '~'.repeat(256)]) assert.ok(Number.isSafeInteger(sessionKeyOf(id)) && sessionKeyOf(id) > 0, id);
});
