// An A2A message's run asks its provider for the stream's usage, as OpenAI's
// API and vLLM send it only when asked (stream_options.include_usage): the
// run's tokens reach its record and edge_stream_tokens_total as an openai SDK
// client's do when it asks.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { ClientFactory } from '@a2a-js/sdk/client';
import type { Message, SendMessageRequest, Task } from '@a2a-js/sdk';
import { startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const COMPLETED = 3;
const chunk = (json: object): string => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served-p', ...json })}\n\n`;

let server: Server;
let stack: ProvidersStack;
let asked: unknown;

before(async () => {
  // As OpenAI and vLLM: a usage chunk (no choices) before [DONE] only for stream_options.include_usage.
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (piece: string) => (body += piece));
    req.on('end', () => {
      const includeUsage = (JSON.parse(body) as { stream_options?: { include_usage?: unknown } }).stream_options?.include_usage;
      asked = includeUsage;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ choices: [{ index: 0, delta: { content: 'Hello' }, finish_reason: null }] }));
      res.write(chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
      if (includeUsage === true) res.write(chunk({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 } }));
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stack = await startProvidersStack('m', { p: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }, {}, {}, {
    a2a: { agents: [{ id: 'writer', model: 'm', name: 'Writer', description: 'Writes', skills: [{ id: 'write', name: 'Write', description: 'Writes text', tags: ['text'] }] }] },
  });
});

after(async () => {
  await stack?.close();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
});

test("an A2A message's run asks for the stream's usage: its tokens are in its run record", async () => {
  const message: Message = { messageId: randomUUID(), contextId: '', taskId: '', role: 1, parts: [{ content: { $case: 'text', value: 'hi' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
  const request: SendMessageRequest = { tenant: '', message, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: false }, metadata: undefined };
  const client = await new ClientFactory().createFromUrl(`${stack.edge.url}/a2a/writer/`);
  const task = (await client.sendMessage(request)) as Task;
  assert.equal(task.status?.state, COMPLETED, JSON.stringify(task.status));
  assert.equal(task.artifacts.flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(''), 'Hello', 'the usage chunk adds no text');
  assert.equal(asked, true, 'the run asked for usage');
  const runId = (task.metadata as { edgeRunId?: string } | undefined)?.edgeRunId ?? '';
  await waitUntil(() => stack.edge.runs.get(runId)?.tokens != null, 'the run record with its tokens');
  assert.deepEqual(stack.edge.runs.get(runId)?.tokens, { prompt: 7, completion: 5 });
});
