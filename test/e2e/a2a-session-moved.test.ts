// A2A: a context's session moved to another node (its node gone) is told to
// the A2A client as the HTTP routes tell theirs with x-edge-session-moved-from:
// in the task's metadata (edgeSessionMovedFrom) and with the status the task
// started working under, so a client of a cli agent knows the agent's state
// from earlier turns did not come along. Real stack of two nodes, the
// official @a2a-js/sdk client.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import type { Message, SendMessageRequest, StreamResponse, Task } from '@a2a-js/sdk';
import { CLI_ALIAS, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

let stack: CliStack;
let client: Client;

before(async () => {
  stack = await startCliStack({
    nodes: 2,
    configure: (raw) => {
      raw.a2a = { agents: [{ id: 'coder', model: CLI_ALIAS, description: 'A command-line agent' }] };
    },
  });
  client = await new ClientFactory().createFromUrl(`${stack.edge.url}/a2a/coder/`);
});

after(async () => {
  await stack.close();
});

function request(text: string, contextId: string): SendMessageRequest {
  const message: Message = { messageId: randomUUID(), contextId, taskId: '', role: 1, parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
  return { tenant: '', message, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: false }, metadata: undefined };
}

async function nodeOf(task: Task): Promise<string> {
  const run = await stack.admin(`/admin/runs/${encodeURIComponent(String(task.metadata?.edgeRunId))}`);
  return run.json.node as string;
}

test("a context whose node went away: the next task says where its session was, once", async () => {
  const contextId = `ctx-${randomUUID()}`;
  const first = (await client.sendMessage(request('hello', contextId))) as Task;
  assert.equal(first.status?.state, 3, JSON.stringify(first.status));
  assert.equal(first.metadata?.edgeSessionMovedFrom, undefined, 'a first turn moved nothing');
  const home = await nodeOf(first);
  await stack.agents[home === 'gpu-1' ? 0 : 1].stop();
  await waitFor(async () => (await stack.edge.status()).nodes.find((n) => n.id === home)?.connected === false, `${home} to be gone`);

  // Streamed: the status it starts working under carries the move.
  const updates: StreamResponse[] = [];
  for await (const event of client.sendMessageStream(request('hello again', contextId))) updates.push(event);
  const moved = updates.flatMap((u) => (u.payload?.$case === 'statusUpdate' ? [u.payload.value] : [])).find((s) => s.metadata?.edgeSessionMovedFrom !== undefined);
  assert.equal(moved?.metadata?.edgeSessionMovedFrom, home, JSON.stringify(updates.map((u) => u.payload?.$case)));
  const taskId = updates.flatMap((u) => (u.payload?.$case === 'task' ? [u.payload.value.id] : u.payload?.$case === 'statusUpdate' ? [u.payload.value.taskId] : []))[0];
  const got = await client.getTask({ tenant: '', id: taskId, historyLength: undefined });
  assert.equal(got.metadata?.edgeSessionMovedFrom, home, 'and its record says so');
  assert.notEqual(await nodeOf(got), home);

  const after = (await client.sendMessage(request('and again', contextId))) as Task;
  assert.equal(after.metadata?.edgeSessionMovedFrom, undefined, 'told once: the session is at home on its new node');
});
