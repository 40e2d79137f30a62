// The session a request names: the x-edge-session header, else the body's
// top-level session_id, else metadata.session_id, read only when the
// inspector's one pass saw one of those members (FIELD_SESSION).
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { FIELD_SESSION, inspectBody } from '../../src/workers/http/inspect.js';
import { SESSION_HEADER, sessionIdOf } from '../../src/workers/http/session-id.js';

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
