// A provider that compresses its answer though the agent asked for identity
// (a gzip proxy in front of it) still stores the Response it made: the edge
// must remember its id as for a plain answer. It read the id only from plain
// bytes, so every follow-up naming it was refused with 400
// previous_response_not_found while the provider held the response.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { startProvidersStack, startScriptedProvider, waitUntil, type ProvidersStack, type ScriptedProvider } from '../helpers/stack.js';

describe('a stored response whose provider compressed its answer', () => {
  let provider: ScriptedProvider;
  let stack: ProvidersStack;
  let made = 0;
  /** The previous_response_id each follow-up reached the provider with. */
  const continued: string[] = [];

  before(async () => {
    provider = await startScriptedProvider((req: IncomingMessage, res) => {
      const coding = String(req.headers['x-test-coding'] ?? '');
      const previous = req.headers['x-test-previous'];
      if (typeof previous === 'string') continued.push(previous);
      const id = `resp_${coding || 'plain'}${++made}`;
      const response = { id, object: 'response', created_at: 1, status: 'completed', model: 'served-p', output: [], usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 } };
      if (req.headers['x-test-stream'] === '1') {
        const text =
          `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: { ...response, status: 'in_progress' } })}\n\n` +
          `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', sequence_number: 1, response })}\n\n`;
        res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'br' });
        res.end(brotliCompressSync(text));
        return;
      }
      const body = coding === 'gzip' ? gzipSync(JSON.stringify(response)) : Buffer.from(JSON.stringify(response));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length, ...(coding === '' ? {} : { 'content-encoding': coding }) });
      res.end(body);
    });
    stack = await startProvidersStack('m', { p: provider.url }, {}, { p: ['responses'] });
  });
  after(async () => {
    await stack?.close();
    await provider?.close();
  });

  const client = (headers: Record<string, string>): OpenAI => new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 0, defaultHeaders: headers });

  test('a gzip JSON answer: its id is remembered and a follow-up reaches its provider', async () => {
    const first = await client({ 'x-test-coding': 'gzip' }).responses.create({ model: 'm', input: 'hi' });
    assert.match(first.id, /^resp_gzip/);
    const next = await client({ 'x-test-previous': first.id }).responses.create({ model: 'm', input: 'and then', previous_response_id: first.id });
    assert.match(next.id, /^resp_plain/);
    assert.ok(continued.includes(first.id));
  });

  test('a brotli event stream: its id is remembered from response.created', async () => {
    const stream = await client({ 'x-test-coding': 'br', 'x-test-stream': '1' }).responses.create({ model: 'm', input: 'hi', stream: true });
    let id = '';
    for await (const event of stream) if (event.type === 'response.completed') id = event.response.id;
    assert.match(id, /^resp_br/);
    const next = await client({ 'x-test-previous': id }).responses.create({ model: 'm', input: 'and then', previous_response_id: id });
    assert.match(next.id, /^resp_plain/);
    assert.ok(continued.includes(id));
  });

  // Codings are case-insensitive: `Identity` is no coding, so its answer is read as a plain one.
  test('a head labelled `Content-Encoding: Identity`: its id is remembered and its tokens counted', async () => {
    const raw = await client({ 'x-test-coding': 'Identity' }).responses.create({ model: 'm', input: 'hi' }).withResponse();
    const id = raw.data.id;
    const runId = raw.response.headers.get('x-edge-run-id');
    const next = await client({ 'x-test-previous': id }).responses.create({ model: 'm', input: 'and then', previous_response_id: id });
    assert.match(next.id, /^resp_plain/);
    await waitUntil(() => stack.edge.runs.list({ limit: 1000 }).some((r) => r.id === runId && r.outcome !== null), 'the run finished');
    assert.deepEqual(stack.edge.runs.list({ limit: 1000 }).find((r) => r.id === runId)?.tokens, { prompt: 1, completion: 1 });
  });
});
