// A node's answer is relayed with its own content-length, so the node's
// body must match it: bytes past the declared length would be read by a
// keep-alive client as the start of its next response, and a body cut
// short would make it wait for bytes that never come and then eat the next
// response's. The edge relays exactly the declared bytes and no more, and a
// short body is a cut connection, never a finished response. Scripted node
// (FakeNode), real edge, undici client on one keep-alive connection.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { ALIAS, inFlight, openExchanges, registeredFakeNode, startStack, waitFor, waitUntil, type Stack } from '../helpers/stack.js';
import { JSON_HEADERS, SSE, type FakeNode } from '../workers/grpc/fake-node.js';

/** A raw keep-alive connection: every byte the edge sends is seen, so a byte too many cannot hide. */
class RawClient {
  readonly socket: Socket;
  received = Buffer.alloc(0);
  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
    });
  }
  chat(content: string): void {
    const body = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content }] });
    this.socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: edge\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  }
  /** Takes one whole response framed by its Content-Length off what arrived; undefined until it is all here. */
  take(): { status: number; body: string } | undefined {
    const end = this.received.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const head = this.received.toString('latin1', 0, end);
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? NaN);
    assert.ok(Number.isInteger(length), `a length-framed response, got head ${JSON.stringify(head)}`);
    if (this.received.length < end + 4 + length) return undefined;
    const body = this.received.toString('utf8', end + 4, end + 4 + length);
    this.received = this.received.subarray(end + 4 + length);
    return { status: Number(head.slice(9, 12)), body };
  }
  async next(): Promise<{ status: number; body: string }> {
    let taken: { status: number; body: string } | undefined;
    await waitUntil(() => (taken = this.take()) !== undefined, 'a whole response');
    return taken as { status: number; body: string };
  }
}

const withLength = (headers: typeof JSON_HEADERS, length: number) => [...headers, { $typeName: 'edge.v1.Header' as const, name: 'content-length', value: String(length) }];

describe('a relayed content-length the node does not keep', () => {
  let stack: Stack;
  let node: FakeNode;
  let client: Agent;
  before(async () => {
    stack = await startStack({ startAgent: false });
    node = await registeredFakeNode(stack);
  });
  after(async () => {
    node.close();
    await stack.close();
  });

  function chat(content: string) {
    return request(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content }] }),
      dispatcher: client,
    });
  }

  /** The next answer on the same connection comes through whole: it was not desynchronised. */
  async function nextIsClean(): Promise<void> {
    const next = chat('after');
    const t = await node.nextTunnel();
    const body = '{"ok":"clean"}';
    node.headers(t.tunnelId, 0, withLength(JSON_HEADERS, body.length));
    node.data(t.tunnelId, 1, body);
    node.end(t.tunnelId, 2);
    const res = await next;
    assert.equal(res.statusCode, 200);
    assert.equal(await res.body.text(), body);
  }

  /**
   * How the answer ended for the client: 'cut' (before or after its head:
   * both are a cut connection), 'whole', or 'waiting' when nothing came
   * within 5 s (a client left hanging for a body that never comes).
   */
  async function cutOrWhole(pending: ReturnType<typeof chat>): Promise<string> {
    const outcome = pending.then((res) => res.body.text()).then(
      (body) => `whole: ${body}`,
      () => 'cut',
    );
    let timer: NodeJS.Timeout | undefined;
    const waiting = new Promise<string>((resolve) => (timer = setTimeout(resolve, 5_000, 'waiting')));
    try {
      return await Promise.race([outcome, waiting]);
    } finally {
      clearTimeout(timer);
    }
  }

  async function settled(): Promise<void> {
    await waitFor(async () => (await openExchanges(stack.edge)) === 0, 'no exchange left open');
    await waitUntil(() => inFlight(stack.edge) === 0, 'no lease left');
  }

  const rawClient = (): RawClient => new RawClient(Number(new URL(stack.edge.url).port));

  /** The next answer on the same raw connection comes through whole, with nothing before or after it. */
  async function rawNextIsClean(raw: RawClient, settle = true): Promise<void> {
    raw.chat('after');
    const t = await node.nextTunnel();
    const body = '{"ok":"clean"}';
    node.headers(t.tunnelId, 0, withLength(JSON_HEADERS, body.length));
    node.data(t.tunnelId, 1, body);
    node.end(t.tunnelId, 2);
    assert.deepEqual(await raw.next(), { status: 200, body });
    if (settle) await settled();
    else await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(raw.received.length, 0, 'nothing after it');
  }

  test('bytes past the declared length are not relayed, the tunnel is cancelled, and the connection stays in step', async () => {
    const raw = rawClient();
    raw.chat('overrun');
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, withLength(JSON_HEADERS, 10));
    node.data(t.tunnelId, 1, '{"a":"123"}HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled');
    assert.deepEqual(await raw.next(), { status: 200, body: '{"a":"123"' }, 'exactly the declared 10 bytes');
    await waitUntil(() => node.cancels().some((c) => c.tunnelId === t.tunnelId), 'the tunnel cancelled');
    node.end(t.tunnelId, 2); // a late END changes nothing
    await settled();
    assert.equal(raw.received.length, 0, `no byte past the length: ${JSON.stringify(raw.received.toString('latin1'))}`);
    await rawNextIsClean(raw);
    raw.socket.destroy();
  });

  test('a later DATA frame past the length, after the body was whole, is not relayed either', async () => {
    const raw = rawClient();
    raw.chat('late overrun');
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, withLength(JSON_HEADERS, 4));
    node.data(t.tunnelId, 1, 'true');
    assert.deepEqual(await raw.next(), { status: 200, body: 'true' });
    node.data(t.tunnelId, 2, 'HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nextra');
    node.end(t.tunnelId, 3);
    await settled();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(raw.received.length, 0, `no byte past the length: ${JSON.stringify(raw.received.toString('latin1'))}`);
    await rawNextIsClean(raw);
    raw.socket.destroy();
  });

  test('a whole answer ends at its last byte: the same connection serves the next request before END, and a late ERROR resets nothing', async () => {
    const raw = rawClient();
    raw.chat('first');
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, withLength(JSON_HEADERS, 7));
    node.data(t.tunnelId, 1, '"whole"');
    assert.deepEqual(await raw.next(), { status: 200, body: '"whole"' });
    // END still held back: the connection is already free for its next request.
    await rawNextIsClean(raw, false);
    assert.equal(await openExchanges(stack.edge), 1, 'the first exchange still waits for its END');
    node.error(t.tunnelId, 2, 'upstream_reset', 'the provider went away after its answer');
    await settled();
    assert.equal(raw.socket.destroyed, false, 'the connection was not reset');
    await rawNextIsClean(raw);
    raw.socket.destroy();
  });

  test('a body shorter than its length ends in a cut connection, not a finished response', async () => {
    client = new Agent({ connections: 1 });
    const pending = chat('short');
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, withLength(JSON_HEADERS, 100));
    node.data(t.tunnelId, 1, '{"a":"short"}');
    node.end(t.tunnelId, 2);
    assert.equal(await cutOrWhole(pending), 'cut', 'the client learns its body was cut, at once');
    await settled();
    await nextIsClean();
    await settled();
    await client.close();
  });

  test('an event stream with a length that then fails gets no error event past the length: it is cut', async () => {
    client = new Agent({ connections: 1 });
    const pending = chat('sse');
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, withLength(SSE, 200));
    node.data(t.tunnelId, 1, 'data: {"x":1}\n\n');
    node.error(t.tunnelId, 2, 'upstream_reset', 'provider went away');
    assert.equal(await cutOrWhole(pending), 'cut', 'cut, not padded with an error event the length has no room for');
    await settled();
    await nextIsClean();
    await settled();
    await client.close();
  });
});
