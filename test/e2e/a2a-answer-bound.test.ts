// A task holds its whole answer (its record, GetTask), so the answer is
// bounded: past a2a.max_task_bytes (and never past what one JS string can
// hold, where the append threw inside the node's frame handler and the edge
// or its I/O worker exited) the task fails with the text it has and its run
// is stopped: the provider sees its request closed, the node stays connected
// and the next task runs. Runs in every worker mode (EDGE_TEST_WORKERS).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import type { SendMessageRequest, Task } from '@a2a-js/sdk';
import { startProvidersStack, startScriptedProvider, waitUntil, type ProvidersStack, type ScriptedProvider } from '../helpers/stack.js';

const FAILED = 4;
const COMPLETED = 3;
const MAX_TASK_BYTES = 1_048_576;

function request(text: string): SendMessageRequest {
  const message = { messageId: randomUUID(), contextId: '', taskId: '', role: 1, parts: [{ content: { $case: 'text' as const, value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
  return { tenant: '', message, configuration: undefined, metadata: undefined };
}

function chunk(text: string): string {
  return `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: text }, finish_reason: null }] })}\n\n`;
}

function textOf(task: Task): string {
  return task.artifacts.flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
}

describe('A2A: an answer larger than a task holds', () => {
  let provider: ScriptedProvider;
  let stack: ProvidersStack;
  let client: Client;
  /** The big answer's request was closed by the edge before the provider ended it. */
  let cut = false;

  before(async () => {
    provider = await startScriptedProvider(async (_req, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (await writeBig(res)) {
        // Held open: only the edge stopping the run ends it (an unbounded edge would wait the whole answer).
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 5_000);
          res.on('close', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        if (res.destroyed || !res.writable) {
          cut = true;
          return;
        }
      } else {
        res.write(chunk('short answer'));
      }
      res.end('data: [DONE]\n\n');
    });
    stack = await startProvidersStack('m', { p: provider.url }, {}, {}, { a2a: { agents: [{ id: 'w', model: 'm' }], max_task_bytes: MAX_TASK_BYTES } });
    client = await new ClientFactory().createFromUrl(`${stack.edge.url}/a2a/w/`);
  });

  after(async () => {
    await stack.close();
    await provider.close();
  });

  /**
   * 1.5 MiB of content in 64 KiB deltas ('big'), or in one event whose line has not ended ('line': no delta
   * reaches the task until it does); false when the edge closed the request meanwhile.
   */
  let mode = 'big';
  async function writeBig(res: ServerResponse): Promise<boolean> {
    if (mode !== 'big' && mode !== 'line') return false;
    if (mode === 'line') res.write('data: {"choices":[{"index":0,"delta":{"content":"');
    const piece = mode === 'line' ? 'x'.repeat(65_536) : chunk('x'.repeat(65_536));
    for (let i = 0; i < 24; i++) {
      if (res.destroyed) return true;
      if (!res.write(piece)) {
        await new Promise<void>((resolve) => {
          const done = (): void => {
            res.off('drain', done).off('close', done);
            resolve();
          };
          res.on('drain', done).on('close', done);
        });
      }
    }
    return true;
  }

  test('the task fails saying so, with the text it held; the run is stopped and the next task runs', async () => {
    const task = (await client.sendMessage(request('write a lot'))) as Task;
    assert.equal(task.status?.state, FAILED, `state ${task.status?.state}`);
    const why = task.status?.message?.parts[0]?.content;
    assert.ok(why?.$case === 'text' && why.value.includes('a2a.max_task_bytes'), JSON.stringify(why));
    assert.ok(textOf(task).length > 0 && textOf(task).length <= MAX_TASK_BYTES, `kept ${textOf(task).length} characters`);
    await waitUntil(() => cut, 'the provider to see its request closed');
    mode = 'short';
    const next = (await client.sendMessage(request('and now briefly'))) as Task;
    assert.equal(next.status?.state, COMPLETED);
    assert.equal(textOf(next), 'short answer');
  });

  test('an answer held in one unended line is bounded too: the task fails and the run is stopped', async () => {
    mode = 'line';
    cut = false;
    const task = (await client.sendMessage(request('write a lot on one line'))) as Task;
    assert.equal(task.status?.state, FAILED, `state ${task.status?.state}`);
    const why = task.status?.message?.parts[0]?.content;
    assert.ok(why?.$case === 'text' && why.value.includes('a2a.max_task_bytes'), JSON.stringify(why));
    // Stopped past the bound, not held until the provider ended its answer (5 s later).
    await waitUntil(() => cut, 'the provider to see its request closed');
    mode = 'short';
    const next = (await client.sendMessage(request('and now briefly'))) as Task;
    assert.equal(next.status?.state, COMPLETED);
    assert.equal(textOf(next), 'short answer');
  });
});
