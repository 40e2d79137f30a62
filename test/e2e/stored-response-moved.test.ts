// A stored response lives on the provider process that made it, on its node.
// A refresh that moves that provider id to another node leaves the response
// behind: its follow-ups are refused (409 response_provider_unavailable),
// never sent to the provider now answering to that id elsewhere, which has no
// such response (or, worse, another one by that id).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import type { NodeAgent } from '../../src/agent/agent.js';
import { ALIAS, edgeConfigObject, PROVIDER_ID, startRegisteredAgent, startStack, type Stack } from '../helpers/stack.js';

describe('stored responses whose provider id moved to another node', () => {
  let stack: Stack;
  let other: MockProvider;
  let agent: NodeAgent | undefined;
  before(async () => {
    stack = await startStack({ providerType: 'vllm' });
    other = await startMockProvider({});
  });
  after(async () => {
    await agent?.stop();
    await stack.close();
    await other.close();
  });

  test('GET and previous_response_id are refused, not sent to the new node', async () => {
    const client = new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0 });
    const made = await client.responses.create({ model: ALIAS, input: 'keep this' });
    const raw = edgeConfigObject({ providerType: 'vllm' });
    const nodes = raw.nodes as { id: string; token: string; providers: Record<string, unknown>[] }[];
    nodes.push({ id: 'gpu-2', token: 'token-2', providers: nodes[0].providers });
    nodes[0].providers = [];
    const result = await stack.edge.refresh({ mode: 'apply', config: raw });
    assert.equal(result.status, 'applied', JSON.stringify(result));
    agent = await startRegisteredAgent({
      edge: { address: `127.0.0.1:${stack.edge.grpcPort}` },
      node: { id: 'gpu-2', token: 'token-2' },
      providers: [{ id: PROVIDER_ID, type: 'vllm', base_url: other.url }],
      reconnect: { initial_ms: 50, max_ms: 200 },
    });
    // The moved provider serves: a new response is made on gpu-2.
    const fresh = await client.responses.create({ model: ALIAS, input: 'new home' });
    assert.equal(other.stats.requests, 1, 'new requests go to the provider on its new node');
    const before = other.stats.requests;
    for (const call of [() => client.responses.retrieve(made.id), () => client.responses.create({ model: ALIAS, input: 'go on', previous_response_id: made.id })]) {
      try {
        await call();
        assert.fail('a response stored on gpu-1 was asked of gpu-2');
      } catch (err) {
        const e = err as { status?: number; code?: string; message?: string; headers?: Headers };
        assert.equal(e.status, 409, e.message);
        assert.equal(e.code, 'response_provider_unavailable');
        assert.match(e.message ?? '', /gpu-1/);
        // Only a config change helps: the SDKs, which retry a 409, are told not to.
        assert.equal(e.headers?.get('x-should-retry'), 'false');
      }
    }
    assert.equal(other.stats.requests, before, 'never sent to the provider on the other node');
    assert.equal((await client.responses.retrieve(fresh.id)).id, fresh.id, 'the response made on the new node is reachable');
  });
});
