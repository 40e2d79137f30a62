// With I/O workers, a worker that has not heard of a stored response asks
// the pool's copy before refusing it (stored-response-late-affinity.test.ts).
// The pool answered after one turn of its loop, taking the message of the
// worker that relayed the response as read by then; but the main thread
// reads the workers' ports in its own order, not in the order of posting:
// measured with 4 workers and 16 clients in another process, 4 of 22,400
// previous_response_id follow-ups sent at once on new connections were
// answered 400 previous_response_not_found while the provider held the
// response (the relaying worker's message was read 0.3-0.6 ms after the
// answer). Here the main thread reads that worker's messages late, as under
// load: held until the pool next posts to that worker or answers an ask.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import OpenAI from 'openai';
import { Agent } from 'undici';
import { ALIAS, startStack, type Stack } from '../helpers/stack.js';

const WORKERS = 4;
/** Responses made, each followed on fresh connections: the kernel spreads them, so some reach another worker. */
const ROUNDS = 3;
const FOLLOW_UPS = 6;

interface Posted {
  readonly type?: string;
  readonly call?: number;
  readonly stored?: unknown;
  readonly expiresAt?: number;
}

describe('a follow-up whose response the pool has not read yet from the worker that relayed it', () => {
  let stack: Stack;
  const dispatchers: Agent[] = [];
  const emit = Object.getOwnPropertyDescriptor(Worker.prototype, 'emit');
  const postMessage = Object.getOwnPropertyDescriptor(Worker.prototype, 'postMessage')?.value as Worker['postMessage'];
  const baseEmit = Worker.prototype.emit;
  /** The next new response's relaying worker has its messages to the main thread held. */
  let armed = false;
  let heldFrom: Worker | undefined;
  const held: unknown[] = [];
  let asks = 0;

  function release(): void {
    const worker = heldFrom;
    heldFrom = undefined;
    if (worker !== undefined) for (const message of held.splice(0)) baseEmit.call(worker, 'message', message);
  }

  before(async () => {
    stack = await startStack({ providerType: 'vllm', configure: (raw) => void (raw.workers = { count: WORKERS }) });
    // What a worker posts reaches the pool as the Worker's 'message' event: those of the held worker wait, in order.
    Worker.prototype.emit = function (this: Worker, event: string | symbol, ...args: unknown[]): boolean {
      if (event === 'message') {
        const message = args[0] as Posted;
        if (armed && heldFrom === undefined && message?.type === 'affinity' && message.stored !== null && message.expiresAt === undefined) {
          armed = false;
          heldFrom = this;
        }
        if (heldFrom === this) {
          held.push(args[0]);
          return true;
        }
        if (message?.type === 'affinityAsk') asks++;
      }
      return baseEmit.call(this, event, ...args);
    };
    // The pool posting to the held worker (it waits on it), or answering an ask: that worker's port is read from then on.
    Worker.prototype.postMessage = function (this: Worker, message: unknown, transfer?: unknown) {
      postMessage.call(this, message, transfer as never);
      const posted = message as Posted;
      if (heldFrom !== undefined && (this === heldFrom || (posted?.type === 'affinity' && posted.call !== undefined))) setImmediate(release);
    } as Worker['postMessage'];
  });
  after(async () => {
    release();
    if (emit === undefined) delete (Worker.prototype as { emit?: unknown }).emit;
    else Object.defineProperty(Worker.prototype, 'emit', emit);
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
    for (let round = 0; round < ROUNDS; round++) {
      armed = true;
      try {
        const made = await fresh().responses.create({ model: ALIAS, input: `remember me ${round}` });
        for (let i = 0; i < FOLLOW_UPS; i++) {
          assert.equal((await fresh().responses.retrieve(made.id)).id, made.id, `round ${round}, GET ${i}`);
        }
        release();
        armed = true;
        const next = await fresh().responses.create({ model: ALIAS, input: `next ${round}` });
        for (let i = 0; i < FOLLOW_UPS; i++) {
          const follow = await fresh().responses.create({ model: ALIAS, input: `and then ${i}`, previous_response_id: next.id });
          assert.equal(follow.previous_response_id, next.id, `round ${round}, follow-up ${i}`);
        }
      } finally {
        armed = false;
        release();
      }
    }
    assert.ok(asks > 0, 'some follow-ups reached a worker that had not heard of their response');
  });
});
