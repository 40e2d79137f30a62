// A provider may write a ping, a keepalive comment or `data: [DONE]` right
// after its stream's last event (message_stop, response.completed), and its
// socket reads (or the node's batched frames) may hand both to the edge in
// one chunk. That stream ended whole: the client gets exactly the provider's
// bytes, no error of the edge's after them, and the run is recorded as ended
// with its tokens.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { RunningEdge } from '../../src/edge/edge.js';
import { startEventStreamCases, type EventStreamCases } from '../helpers/stack.js';

const event = (name: string, data: object): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
const PING = 'event: ping\ndata: {"type": "ping"}\n\n';

const MESSAGE = { id: 'msg_1', type: 'message', role: 'assistant', model: 'served-p', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 7, output_tokens: 1 } };
const MESSAGES_STREAM =
  event('message_start', { message: MESSAGE }) +
  event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hello' } }) +
  event('content_block_stop', { index: 0 }) +
  event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 9 } }) +
  event('message_stop', {});

const RESPONSE = { id: 'resp_1', object: 'response', created_at: 1, model: 'served-p', status: 'in_progress', output: [] as unknown[] };
const ITEM = { id: 'msg_1', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Hello', annotations: [] }] };
const RESPONSES_STREAM =
  event('response.created', { sequence_number: 0, response: RESPONSE }) +
  event('response.output_text.delta', { sequence_number: 1, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hello' }) +
  event('response.completed', { sequence_number: 2, response: { ...RESPONSE, status: 'completed', output: [ITEM], usage: { input_tokens: 36, output_tokens: 87, total_tokens: 123 } } });

/** What the provider writes for each x-case: the chunks, each in a write of its own. */
const CASES: Record<string, string[]> = {
  'messages-ping': [MESSAGES_STREAM + PING],
  'messages-ping-comment': [MESSAGES_STREAM + PING + ': still here\n\n'],
  // message_stop cut across two writes, the ping behind its second half.
  'messages-split-ping': [MESSAGES_STREAM.slice(0, -10), MESSAGES_STREAM.slice(-10) + PING],
  'responses-done': [RESPONSES_STREAM + 'data: [DONE]\n\n'],
  'responses-comment': [RESPONSES_STREAM + ': bye\n\n'],
};

describe('a ping, comment or [DONE] in the same chunk as the last event', () => {
  let cases: EventStreamCases;
  let edge: RunningEdge;
  before(async () => {
    cases = await startEventStreamCases(CASES);
    edge = cases.edge;
  });
  after(async () => {
    await cases?.close();
  });

  const finishedRecord = (runId: string | null): Promise<{ state?: string; outcome?: string; tokens?: unknown }> => cases.finishedRun(runId);
  const relayed = (path: string, name: string, body: object): Promise<{ text: string; runId: string | null }> => cases.relay(path, name, body);

  for (const name of ['messages-ping', 'messages-ping-comment', 'messages-split-ping']) {
    test(`Messages (${name}): relayed as it is, the SDK reads it whole, the run ended with its tokens`, async () => {
      const { text, runId } = await relayed('/v1/messages', name, { model: 'm', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hi' }] });
      assert.equal(text, CASES[name].join(''), 'no error event after the provider\'s');
      const record = await finishedRecord(runId);
      assert.equal(record.outcome, 'end', JSON.stringify(record));
      assert.deepEqual(record.tokens, { prompt: 7, completion: 9 });

      const client = new Anthropic({ baseURL: edge.url, apiKey: 'k', maxRetries: 0 });
      const stream = client.messages.stream({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] }, { headers: { 'x-case': name } });
      const message = await stream.finalMessage();
      assert.deepEqual(message.content, [{ type: 'text', text: 'Hello' }]);
    });
  }

  for (const name of ['responses-done', 'responses-comment']) {
    test(`Responses (${name}): relayed as it is, the SDK reads it whole, the run ended with its tokens`, async () => {
      const { text, runId } = await relayed('/v1/responses', name, { model: 'm', stream: true, input: 'Hi' });
      assert.equal(text, CASES[name].join(''), 'no response.failed after the provider\'s response.completed');
      const record = await finishedRecord(runId);
      assert.equal(record.outcome, 'end', JSON.stringify(record));
      assert.deepEqual(record.tokens, { prompt: 36, completion: 87 });

      const client = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const types: string[] = [];
      const stream = await client.responses.create({ model: 'm', stream: true, input: 'Hi' }, { headers: { 'x-case': name } });
      for await (const e of stream) types.push(e.type);
      assert.deepEqual(types, ['response.created', 'response.output_text.delta', 'response.completed']);
    });
  }
});
