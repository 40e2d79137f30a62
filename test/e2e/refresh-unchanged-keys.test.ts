// An edge with client API keys, refreshed with the config it runs (SIGHUP on
// an untouched file, a script that applies on a timer): no change, so the
// answer is `unchanged` and the version stays. Each key's digests are a
// list, a new one in every parsed candidate; the diff compares them by value.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { copyOf, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

let stack: OpsStack;

before(async () => {
  stack = await startOpsStack({ apiKeys: [{ name: 'team-a', key_sha256: sha256Hex('sk-unchanged-team-a-01') }, { name: 'team-b', key_sha256: [sha256Hex('sk-unchanged-team-b-01'), sha256Hex('sk-unchanged-team-b-02')] }] });
});

after(async () => {
  await stack.close();
});

test('an apply of the running config with API keys is unchanged: no version bump, no changes listed', async () => {
  const evaluated = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'evaluate', config: copyOf(stack.raw) } });
  assert.deepEqual(evaluated.json.changes, []);
  for (let i = 0; i < 2; i++) {
    const { status, json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: copyOf(stack.raw) } });
    assert.equal(status, 200);
    assert.equal(json.status, 'unchanged', JSON.stringify(json.changes));
    assert.equal(json.configVersion, 1);
  }
  // A digest that did change is still one change, its value redacted.
  const rotated = copyOf(stack.raw);
  rotated.auth.api_keys[1].key_sha256 = [sha256Hex('sk-unchanged-team-b-02')];
  const { json } = await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'apply', config: rotated } });
  assert.equal(json.status, 'applied');
  assert.deepEqual(json.changes.map((c: { old: unknown; new: unknown }) => [c.old, c.new]), [['[redacted]', '[redacted]']]);
});
