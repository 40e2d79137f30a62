// A provider whose response head is just under the agent's 64 KiB limit on
// the wire, written `name:value` (no space after the colon, as some proxies
// and hand-written servers do): the edge counts a HEADERS frame as
// `name: value` CRLF per header, so the same head is larger there. The agent
// must refuse it as the provider's bad answer, never relay a frame the edge
// takes for the node breaking the protocol (which fences the whole node after
// a few such requests, taking its other providers with it).
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { MAX_SESSION_VIOLATIONS } from '../../src/workers/grpc/frame-guard.js';
import { MAX_RESPONSE_HEAD_BYTES } from '../../src/shared/wire-limits.js';
import { inFlight, startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const BODY = JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'served-p', choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });

/** A compact head of many short headers, under the limit as raw bytes, over it as the edge counts them. */
function compactHead(): string {
  let head = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n';
  for (let i = 0; head.length < MAX_RESPONSE_HEAD_BYTES - 200; i++) head += `x-${i.toString(36)}:v\r\n`;
  return `${head}content-length: ${BODY.length}\r\n\r\n`;
}

let server: Server;
let stack: ProvidersStack;
const sockets = new Set<Socket>();
let compact = true;

before(async () => {
  const head = compactHead();
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
        const plain = !buffered.startsWith('POST') || !compact;
        buffered = buffered.slice(end + 4 + length);
        socket.write(plain ? `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${BODY.length}\r\n\r\n${BODY}` : head + BODY);
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

test("a provider's compact head over the limit as the edge counts it fails as the provider's error, and the node is never fenced for it", async () => {
  assert.ok(compactHead().length < MAX_RESPONSE_HEAD_BYTES, 'the head is under the limit on the wire');
  const openai = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  for (let i = 0; i <= MAX_SESSION_VIOLATIONS; i++) {
    const failed = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).then(() => undefined, (err: unknown) => err);
    assert.ok(failed instanceof OpenAI.APIError, String(failed));
    assert.equal(failed.status, 502);
    assert.equal(failed.code, 'upstream_error', failed.message);
    assert.match(failed.message, /response head over 65536 bytes/);
  }
  await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  assert.deepEqual(stack.events.filter((e) => e.type === 'node.disconnected'), [], 'the node kept its session');
  compact = false;
  const ok = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(ok.choices[0].message.content, 'hello');
});
