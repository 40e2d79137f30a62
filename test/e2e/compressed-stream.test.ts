// A provider that compresses its event stream though the agent asked for
// identity (some OpenAI-compatible servers behind a gzip proxy do): the
// edge cannot see events in compressed bytes, so it relays them as they
// come, labelled as the provider sent them. Before, it held them waiting
// for a blank line that compressed bytes never hold, and the client got
// the whole stream at its end.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGzip } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { openExchanges, startProvidersStack, waitUntil, type ProvidersStack } from '../helpers/stack.js';

describe('a gzip-compressed event stream', () => {
  let provider: Server;
  let stack: ProvidersStack;
  /** Resolves the provider's wait between its first event and the rest. */
  let clientGotFirst: () => void = () => {};

  before(async () => {
    provider = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
        const gzip = createGzip();
        gzip.pipe(res);
        const event = (text: string): void => {
          gzip.write(`data: {"choices":[{"delta":{"content":"${text}"}}]}\n\n`);
          gzip.flush();
        };
        event('first');
        // The rest only once the client has read the first: an edge holding it would never be answered.
        new Promise<void>((resolve) => (clientGotFirst = resolve)).then(() => {
          event('second');
          gzip.end('data: [DONE]\n\n');
        });
      });
    });
    provider.listen(0, '127.0.0.1');
    await once(provider, 'listening');
    stack = await startProvidersStack('gz', { p1: `http://127.0.0.1:${(provider.address() as AddressInfo).port}` });
  });
  after(async () => {
    provider?.closeAllConnections();
    await stack?.close();
    provider?.close();
  });

  test('reaches the client event by event, still compressed and labelled so, and nothing is left open', async () => {
    const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gz', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-encoding'), 'gzip');
    // fetch decodes gzip as it streams.
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    const firstSeen = (async () => {
      while (!text.includes('first')) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    })();
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error(`the first event never arrived alone (got ${JSON.stringify(text)})`)), 5_000).unref());
    await Promise.race([firstSeen, timeout]).catch(async (err: unknown) => {
      await reader.cancel();
      throw err;
    });
    assert.match(text, /"first"/);
    clientGotFirst();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    assert.match(text, /"second"/);
    assert.match(text, /data: \[DONE\]\n\n$/);
    await waitUntil(() => stack.edge.driver.status().providers.every((p) => p.inFlight === 0), 'the lease released');
    assert.equal(await openExchanges(stack.edge), 0);
  });
});
