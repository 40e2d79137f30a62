// Which provider a request gets: load ratio, tie-breaks, the shared capacity
// budget, the long-context class and direct dispatch.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { estimateInputTokens } from '../../../src/contract/estimate.js';
import { makeConfig, req, setup } from './fixtures.js';

test('chooses the candidate with the lowest in-flight/capacity ratio', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'big', capacity: 4 }], n2: [{ id: 'small', capacity: 1 }] },
    models: [{ alias: 'chat', providers: ['big', 'small'] }],
  });
  for (let i = 1; i <= 5; i++) s.admit(req(i, 'chat'), 0);
  // 0/4 ties 0/1 -> 'big' (id order); then 1/4 < 0/1? no: 0/1 = 0 < 1/4 -> 'small';
  // then only 'big' is free.
  assert.deepEqual(
    sink.takeGrants().map((g) => g.providerId),
    ['big', 'small', 'big', 'big', 'big'],
  );
});

test('ties break by provider id then node id', () => {
  // Provider ids are fleet-unique, so the id order alone decides; declared out of order on purpose.
  const { s, sink } = setup({
    nodes: { nz: [{ id: 'p-a', capacity: 2 }], na: [{ id: 'p-c', capacity: 2 }, { id: 'p-b', capacity: 2 }] },
    models: [{ alias: 'chat', providers: ['p-c', 'p-b', 'p-a'] }],
  });
  for (let i = 1; i <= 6; i++) s.admit(req(i, 'chat'), 0);
  assert.deepEqual(
    sink.takeGrants().map((g) => g.providerId),
    ['p-a', 'p-b', 'p-c', 'p-a', 'p-b', 'p-c'],
  );
});

test('capacity is one budget shared by every alias a provider serves', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'gpu', capacity: 2 }] },
    models: [
      { alias: 'chat', providers: { gpu: 'llama3:8b' } },
      { alias: 'code', providers: { gpu: 'qwen2.5-coder' } },
    ],
  });
  s.admit(req(1, 'chat'), 0);
  s.admit(req(2, 'code'), 0);
  s.admit(req(3, 'chat'), 0);
  s.admit(req(4, 'code'), 0);
  const grants = sink.takeGrants();
  assert.deepEqual(
    grants.map((g) => [g.requestId, g.servedModel]),
    [
      [1, 'llama3:8b'],
      [2, 'qwen2.5-coder'],
    ],
    'two aliases together get the provider capacity once, not twice',
  );
  const gpu = s.status().providers[0];
  assert.equal(gpu.inFlight, 2);
  assert.equal(gpu.queued, 2);
  assert.equal(gpu.loadRatio, 1);
  assert.deepEqual(gpu.servedModels, ['llama3:8b', 'qwen2.5-coder']);
  assert.deepEqual(s.checkInvariants(), []);
});

test('long requests only go to providers whose context covers them', () => {
  const { s, sink } = setup({
    nodes: {
      n1: [
        { id: 'a-undeclared', capacity: 5 },
        { id: 'b-8k', capacity: 5, maxContextTokens: 8_192 },
        { id: 'c-128k', capacity: 5, maxContextTokens: 131_072 },
      ],
    },
    models: [{ alias: 'chat', providers: ['a-undeclared', 'b-8k', 'c-128k'] }],
    longContextThresholdTokens: 4_096,
  });
  s.admit(req(1, 'chat', { tokens: 100 }), 0); // short: anyone, a-undeclared by id
  s.admit(req(2, 'chat', { tokens: 4_096 }), 0); // long at the threshold: a declared context >= 4096
  s.admit(req(3, 'chat', { tokens: 20_000 }), 0); // long: only c-128k covers it
  s.admit(req(4, 'chat', { tokens: 200_000 }), 0); // nobody covers it: refused at once
  assert.deepEqual(sink.take(), [
    { kind: 'grant', grant: sink.grantFor(1) },
    { kind: 'grant', grant: sink.grantFor(2) },
    { kind: 'grant', grant: sink.grantFor(3) },
    { kind: 'reject', requestId: 4, code: 'context_length_exceeded', retryAfterSec: 0 },
  ]);
  assert.deepEqual(
    [1, 2, 3].map((id) => [id, sink.grantFor(id)?.providerId]),
    [
      [1, 'a-undeclared'],
      [2, 'b-8k'],
      [3, 'c-128k'],
    ],
  );
  assert.equal(s.status().groups[0].queueDepth, 0, 'nothing waits for a window no provider has');
});

test('a long request waits for a provider that declares its window but is not connected, then times out as no_provider_available', () => {
  const { s, sink } = setup(
    {
      nodes: { n1: [{ id: 'small', capacity: 5, maxContextTokens: 8_192 }], n2: [{ id: 'big', capacity: 5, maxContextTokens: 131_072 }] },
      models: [{ alias: 'chat', providers: ['small', 'big'] }],
      longContextThresholdTokens: 4_096,
    },
    ['n1'],
  );
  s.admit(req(1, 'chat', { tokens: 20_000 }), 0);
  assert.deepEqual(sink.take(), [], 'big would take it: it waits');
  assert.equal(s.status().groups[0].queueDepth, 1);
  s.tick(30_000);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 1, code: 'no_provider_available', retryAfterSec: 30 }]);
});

test('the long-context class follows the live threshold', () => {
  const spec = {
    nodes: { n1: [{ id: 'short-only', capacity: 5 }] },
    models: [{ alias: 'chat', providers: ['short-only'] }],
    longContextThresholdTokens: 1_000,
  };
  const { s, sink } = setup(spec);
  s.admit(req(1, 'chat', { tokens: 2_000 }), 0);
  assert.deepEqual(sink.take(), [{ kind: 'reject', requestId: 1, code: 'context_length_exceeded', retryAfterSec: 0 }], 'long, and no provider declares a context: refused');
  s.setConfig(makeConfig({ ...spec, longContextThresholdTokens: 10_000 }), 1);
  s.admit(req(2, 'chat', { tokens: 2_000 }), 2);
  assert.deepEqual(sink.takeGrants().map((g) => g.requestId), [2], 'no longer long: served at once');
});

test('direct dispatch only uses providers of the named node', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'a', capacity: 2 }], n2: [{ id: 'b', capacity: 2 }] },
    models: [{ alias: 'chat', providers: ['a', 'b'] }],
  });
  s.admit(req(1, 'chat', { node: 'n2' }), 0);
  s.admit(req(2, 'chat', { node: 'n2' }), 0);
  s.admit(req(3, 'chat', { node: 'n2' }), 0);
  assert.deepEqual(
    sink.takeGrants().map((g) => [g.requestId, g.nodeId]),
    [
      [1, 'n2'],
      [2, 'n2'],
    ],
    'the third waits for n2 although n1 is idle',
  );
  assert.equal(s.status().groups[0].queueDepth, 1);
});

test('direct dispatch counts against capacity', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'a', capacity: 1 }] },
    models: [{ alias: 'chat', providers: ['a'] }],
  });
  s.admit(req(1, 'chat', { node: 'n1' }), 0);
  const direct = sink.takeGrants()[0];
  s.admit(req(2, 'chat'), 0);
  assert.deepEqual(sink.take(), [], 'the pooled request waits for the slot the direct one holds');
  assert.equal(s.status().providers[0].inFlight, 1);
  s.release(direct.leaseId, 'end', 1);
  assert.deepEqual(sink.takeGrants().map((g) => g.requestId), [2]);
});

test('direct dispatch to a node that serves no provider for the alias is node_not_found', () => {
  const { s, sink } = setup({
    nodes: { n1: [{ id: 'a' }], n2: [{ id: 'b' }] },
    models: [
      { alias: 'chat', providers: ['a'] },
      { alias: 'code', providers: ['b'] },
    ],
  });
  s.admit(req(1, 'chat', { node: 'n2' }), 0);
  s.admit(req(2, 'chat', { node: 'nowhere' }), 0);
  assert.deepEqual(sink.take(), [
    { kind: 'reject', requestId: 1, code: 'node_not_found', retryAfterSec: 0 },
    { kind: 'reject', requestId: 2, code: 'node_not_found', retryAfterSec: 0 },
  ]);
});

test('estimateInputTokens is ceil(bytes / 4)', () => {
  assert.equal(estimateInputTokens(0), 0);
  assert.equal(estimateInputTokens(1), 1);
  assert.equal(estimateInputTokens(4), 1);
  assert.equal(estimateInputTokens(5), 2);
  assert.equal(estimateInputTokens(400_000), 100_000);
});
