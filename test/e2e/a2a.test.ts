// The A2A surface through the official @a2a-js/sdk client, unmodified,
// against a real edge and real node agents: a model agent (mock provider
// behind an agent) and a cli agent (the cli fixture run by an agent).
// Discovery, blocking and streaming sends, GetTask after completion, cancel
// mid-stream (the mock sees its request aborted; the cli process is gone),
// resubscribe to a running task, the task-not-found error, a conversation's
// two messages in one cli session, and API keys. Runs in every worker mode
// (EDGE_TEST_WORKERS): with workers a GetTask / resubscribe may land on a
// worker other than the task's and is relayed through the pool.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { Client, ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import type { Message, SendMessageRequest, StreamResponse, Task } from '@a2a-js/sdk';
import { Agent } from 'undici';
import { completionText } from '../../src/mock/responses.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { CLI_ALIAS, isLive, livePids, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { ALIAS, SERVED, startStack, testWorkers, waitFor, type Stack } from '../helpers/stack.js';

const SUBMITTED = 1;
const WORKING = 2;
const COMPLETED = 3;
const FAILED = 4;
const CANCELED = 5;
const TOKENS = 12;

function message(text: string, contextId = ''): Message {
  return { messageId: randomUUID(), contextId, taskId: '', role: 1, parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
}

function request(text: string, contextId = '', returnImmediately = false): SendMessageRequest {
  return { tenant: '', message: message(text, contextId), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately }, metadata: undefined };
}

function textOf(task: Task): string {
  return task.artifacts.flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
}

function asTask(result: Task | Message): Task {
  assert.ok(!('messageId' in result), 'a Task, not a Message');
  return result as Task;
}

async function clientFor(url: string): Promise<Client> {
  return new ClientFactory().createFromUrl(url);
}

/**
 * A client whose every call opens a new connection: with workers the kernel
 * spreads connections over them, so some calls land on a worker other than
 * the one holding the task (and are relayed through the pool).
 */
async function freshConnectionClient(url: string): Promise<Client> {
  const fetchImpl = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const dispatcher = new Agent({ pipelining: 0 });
    return fetch(input, { ...init, dispatcher } as RequestInit);
  };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] }));
  return factory.createFromUrl(url);
}

describe('A2A: model agent', () => {
  let stack: Stack;
  let client: Client;

  before(async () => {
    stack = await startStack({
      mock: { tokens: TOKENS, intervalMs: 40 },
      configure: (raw) => {
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS, name: 'Writer', description: 'Writes with llama3', skills: [{ id: 'write', name: 'Write', description: 'Writes text', tags: ['text'] }] }] };
      },
    });
    client = await clientFor(`${stack.edge.url}/a2a/writer/`);
  });

  after(async () => {
    await stack.close();
  });

  test('discovery: the well-known card and the agent card name the JSON-RPC endpoint', async () => {
    const edgeClient = await clientFor(stack.edge.url);
    const root = await edgeClient.getAgentCard();
    assert.deepEqual(root.skills.map((s) => s.id), ['writer']);
    const card = await client.getAgentCard();
    assert.equal(card.name, 'Writer');
    assert.equal(card.capabilities?.streaming, true);
    assert.deepEqual(card.skills.map((s) => s.id), ['write']);
    const jsonRpc = card.supportedInterfaces.find((i) => i.protocolBinding === 'JSONRPC' && i.protocolVersion === '1.0');
    assert.equal(jsonRpc?.url, `${stack.edge.url}/a2a/writer`);
    assert.deepEqual(Object.keys(card.securitySchemes ?? {}), [], 'no API keys configured: no scheme');
    // Without a2a.public_url the card's URLs come from the Host header: a cache must key it by Host.
    const raw = await fetch(`${stack.edge.url}/a2a/writer/.well-known/agent-card.json`);
    assert.equal(raw.headers.get('vary'), 'Host');
    await raw.arrayBuffer();
    // The root card's interface is the first agent's: a message through it runs there.
    const task = asTask(await edgeClient.sendMessage(request('hi')));
    assert.equal(task.status?.state, COMPLETED);
  });

  test('a card asked for without a usable Host (HTTP/1.0 without one, a Host with a path) names the address the request reached', async () => {
    const cardThrough = (head: string): Promise<{ supportedInterfaces: { url: string }[]; url: string }> =>
      new Promise((resolve, reject) => {
        let answer = '';
        const socket = connect(stack.edge.httpPort, '127.0.0.1', () => socket.write(`GET /a2a/writer/.well-known/agent-card.json HTTP/1.0\r\n${head}\r\n`));
        socket.on('data', (chunk: Buffer) => (answer += chunk.toString('utf8')));
        socket.on('error', reject);
        socket.on('end', () => resolve(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { supportedInterfaces: { url: string }[]; url: string }));
      });
    for (const head of ['', 'Host: example.com/x?\r\n']) {
      const card = await cardThrough(head);
      assert.equal(card.url, `${stack.edge.url}/a2a/writer`, JSON.stringify(head));
      assert.deepEqual(card.supportedInterfaces.map((i) => i.url), [`${stack.edge.url}/a2a/writer`, `${stack.edge.url}/a2a/writer`], JSON.stringify(head));
    }
    // A Host that is one still names the card's URLs (a proxy's name for this edge).
    assert.equal((await cardThrough('Host: edge.example:8443\r\n')).url, 'http://edge.example:8443/a2a/writer');
  });

  test('a historyLength that is not a count is refused as malformed (-32602), never read as "all" or "none"', async () => {
    const task = asTask(await client.sendMessage(request('history check')));
    assert.equal((await client.getTask({ tenant: '', id: task.id, historyLength: 1 })).history.length, 1);
    assert.equal((await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).history.length, 0);
    // Raw JSON-RPC: what another client (or a hand-written one) may send, in 1.0 and in 0.3 form.
    const rpc = async (method: string, params: unknown): Promise<{ error?: { code: number; message: string } }> => {
      const res = await fetch(`${stack.edge.url}/a2a/writer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }) });
      return (await res.json()) as { error?: { code: number; message: string } };
    };
    for (const historyLength of [-1, 'x', 1.5]) {
      for (const method of ['GetTask', 'tasks/get']) {
        const answer = await rpc(method, { id: task.id, historyLength });
        assert.equal(answer.error?.code, -32602, `${method} ${JSON.stringify(historyLength)}: ${JSON.stringify(answer)}`);
      }
    }
  });

  test('a blocking send returns the completed task; GetTask returns it again', async () => {
    const task = asTask(await client.sendMessage(request('write something')));
    assert.equal(task.status?.state, COMPLETED);
    assert.equal(textOf(task), completionText(SERVED, TOKENS));
    assert.match(String(task.metadata?.edgeRunId), /^run-/);
    assert.equal(task.history[0]?.parts[0]?.content?.value, 'write something');
    // The provider got an ordinary chat completion with the model rewritten.
    const sent = stack.mock.requestLog.at(-1);
    assert.equal(sent?.completed, true);
    // Several clients at once, so that with workers some calls land on a worker other than the task's.
    const fresh = await freshConnectionClient(`${stack.edge.url}/a2a/writer/`);
    const again = await Promise.all(Array.from({ length: 8 }, () => fresh.getTask({ tenant: '', id: task.id, historyLength: undefined })));
    for (const got of again) {
      assert.equal(got.status?.state, COMPLETED);
      assert.equal(textOf(got), textOf(task));
    }
  });

  test('streaming: the task, then status and artifact updates as tokens arrive, then completed', async () => {
    const events: StreamResponse[] = [];
    for await (const event of client.sendMessageStream(request('stream please'))) events.push(event);
    const cases = events.map((e) => e.payload?.$case);
    assert.equal(cases[0], 'task');
    // As docs/a2a.md says, in every worker mode: the task SUBMITTED, then a WORKING update before any artifact.
    const first = events[0]?.payload;
    assert.equal(first?.$case === 'task' ? first.value.status?.state : -1, SUBMITTED);
    const second = events[1]?.payload;
    assert.equal(second?.$case === 'statusUpdate' ? second.value.status?.state : -1, WORKING, JSON.stringify(cases));
    const last = events.at(-1)?.payload;
    assert.equal(last?.$case, 'statusUpdate');
    assert.equal(last?.$case === 'statusUpdate' ? last.value.status?.state : -1, COMPLETED);
    const updates = events.filter((e) => e.payload?.$case === 'artifactUpdate');
    assert.ok(updates.length >= 2, `at least 2 artifact updates before completion, got ${updates.length}`);
    const text = updates.map((e) => (e.payload?.$case === 'artifactUpdate' ? e.payload.value.artifact?.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('') : '')).join('');
    assert.equal(text, completionText(SERVED, TOKENS));
    // The answer's last chunk says so (A2A lastChunk), and only it; it comes before the completed status.
    assert.deepEqual(updates.map((e) => e.payload?.$case === 'artifactUpdate' && e.payload.value.lastChunk), [...updates.slice(1).map(() => false), true]);
    assert.equal(events.at(-2)?.payload?.$case, 'artifactUpdate');
  });

  test('cancel mid-stream: the task is canceled and the upstream request aborted', async () => {
    const abortedBefore = stack.mock.stats.aborted;
    const events: StreamResponse[] = [];
    let taskId = '';
    let canceled: Task | undefined;
    for await (const event of client.sendMessageStream(request('long answer'))) {
      events.push(event);
      if (event.payload?.$case === 'task') taskId = event.payload.value.id;
      if (event.payload?.$case === 'artifactUpdate' && canceled === undefined) canceled = await client.cancelTask({ tenant: '', id: taskId, metadata: undefined });
    }
    assert.equal(canceled?.status?.state, CANCELED);
    const last = events.at(-1)?.payload;
    assert.equal(last?.$case === 'statusUpdate' ? last.value.status?.state : -1, CANCELED, 'the stream ends with the canceled status');
    await stack.mock.waitFor(() => stack.mock.stats.aborted === abortedBefore + 1, 3_000);
    const upstream = stack.mock.requestLog.at(-1);
    assert.equal(upstream?.aborted, true);
    assert.equal(upstream?.completed, false);
    assert.ok((upstream?.chunksEmitted ?? TOKENS) < TOKENS, 'the provider stopped before its last token');
    // Over: not cancelable twice.
    await assert.rejects(client.cancelTask({ tenant: '', id: taskId, metadata: undefined }), (err: Error) => err.name === 'TaskNotCancelableError');
  });

  test('an operator\'s cancel of the task\'s run ends the task canceled, not failed', async () => {
    const started = asTask(await client.sendMessage(request('cancel me from the console', '', true)));
    const runId = String(started.metadata?.edgeRunId);
    assert.match(runId, /^run-/);
    await waitFor(async () => (await client.getTask({ tenant: '', id: started.id, historyLength: undefined })).artifacts.length > 0, 'the run to be streaming');
    assert.equal(await stack.edge.cancelRun(runId), 'cancelled');
    let task: Task | undefined;
    await waitFor(async () => {
      task = await client.getTask({ tenant: '', id: started.id, historyLength: undefined });
      return task.status?.state === CANCELED || task.status?.state === FAILED || task.status?.state === COMPLETED;
    }, 'the task to end');
    assert.equal(task?.status?.state, CANCELED, JSON.stringify(task?.status));
  });

  test('a blocking caller that leaves before the answer: its run is cancelled upstream', async () => {
    const abortedBefore = stack.mock.stats.aborted;
    await assert.rejects(client.sendMessage(request('never mind'), { signal: AbortSignal.timeout(150) }));
    await stack.mock.waitFor(() => stack.mock.stats.aborted === abortedBefore + 1, 3_000);
    assert.equal(stack.mock.requestLog.at(-1)?.completed, false);
  });

  test('resubscribe to a running task: its current state, then the rest of its updates', async () => {
    const started = asTask(await client.sendMessage(request('poll me', '', true)));
    assert.notEqual(started.status?.state, COMPLETED);
    const other = await freshConnectionClient(`${stack.edge.url}/a2a/writer/`);
    const collect = async (): Promise<StreamResponse[]> => {
      const out: StreamResponse[] = [];
      for await (const event of other.resubscribeTask({ tenant: '', id: started.id })) out.push(event);
      return out;
    };
    // Three subscribers on three connections: with workers, most are on another worker than the task.
    const [events, ...others] = await Promise.all([collect(), collect(), collect()]);
    for (const more of others) assert.deepEqual(more.at(-1), events.at(-1));
    assert.equal(events[0]?.payload?.$case, 'task');
    assert.ok(events.some((e) => e.payload?.$case === 'artifactUpdate'), 'updates after the resubscription');
    const last = events.at(-1)?.payload;
    assert.equal(last?.$case === 'statusUpdate' ? last.value.status?.state : -1, COMPLETED);
    const done = await client.getTask({ tenant: '', id: started.id, historyLength: undefined });
    assert.equal(textOf(done), completionText(SERVED, TOKENS));
  });

  test('a conversation: each message of a context carries the earlier turns to the provider, another context does not', async () => {
    // A fresh connection per message: with workers the turns run on different workers than the context's history.
    const fresh = await freshConnectionClient(`${stack.edge.url}/a2a/writer/`);
    const contextId = `conversation-${randomUUID()}`;
    const answer = completionText(SERVED, TOKENS);
    const sentMessages = (prompt: string): { role: string; content: string }[] => {
      const record = stack.mock.requestLog.findLast((r) => r.body !== undefined && r.body.toString('utf8').includes(prompt));
      assert.ok(record?.body !== undefined, `the provider got a request with ${prompt}`);
      return (JSON.parse(record.body.toString('utf8')) as { messages: { role: string; content: string }[] }).messages;
    };
    const first = asTask(await fresh.sendMessage(request('turn one: my name is Ada', contextId)));
    assert.equal(first.status?.state, COMPLETED);
    assert.deepEqual(sentMessages('turn one'), [{ role: 'user', content: 'turn one: my name is Ada' }]);
    const second = asTask(await fresh.sendMessage(request('turn two: what is my name?', contextId)));
    assert.equal(second.status?.state, COMPLETED);
    assert.equal(second.contextId, contextId);
    assert.deepEqual(sentMessages('turn two'), [
      { role: 'user', content: 'turn one: my name is Ada' },
      { role: 'assistant', content: answer },
      { role: 'user', content: 'turn two: what is my name?' },
    ]);
    // Streaming joins the same conversation.
    for await (const event of fresh.sendMessageStream(request('turn three', contextId))) void event;
    assert.deepEqual(sentMessages('turn three').map((m) => m.content), ['turn one: my name is Ada', answer, 'turn two: what is my name?', answer, 'turn three']);
    // Another context (and a message without one) starts empty.
    await fresh.sendMessage(request('elsewhere', `other-${randomUUID()}`));
    assert.deepEqual(sentMessages('elsewhere'), [{ role: 'user', content: 'elsewhere' }]);
  });

  test('GetTask, CancelTask or SubscribeToTask without a task id (or with one that is no string) is malformed (-32602, its id echoed), not a task-not-found', async () => {
    const rpc = async (method: string, params: unknown): Promise<{ id?: unknown; error?: { code: number; message: string } }> => {
      const res = await fetch(`${stack.edge.url}/a2a/writer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 'no-id', method, params }) });
      return (await res.json()) as { id?: unknown; error?: { code: number; message: string } };
    };
    for (const method of ['GetTask', 'CancelTask', 'SubscribeToTask', 'tasks/get', 'tasks/cancel', 'tasks/resubscribe']) {
      // A task id that is no string (a number, an object): malformed in 1.0 as in 0.3, not "task [object Object] is not known".
      for (const params of [{}, { id: '' }, { id: 5 }, { id: { a: 1 } }, { id: true }]) {
        const answer = await rpc(method, params);
        assert.equal(answer.error?.code, -32602, `${method} ${JSON.stringify(params)}: ${JSON.stringify(answer)}`);
        assert.equal(answer.id, 'no-id');
      }
    }
    // Through the SDK: an empty id is refused by the edge as invalid params.
    await assert.rejects(client.getTask({ tenant: '', id: '', historyLength: undefined }), (err: Error & { envelopeCode?: number }) => err.name === 'RequestMalformedError' && err.envelopeCode === -32602);
  });

  test('an unknown task id is the task-not-found error (-32001)', async () => {
    for (const id of ['no-such-task', 'a2a-m-00000000-0000-0000-0000-000000000000', 'a2a-w1-00000000-0000-0000-0000-000000000000']) {
      await assert.rejects(client.getTask({ tenant: '', id, historyLength: undefined }), (err: Error & { envelopeCode?: number }) => err.name === 'TaskNotFoundError' && err.envelopeCode === -32001);
    }
    await assert.rejects(client.resubscribeTask({ tenant: '', id: 'no-such-task' }).next(), (err: Error) => err.name === 'TaskNotFoundError');
    await assert.rejects(client.cancelTask({ tenant: '', id: 'no-such-task', metadata: undefined }), (err: Error) => err.name === 'TaskNotFoundError');
  });

  test('a v0.3 client (the SDK\'s LegacyJsonRpcTransport) is served by the compatibility layer', async () => {
    const card = await client.getAgentCard();
    const legacy = new Client(new LegacyJsonRpcTransport({ endpoint: `${stack.edge.url}/a2a/writer` }), card);
    const task = asTask(await legacy.sendMessage(request('old client')));
    assert.equal(task.status?.state, COMPLETED);
    assert.equal(textOf(task), completionText(SERVED, TOKENS));
    const cases: (string | undefined)[] = [];
    for await (const event of legacy.sendMessageStream(request('old stream'))) cases.push(event.payload?.$case);
    assert.equal(cases[0], 'task');
    assert.ok(cases.filter((c) => c === 'artifactUpdate').length >= 2, cases.join());
    assert.equal((await legacy.getTask({ tenant: '', id: task.id, historyLength: undefined })).status?.state, COMPLETED);
    await assert.rejects(legacy.getTask({ tenant: '', id: 'no-such-task', historyLength: undefined }), (err: Error) => err.name === 'TaskNotFoundError');
  });

  test('a GET on an agent\'s JSON-RPC endpoint (a browser, curl) is 405 naming POST, as a JSON-RPC error', async () => {
    for (const path of ['/a2a/writer', '/a2a/writer/']) {
      const res = await fetch(`${stack.edge.url}${path}`);
      assert.equal(res.status, 405, path);
      assert.equal(res.headers.get('allow'), 'POST');
      const body = (await res.json()) as { jsonrpc?: string; error?: { code: number; message: string } };
      assert.equal(body.jsonrpc, '2.0');
      assert.match(body.error?.message ?? '', /GET is not allowed/);
    }
  });

  test('a POST or DELETE on an Agent Card (the edge\'s or an agent\'s) is 405 naming GET, HEAD, as on every other known route', async () => {
    for (const path of ['/.well-known/agent-card.json', '/a2a/writer/.well-known/agent-card.json']) {
      for (const method of ['POST', 'DELETE']) {
        const res = await fetch(`${stack.edge.url}${path}`, { method, headers: { 'content-type': 'application/json' }, body: '{}' });
        await res.arrayBuffer();
        assert.equal(res.status, 405, `${method} ${path}`);
        assert.equal(res.headers.get('allow'), 'GET, HEAD', `${method} ${path}`);
      }
    }
  });

  test('the agent\'s base URL (ending in /, where its card is found) takes its calls too: a POST there is served, not a 405 saying POST is not allowed', async () => {
    // A client given the base URL as its endpoint (docs/a2a.md writes it with the slash); its GET is told Allow: POST.
    const card = await client.getAgentCard();
    const legacy = new Client(new LegacyJsonRpcTransport({ endpoint: `${stack.edge.url}/a2a/writer/` }), card);
    const task = asTask(await legacy.sendMessage(request('through the base URL')));
    assert.equal(task.status?.state, COMPLETED);
    assert.equal((await legacy.getTask({ tenant: '', id: task.id, historyLength: undefined })).status?.state, COMPLETED);
    const res = await fetch(`${stack.edge.url}/a2a/writer/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'GetTask', params: { id: 'no-such-task' } }) });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { error?: { code: number } }).error?.code, -32001);
  });

  test('raw JSON-RPC: parse error, unknown method, unknown agent, push config', async () => {
    const post = async (path: string, body: string): Promise<{ status: number; json: { error?: { code: number; message: string } } }> => {
      const res = await fetch(`${stack.edge.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      return { status: res.status, json: (await res.json()) as { error?: { code: number; message: string } } };
    };
    assert.equal((await post('/a2a/writer', '{not json')).json.error?.code, -32700);
    assert.equal((await post('/a2a/writer', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'NoSuchMethod', params: {} }))).json.error?.code, -32601);
    // JSON-RPC lets a call omit params: an unknown method is still method not found (docs/a2a.md), not invalid params.
    for (const method of ['NoSuchMethod', 'tasks/nope']) {
      const answer = await post('/a2a/writer', JSON.stringify({ jsonrpc: '2.0', id: 7, method }));
      assert.deepEqual([answer.json.error?.code, (answer.json as { id?: unknown }).id], [-32601, 7], `${method} without params: ${JSON.stringify(answer.json)}`);
    }
    assert.equal((await post('/a2a/writer', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask' }))).json.error?.code, -32602, 'a known method without params');
    const unknown = await post('/a2a/nobody', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } }));
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error?.code, -32601);
    assert.equal((await post('/a2a/writer', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'CreateTaskPushNotificationConfig', params: { taskId: 'x', url: 'http://example.com' } }))).json.error?.code, -32003);
    assert.equal((await post('/a2a/writer', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: {} }))).json.error?.code, -32602);
    // JSON that is not a request object: Invalid Request, and the edge (or its worker) lives on to serve the next call.
    for (const body of ['null', '42', '"GetTask"', '[]', '[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]']) {
      const answer = await post('/a2a/writer', body);
      assert.equal(answer.json.error?.code, -32600, `${body}: ${JSON.stringify(answer.json)}`);
    }
    // Malformed requests are Invalid Request too (not the SDK's -32602), with id null; a notification (no id) starts no run.
    const runsBefore = stack.edge.runs.list({}).length;
    const message = { message: { messageId: 'm-1', role: 'ROLE_USER', parts: [{ text: 'fire and forget' }] } };
    for (const request of [
      { id: 2, method: 'GetTask', params: { id: 'x' } },
      { jsonrpc: '1.0', id: 3, method: 'GetTask', params: { id: 'x' } },
      { jsonrpc: '2.0', id: 4, method: 7, params: {} },
      { jsonrpc: '2.0', id: { a: 1 }, method: 'GetTask', params: { id: 'x' } },
      // Refused by the SDK as invalid params (-32602) when passed through: a fractional id, an empty method name.
      { jsonrpc: '2.0', id: 1.5, method: 'GetTask', params: { id: 'x' } },
      { jsonrpc: '2.0', id: 5, method: '', params: { id: 'x' } },
      { jsonrpc: '2.0', id: 1.5, method: 'message/send', params: message },
      { jsonrpc: '2.0', method: 'SendMessage', params: message },
    ]) {
      const answer = await post('/a2a/writer', JSON.stringify(request));
      assert.equal(answer.json.error?.code, -32600, `${JSON.stringify(request)}: ${JSON.stringify(answer.json)}`);
      assert.equal((answer.json as { id?: unknown }).id, null);
    }
    assert.equal(stack.edge.runs.list({}).length, runsBefore, 'the notification started no run');
    assert.equal(asTask(await client.sendMessage(request('still here'))).status?.state, COMPLETED);
  });

  test('a body with ill-formed UTF-8 is a parse error (-32700), not a prompt whose bytes became U+FFFD', async () => {
    const text = JSON.stringify({ jsonrpc: '2.0', id: 12, method: 'SendMessage', params: { message: { messageId: 'u1', role: 'ROLE_USER', parts: [{ text: 'AB' }] } } });
    const at = text.indexOf('AB') + 1;
    const body = Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from([0xff]), Buffer.from(text.slice(at))]);
    const runsBefore = stack.edge.runs.list({}).length;
    const providerBefore = stack.mock.stats.requests;
    const res = await fetch(`${stack.edge.url}/a2a/writer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const json = (await res.json()) as { id: unknown; error?: { code: number; message: string } };
    assert.equal(json.error?.code, -32700, JSON.stringify(json));
    assert.match(json.error?.message ?? '', new RegExp(`ill-formed UTF-8 at byte ${at}`));
    assert.equal(stack.edge.runs.list({}).length, runsBefore, 'no run started');
    assert.equal(stack.mock.stats.requests, providerBefore, 'nothing reached the provider');
  });

  test('a body nested deeper than limits.max_json_depth is refused before any run (400, json_too_deep), as on /v1/', async () => {
    // Legal JSON well within body_bytes: unchecked, the task ran and its answer overflowed the SDK's serializer (-32603, run lost).
    const depth = 20_000;
    const metadata = '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
    const body = `{"jsonrpc":"2.0","id":13,"method":"SendMessage","params":{"message":{"messageId":"deep","role":"ROLE_USER","parts":[{"text":"deep"}],"metadata":${metadata}}}}`;
    const runsBefore = stack.edge.runs.list({}).length;
    const providerBefore = stack.mock.stats.requests;
    const res = await fetch(`${stack.edge.url}/a2a/writer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const json = (await res.json()) as { jsonrpc: string; id: unknown; error?: { code: number; message: string } };
    assert.equal(res.status, 400, JSON.stringify(json));
    assert.equal(json.error?.code, -32600);
    assert.match(json.error?.message ?? '', /json_too_deep/);
    assert.equal(stack.edge.runs.list({}).length, runsBefore, 'no run started');
    assert.equal(stack.mock.stats.requests, providerBefore, 'nothing reached the provider');
  });

  test('an A2A-Version this edge does not speak is refused (-32009, VERSION_NOT_SUPPORTED); 1.0, 0.3 and none are served', async () => {
    const send = async (version: string | undefined): Promise<{ error?: { code: number; message: string }; result?: unknown }> => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (version !== undefined) headers['a2a-version'] = version;
      const res = await fetch(`${stack.edge.url}/a2a/writer`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'GetTask', params: { id: 'no-such-task' } }) });
      assert.equal(res.status, 200);
      return (await res.json()) as { error?: { code: number; message: string } };
    };
    const refused = await send('2.0');
    assert.equal(refused.error?.code, -32009, JSON.stringify(refused));
    assert.match(refused.error?.message ?? '', /'2\.0' is not supported\. Supported versions: 1\.0, 0\.3/);
    for (const version of ['1.0', '0.3', undefined]) assert.equal((await send(version)).error?.code, -32001, `version ${String(version)}: served (task not found)`);
  });

  test('a compressed or non-JSON body is a 415 in JSON-RPC form, as on every other route: never parsed, never run', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'SendMessage', params: { message: { messageId: 'z1', role: 'ROLE_USER', parts: [{ text: 'packed' }] } } });
    const runsBefore = stack.edge.runs.list({}).length;
    const providerBefore = stack.mock.stats.requests;
    for (const [headers, payload, named] of [
      [{ 'content-type': 'application/json', 'content-encoding': 'gzip' }, gzipSync(body), /content-encoding "gzip"/],
      // Labelled compressed but plain: still refused, as the OpenAI routes refuse it (RFC 7694), not guessed at.
      [{ 'content-type': 'application/json', 'content-encoding': 'br' }, Buffer.from(body), /content-encoding "br"/],
      [{ 'content-type': 'text/plain' }, Buffer.from(body), /content-type "text\/plain"/],
    ] as const) {
      const res = await fetch(`${stack.edge.url}/a2a/writer`, { method: 'POST', headers, body: payload });
      assert.equal(res.status, 415, JSON.stringify(headers));
      const json = (await res.json()) as { jsonrpc: string; id: unknown; error?: { code: number; message: string } };
      assert.equal(json.jsonrpc, '2.0');
      assert.equal(json.error?.code, -32600);
      assert.match(json.error?.message ?? '', named);
      assert.match(json.error?.message ?? '', /unsupported_media_type/);
    }
    assert.equal(stack.edge.runs.list({}).length, runsBefore, 'no run started');
    assert.equal(stack.mock.stats.requests, providerBefore, 'nothing reached the provider');
  });

  test('a refusal before the JSON-RPC handler (no such agent, a body it does not read) names a req- request id, as every refusal at the door does', async () => {
    const refusals: [string, RequestInit][] = [
      ['/a2a/nobody', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } }) }],
      ['/a2a/writer', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' }],
      ['/a2a/nobody/.well-known/agent-card.json', {}],
    ];
    const rejects = async (reason: string): Promise<number> => Number(new RegExp(`^edge_rejects_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(await stack.edge.scrapeMetrics())?.[1] ?? 0);
    const before = { unknown: await rejects('unknown_url'), media: await rejects('unsupported_media_type') };
    for (const [path, init] of refusals) {
      const res = await fetch(`${stack.edge.url}${path}`, init);
      await res.text();
      assert.ok(res.status === 404 || res.status === 415, `${path}: ${res.status}`);
      assert.match(res.headers.get('x-request-id') ?? '', /^req-/, `${path}: x-request-id`);
      assert.equal(res.headers.get('request-id'), res.headers.get('x-request-id'), `${path}: request-id`);
    }
    // Counted as every refusal at the door is: no such agent is an unknown URL.
    assert.deepEqual({ unknown: await rejects('unknown_url'), media: await rejects('unsupported_media_type') }, { unknown: before.unknown + 2, media: before.media + 1 });
  });

  test('a non-text part is content-type-not-supported (-32005)', async () => {
    const req = request('x');
    (req.message as Message).parts = [{ content: { $case: 'url', value: 'https://example.com/a.png' }, metadata: undefined, filename: 'a.png', mediaType: 'image/png' }];
    await assert.rejects(client.sendMessage(req), (err: Error & { envelopeCode?: number }) => err.name === 'ContentTypeNotSupportedError' && err.envelopeCode === -32005);
  });
});

/** A cli stack with the A2A agent 'coder' on the cli alias, and a client of it; `keepaliveMs` undefined keeps the edge's default. */
async function coderStack(keepaliveMs: number | undefined): Promise<{ stack: CliStack; client: Client }> {
  const stack = await startCliStack({
    configure: (raw) => {
      raw.a2a = { agents: [{ id: 'coder', model: CLI_ALIAS, description: 'A command-line agent' }] };
      if (keepaliveMs !== undefined) (raw.limits as Record<string, unknown>).sse_keepalive_ms = keepaliveMs;
    },
  });
  return { stack, client: await clientFor(`${stack.edge.url}/a2a/coder/`) };
}

describe('A2A: cli agent', () => {
  let stack: CliStack;
  let client: Client;

  before(async () => {
    ({ stack, client } = await coderStack(100));
  });

  after(async () => {
    await stack.close();
  });

  test('a message runs as a cli run: its output is the answer and the run is in /admin/runs', async () => {
    const task = asTask(await client.sendMessage(request('echo hello a2a world', 'ctx-echo')));
    assert.equal(task.status?.state, COMPLETED);
    assert.equal(textOf(task), 'hello a2a world');
    const runs = (await stack.admin('/admin/runs?session=ctx-echo')).json.runs as { id: string; session: string }[];
    assert.ok(runs.some((r) => r.id === task.metadata?.edgeRunId), `run ${String(task.metadata?.edgeRunId)} in ${JSON.stringify(runs)}`);
  });

  test('a blocking send longer than the client\'s wait for a head still returns its task: the head goes out early, whitespace keeps it alive', async () => {
    // As a client's fetch gives up without a head after 300 s (undici), here after 500 ms; the command takes 1.2 s.
    const impatient = new Agent({ headersTimeout: 500, bodyTimeout: 500 });
    const fetchImpl = (input: string | URL | Request, init?: RequestInit): Promise<Response> => fetch(input, { ...init, dispatcher: impatient } as RequestInit);
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] }));
    const slowClient = await factory.createFromUrl(`${stack.edge.url}/a2a/coder/`);
    try {
      const task = asTask(await slowClient.sendMessage(request('hold 1200', `slow-${randomUUID()}`)));
      assert.equal(task.status?.state, COMPLETED);
      assert.ok((JSON.parse(textOf(task)) as { end: number; start: number }).end - (JSON.parse(textOf(task)) as { start: number }).start >= 1_200);
    } finally {
      await impatient.close();
    }
  });

  test('two messages with one contextId run in the same cli session (same working directory)', async () => {
    const contextId = `conversation-${randomUUID()}`;
    const first = asTask(await client.sendMessage(request('hold 10', contextId)));
    const second = asTask(await client.sendMessage(request('hold 10', contextId)));
    const other = asTask(await client.sendMessage(request('hold 10', `other-${randomUUID()}`)));
    const cwd = (t: Task): string => (JSON.parse(textOf(t)) as { cwd: string }).cwd;
    assert.equal(first.contextId, contextId);
    assert.equal(cwd(second), cwd(first));
    assert.ok(cwd(first).includes(contextId), `the session's directory ${cwd(first)} is named after the context`);
    assert.notEqual(cwd(other), cwd(first));
  });

  test('cancel mid-stream: the cli process is gone', async () => {
    let taskId = '';
    let canceled: Task | undefined;
    const states: number[] = [];
    for await (const event of client.sendMessageStream(request('sleep'))) {
      if (event.payload?.$case === 'task') taskId = event.payload.value.id;
      if (event.payload?.$case === 'statusUpdate') states.push(event.payload.value.status?.state ?? -1);
      if (canceled === undefined && taskId !== '') {
        await waitFor(async () => (await livePids(stack.tag)).length === 1, 'the fixture to run');
        canceled = await client.cancelTask({ tenant: '', id: taskId, metadata: undefined });
      }
    }
    assert.equal(canceled?.status?.state, CANCELED);
    assert.equal(states.at(-1), CANCELED);
    await waitFor(async () => (await livePids(stack.tag)).length === 0, 'the cancelled process to be gone');
  });

  test('CancelTask of a running cli task: the run\'s outcome is run_cancelled (not a client that left), its whole process group is gone', async () => {
    let taskId = '';
    let text = '';
    let cancelled = false;
    for await (const event of client.sendMessageStream(request('orphan'))) {
      if (event.payload?.$case === 'task') taskId = event.payload.value.id;
      if (event.payload?.$case === 'artifactUpdate') for (const p of event.payload.value.artifact?.parts ?? []) if (p.content?.$case === 'text') text += p.content.value;
      if (!cancelled && /pids \d+ \d+/.test(text)) {
        cancelled = true;
        assert.equal((await client.cancelTask({ tenant: '', id: taskId, metadata: undefined })).status?.state, CANCELED);
      }
    }
    const task = await client.getTask({ tenant: '', id: taskId, historyLength: undefined });
    assert.equal(task.status?.state, CANCELED);
    const [, child, grandchild] = /pids (\d+) (\d+)/.exec(text)?.map(Number) ?? [];
    // Both ignore SIGTERM: gone only once the group got its SIGKILL.
    await waitFor(async () => !(await isLive(child)) && !(await isLive(grandchild)), 'the command and its grandchild to be gone');
    const run = (await stack.admin(`/admin/runs/${String(task.metadata?.edgeRunId)}`)).json as { outcome: string };
    assert.equal(run.outcome, 'run_cancelled', 'docs/operations.md: an A2A client\'s cancel is run_cancelled');
  });

  test('a silent run keeps its stream alive with SSE comments, which the SDK skips', async () => {
    const res = await fetch(`${stack.edge.url}/a2a/coder`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'SendStreamingMessage', params: { message: { messageId: 'k1', role: 'ROLE_USER', parts: [{ text: 'hold 450' }] } } }),
    });
    const text = await res.text();
    assert.match(text, /^: keepalive$/m);
    assert.match(text, /TASK_STATE_COMPLETED/);
    // The same through the SDK: only protocol events come out.
    const cases: (string | undefined)[] = [];
    for await (const event of client.sendMessageStream(request('hold 300'))) cases.push(event.payload?.$case);
    assert.deepEqual(cases.filter((c) => c !== 'artifactUpdate' && c !== 'statusUpdate'), ['task']);
  });

  test('a run that fails is a failed task with the reason', async () => {
    const task = asTask(await client.sendMessage(request('fail')));
    assert.equal(task.status?.state, FAILED);
    const reason = task.status?.message?.parts[0]?.content;
    assert.ok(reason?.$case === 'text' && reason.value.length > 0, 'a status message says why');
  });
});

describe('A2A: cli agent, a quiet command', () => {
  // The default SSE keepalive (15 s): a keepalive's early head would mark the task working by itself.
  let stack: CliStack;
  let client: Client;

  before(async () => {
    ({ stack, client } = await coderStack(undefined));
  });

  after(async () => {
    await stack.close();
  });

  test('a task whose command runs but has not written yet is WORKING, not SUBMITTED', async () => {
    const task = asTask(await client.sendMessage(request('sleep', `quiet-${randomUUID()}`, true)));
    await waitFor(async () => (await livePids(stack.tag)).length === 1, 'the fixture to run');
    const seen = await client.getTask({ tenant: '', id: task.id, historyLength: undefined });
    assert.equal(seen.status?.state, WORKING, 'a provider took it: it is no longer waiting to start');
    assert.equal((await client.cancelTask({ tenant: '', id: task.id, metadata: undefined })).status?.state, CANCELED);
    await waitFor(async () => (await livePids(stack.tag)).length === 0, 'the cancelled process to be gone');
  });
});

describe('A2A: API keys', () => {
  const KEY = 'sk-a2a-test';
  const OTHER_KEY = 'sk-a2a-other';
  const LIMITED_KEY = 'sk-a2a-limited';
  let stack: Stack;

  before(async () => {
    stack = await startStack({
      mock: { tokens: 3 },
      configure: (raw) => {
        // A second alias, so that a key can be allowed a model other than the agent's.
        const models = raw.models as { alias: string; providers: unknown }[];
        models.push({ alias: 'elsewhere', providers: models[0].providers });
        raw.auth = {
          api_keys: [
            { name: 'tester', key_sha256: sha256Hex(KEY) },
            { name: 'other', key_sha256: sha256Hex(OTHER_KEY) },
            { name: 'limited', key_sha256: sha256Hex(LIMITED_KEY), models: ['elsewhere'] },
          ],
        };
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }] };
      },
    });
  });

  after(async () => {
    await stack.close();
  });

  test('the card says how to authenticate; a call without the key is refused, with it served', async () => {
    const client = await clientFor(`${stack.edge.url}/a2a/writer/`);
    const card = await client.getAgentCard();
    const scheme = card.securitySchemes.edgeApiKey?.scheme;
    assert.equal(scheme?.$case, 'httpAuthSecurityScheme');
    assert.equal(scheme?.$case === 'httpAuthSecurityScheme' ? scheme.value.scheme : '', 'Bearer');
    assert.deepEqual(Object.keys(card.securityRequirements[0]?.schemes ?? {}), ['edgeApiKey']);

    await assert.rejects(client.sendMessage(request('no key')), /invalid_api_key|API key/);
    await assert.rejects(client.sendMessage(request('bad key'), { serviceParameters: { authorization: 'Bearer wrong' } }), /invalid_api_key|API key/);
    assert.equal(stack.mock.stats.requests, 0, 'nothing reached the provider');
    const perCall = asTask(await client.sendMessage(request('key per call'), { serviceParameters: { authorization: `Bearer ${KEY}` } }));
    assert.equal(perCall.status?.state, COMPLETED);
    // A task is shown only to the key that made it; GetTask without a key is refused at the door.
    await assert.rejects(client.getTask({ tenant: '', id: perCall.id, historyLength: undefined }), /invalid_api_key|API key/);

    const authed = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: (url, init) => fetch(url, { ...init, headers: { ...Object.fromEntries(new Headers(init?.headers).entries()), authorization: `Bearer ${KEY}` } }) })],
    }));
    const keyed = await authed.createFromUrl(`${stack.edge.url}/a2a/writer/`);
    const task = asTask(await keyed.sendMessage(request('with key')));
    assert.equal(task.status?.state, COMPLETED);
    assert.equal(textOf(task), completionText(SERVED, 3));

    // Another key naming this task in a message learns nothing of it: task-not-found, as for a missing one.
    const withOther = { serviceParameters: { authorization: `Bearer ${OTHER_KEY}` } };
    const followUp = { ...request('its task'), message: { ...message('its task'), taskId: task.id } };
    await assert.rejects(client.sendMessage(followUp, withOther), (err: Error & { envelopeCode?: number }) => err.name === 'TaskNotFoundError' && err.envelopeCode === -32001);
    await assert.rejects(client.getTask({ tenant: '', id: task.id, historyLength: undefined }, withOther), (err: Error) => err.name === 'TaskNotFoundError');
  });

  test('a key not allowed the agent\'s model: a failed task saying so, counted in edge_rejects_total as the HTTP refusal is', async () => {
    const client = await clientFor(`${stack.edge.url}/a2a/writer/`);
    const before = stack.mock.stats.requests;
    const task = asTask(await client.sendMessage(request('not my model'), { serviceParameters: { authorization: `Bearer ${LIMITED_KEY}` } }));
    assert.equal(task.status?.state, FAILED);
    const reason = task.status?.message?.parts[0]?.content;
    assert.match(reason?.$case === 'text' ? reason.value : '', /model_not_allowed/);
    assert.equal(stack.mock.stats.requests, before, 'nothing reached the provider');
    // Where operators look for refusals: the same counter an HTTP request refused for this reason moves.
    await waitFor(async () => /^edge_rejects_total\{reason="model_not_allowed"\} 1$/m.test(await stack.edge.scrapeMetrics()), 'edge_rejects_total{reason="model_not_allowed"} to count the refusal');
  });

  test('a query that looks like the card\'s path does not lift the key check; the card itself stays public', async () => {
    const before = stack.mock.stats.requests;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'm-1', role: 'ROLE_USER', parts: [{ text: 'no key, card-like query' }] } } });
    // '/': the agent's base URL, its endpoint too.
    for (const query of ['?x=/.well-known/', '?p=/a2a/writer/.well-known/agent-card.json', '/']) {
      const res = await fetch(`${stack.edge.url}/a2a/writer${query}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      assert.equal(res.status, 401, `${query}: ${await res.clone().text()}`);
      assert.match(await res.text(), /invalid_api_key|API key/);
    }
    assert.equal(stack.mock.stats.requests, before, 'nothing reached the provider');
    const card = await fetch(`${stack.edge.url}/a2a/writer/.well-known/agent-card.json?v=1`);
    assert.equal(card.status, 200);
  });

  test('a percent-encoded path, or a fragment that looks like the card\'s path, does not lift the key check either', async () => {
    const before = stack.mock.stats.requests;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'm-2', role: 'ROLE_USER', parts: [{ text: 'no key, encoded path' }] } } });
    // The router decodes %61%32%61 to a2a: the same endpoint, so the same key check.
    const encoded = await fetch(`${stack.edge.url}/%61%32%61/writer`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(encoded.status, 401, await encoded.clone().text());
    await encoded.arrayBuffer();
    // fetch drops a fragment; a raw request keeps it in the target.
    const url = new URL(stack.edge.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => {
        socket.end(`POST /a2a/writer#/.well-known/agent-card.json HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      });
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (text += chunk));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    assert.match(raw, /^HTTP\/1\.1 (401|400|404) /, raw.slice(0, 200));
    assert.doesNotMatch(raw, /^HTTP\/1\.1 200 /);
    assert.equal(stack.mock.stats.requests, before, 'nothing reached the provider');
  });
});

describe('A2A: two agents', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack({
      mock: { tokens: 200, intervalMs: 20 },
      configure: (raw) => {
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }, { id: 'reader', model: ALIAS }] };
      },
    });
  });

  after(async () => {
    await stack.close();
  });

  test('a task is only known through the agent that made it: another agent\'s endpoint can neither read, follow nor cancel it', async () => {
    // Fresh connections: with workers some calls land on a worker other than the task's and are relayed.
    const writer = await freshConnectionClient(`${stack.edge.url}/a2a/writer/`);
    const reader = await freshConnectionClient(`${stack.edge.url}/a2a/reader/`);
    const task = asTask(await writer.sendMessage(request('only mine', '', true)));
    const notFound = (err: Error & { envelopeCode?: number }): boolean => err.name === 'TaskNotFoundError' && err.envelopeCode === -32001;
    for (let i = 0; i < 4; i++) {
      await assert.rejects(reader.getTask({ tenant: '', id: task.id, historyLength: undefined }), notFound);
      await assert.rejects(reader.cancelTask({ tenant: '', id: task.id, metadata: undefined }), notFound);
      await assert.rejects(reader.resubscribeTask({ tenant: '', id: task.id }).next(), (err: Error) => err.name === 'TaskNotFoundError');
      await assert.rejects(reader.sendMessage({ ...request('its task'), message: { ...message('its task'), taskId: task.id } }), notFound);
    }
    // Its own agent still has it, running: nothing above reached it.
    const own = await writer.getTask({ tenant: '', id: task.id, historyLength: undefined });
    assert.ok(own.status?.state === SUBMITTED || own.status?.state === WORKING, JSON.stringify(own.status));
    assert.equal((await writer.cancelTask({ tenant: '', id: task.id, metadata: undefined })).status?.state, CANCELED);
  });
});

describe('A2A: admission', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack({
      capacity: 1,
      maxQueue: 0,
      mock: { tokens: 20, intervalMs: 50 },
      configure: (raw) => {
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }] };
      },
    });
  });

  after(async () => {
    await stack.close();
  });

  test('a full queue is a failed task saying so; the running one is unaffected', async () => {
    const client = await clientFor(`${stack.edge.url}/a2a/writer/`);
    const running = asTask(await client.sendMessage(request('occupy the only slot', '', true)));
    await stack.mock.waitFor(() => stack.mock.stats.inFlight === 1, 3_000);
    const refused = asTask(await client.sendMessage(request('no room')));
    assert.equal(refused.status?.state, FAILED);
    const reason = refused.status?.message?.parts[0]?.content;
    assert.match(reason?.$case === 'text' ? reason.value : '', /queue_full/);
    const stream: StreamResponse[] = [];
    for await (const event of client.resubscribeTask({ tenant: '', id: running.id })) stream.push(event);
    const last = stream.at(-1)?.payload;
    assert.equal(last?.$case === 'statusUpdate' ? last.value.status?.state : -1, COMPLETED);
  });
});

describe('A2A: a full task store', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack({
      mock: { tokens: 20, intervalMs: 30 },
      configure: (raw) => {
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }], max_tasks: 1 };
        // The bound is per data path: one, so that every call meets the same store.
        raw.workers = { count: 1 };
      },
    });
  });

  after(async () => {
    await stack.close();
  });

  test('every record a running task: a new message is refused as retryable (internal error), not unsupported; it goes through once one finished', async () => {
    const client = await clientFor(`${stack.edge.url}/a2a/writer/`);
    const running = asTask(await client.sendMessage(request('occupy the store', '', true)));
    const refused = await client.sendMessage(request('no room yet')).then(
      () => 'accepted',
      (err: Error) => `${err.name}: ${err.message}`,
    );
    assert.doesNotMatch(refused, /^UnsupportedOperationError/, refused);
    assert.match(refused, /a2a\.max_tasks running tasks; retry later/, refused);
    // Once it finished, its record makes room.
    await waitFor(async () => (await client.getTask({ tenant: '', id: running.id, historyLength: 0 })).status?.state === COMPLETED, 'the first task to finish', 10_000);
    assert.equal(asTask(await client.sendMessage(request('room now'))).status?.state, COMPLETED);
  });
});

describe('A2A: conversation histories of many contexts', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack({
      mock: { tokens: 2, intervalMs: 0 },
      configure: (raw) => {
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }], max_task_bytes: 1_048_576 };
        // The bound is per data path: at most one worker, so that every context's history lives in the same one.
        raw.workers = { count: Math.min(1, testWorkers()) };
      },
    });
  });

  after(async () => {
    await stack.close();
  });

  test('the histories of a data path hold at most a2a.max_task_bytes together: the least recently used contexts go first', async () => {
    const client = await clientFor(`${stack.edge.url}/a2a/writer/`);
    const run = randomUUID();
    const contexts = Array.from({ length: 8 }, (_, i) => `big-${run}-${i}`);
    // 8 turns of 200 KB each, every one within history_max_bytes (256 KiB): 1.6 MB over the 1 MiB bound.
    for (const [i, contextId] of contexts.entries()) {
      assert.equal(asTask(await client.sendMessage(request(`first ${i} ${'x'.repeat(200_000)}`, contextId))).status?.state, COMPLETED);
    }
    const sent = (prompt: string): string[] => {
      const record = stack.mock.requestLog.findLast((r) => r.body !== undefined && r.body.toString('utf8').includes(prompt));
      assert.ok(record?.body !== undefined, `the provider got a request with ${prompt}`);
      return (JSON.parse(record.body.toString('utf8')) as { messages: { content: string }[] }).messages.map((m) => m.content.slice(0, 8));
    };
    await client.sendMessage(request(`second ${run} newest`, contexts[7]));
    assert.deepEqual(sent(`second ${run} newest`), ['first 7 ', completionText(SERVED, 2).slice(0, 8), `second ${run}`.slice(0, 8)], 'the newest context kept its turn');
    await client.sendMessage(request(`second ${run} oldest`, contexts[0]));
    assert.deepEqual(sent(`second ${run} oldest`), [`second ${run}`.slice(0, 8)], 'the oldest context went: its turns were over the bytes of every context together');
  });
});

describe('A2A: a client that reads slower than the answer comes', () => {
  const MANY = 30_000;
  let stack: Stack;

  before(async () => {
    stack = await startStack({
      mock: { tokens: MANY, intervalMs: 0 },
      configure: (raw) => {
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }] };
      },
    });
  });

  after(async () => {
    await stack.close();
  });

  test('the deltas it has not read merge into fewer updates; it still gets the whole answer, in order', async () => {
    const client = await clientFor(`${stack.edge.url}/a2a/writer/`);
    const stream = client.sendMessageStream(request('a long answer'));
    const first = await stream.next();
    assert.equal(first.value?.payload?.$case, 'task');
    const taskId = first.value?.payload?.$case === 'task' ? first.value.payload.value.id : '';
    // The stream is not read while the whole answer is produced: its socket fills, then the edge's writer waits.
    const poller = await freshConnectionClient(`${stack.edge.url}/a2a/writer/`);
    await waitFor(async () => (await poller.getTask({ tenant: '', id: taskId, historyLength: 0 })).status?.state === COMPLETED, 'the task to complete', 20_000);
    const events: StreamResponse[] = [];
    for await (const event of stream) events.push(event);
    const updates = events.filter((e) => e.payload?.$case === 'artifactUpdate');
    const text = updates.map((e) => (e.payload?.$case === 'artifactUpdate' ? e.payload.value.artifact?.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('') : '')).join('');
    assert.equal(text, completionText(SERVED, MANY));
    // Each update appends to the one before, but the first replaces (A2A append semantics).
    assert.deepEqual(updates.map((e) => e.payload?.$case === 'artifactUpdate' && e.payload.value.append).slice(0, 2), updates.length > 1 ? [false, true] : [false]);
    assert.ok(updates.length < MANY / 2, `${updates.length} updates for ${MANY} tokens: the unread ones did not merge`);
    const last = events.at(-1)?.payload;
    assert.equal(last?.$case === 'statusUpdate' ? last.value.status?.state : -1, COMPLETED);
  });
});

/**
 * A fetch for the SDK over one socket opened (request line sent) before the
 * edge began to drain: a drain closes the listener and idle connections, so
 * only a request already begun on a connection reaches the edge to be refused.
 */
async function preopenedFetch(url: string): Promise<(input: string | URL | Request, init?: RequestInit) => Promise<Response>> {
  const target = new URL(url);
  const socket: Socket = connect(Number(target.port), target.hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(`POST ${target.pathname} HTTP/1.1\r\nhost: ${target.host}\r\n`);
  return async (_input, init) => {
    const body = Buffer.from(String(init?.body ?? ''));
    const headers = [...new Headers(init?.headers).entries()].map(([k, v]) => `${k}: ${v}\r\n`).join('');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(`${headers}content-length: ${body.length}\r\n\r\n`);
    socket.write(body);
    await ended;
    const raw = Buffer.concat(chunks).toString('utf8');
    const split = raw.indexOf('\r\n\r\n');
    const [statusLine = '', ...lines] = raw.slice(0, split).split('\r\n');
    const responseHeaders = new Headers(lines.map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()] as [string, string]));
    return new Response(raw.slice(split + 4), { status: Number(statusLine.split(' ')[1]), headers: responseHeaders });
  };
}

describe('A2A: drain', () => {
  test('a message that reaches a draining edge gets a JSON-RPC error (503, shutting_down) the SDK raises', async () => {
    const stack = await startStack({
      mock: { tokens: 60, intervalMs: 40 },
      configure: (raw) => {
        raw.a2a = { agents: [{ id: 'writer', model: ALIAS }] };
      },
    });
    try {
      const url = `${stack.edge.url}/a2a/writer/`;
      const card = await (await clientFor(url)).getAgentCard();
      // A running task keeps the drain waiting (and the connection below open).
      const running = (await clientFor(url)).sendMessageStream(request('keep the drain busy'));
      for await (const event of running) if (event.payload?.$case === 'artifactUpdate') break;
      const fetchImpl = await preopenedFetch(`${stack.edge.url}/a2a/writer`);
      const late = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] })).createFromAgentCard(card);
      const report = stack.edge.shutdown(5_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await assert.rejects(late.sendMessage(request('too late')), (err: Error & { envelopeCode?: number }) => {
        assert.match(err.message, /shutting_down/);
        assert.equal(err.envelopeCode, -32603);
        return true;
      });
      assert.equal((await report).drained, true, 'the running task finished within the grace');
    } finally {
      await stack.agent?.stop();
      await stack.mock.close();
    }
  });
});
