// auth.api_keys[].requests_per_minute across refreshes that remove a key and
// give it back: what the key spent stays spent, with workers.count 0 (the
// data path's ClientAuth keeps the bucket) as with I/O workers (main's
// KeyConcurrency keeps every name's); and a refresh raising a key's rate
// applies from the refresh on.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { ALIAS, chatOnFreshConnection, waitFor } from '../helpers/stack.js';
import { applyApiKeys, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

const ERIN = 'sk-rate-erin-8888888888';
const FRANK = 'sk-rate-frank-9999999999';

describe('requests per minute of a key removed and given back', () => {
  let stack: OpsStack;
  const apiKeys = [
    { name: 'erin', key_sha256: sha256Hex(ERIN), requests_per_minute: 1 },
    { name: 'frank', key_sha256: sha256Hex(FRANK) },
  ];
  before(async () => {
    stack = await startOpsStack({
      capacity: 4,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      apiKeys: apiKeys,
    });
  });
  after(async () => {
    await stack?.close();
  });

  const apply = async (api_keys: unknown[]): Promise<void> => {
    const { status, json } = await applyApiKeys(stack, api_keys);
    assert.equal(status, 200, JSON.stringify(json));
  };

  test('a key a refresh removes and a later one gives back finds its minute still spent, whatever workers.count is', async () => {
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, ERIN), 200);
    await apply(apiKeys.filter((k) => k.name !== 'erin'));
    await waitFor(async () => (await chatOnFreshConnection(stack.baseURL, ALIAS, ERIN)) === 401, 'erin removed on every worker');
    await apply(apiKeys);
    // The first answer that is not 401 tells (a served request would take the fresh minute it got).
    let back = 401;
    await waitFor(async () => (back = await chatOnFreshConnection(stack.baseURL, ALIAS, ERIN)) !== 401, 'erin back');
    assert.equal(back, 429, 'one a minute, spent before the key was removed');
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, ERIN), 429);
  });
});

describe('requests per minute raised by a refresh', () => {
  let stack: OpsStack;
  const GINA = 'sk-rate-gina-1111111111';
  const gina = { name: 'gina', key_sha256: sha256Hex(GINA), requests_per_minute: 1 };
  before(async () => {
    stack = await startOpsStack({
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      apiKeys: [gina],
    });
  });
  after(async () => {
    await stack?.close();
  });

  test('applies from the refresh, not from the key\'s next request: the time between refills at the new rate, whatever workers.count is', async () => {
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, GINA), 200);
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, GINA), 429, 'one a minute, spent');
    // 10,000 a second: a tenth of a millisecond after the refresh holds a request's worth.
    const { status, json } = await applyApiKeys(stack, [{ ...gina, requests_per_minute: 600_000 }]);
    assert.equal(status, 200, JSON.stringify(json));
    // Refilled at the old rate (one a minute) until this request, the bucket would still be empty.
    assert.equal(await chatOnFreshConnection(stack.baseURL, ALIAS, GINA), 200);
  });
});
