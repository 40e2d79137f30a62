// An A2A model agent reads its provider's chat stream as the SSE spec (and
// the openai SDK) does: a line ends at CRLF, LF or CR alone, an event's data
// is all of its `data:` lines joined, and a BOM before the first byte is no
// part of the stream. Read line by line on LF, a CR-only stream failed its
// task, a JSON chunk spread over two data lines was dropped (the task
// completed with no text) and the first delta behind a BOM was lost, while
// the same provider streamed whole to an openai SDK client.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ClientFactory } from '@a2a-js/sdk/client';
import type { Message, SendMessageRequest, Task } from '@a2a-js/sdk';
import OpenAI from 'openai';
import type { RunningEdge } from '../../src/edge/edge.js';
import { startProvidersStack, startScriptedProvider, writeEventStream, type ProvidersStack, type ScriptedProvider } from '../helpers/stack.js';

const COMPLETED = 3;
const TEXT = ['Hé', 'llo', ' wörld €😀'];

const chunk = (delta: object, finish: string | null = null): string => JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served-p', choices: [{ index: 0, delta, finish_reason: finish }] });
/** A chat stream whose every delta has text, lines ended by `eol`, each chunk's JSON optionally over two data lines. */
function chat(eol: string, twoLines = false): string {
  const data = (json: string): string => (twoLines ? `data: ${json.replace('","object"', `",${eol}data: "object"`)}` : `data: ${json}`);
  return [...TEXT.map((t) => chunk({ content: t })), chunk({}, 'stop')].map((json) => `${data(json)}${eol}${eol}`).join('') + `data: [DONE]${eol}${eol}`;
}

/** x-case (or, for the A2A agent's runs, the case named last) -> the chunks the provider writes, each a write of its own. */
const CASES: Record<string, () => string[]> = {
  cr: () => [chat('\r')],
  'cr-bytewise': () => [...chat('\r')],
  'crlf-split': () => { const s = chat('\r\n'); const at = s.indexOf('\r\n') + 1; return [s.slice(0, at), s.slice(at)]; },
  'multi-line-data': () => [chat('\n', true)],
  bom: () => [`\uFEFF${chat('\n')}`],
};
let current = 'cr';

function request(text: string): SendMessageRequest {
  const message: Message = { messageId: randomUUID(), contextId: '', taskId: '', role: 1, parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: undefined, extensions: [], referenceTaskIds: [] };
  return { tenant: '', message, configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: false }, metadata: undefined };
}

describe('A2A over a provider stream with legal but unusual SSE lines', () => {
  let provider: ScriptedProvider;
  let stack: ProvidersStack;
  let edge: RunningEdge;
  before(async () => {
    provider = await startScriptedProvider((req, res) => writeEventStream(res, CASES[(req.headers['x-case'] as string | undefined) ?? current]()));
    stack = await startProvidersStack('m', { p: provider.url }, {}, {}, {
      a2a: { agents: [{ id: 'writer', model: 'm', name: 'Writer', description: 'Writes', skills: [{ id: 'write', name: 'Write', description: 'Writes text', tags: ['text'] }] }] },
    });
    edge = stack.edge;
  });
  after(async () => {
    await stack?.close();
    await provider?.close();
  });

  for (const name of Object.keys(CASES)) {
    test(`${name}: the task completes with the whole text, as the openai SDK reads it`, async () => {
      const openai = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const stream = await openai.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'x-case': name } });
      let sdkText = '';
      for await (const c of stream) sdkText += c.choices[0]?.delta?.content ?? '';
      assert.equal(sdkText, TEXT.join(''), 'the relay passes the stream as it is');

      current = name;
      const client = await new ClientFactory().createFromUrl(`${edge.url}/a2a/writer/`);
      const task = (await client.sendMessage(request('hi'))) as Task;
      assert.equal(task.status?.state, COMPLETED, JSON.stringify(task.status));
      const text = task.artifacts.flatMap((a) => a.parts).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
      assert.equal(text, TEXT.join(''));
    });
  }
});
