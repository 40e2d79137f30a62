// Fair queuing's inputs: the config keys that turn it on (and their ranges),
// and what a request's API key and headers make of its band and tenant
// (src/workers/http/fairness-headers.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseEdgeConfig } from '../../src/main/config.js';
import { fairnessOf } from '../../src/main/scheduler/fairness-config.js';
import { ConfigError } from '../../src/shared/config-reader.js';
import { tenantKeyOf } from '../../src/shared/tenant-key.js';
import { ClientAuth, sha256Hex, type ApiKeyState } from '../../src/workers/http/client-auth.js';
import { ANONYMOUS_FAIRNESS, requestFairnessOf } from '../../src/workers/http/fairness-headers.js';

const BASE = { nodes: [{ id: 'n', token: 't', providers: [{ id: 'p' }] }], models: [{ alias: 'm', providers: { p: 's' } }] };
const key = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ name, key_sha256: sha256Hex(`sk-${name}-0123456789`), ...extra });

test('fairness stays off (FIFO) unless a key sets priority, weight or fairness_header, or config says so', () => {
  assert.equal(fairnessOf(parseEdgeConfig(BASE, 't')).enabled, false);
  assert.equal(fairnessOf(parseEdgeConfig({ ...BASE, auth: { api_keys: [key('a', { max_concurrent: 2 })] } }, 't')).enabled, false);
  assert.equal(fairnessOf(parseEdgeConfig({ ...BASE, auth: { api_keys: [key('a', { weight: 3 })] } }, 't')).enabled, true);
  assert.equal(fairnessOf(parseEdgeConfig({ ...BASE, auth: { api_keys: [key('a', { priority: -1 })] } }, 't')).enabled, true);
  assert.equal(fairnessOf(parseEdgeConfig({ ...BASE, auth: { api_keys: [key('a', { fairness_header: true })] } }, 't')).enabled, true);
  assert.equal(fairnessOf(parseEdgeConfig({ ...BASE, auth: { api_keys: [key('a', { fairness_header: false })] } }, 't')).enabled, false);
  assert.equal(fairnessOf(parseEdgeConfig({ ...BASE, scheduler: { fairness: false }, auth: { api_keys: [key('a', { weight: 3 })] } }, 't')).enabled, false);
  const forced = fairnessOf(parseEdgeConfig({ ...BASE, scheduler: { fairness: true, aging_step_per_sec: 0 } }, 't'));
  assert.deepEqual(forced, { enabled: true, agingStepPerSec: 0 });
  assert.equal(fairnessOf(parseEdgeConfig(BASE, 't')).agingStepPerSec, 1);
});

test('priority, weight and fairness_header are range-checked', () => {
  let problems = '';
  try {
    parseEdgeConfig({ ...BASE, scheduler: { fairness: 'yes', aging_step_per_sec: -1 }, auth: { api_keys: [key('a', { priority: 101, weight: 0, fairness_header: 1 })] } }, 't');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    problems = err.problems.join('\n');
  }
  assert.match(problems, /scheduler\.fairness: expected true or false/);
  assert.match(problems, /scheduler\.aging_step_per_sec: expected an integer from 0/);
  assert.match(problems, /auth\.api_keys\[0\]\.priority: expected an integer from -100 to 100/);
  assert.match(problems, /auth\.api_keys\[0\]\.weight: expected an integer from 1 to 1000/);
  assert.match(problems, /auth\.api_keys\[0\]\.fairness_header: expected true or false/);
});

function keyState(extra: Record<string, unknown>): ApiKeyState {
  const config = parseEdgeConfig({ ...BASE, auth: { api_keys: [key('acme', extra)] } }, 't');
  const state = new ClientAuth(config.auth).authenticate('Bearer sk-acme-0123456789');
  assert.ok(!('status' in state));
  return state as ApiKeyState;
}

test('x-edge-priority only lowers the key band; an unreadable one is ignored', () => {
  const k = keyState({ priority: 2, weight: 5 });
  assert.deepEqual(requestFairnessOf({}, k), { priority: 2, tenantKey: tenantKeyOf('acme'), weight: 5 });
  assert.equal(requestFairnessOf({ 'x-edge-priority': '-3' }, k).priority, -3);
  assert.equal(requestFairnessOf({ 'x-edge-priority': '9' }, k).priority, 2, 'never raised');
  assert.equal(requestFairnessOf({ 'x-edge-priority': 'high' }, k).priority, 2);
  assert.equal(requestFairnessOf({ 'x-edge-priority': '-999' }, k).priority, -100);
  assert.equal(requestFairnessOf({}, undefined), ANONYMOUS_FAIRNESS);
});

test('x-edge-fairness-id names a tenant only for a key that allows it (or with auth off)', () => {
  const plain = keyState({});
  const allowed = keyState({ fairness_header: true });
  assert.equal(requestFairnessOf({ 'x-edge-fairness-id': 'user-1' }, plain).tenantKey, tenantKeyOf('acme'));
  const u1 = requestFairnessOf({ 'x-edge-fairness-id': 'user-1' }, allowed).tenantKey;
  const u2 = requestFairnessOf({ 'x-edge-fairness-id': 'user-2' }, allowed).tenantKey;
  assert.notEqual(u1, u2);
  assert.notEqual(u1, tenantKeyOf('acme'));
  assert.equal(u1, tenantKeyOf('acme', 'user-1'));
  assert.equal(requestFairnessOf({ 'x-edge-fairness-id': 'user-1' }, undefined).tenantKey, tenantKeyOf('', 'user-1'));
});

test('x-edge-fairness-id is 1-256 printable ASCII, spaces included (as x-edge-session); anything else is ignored', () => {
  const allowed = keyState({ fairness_header: true });
  const jane = requestFairnessOf({ 'x-edge-fairness-id': 'Jane Doe' }, allowed).tenantKey;
  assert.equal(jane, tenantKeyOf('acme', 'Jane Doe'), 'an end user named with a space is a tenant of its own');
  assert.notEqual(jane, requestFairnessOf({ 'x-edge-fairness-id': 'John Roe' }, allowed).tenantKey);
  assert.equal(requestFairnessOf({ 'x-edge-fairness-id': 'x'.repeat(256) }, allowed).tenantKey, tenantKeyOf('acme', 'x'.repeat(256)));
  for (const bad of ['x'.repeat(257), 'tab\there', 'caf\u00e9', '']) {
    assert.equal(requestFairnessOf({ 'x-edge-fairness-id': bad }, allowed).tenantKey, tenantKeyOf('acme'), `${JSON.stringify(bad)} is the key's own tenant`);
  }
});
