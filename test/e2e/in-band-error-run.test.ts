// A provider's 200 stream may end with its own in-band error: chat's
// `data: {"error":{...}}`, Messages' `event: error`, Responses' `error` or
// `response.failed`. The client gets those bytes untouched and its SDK raises
// the error; the run record says the run ended in that error (outcome
// `error`, the provider's message, clipped as other provider messages are),
// with the status the client got (200), and the provider is judged as the
// error's status would have judged it. A stream whose text only mentions
// the word still ended as an answer.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { RunningEdge } from '../../src/edge/edge.js';
import { startEventStreamCases, type EventStreamCases } from '../helpers/stack.js';

const event = (name: string, data: object): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
const chunk = (delta: object, finish: string | null = null): string =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served-p', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

const CHAT_HEAD = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'Hel' });
const CHAT_ERROR = 'data: {"error":{"message":"model crashed","type":"server_error","code":500}}\n\n';
const LONG = 'x'.repeat(1_500);

const MESSAGE = { id: 'msg_1', type: 'message', role: 'assistant', model: 'served-p', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 7, output_tokens: 1 } };
const MESSAGES_HEAD =
  event('message_start', { message: MESSAGE }) +
  event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hel' } });

const RESPONSE = { id: 'resp_1', object: 'response', created_at: 1, model: 'served-p', status: 'in_progress', output: [] as unknown[] };
const RESPONSES_HEAD = event('response.created', { sequence_number: 0, response: RESPONSE });

/** What the provider writes for each x-case: the chunks, each in a write of its own. */
const CASES: Record<string, string[]> = {
  'chat-error': [CHAT_HEAD, CHAT_ERROR],
  'chat-error-done': [CHAT_HEAD, CHAT_ERROR + 'data: [DONE]\n\n'],
  'chat-long-error': [CHAT_HEAD, `data: ${JSON.stringify({ error: { message: LONG, type: 'server_error' } })}\n\n`],
  // The word in the text and a finish_reason: an answer like any other.
  'chat-says-error': [chunk({ role: 'assistant', content: '"error": no' }), chunk({}, 'error'), 'data: [DONE]\n\n'],
  'messages-error': [MESSAGES_HEAD, 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'],
  'responses-failed': [RESPONSES_HEAD, event('response.failed', { sequence_number: 1, response: { ...RESPONSE, status: 'failed', error: { code: 'server_error', message: 'the model failed' } } })],
  'responses-error': [RESPONSES_HEAD, event('error', { sequence_number: 1, code: 'server_error', message: 'stream broke', param: null })],
};

interface RunRecord {
  state?: string;
  outcome?: string;
  status?: number;
  error?: string | null;
}

describe('a 200 stream that ends with the provider\'s in-band error', () => {
  let cases: EventStreamCases;
  let edge: RunningEdge;
  before(async () => {
    cases = await startEventStreamCases(CASES);
    edge = cases.edge;
  });
  after(async () => {
    await cases?.close();
  });

  function finishedRecord(runId: string | null): Promise<RunRecord> {
    assert.ok(runId, 'the answer names its run');
    return cases.finishedRun<RunRecord>(runId);
  }

  function assertFailedWith(record: RunRecord, message: string): void {
    assert.equal(record.outcome, 'error', JSON.stringify(record));
    assert.equal(record.status, 200, 'the status the client got');
    assert.equal(record.error, message);
  }

  const relayed = (path: string, name: string, body: object): Promise<{ text: string; runId: string | null }> => cases.relay(path, name, body);

  for (const name of ['chat-error', 'chat-error-done']) {
    test(`chat (${name}): the SDK raises the provider's error, the run ended in it`, async () => {
      const client = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const { data: stream, response } = await client.chat.completions
        .create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { headers: { 'x-case': name } })
        .withResponse();
      const read: string[] = [];
      await assert.rejects(
        async () => {
          for await (const c of stream) read.push(c.choices[0]?.delta.content ?? '');
        },
        (err: Error) => err.message.includes('model crashed'),
      );
      assert.equal(read.join(''), 'Hel');
      assertFailedWith(await finishedRecord(response.headers.get('x-edge-run-id')), 'model crashed');
    });
  }

  test('chat: the bytes are relayed untouched, and a long message is clipped in the record', async () => {
    const { text, runId } = await relayed('/v1/chat/completions', 'chat-long-error', { model: 'm', stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(text, CASES['chat-long-error'].join(''), 'nothing of the edge\'s added');
    assertFailedWith(await finishedRecord(runId), `${LONG.slice(0, 1_000)}…`);
  });

  test('chat: a stream whose text says "error" ended as an answer', async () => {
    const { text, runId } = await relayed('/v1/chat/completions', 'chat-says-error', { model: 'm', stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(text, CASES['chat-says-error'].join(''));
    const record = await finishedRecord(runId);
    assert.equal(record.outcome, 'end', JSON.stringify(record));
    assert.equal(record.error, null);
  });

  test('Messages: the SDK raises the provider\'s error event, the run ended in it', async () => {
    const client = new Anthropic({ baseURL: edge.url, apiKey: 'k', maxRetries: 0 });
    const { data: stream, response } = await client.messages
      .create({ model: 'm', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { headers: { 'x-case': 'messages-error' } })
      .withResponse();
    await assert.rejects(
      async () => {
        for await (const e of stream) void e;
      },
      (err: Error) => err.message.includes('Overloaded'),
    );
    assertFailedWith(await finishedRecord(response.headers.get('x-edge-run-id')), 'Overloaded');
  });

  for (const [name, message] of [['responses-failed', 'the model failed'], ['responses-error', 'stream broke']]) {
    test(`Responses (${name}): relayed untouched, the run ended in the provider's error`, async () => {
      const { text, runId } = await relayed('/v1/responses', name, { model: 'm', stream: true, input: 'Hi' });
      assert.equal(text, CASES[name].join(''));
      assertFailedWith(await finishedRecord(runId), message);
    });
  }

  test('the provider\'s in-band failure counts toward its ejection and its overload lowers its limit, as their statuses would', async () => {
    const provider = async (): Promise<{ outlier?: { consecutiveFailures: number }; overload?: { limit: number; overloads: number } }> =>
      ((await (await fetch(`${edge.adminUrl}/admin/status`)).json()) as { providers: { id: string }[] }).providers.find((p) => p.id === 'p') as never;
    // An answer first: the failure count starts over.
    await relayed('/v1/chat/completions', 'chat-says-error', { model: 'm', stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    const failuresBefore = (await provider()).outlier?.consecutiveFailures ?? 0;
    const { runId } = await relayed('/v1/chat/completions', 'chat-error', { model: 'm', stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    await finishedRecord(runId);
    assert.equal((await provider()).outlier?.consecutiveFailures, failuresBefore + 1, 'a server_error event is the provider\'s failure');
    const overloadsBefore = (await provider()).overload?.overloads ?? 0;
    const messages = await relayed('/v1/messages', 'messages-error', { model: 'm', max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    await finishedRecord(messages.runId);
    const after = await provider();
    assert.equal(after.overload?.overloads, overloadsBefore + 1, `an overloaded_error event lowers the limit: ${JSON.stringify(after)}`);
    assert.equal(after.outlier?.consecutiveFailures ?? 0, failuresBefore + 1, 'an overload is not a failure');
  });
});
