// Checks that a client received exactly its own answer. The mock provider
// stamps every chunk with the request it answers (`mock`: its log id, the
// x-request-id the client sent, the token count the request asked for, the
// event's seq), so a response crossed between tunnels, spliced from two
// streams, reordered or cut short fails here, where comparing texts of
// identical answers could not tell.
import assert from 'node:assert/strict';
import type { MockRequestRecord } from '../../src/mock/provider.js';

/** What the mock put in every chunk. */
interface Stamp {
  readonly request: number;
  readonly request_id: string;
  readonly tokens: number;
  readonly seq?: number;
}

/** What a client learnt about the answer it got: the mock's log id for it. */
export interface OwnAnswer {
  readonly mockRequest: number;
}

/** A unique x-request-id for client `i` of a test. */
export function clientRequestId(test: string, i: number): string {
  return `${test}-${process.pid}-${i}`;
}

function stampOf(value: unknown, where: string): Stamp {
  const stamp = (value as { mock?: Stamp } | null)?.mock;
  assert.ok(stamp !== undefined && typeof stamp.request === 'number', `${where}: no mock stamp in ${JSON.stringify(value).slice(0, 200)}`);
  return stamp;
}

/**
 * An SSE body of a streamed chat completion: every data event carries the
 * same request id and mock request and the asked token count, seq runs
 * 0..tokens without a gap, tokens content events, then [DONE].
 */
export function assertOwnStream(body: string, requestId: string, tokens: number): OwnAnswer {
  const events = body.split('\n\n').filter((e) => e.length > 0);
  assert.equal(events.at(-1), 'data: [DONE]', `${requestId}: the stream ends with [DONE]: ${body.slice(-200)}`);
  return assertOwnChunks(
    events.slice(0, -1).map((e) => {
      assert.ok(e.startsWith('data: '), `${requestId}: not an SSE data event: ${e.slice(0, 100)}`);
      return JSON.parse(e.slice(6)) as unknown;
    }),
    requestId,
    tokens,
  );
}

/** The parsed chunks of one stream (e.g. from the openai SDK), checked as assertOwnStream does. */
export function assertOwnChunks(chunks: readonly unknown[], requestId: string, tokens: number): OwnAnswer {
  assert.equal(chunks.length, tokens + 1, `${requestId}: ${tokens} token chunks and a final one, got ${chunks.length} chunks`);
  const first = stampOf(chunks[0], requestId);
  for (const [k, chunk] of chunks.entries()) {
    const stamp = stampOf(chunk, requestId);
    assert.deepEqual(
      { request: stamp.request, request_id: stamp.request_id, tokens: stamp.tokens, seq: stamp.seq },
      { request: first.request, request_id: requestId, tokens, seq: k },
      `${requestId}: chunk ${k} belongs to another request or is out of place`,
    );
  }
  return { mockRequest: first.request };
}

/** A non-streaming completion body: its stamp names this request and its token count. */
export function assertOwnBody(body: string, requestId: string, tokens: number): OwnAnswer {
  const stamp = stampOf(JSON.parse(body), requestId);
  assert.deepEqual({ request_id: stamp.request_id, tokens: stamp.tokens }, { request_id: requestId, tokens }, `${requestId}: the body belongs to another request`);
  return { mockRequest: stamp.request };
}

/** The entries of GET /mock/log or an in-process requestLog that matter here. */
export type LogEntry = Pick<MockRequestRecord, 'id' | 'requestId' | 'tokens' | 'completed'>;

/**
 * The mock's log agrees with what the client got: the log entry the answer
 * names is this client's request (same x-request-id and token count) and it
 * completed.
 */
export function assertLogged(log: readonly LogEntry[], answer: OwnAnswer, requestId: string, tokens: number): void {
  const entry = log.find((r) => r.id === answer.mockRequest);
  assert.ok(entry !== undefined, `${requestId}: mock request ${answer.mockRequest} is not in the mock's log`);
  assert.deepEqual({ requestId: entry.requestId, tokens: entry.tokens, completed: entry.completed }, { requestId, tokens, completed: true }, `${requestId}: the mock's log disagrees`);
}
