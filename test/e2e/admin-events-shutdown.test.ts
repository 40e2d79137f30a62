// /admin/events when the edge shuts down: the events published on the way
// out (edge.draining, and what a drain's end publishes) reach the stream
// before it ends, even when the drain has nothing to wait for and the admin
// listener closes in the same turn of the event loop.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startOpsStack } from '../main/admin/ops-stack.js';

/** Every event type the stream carried, in order, read until the edge ends it. */
async function eventTypesUntilEnd(res: Response): Promise<string[]> {
  const decoder = new TextDecoder();
  let text = '';
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
  return text
    .split('\n')
    .filter((line) => line.startsWith('event: '))
    .map((line) => line.slice('event: '.length));
}

test('a drain with nothing open still tells /admin/events edge.draining before the stream ends', async () => {
  const stack = await startOpsStack();
  try {
    const res = await fetch(`${stack.edge.adminUrl as string}/admin/events?runs=0`);
    assert.equal(res.status, 200);
    // The subscription exists once the head is back: the stream opens with a comment right after subscribing.
    const types = eventTypesUntilEnd(res);
    const report = await stack.edge.shutdown(5_000);
    assert.equal(report.aborted, 0);
    assert.ok((await types).includes('edge.draining'), `the stream ended with ${JSON.stringify(await types)}, without edge.draining`);
  } finally {
    await stack.close();
  }
});
