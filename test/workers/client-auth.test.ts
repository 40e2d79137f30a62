import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseEdgeConfig } from '../../src/main/config.js';
import { ConfigError } from '../../src/shared/config-reader.js';
import { Errors } from '../../src/shared/errors.js';
import { ApiKeyState, ClientAuth, sha256Hex } from '../../src/workers/http/client-auth.js';

function key(name: string, secret: string, extra: { models?: string[]; maxConcurrent?: number } = {}) {
  return { name, keySha256s: [sha256Hex(secret)], models: extra.models, maxConcurrent: extra.maxConcurrent };
}

test('auth is off with no keys and on with one', () => {
  assert.equal(new ClientAuth(undefined).enabled, false);
  assert.equal(new ClientAuth({ apiKeys: [] }).enabled, false);
  assert.equal(new ClientAuth({ apiKeys: [key('a', 'sk-a')] }).enabled, true);
});

test('only `Bearer <exact key>` authenticates', () => {
  const auth = new ClientAuth({ apiKeys: [key('a', 'sk-a'), key('b', 'sk-b')] });
  const a = auth.authenticate('Bearer sk-a');
  assert.ok(a instanceof ApiKeyState);
  assert.equal(a.name, 'a');
  assert.equal((auth.authenticate('bearer   sk-b ') as ApiKeyState).name, 'b');
  for (const bad of [undefined, '', 'sk-a', 'Bearer', 'Bearer sk-a sk-b', 'Bearer sk-', 'Bearer SK-A', 'Token sk-a']) {
    assert.equal(auth.authenticate(bad), Errors.invalidApiKey, String(bad));
  }
});

test('max_concurrent bounds open requests; a refresh keeps the count of requests in flight', () => {
  const auth = new ClientAuth({ apiKeys: [key('a', 'sk-a', { maxConcurrent: 2 })] });
  const a = auth.authenticate('Bearer sk-a') as ApiKeyState;
  assert.ok(a.tryAcquire());
  assert.ok(a.tryAcquire());
  assert.equal(a.tryAcquire(), false);
  auth.setConfig({ apiKeys: [key('a', 'sk-a2', { maxConcurrent: 3 })] });
  assert.equal(auth.authenticate('Bearer sk-a'), Errors.invalidApiKey, 'the rotated key is gone');
  const again = auth.authenticate('Bearer sk-a2') as ApiKeyState;
  assert.equal(again, a, 'same state object: its open requests still count');
  assert.ok(again.tryAcquire());
  assert.equal(again.tryAcquire(), false);
  a.release();
  a.release();
  a.release();
  a.release();
  assert.equal(a.inFlight, 0, 'never below zero');
  assert.deepEqual(auth.load(0), [{ name: 'a', inFlight: 0 }]);
});

test('a key removed and given back while its requests are open still counts them (as the I/O workers\' count by name does)', () => {
  const auth = new ClientAuth({ apiKeys: [key('a', 'sk-a', { maxConcurrent: 1 }), key('b', 'sk-b')] });
  const a = auth.authenticate('Bearer sk-a') as ApiKeyState;
  assert.ok(a.tryAcquire());
  auth.setConfig({ apiKeys: [key('b', 'sk-b')] });
  assert.equal(auth.authenticate('Bearer sk-a'), Errors.invalidApiKey, 'revoked');
  assert.deepEqual(auth.load(0), [{ name: 'a', inFlight: 1 }, { name: 'b', inFlight: 0 }], 'the load still counts the revoked key\'s open request');
  auth.setConfig({ apiKeys: [key('a', 'sk-a', { maxConcurrent: 1 }), key('b', 'sk-b')] });
  const back = auth.authenticate('Bearer sk-a') as ApiKeyState;
  assert.equal(back.inFlight, 1, 'the request opened before the removal is still open');
  assert.equal(back.tryAcquire(), false, 'max_concurrent 1 holds');
  a.release();
  assert.ok(back.tryAcquire());
  back.release();
  // Gone with nothing open: forgotten at the next refresh.
  auth.setConfig({ apiKeys: [key('b', 'sk-b')] });
  auth.setConfig({ apiKeys: [key('a', 'sk-a', { maxConcurrent: 1 }), key('b', 'sk-b')] });
  assert.equal((auth.authenticate('Bearer sk-a') as ApiKeyState).inFlight, 0);
});

test('models restricts a key to its aliases', () => {
  const auth = new ClientAuth({ apiKeys: [key('a', 'sk-a', { models: ['m1'] }), key('b', 'sk-b')] });
  const a = auth.authenticate('Bearer sk-a') as ApiKeyState;
  assert.ok(a.mayUse('m1'));
  assert.equal(a.mayUse('m2'), false);
  assert.ok((auth.authenticate('Bearer sk-b') as ApiKeyState).mayUse('anything'));
});

function problemsOf(raw: unknown): readonly string[] {
  try {
    parseEdgeConfig(raw, 'test.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail('expected a ConfigError');
}

test('auth config: bad digests are reported without echoing them, unknown aliases and duplicates too', () => {
  const base = { nodes: [{ id: 'n', token: 't', providers: [{ id: 'p' }] }], models: [{ alias: 'm', providers: { p: 's' } }] };
  const problems = problemsOf({
    ...base,
    auth: {
      api_keys: [
        { name: 'a', key_sha256: 'sk-live-secret-pasted-by-mistake' },
        { name: 'a', key_sha256: sha256Hex('x'), models: ['nope'] },
        { name: 'c', key_sha256: sha256Hex('x'), max_concurrent: 0 },
      ],
    },
  }).join('\n');
  assert.match(problems, /auth\.api_keys\[0\]\.key_sha256: expected 64 hex digits/);
  assert.ok(!problems.includes('sk-live-secret'), 'the pasted value is not echoed');
  assert.match(problems, /auth\.api_keys\[1\]\.name: duplicate name "a"/);
  assert.match(problems, /auth\.api_keys\[1\]\.models\[0\]: no model with alias "nope"/);
  assert.match(problems, /auth\.api_keys\[2\]\.key_sha256: the same key is listed twice/);
  assert.match(problems, /auth\.api_keys\[2\]\.max_concurrent: expected an integer from 1/);
  const ok = parseEdgeConfig({ ...base, auth: { api_keys: [{ name: 'a', key_sha256: sha256Hex('k'), models: ['m'], max_concurrent: 4 }] } }, 't');
  assert.deepEqual(ok.auth?.apiKeys, [{ name: 'a', keySha256s: [sha256Hex('k')], models: ['m'], maxConcurrent: 4 }]);
  assert.deepEqual(parseEdgeConfig(base, 't').auth?.apiKeys, []);
});

test('auth config: a key pasted as a list entry, as the list or as the section is reported without echoing it', () => {
  const base = { nodes: [{ id: 'n', token: 't', providers: [{ id: 'p' }] }], models: [{ alias: 'm', providers: { p: 's' } }] };
  const cases: [unknown, RegExp][] = [
    [{ api_keys: ['sk-live-pasted-entry-0123'] }, /auth\.api_keys\[0\]: expected a mapping, found a string \(value not shown/],
    [{ api_keys: [{ name: 'a', key_sha256: sha256Hex('k') }, 'sk-live-pasted-entry-0123'] }, /auth\.api_keys\[1\]: expected a mapping, found a string/],
    [{ api_keys: 'sk-live-pasted-entry-0123' }, /auth\.api_keys: expected a list, found a string/],
    [{ api_keys: [1234567890123] }, /auth\.api_keys\[0\]: expected a mapping, found a number \(value not shown/],
    ['sk-live-pasted-entry-0123', /auth: expected a mapping, found a string/],
  ];
  for (const [auth, expected] of cases) {
    const problems = problemsOf({ ...base, auth }).join('\n');
    assert.match(problems, expected);
    assert.ok(!problems.includes('sk-live') && !problems.includes('1234567890'), `the pasted value is not echoed: ${problems}`);
  }
  assert.match(problemsOf({ ...base, auth: null }).join('\n'), /auth: expected a mapping, found null/);
});

test('a key known by two secrets while one is rotated: either authenticates as the one key, its count shared; dropping the old leaves the new', () => {
  const auth = new ClientAuth({ apiKeys: [{ name: 'a', keySha256s: [sha256Hex('sk-old'), sha256Hex('sk-new')], models: undefined, maxConcurrent: 2 }] });
  const old = auth.authenticate('Bearer sk-old') as ApiKeyState;
  const fresh = auth.authenticate('Bearer sk-new') as ApiKeyState;
  assert.equal(old, fresh, 'one key, not two');
  assert.ok(old.tryAcquire());
  assert.ok(fresh.tryAcquire());
  assert.equal(old.tryAcquire(), false, 'its max_concurrent counts both secrets');
  auth.setConfig({ apiKeys: [{ name: 'a', keySha256s: [sha256Hex('sk-new')], models: undefined, maxConcurrent: 2 }] });
  assert.equal(auth.authenticate('Bearer sk-old'), Errors.invalidApiKey, 'the old secret is gone once the list drops it');
  assert.equal(auth.authenticate('Bearer sk-new'), old, 'the same state: its open requests still count');
});

test('key_sha256 as a list: 1 to 4 digests, each checked and none shown', () => {
  const raw = (digests: unknown) => ({ nodes: [{ id: 'n1', token: 'node-token-0123456789', providers: [{ id: 'p1' }] }], models: [{ alias: 'm', providers: { p1: 'm' } }], auth: { api_keys: [{ name: 'a', key_sha256: digests }] } });
  assert.deepEqual(parseEdgeConfig(raw([sha256Hex('x'), sha256Hex('y').toUpperCase()]), 't').auth?.apiKeys[0].keySha256s, [sha256Hex('x'), sha256Hex('y')]);
  const problems = (digests: unknown): readonly string[] => {
    try {
      parseEdgeConfig(raw(digests), 't');
    } catch (err) {
      return (err as ConfigError).problems;
    }
    return [];
  };
  assert.deepEqual(problems([]), ['auth.api_keys[0].key_sha256: one digest, or a list of 1 to 4 (the secrets the key is known by while one is rotated)']);
  assert.deepEqual(problems([sha256Hex('x'), 'sk-pasted-by-mistake']), ['auth.api_keys[0].key_sha256[1]: expected 64 hex digits (sha256 of the key; `edge hash-key` prints it), value not shown']);
  assert.deepEqual(problems([sha256Hex('x'), sha256Hex('x')]), ['auth.api_keys[0].key_sha256[1]: the same key is listed twice']);
});
