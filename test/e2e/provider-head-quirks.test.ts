// Response heads a provider may legally write that the edge would take, as
// relayed, for the node breaking the protocol (a 502 node_protocol_error
// counted against the node, which is fenced after a few, taking its other
// providers with it). The agent must make them the provider's own answer:
// - a head just under the agent's 64 KiB limit on the wire, written
//   `name:value` (no space after the colon, as some proxies and hand-written
//   servers do): the edge counts a HEADERS frame as `name: value` CRLF per
//   header, so the same head is larger there. It fails as the provider's bad
//   answer (upstream_error).
// - a content-length written with leading zeros (`0000000000000224`, the
//   length 224: RFC 9110 8.6 is 1*DIGIT). The edge frames the client's body
//   by a relayed length of at most 15 digits, so the agent relays the number.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { MAX_SESSION_VIOLATIONS } from '../../src/workers/grpc/frame-guard.js';
import { MAX_RESPONSE_HEAD_BYTES } from '../../src/shared/wire-limits.js';
import { inFlight, startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const BODY = JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'served-p', choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
const PLAIN_HEAD = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${BODY.length}\r\n\r\n`;

/** A compact head of many short headers, under the limit as raw bytes, over it as the edge counts them. */
function compactHead(): string {
  let head = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n';
  for (let i = 0; head.length < MAX_RESPONSE_HEAD_BYTES - 200; i++) head += `x-${i.toString(36)}:v\r\n`;
  return `${head}content-length: ${BODY.length}\r\n\r\n`;
}

/** The head the provider answers the next POSTs with. */
let nextHead = PLAIN_HEAD;
let server: Server;
let stack: ProvidersStack;
const sockets = new Set<Socket>();

before(async () => {
  server = createServer((socket) => {
    sockets.add(socket);
    // The agent drops the connection of a refused answer while its head is still being written.
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
    let buffered = '';
    socket.on('data', (data) => {
      buffered += data.toString('latin1');
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end === -1) return;
        const length = Number(/content-length: *(\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        // Only the chat calls get the quirk; a probe or model list gets the plain head.
        const head = buffered.startsWith('POST') ? nextHead : PLAIN_HEAD;
        buffered = buffered.slice(end + 4 + length);
        socket.write(head + BODY);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stack = await startProvidersStack('m', { p: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
});

after(async () => {
  await stack.close();
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => server.close(resolve));
});

function client(): OpenAI {
  return new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
}

test("a provider's compact head over the limit as the edge counts it fails as the provider's error, and the node is never fenced for it", async () => {
  nextHead = compactHead();
  assert.ok(nextHead.length < MAX_RESPONSE_HEAD_BYTES, 'the head is under the limit on the wire');
  for (let i = 0; i <= MAX_SESSION_VIOLATIONS; i++) {
    const failed = await client().chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).then(() => undefined, (err: unknown) => err);
    assert.ok(failed instanceof OpenAI.APIError, String(failed));
    assert.equal(failed.status, 502);
    assert.equal(failed.code, 'upstream_error', failed.message);
    assert.match(failed.message, /response head over 65536 bytes/);
  }
  await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  assert.deepEqual(stack.events.filter((e) => e.type === 'node.disconnected'), [], 'the node kept its session');
  nextHead = PLAIN_HEAD;
  const ok = await client().chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(ok.choices[0].message.content, 'hello');
});

test("a provider's content-length with leading zeros is relayed as its number: the client gets the answer", async () => {
  nextHead = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${String(BODY.length).padStart(16, '0')}\r\n\r\n`;
  const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(res.headers.get('content-length'), String(BODY.length));
  assert.equal(await res.text(), BODY);
  const again = await client().chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(again.choices[0].message.content, 'hello');
  await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  assert.deepEqual(stack.events.filter((e) => e.type === 'node.disconnected'), []);
});
