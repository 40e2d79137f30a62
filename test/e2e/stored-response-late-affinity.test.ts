// With I/O workers, the worker that relays a created Response tells the
// others where it is stored through the pool (postMessage). A client that
// reads the response and sends its follow-up at once, on a new connection,
// can reach another worker before that message does: measured with 4
// workers and 16 clients in another process, ~3% of GETs right after a
// create were answered 404 response_not_found (and some
// previous_response_id follow-ups 400), while the provider held the
// response. Here the pool's messages to the other workers are held back
// until the follow-ups are answered, so that moment lasts: every follow-up
// must still find the response (the pool's own copy is asked before a 404).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import OpenAI from 'openai';
import { Agent } from 'undici';
import { ALIAS, startStack, type Stack } from '../helpers/stack.js';

const WORKERS = 4;
/** Fresh connections per follow-up kind: the kernel spreads them over the workers, so some reach one that did not relay the create. */
const FOLLOW_UPS = 8;

interface Posted {
  readonly type?: string;
  readonly call?: number;
}

describe('a follow-up that reaches another I/O worker before the pool\'s message about its response', () => {
  let stack: Stack;
  const dispatchers: Agent[] = [];
  const held: (() => void)[] = [];
  let holding = false;
  const postMessage = Object.getOwnPropertyDescriptor(Worker.prototype, 'postMessage')?.value as Worker['postMessage'];

  before(async () => {
    stack = await startStack({ providerType: 'vllm', configure: (raw) => void (raw.workers = { count: WORKERS }) });
    // The pool passing on what a worker learnt or used (an 'affinity' message without a call) is late while `holding`.
    Worker.prototype.postMessage = function (this: Worker, message: unknown, transfer?: unknown) {
      const posted = message as Posted;
      if (holding && posted?.type === 'affinity' && posted.call === undefined) {
        held.push(() => postMessage.call(this, message, transfer as never));
        return;
      }
      postMessage.call(this, message, transfer as never);
    } as Worker['postMessage'];
  });
  after(async () => {
    Worker.prototype.postMessage = postMessage;
    await Promise.all(dispatchers.map((d) => d.close()));
    await stack.close();
  });

  function fresh(): OpenAI {
    const dispatcher = new Agent({ connections: 1 });
    dispatchers.push(dispatcher);
    return new OpenAI({ baseURL: stack.baseURL, apiKey: 'unused', maxRetries: 0, fetchOptions: { dispatcher } });
  }

  test('GET /v1/responses/{id} and previous_response_id on other connections find the response just made', async () => {
    holding = true;
    try {
      const made = await fresh().responses.create({ model: ALIAS, input: 'remember me' });
      for (let i = 0; i < FOLLOW_UPS; i++) {
        assert.equal((await fresh().responses.retrieve(made.id)).id, made.id, `GET ${i}`);
      }
      for (let i = 0; i < FOLLOW_UPS; i++) {
        const next = await fresh().responses.create({ model: ALIAS, input: `and then ${i}`, previous_response_id: made.id });
        assert.equal(next.previous_response_id, made.id, `follow-up ${i}`);
      }
      assert.ok(held.length > 0, 'the pool had messages to pass on');
    } finally {
      holding = false;
      for (const release of held.splice(0)) release();
    }
  });

  test('an id no worker has heard of is still refused, in the API\'s own format', async () => {
    for (let i = 0; i < 4; i++) {
      await assert.rejects(fresh().responses.retrieve('resp_never_made'), (err: unknown) => {
        assert.ok(err instanceof OpenAI.NotFoundError, String(err));
        assert.equal((err.error as { code?: string }).code, 'response_not_found');
        return true;
      });
      await assert.rejects(fresh().responses.create({ model: ALIAS, input: 'x', previous_response_id: 'resp_never_made' }), (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal((err.error as { code?: string }).code, 'previous_response_not_found');
        return true;
      });
    }
  });
});
