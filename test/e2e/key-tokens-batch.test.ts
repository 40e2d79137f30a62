// A batch (embeddings `input`, completions `prompt` as a list) large enough
// to be token-counted off the event loop is as long as its longest item for
// the long-context class, but its key's tokens_per_minute reservation is
// every item's tokens: a provider counts them all. Reserved as its longest
// item alone, a 2,000-input batch took a few dozen tokens of the minute
// where a smaller batch, estimated by its bytes, took thousands, so a key
// could run any number of such batches at once past its limit.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createServer, type ServerResponse } from 'node:http';
import OpenAI from 'openai';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { silentLogger } from '../../src/shared/logger.js';
import type { NodeAgent } from '../../src/agent/agent.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { NODE_ID, NODE_TOKEN, serveOnLoopback, startRegisteredAgent, testWorkers, waitUntil, type ScriptedProvider } from '../helpers/stack.js';

const KEY = 'sk-batch-tokens-0123456789';
const SDK_KEY = 'sk-batch-tokens-sdk-9876543210';
const PER_MINUTE = 1_000;

describe('a large batch reserves its items\' tokens of its key\'s minute', () => {
  let provider: ScriptedProvider;
  let edge: RunningEdge;
  let agent: NodeAgent;
  /** Embeddings requests the provider holds, with their input count, until the test answers them. */
  const held: { res: ServerResponse; inputs: number }[] = [];
  const answerHeld = (): void => {
    for (const { res, inputs } of held.splice(0)) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [], model: 'served-p', usage: { prompt_tokens: inputs * 20, total_tokens: inputs * 20 } }));
    }
  };
  before(async () => {
    provider = await serveOnLoopback(
      createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => held.push({ res, inputs: (JSON.parse(Buffer.concat(chunks).toString()) as { input: unknown[] }).input.length }));
      }),
    );
    edge = await startEdge(
      parseEdgeConfig(
        {
          listen: { http: { port: 0 }, grpc: { port: 0 } },
          admin: { host: '127.0.0.1', port: 0 },
          workers: { count: testWorkers() },
          auth: { api_keys: [{ name: 'k', key_sha256: sha256Hex(KEY), tokens_per_minute: PER_MINUTE }, { name: 'sdk', key_sha256: sha256Hex(SDK_KEY), tokens_per_minute: PER_MINUTE }] },
          nodes: [{ id: NODE_ID, token: NODE_TOKEN, providers: [{ id: 'p', capacity: 4 }] }],
          models: [{ alias: 'emb', providers: { p: 'served-p' } }],
        },
        'test',
      ),
      { logger: silentLogger(), admin: true },
    );
    agent = await startRegisteredAgent({ edge: { address: `127.0.0.1:${edge.grpcPort}` }, node: { id: NODE_ID, token: NODE_TOKEN }, providers: [{ id: 'p', type: 'openai_compat', base_url: provider.url }], reconnect: { initial_ms: 50, max_ms: 200 } });
  });
  after(async () => {
    answerHeld();
    await agent?.stop();
    await edge?.close();
    await provider?.close();
  });

  const tokensLeft = async (name: string): Promise<number> => {
    const keys = (await (await fetch(`${edge.adminUrl}/admin/keys`)).json()) as { keys: { name: string; tokensLeft: number }[] };
    return keys.keys.find((k) => k.name === name)?.tokensLeft ?? NaN;
  };

  const embed = (input: unknown): Promise<Response> =>
    fetch(`${edge.url}/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'emb', input }) });

  test('while a 2,000-input batch is at its provider, the key is in debt for it and a further request is refused', async () => {
    // ~20 tokens each, ~40,000 together: 219 KB, past the bytes (long_context_threshold_tokens x 4) that get it counted.
    const batch = Array.from({ length: 2_000 }, (_, i) => `sentence number ${i} of the batch, ${'words '.repeat(12)}`);
    assert.ok(JSON.stringify({ model: 'emb', input: batch }).length > 32_768 * 4);
    const first = embed(batch);
    await waitUntil(() => held.length === 1, 'the batch at its provider');
    const left = await tokensLeft('k');
    assert.ok(left < -30_000, `the batch reserved ${PER_MINUTE - left} tokens of the minute`);
    const second = await embed('one more');
    const body = (await second.json()) as { error?: { code?: string } };
    assert.equal(second.status, 429, JSON.stringify(body));
    assert.equal(body.error?.code, 'rate_limit_exceeded');
    answerHeld();
    assert.equal((await first).status, 200);
  });

  test("the openai SDK's batch (it asks for base64, so a key with tokens_per_minute has it counted from 32 KiB) reserves its items too", async () => {
    const openai = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: SDK_KEY, maxRetries: 0 });
    // ~20 tokens each, ~8,000 together: 44 KB.
    const batch = Array.from({ length: 400 }, (_, i) => `sentence number ${i} of the batch, ${'words '.repeat(12)}`);
    const first = openai.embeddings.create({ model: 'emb', input: batch });
    await waitUntil(() => held.length === 1, 'the batch at its provider');
    const left = await tokensLeft('sdk');
    assert.ok(left < -5_000, `the batch reserved ${PER_MINUTE - left} tokens of the minute`);
    answerHeld();
    assert.equal((await first).object, 'list');
  });
});
