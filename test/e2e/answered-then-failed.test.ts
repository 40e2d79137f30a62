// A provider's stream that ended its answer (chat's `data: [DONE]`, the
// Messages API's message_stop, the Responses API's response.completed) and
// then failed before the node's END (its socket reset, a deadline, the node
// gone): the client keeps the complete answer, through the official SDKs
// and A2A. Before, the edge appended an in-band error after the last event
// and the SDKs raised it over the answer. A failure before that event still
// reaches the client as an error. The node is a FakeNode, so each frame is
// scripted.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import type { Task } from '@a2a-js/sdk';
import { ALIAS, inFlight, waitFor, waitUntil, type Stack } from '../helpers/stack.js';
import { stackWithFakeNode } from '../helpers/fake-node-stack.js';
import { JSON_HEADERS, type FakeNode } from '../workers/grpc/fake-node.js';

const COMPLETED = 3;
const FAILED = 4;
const CANCELED = 5;

const chunk = (content: string, finish: string | null = null): string =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`;

const MESSAGES_EVENTS: readonly (readonly [string, unknown])[] = [
  ['message_start', { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 3, output_tokens: 0 } } }],
  ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
  ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello "message_stop"' } }],
  ['content_block_stop', { type: 'content_block_stop', index: 0 }],
  ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }],
  ['message_stop', { type: 'message_stop' }],
];

/** One text message to the agent: `returnImmediately` answers with the task as it starts, else as it ends. */
function sendTask(client: Client, returnImmediately: boolean): Promise<Task> {
  return client.sendMessage({
    tenant: '',
    message: { messageId: randomUUID(), contextId: '', taskId: '', role: 1, parts: [{ content: { $case: 'text', value: 'x' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] },
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately },
    metadata: undefined,
  }) as Promise<Task>;
}

describe('a stream that ended its answer, then failed before END', () => {
  let stack: Stack;
  let node: FakeNode;
  before(async () => {
    ({ stack, node } = await stackWithFakeNode({
      providerType: 'vllm',
      configure: (raw) => {
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS, name: 'Writer', description: 'w', skills: [{ id: 'write', name: 'Write', description: 'Writes', tags: ['text'] }] }] };
      },
    }));
  });
  after(async () => {
    node?.close();
    await stack.close();
  });

  async function settled(): Promise<void> {
    await waitUntil(() => inFlight(stack.edge) === 0, 'the lease released');
  }

  test('Anthropic: message_stop, then the provider resets: finalMessage() has the message', async () => {
    const client = new Anthropic({ baseURL: stack.edge.url, apiKey: 'x', maxRetries: 0 });
    const stream = client.messages.stream({ model: ALIAS, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    let seq = 1;
    // Each event its own frame; the quoted "message_stop" inside the text must not read as the stream's end.
    for (const [name, data] of MESSAGES_EVENTS) node.data(t.tunnelId, seq++, `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
    await waitUntil(() => stream.currentMessage?.stop_reason === 'end_turn', 'the client to read message_delta');
    node.error(t.tunnelId, seq, 'upstream_reset', 'provider closed the connection');
    const message = await stream.finalMessage();
    assert.equal(message.content[0]?.type === 'text' ? message.content[0].text : '', 'Hello "message_stop"');
    assert.equal(message.stop_reason, 'end_turn');
    await settled();
  });

  test('Anthropic: a message_stop with extra fields (a gateway\'s metrics), then a reset: finalMessage() has the message', async () => {
    const client = new Anthropic({ baseURL: stack.edge.url, apiKey: 'x', maxRetries: 0 });
    const stream = client.messages.stream({ model: ALIAS, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    let seq = 1;
    // As Bedrock behind a gateway ends a stream: its `event: message_stop` line is far from the event's end.
    const stop = { type: 'message_stop', 'amazon-bedrock-invocationMetrics': { inputTokenCount: 3, outputTokenCount: 2, invocationLatency: 412, firstByteLatency: 120 } };
    for (const [name, data] of [...MESSAGES_EVENTS.slice(0, -1), ['message_stop', stop] as const]) node.data(t.tunnelId, seq++, `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
    await waitUntil(() => stream.currentMessage?.stop_reason === 'end_turn', 'the client to read message_delta');
    node.error(t.tunnelId, seq, 'upstream_reset', 'provider closed the connection');
    const message = await stream.finalMessage();
    assert.equal(message.stop_reason, 'end_turn');
    await settled();
  });

  test('Anthropic: a reset before message_stop is still the SDK error it was', async () => {
    const client = new Anthropic({ baseURL: stack.edge.url, apiKey: 'x', maxRetries: 0 });
    const stream = client.messages.stream({ model: ALIAS, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    let seq = 1;
    for (const [name, data] of MESSAGES_EVENTS.slice(0, 3)) node.data(t.tunnelId, seq++, `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
    node.error(t.tunnelId, seq, 'upstream_reset', 'provider closed the connection');
    await assert.rejects(stream.finalMessage(), (err: unknown) => err instanceof Anthropic.APIError && /upstream_reset|closed the connection/.test(err.message));
    await settled();
  });

  test('Responses: response.completed (a long one), then the provider resets: finalResponse() is completed', async () => {
    const client = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const stream = client.responses.stream({ model: ALIAS, input: 'hi' });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    const text = 'Hello '.repeat(2_000);
    const opened = { id: 'resp_1', object: 'response', created_at: 1, status: 'in_progress', output: [], model: 'm' };
    const done = { ...opened, status: 'completed', output: [{ type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] }] };
    node.data(t.tunnelId, 1, `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: opened })}\n\n`);
    // The terminal event and the data before it in one frame: only the last event decides.
    node.data(
      t.tunnelId,
      2,
      `event: response.in_progress\ndata: ${JSON.stringify({ type: 'response.in_progress', sequence_number: 1, response: opened })}\n\n` +
        `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', sequence_number: 2, response: done })}\n\n`,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    node.error(t.tunnelId, 3, 'upstream_reset', 'provider closed the connection');
    const response = await stream.finalResponse();
    assert.equal(response.status, 'completed');
    assert.equal(response.output_text, text);
    await settled();
  });

  test('Responses: a resumed stream (GET /v1/responses/{id}?stream=true) that fails ends with response.failed naming that response', async () => {
    const client = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const opened = { id: 'resp_resumed', object: 'response', created_at: 1, status: 'in_progress', output: [], model: 'm' };
    const created = client.responses.create({ model: ALIAS, input: 'hi', background: true });
    let t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, JSON_HEADERS);
    node.data(t.tunnelId, 1, JSON.stringify({ ...opened, status: 'queued' }));
    node.end(t.tunnelId, 2);
    assert.equal((await created).id, opened.id);
    await settled();
    // The client picks the background response's stream up again: the edge read no response.created for it.
    const resumed = client.responses.retrieve(opened.id, { stream: true });
    t = await node.nextTunnel();
    assert.equal(t.path, `/v1/responses/${opened.id}?stream=true`);
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: opened })}\n\n`);
    node.error(t.tunnelId, 2, 'upstream_reset', 'provider closed the connection');
    const events: { type: string; response?: { id?: string | null; status?: string } }[] = [];
    for await (const event of await resumed) events.push(event as (typeof events)[number]);
    assert.deepEqual(events.map((e) => e.type), ['response.created', 'error', 'response.failed']);
    assert.equal(events[2].response?.status, 'failed');
    assert.equal(events[2].response?.id, opened.id, 'the failure names the response it resumed');
    await settled();
  });

  test('the last event reached the edge in pieces (held, or past the hold bound), then a reset: each SDK keeps its answer', async () => {
    // Socket reads cut a provider's bytes anywhere: the event that ends the answer may come in two frames or more.
    const split = (event: string, at: number): string[] => [event.slice(0, at), event.slice(at)];
    const anthropic = new Anthropic({ baseURL: stack.edge.url, apiKey: 'x', maxRetries: 0 });
    const messages = anthropic.messages.stream({ model: ALIAS, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    let t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    let seq = 1;
    const events = MESSAGES_EVENTS.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
    for (const event of events.slice(0, -1)) node.data(t.tunnelId, seq++, event);
    // `event: message_stop\ndata: {"type":"mess` | `age_stop"}\n\n`
    for (const piece of split(events.at(-1) as string, 40)) node.data(t.tunnelId, seq++, piece);
    await waitUntil(() => messages.currentMessage?.stop_reason === 'end_turn', 'the client to read message_delta');
    await new Promise((resolve) => setTimeout(resolve, 50));
    node.error(t.tunnelId, seq, 'upstream_reset', 'provider closed the connection');
    assert.equal((await messages.finalMessage()).stop_reason, 'end_turn');
    await settled();

    const openai = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'x', maxRetries: 0 });
    // 12 KB, held whole until its end; 150 KB, past the 64 KiB the relay holds (its start went out first).
    for (const length of [12_000, 150_000]) {
      const stream = openai.responses.stream({ model: ALIAS, input: 'hi' });
      t = await node.nextTunnel();
      node.headers(t.tunnelId, 0);
      const text = 'y'.repeat(length);
      const opened = { id: 'resp_1', object: 'response', created_at: 1, status: 'in_progress', output: [], model: 'm' };
      const done = { ...opened, status: 'completed', output: [{ type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] }] };
      node.data(t.tunnelId, 1, `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: opened })}\n\n`);
      const completed = `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', sequence_number: 1, response: done })}\n\n`;
      const pieces = [completed.slice(0, 100), ...(completed.slice(100).match(/[^]{1,50000}/g) ?? [])];
      seq = 2;
      for (const piece of pieces) node.data(t.tunnelId, seq++, piece);
      await new Promise((resolve) => setTimeout(resolve, 50));
      node.error(t.tunnelId, seq, 'upstream_reset', 'provider closed the connection');
      const response = await stream.finalResponse();
      assert.equal(response.status, 'completed', `${length}`);
      assert.equal(response.output_text.length, length);
      await settled();
    }

    const pending = fetch(`${stack.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, `${chunk('Hi', 'stop')}data: [DO`);
    node.data(t.tunnelId, 2, 'NE]\n');
    node.data(t.tunnelId, 3, '\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    node.error(t.tunnelId, 4, 'upstream_reset', 'provider closed the connection');
    const body = await (await pending).text();
    assert.ok(body.endsWith('data: [DONE]\n\n'), body);
    assert.doesNotMatch(body, /"error"/);
    await settled();
  });

  test('chat: [DONE], then a reset: the raw stream ends with [DONE], no error event after it; the run keeps the failure', async () => {
    const pending = fetch(`${stack.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, chunk('Hi', 'stop') + 'data: [DONE]\n\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    node.error(t.tunnelId, 2, 'upstream_reset', 'provider closed the connection');
    const res = await pending;
    const body = await res.text();
    assert.ok(body.endsWith('data: [DONE]\n\n'), body);
    assert.doesNotMatch(body, /"error"/);
    const runId = res.headers.get('x-edge-run-id') ?? '';
    await waitUntil(() => stack.edge.runs.get(runId)?.state === 'finished', 'the run finished');
    assert.match(stack.edge.runs.get(runId)?.error ?? '', /closed the connection/, 'the operator still sees the failure');
    await settled();
  });

  test('A2A: the answer ended, then the node failed: the task is COMPLETED with its text; a failure before [DONE] is FAILED', async () => {
    const client = await new ClientFactory().createFromUrl(`${stack.edge.url}/a2a/writer/`);
    const send = (): Promise<Task> => sendTask(client, false);
    const done = send();
    let t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, chunk('All ') + chunk('done', 'stop') + 'data: [DONE]\n\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    node.error(t.tunnelId, 2, 'upstream_reset', 'provider closed the connection');
    const completed = await done;
    assert.equal(completed.status?.state, COMPLETED);
    assert.equal(completed.artifacts.flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(''), 'All done');

    const cut = send();
    t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, chunk('Half'));
    await new Promise((resolve) => setTimeout(resolve, 50));
    node.error(t.tunnelId, 2, 'upstream_reset', 'provider closed the connection');
    assert.equal((await cut).status?.state, FAILED);
    await settled();
  });

  test('A2A: a provider stream whose content-type is spelled in capitals is read as a stream: the task completes with its text', async () => {
    // Media types are case-insensitive; read as a JSON body, the events failed the task.
    const client = await new ClientFactory().createFromUrl(`${stack.edge.url}/a2a/writer/`);
    const done = sendTask(client, false);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, [{ $typeName: 'edge.v1.Header', name: 'content-type', value: 'Text/Event-Stream; charset=UTF-8' }]);
    node.data(t.tunnelId, 1, `${chunk('Spelled ')}${chunk('loudly', 'stop')}data: [DONE]\n\n`);
    node.end(t.tunnelId, 2);
    const task = await done;
    assert.equal(task.status?.state, COMPLETED);
    assert.equal(task.artifacts.flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(''), 'Spelled loudly');
    await settled();
  });

  test('A2A: a provider event that is JSON but no chunk (`data: null`) is skipped; the edge lives on and the task completes', async () => {
    const client = await new ClientFactory().createFromUrl(`${stack.edge.url}/a2a/writer/`);
    const done = sendTask(client, false);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, `data: null\n\n${chunk('Still ')}data: 7\n\n${chunk('here', 'stop')}data: [DONE]\n\n`);
    node.end(t.tunnelId, 2);
    const task = await done;
    assert.equal(task.status?.state, COMPLETED);
    assert.equal(task.artifacts.flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(''), 'Still here');
    await settled();
  });

  test("A2A: an operator's cancel while an event over the hold limit is half relayed (the response can only be cut) ends the task CANCELED", async () => {
    const client = await new ClientFactory().createFromUrl(`${stack.edge.url}/a2a/writer/`);
    const started = await sendTask(client, true);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, chunk('Hi'));
    // 70 KB of an event whose end has not come: past the 64 KiB the relay holds, so it went out as it came.
    node.data(t.tunnelId, 2, `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${'y'.repeat(70_000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(await stack.edge.cancelRun(String(started.metadata?.edgeRunId)), 'cancelled');
    let task: Task | undefined;
    await waitFor(async () => {
      task = await client.getTask({ tenant: '', id: started.id, historyLength: undefined });
      return (task.status?.state ?? 0) >= COMPLETED;
    }, 'the task to end');
    assert.equal(task?.status?.state, CANCELED);
    await settled();
  });
});
