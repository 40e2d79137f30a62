// With I/O workers, a model agent's conversation (its contextId's earlier
// turns) lives on one worker, its home; a turn that ran on another worker is
// added there through the pool (postMessage). The task used to be completed
// (and the client told) before that message landed: a client that sent its
// next message at once, on a connection of another worker, had it run
// without the turn before, silently. Measured with 4 workers and 16 clients
// in another process: 4 of 480 second turns reached the provider without
// the first. Here the pool passes such a turn on late (a slow pool, as under
// load): the next message must still carry it.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { Client, ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import type { Message, SendMessageRequest, Task } from '@a2a-js/sdk';
import { Agent } from 'undici';
import type { A2ARelayMessage } from '../../src/contract/io-protocol.js';
import { completionText } from '../../src/mock/responses.js';
import { ALIAS, SERVED, startStack, type Stack } from '../helpers/stack.js';

const WORKERS = 4;
const TOKENS = 4;
const COMPLETED = 3;
/** How late the pool passes a turn on to its context's home. */
const LATE_MS = 300;
/** Contexts tried: each one's home and the worker of its first turn are the kernel's and the hash's choice; some differ. */
const CONTEXTS = 6;

function request(text: string, contextId: string): SendMessageRequest {
  const message: Message = { messageId: randomUUID(), contextId, taskId: '', role: 1, parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
  return { tenant: '', message, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: false }, metadata: undefined };
}

describe('A2A: the next message of a context, sent as soon as the last one completed, on another worker', () => {
  let stack: Stack;
  let client: Client;
  const dispatchers: Agent[] = [];
  const postMessage = Object.getOwnPropertyDescriptor(Worker.prototype, 'postMessage')?.value as Worker['postMessage'];
  /** Run (once) while the next turn passed through the pool is held. */
  let onRemember: (() => Promise<void>) | undefined;

  before(async () => {
    stack = await startStack({
      mock: { tokens: TOKENS, intervalMs: 1 },
      configure: (raw) => {
        raw.workers = { count: WORKERS };
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS, name: 'Writer', description: 'Writes with llama3', skills: [{ id: 'write', name: 'Write', description: 'Writes text', tags: ['text'] }] }] };
      },
    });
    Worker.prototype.postMessage = function (this: Worker, message: unknown, transfer?: unknown) {
      if ((message as Partial<A2ARelayMessage>)?.type === 'a2a' && (message as A2ARelayMessage).op === 'remember') {
        const pass = (): void => void postMessage.call(this, message, transfer as never);
        // A test may act while the turn is on its way (then it goes on), else it is late by LATE_MS.
        const hook = onRemember;
        onRemember = undefined;
        if (hook !== undefined) void hook().finally(pass);
        else setTimeout(pass, LATE_MS);
        return;
      }
      postMessage.call(this, message, transfer as never);
    } as Worker['postMessage'];
    // Every call on a new connection: the kernel spreads them over the workers.
    const fetchImpl = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const dispatcher = new Agent({ pipelining: 0 });
      dispatchers.push(dispatcher);
      return fetch(input, { ...init, dispatcher } as RequestInit);
    };
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] }));
    client = await factory.createFromUrl(`${stack.edge.url}/a2a/writer/`);
  });
  after(async () => {
    Worker.prototype.postMessage = postMessage;
    await Promise.all(dispatchers.map((d) => d.close()));
    await stack.close();
  });

  test('it carries the turn before, whichever worker ran that one and whichever holds the context', async () => {
    const answer = completionText(SERVED, TOKENS);
    for (let i = 0; i < CONTEXTS; i++) {
      const contextId = `late-${i}-${randomUUID()}`;
      const first = (await client.sendMessage(request(`first of ${contextId}`, contextId))) as Task;
      assert.equal(first.status?.state, COMPLETED);
      const second = (await client.sendMessage(request(`second of ${contextId}`, contextId))) as Task;
      assert.equal(second.status?.state, COMPLETED);
      const sent = stack.mock.requestLog.findLast((r) => r.body?.toString('utf8').includes(`second of ${contextId}`));
      assert.ok(sent?.body !== undefined, 'the provider got the second message');
      const messages = (JSON.parse(sent.body.toString('utf8')) as { messages: { role: string; content: string }[] }).messages;
      assert.deepEqual(messages, [
        { role: 'user', content: `first of ${contextId}` },
        { role: 'assistant', content: answer },
        { role: 'user', content: `second of ${contextId}` },
      ], `context ${i}`);
    }
  });

  test('a cancel while the finished turn is on its way to its context\'s home is refused: the task completes, its turn kept', async () => {
    // Some context's turn runs on a worker other than its home: only then does it pass through the pool.
    for (let i = 0; i < CONTEXTS * 2; i++) {
      const contextId = `cancel-late-${i}-${randomUUID()}`;
      let taskId = '';
      let refusal: unknown;
      let held = false;
      onRemember = async () => {
        held = true;
        refusal = await client.cancelTask({ tenant: '', id: taskId, metadata: undefined }).then(() => 'canceled', (err: Error) => err.name);
      };
      let last: Task | undefined;
      for await (const event of client.sendMessageStream(request(`turn of ${contextId}`, contextId))) {
        if (event.payload?.$case === 'task') taskId = event.payload.value.id;
      }
      onRemember = undefined;
      if (!held) continue;
      last = await client.getTask({ tenant: '', id: taskId, historyLength: undefined });
      assert.equal(refusal, 'TaskNotCancelableError');
      assert.equal(last.status?.state, COMPLETED);
      return;
    }
    assert.fail('no turn ran away from its context\'s home');
  });
});
