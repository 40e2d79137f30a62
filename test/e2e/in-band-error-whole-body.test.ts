// A provider (or a buffering proxy before it) may send a whole event stream
// with a Content-Length: the edge ends the lease at its last byte, before
// END. A last event that is the provider's own overload still lowers its
// limit, as it does on a chunked stream (in-band-error-run.test.ts).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { startProvidersStack, startScriptedProvider, waitFor, type ProvidersStack, type ScriptedProvider } from '../helpers/stack.js';

const event = (name: string, data: object): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
const MESSAGE = { id: 'msg_1', type: 'message', role: 'assistant', model: 'served-p', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 7, output_tokens: 1 } };
const BODY =
  event('message_start', { message: MESSAGE }) +
  event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hel' } }) +
  'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n';

describe('a whole event stream with a Content-Length that ends in an overloaded_error', () => {
  let provider: ScriptedProvider;
  let stack: ProvidersStack;
  before(async () => {
    provider = await startScriptedProvider((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'content-length': Buffer.byteLength(BODY) });
      res.end(BODY);
    });
    stack = await startProvidersStack('m', { p: provider.url }, {}, { p: ['messages'] }, { admin: { host: '127.0.0.1', port: 0 } });
  });
  after(async () => {
    await stack?.close();
    await provider?.close();
  });

  test('lowers the provider\'s limit as the chunked one does', async () => {
    const edge = stack.edge;
    const overloads = async (): Promise<number> =>
      (((await (await fetch(`${edge.adminUrl}/admin/status`)).json()) as { providers: { id: string; overload?: { overloads: number } }[] }).providers.find((p) => p.id === 'p')?.overload?.overloads ?? 0);
    const before = await overloads();
    const client = new Anthropic({ baseURL: edge.url, apiKey: 'unused', maxRetries: 0 });
    const stream = client.messages.stream({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] });
    await assert.rejects(stream.finalMessage(), /Overloaded/);
    await waitFor(async () => (await overloads()) === before + 1, 'the overload to be counted');
  });
});
