// A base_url's trailing slashes, however many, are not part of the path the
// agent joins each request's path (and each probe's) to: `http://host/gateway//`
// reaches /gateway/v1/chat/completions, never /gateway//v1/… (a 404 at most
// providers, which route by exact path).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { probeProvider } from '../../src/agent/health-probes.js';
import { parseAgentConfig } from '../../src/agent/config.js';
import { startProvidersStack, startScriptedProvider, type ProvidersStack, type ScriptedProvider } from '../helpers/stack.js';

const ALIAS = 'm';
/** The path of each request the provider got, in order. */
const paths: string[] = [];
let provider: ScriptedProvider;
let stack: ProvidersStack;

before(async () => {
  provider = await startScriptedProvider((req, res) => {
    paths.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'served-p', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
  });
  stack = await startProvidersStack(ALIAS, { p: `${provider.url}/gateway//` });
});

after(async () => {
  await stack.close();
  await provider.close();
});

test('a request through the edge reaches the base path joined once, whatever trailing slashes base_url has', async () => {
  const client = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const answer = await client.chat.completions.create({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(answer.choices[0].message.content, 'ok');
  assert.deepEqual(paths, ['/gateway/v1/chat/completions']);
});

test("a health probe joins base_url and its path alike", async () => {
  paths.length = 0;
  const answer = await probeProvider(`${provider.url}/gateway//`, '/v1/models', undefined, 2_000);
  assert.equal(answer.status, 200);
  assert.deepEqual(paths, ['/gateway/v1/models']);
});

test('a base_url ending in /v1 and more than one slash is refused as /v1 is: requests would go to /v1/v1/…', () => {
  assert.throws(
    () => parseAgentConfig({ edge: { address: 'edge:1' }, node: { id: 'n', token: 't' }, providers: [{ id: 'p', type: 'vllm', base_url: 'http://gpu:8000/v1//' }] }, 'x'),
    /providers\[0\]\.base_url: ends in \/v1, .* requests would go to \/v1\/v1\/…/,
  );
});
