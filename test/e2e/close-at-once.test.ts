// RunningEdge.close() "closes at once" (an embedder's shutdown, every test's
// teardown): with a stream still open it returns without waiting for the
// stream to end by itself (here, it never would before its 60 s tunnel
// deadline), the client's stream ends with an error event, and the node
// hears the cancel. Before, close() awaited the client listener first, which
// waited for that stream, which only the node listener's close (next) ended.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { test } from 'node:test';
import type { RunningEdge } from '../../src/edge/edge.js';
import { hasOpenssl, makeTestPki } from '../helpers/certs.js';
import { ALIAS, NODE_ID, NODE_TOKEN, openExchanges, postChat, PROVIDER_ID, startStack, waitFor } from '../helpers/stack.js';
import { FakeNode } from '../workers/grpc/fake-node.js';

/** 'closed' once edge.close() returns; 'still closing' if it has not within 10 s (a bound, not a speed check). */
async function closesWithin10s(edge: RunningEdge): Promise<string> {
  let deadline: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([edge.close().then(() => 'closed'), new Promise<string>((resolve) => (deadline = setTimeout(resolve, 10_000, 'still closing')))]);
  clearTimeout(deadline);
  return outcome;
}

test('close() with a stream open ends it and returns, well before the tunnel deadline', async () => {
  const stack = await startStack({ startAgent: false, tunnelTimeoutMs: 60_000 });
  const node = new FakeNode(stack.edge.grpcPort);
  try {
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    await node.registered();
    const pending = fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] })}\n\n`);
    const res = await pending;
    // The chunk reached the client before close() (with I/O workers it crosses from the node's worker to the client's).
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('Hi')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    assert.match(text, /Hi/);
    const rest = (async () => {
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
    })().catch((err: unknown) => void (text += `(cut: ${String(err)})`));
    assert.equal(await closesWithin10s(stack.edge), 'closed', 'close() waited for the open stream');
    await rest;
    assert.match(text, /"error"|\(cut:/, 'the stream did not end as if complete');
  } finally {
    node.close();
    await stack.close().catch(() => {});
  }
});

// A request still queued when close() begins (its provider busy) is answered
// 503 shutting_down at once. Before, its node's close left it no provider,
// so it waited out its queue timeout, and close() waited with it.
test('close() with a request queued answers it 503 shutting_down at once, not after its queue timeout', async () => {
  const stack = await startStack({ startAgent: false, capacity: 1, queueTimeoutMs: 30_000, tunnelTimeoutMs: 60_000 });
  const node = new FakeNode(stack.edge.grpcPort);
  try {
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    await node.registered();
    const send = () => postChat(stack.baseURL, { stream: true }).then(async (res) => ({ status: res.status, body: await res.text() }));
    const granted = send();
    await node.nextTunnel();
    const queued = send();
    await waitFor(async () => (await openExchanges(stack.edge)) === 2, 'the second request to be queued behind the first');
    assert.equal(await closesWithin10s(stack.edge), 'closed', 'close() waited for the queued request');
    const answer = await queued;
    assert.equal(answer.status, 503, answer.body);
    assert.equal((JSON.parse(answer.body) as { error: { code: string } }).error.code, 'shutting_down');
    assert.equal((await granted).status, 503, 'the granted one, with no head yet, is answered too');
  } finally {
    node.close();
    await stack.close().catch(() => {});
  }
});

// A request that completes on a connection the closing edge still serves
// (its body finished after close() began) gets the API's own 503
// shutting_down with a request id, as a drain answers: not fastify's
// generic `{"error":"Service Unavailable"}`, which the SDKs cannot read.
for (const lean of [true, false]) test(`a request finishing after close() began gets 503 shutting_down in the API format (lean_http1 ${lean})`, async () => {
  const stack = await startStack({
    startAgent: false,
    configure: (raw) => {
      ((raw.listen as Record<string, Record<string, unknown>>).http).lean_http1 = lean;
    },
  });
  const node = new FakeNode(stack.edge.grpcPort);
  try {
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    await node.registered();
    const body = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] });
    const port = new URL(stack.edge.url).port;
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      received += chunk;
    });
    const ended = once(socket, 'close');
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
    // The edge has read the head and waits for the body: its close() cannot finish before the request does.
    // (A fixed wait: nothing tells a client that its head was read. Before, close() would count the
    // connection idle and close it, and the test fail on no answer, never pass falsely.)
    await new Promise((resolve) => setTimeout(resolve, 300));
    const closed = stack.edge.close();
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.write(body.slice(10));
    await ended;
    await closed;
    const head = received.slice(0, received.indexOf('\r\n\r\n')).toLowerCase();
    assert.match(head, /^http\/1\.1 503 /, received);
    assert.match(head, /\r\nx-request-id: req-/, received);
    assert.match(head, /\r\nconnection: close/, received);
    const raw = received.slice(received.indexOf('\r\n\r\n') + 4);
    const answer = JSON.parse(/\r\ntransfer-encoding: chunked/.test(head) ? dechunk(raw) : raw) as { error?: { code?: string; type?: string } };
    assert.equal(answer.error?.code, 'shutting_down', received);
  } finally {
    node.close();
    await stack.close().catch(() => {});
  }
});

function dechunk(raw: string): string {
  let out = '';
  for (let at = 0; ; ) {
    const eol = raw.indexOf('\r\n', at);
    const size = parseInt(raw.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += raw.slice(eol + 2, eol + 2 + size);
    at = eol + 4 + size;
  }
}

/** edge.close() with `socket` open and silent: close() returns within 10 s, and the socket is cut. */
async function closeCutsSilent(edge: RunningEdge, socket: Socket): Promise<void> {
  // A cut is a cut, FIN or reset (seen at 4 I/O workers): once(socket, 'close') would reject on the reset's 'error'.
  socket.on('error', () => {});
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.resume();
  assert.equal(await closesWithin10s(edge), 'closed');
  await ended;
}

// A connection that never sent a byte has no request to finish: the OpenAI SDK's
// undici leaves one open after a request it timed out while queued, a browser
// preconnects one. node:http (and the lean path) do not count it idle, so
// close() waited for it until the 60 s head timeout.
for (const lean of [true, false]) test(`close() does not wait for a connection that never sent a request (lean_http1 ${lean})`, async () => {
  const stack = await startStack({
    configure: (raw) => {
      ((raw.listen as Record<string, Record<string, unknown>>).http).lean_http1 = lean;
    },
  });
  const socket = connect(Number(new URL(stack.edge.url).port), '127.0.0.1');
  try {
    await once(socket, 'connect');
    await closeCutsSilent(stack.edge, socket);
  } finally {
    socket.destroy();
    await stack.close();
  }
});

// The same over HTTPS: the raw socket has read the handshake, so what tells a connection that never sent a
// request is its TLS socket's count (an SDK's spare connection is past its handshake).
test('close() does not wait for an HTTPS connection that finished its handshake and never sent a request', { skip: hasOpenssl() ? false : 'the openssl CLI is not installed' }, async () => {
  const pki = makeTestPki();
  const stack = await startStack({
    startAgent: false,
    configure: (raw) => {
      raw.tls = { client: { cert_file: pki.serverCert, key_file: pki.serverKey } };
    },
  });
  const socket = tlsConnect({ host: '127.0.0.1', port: stack.edge.httpPort, ca: readFileSync(pki.caCert), servername: 'localhost' });
  socket.on('error', () => {}); // before the handshake too
  try {
    // A TLS 1.3 session ticket comes once the edge has finished its side of the handshake.
    await once(socket, 'session');
    await closeCutsSilent(stack.edge, socket);
  } finally {
    socket.destroy();
    await stack.close();
    pki.remove();
  }
});
