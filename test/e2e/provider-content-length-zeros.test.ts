// A provider's content-length written with leading zeros (`Content-Length:
// 0000000000000224`) is the length 224 (RFC 9110 8.6 is 1*DIGIT). The edge
// frames the client's body by a relayed length of at most 15 digits and takes
// a longer one for the node breaking the protocol, so the agent relays the
// plain number: the client gets the answer, and the node is not blamed.
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { inFlight, startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

const BODY = JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'served-p', choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });

let server: Server;
let stack: ProvidersStack;
const sockets = new Set<Socket>();

before(async () => {
  server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffered = '';
    socket.on('data', (data) => {
      buffered += data.toString('latin1');
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end === -1) return;
        const length = Number(/content-length: *(\d+)/i.exec(buffered.slice(0, end))?.[1] ?? 0);
        if (buffered.length < end + 4 + length) return;
        buffered = buffered.slice(end + 4 + length);
        socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${String(BODY.length).padStart(16, '0')}\r\n\r\n${BODY}`);
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

test("a provider's content-length with leading zeros is relayed as its number: the client gets the answer", async () => {
  const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(res.headers.get('content-length'), String(BODY.length));
  assert.equal(await res.text(), BODY);
  const openai = new OpenAI({ baseURL: `${stack.edge.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const again = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(again.choices[0].message.content, 'hello');
  await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released');
  assert.deepEqual(stack.events.filter((e) => e.type === 'node.disconnected'), []);
});
