// What the edge's log says about requests (docs/operations.md, "Logs"): at
// info nothing for a request that succeeded, and one line for one that failed,
// naming it (run id, request id), where it went (node, provider), how it
// ended (status, outcome) and how long it took: the line an operator
// searches for when a user quotes a request id.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../../src/shared/logger.js';
import { ALIAS, NODE_ID, PROVIDER_ID, startStack, waitUntil } from '../helpers/stack.js';

// The I/O workers log to their own stdout: the log is read in the single-thread mode.
test('a failed request is logged once at info, with its ids, route, outcome and duration; a good one not at all', { skip: Number(process.env.EDGE_TEST_WORKERS ?? 0) > 0 ? 'the I/O workers log to their own stdout' : false }, async () => {
  const lines: string[] = [];
  const stack = await startStack({ logger: createLogger('edge', 'info', { destination: { write: (line: string) => void lines.push(line) } }) });
  try {
    const chat = (requestId: string, headers: Record<string, string> = {}): Promise<Response> =>
      fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...headers },
        body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
    const before = lines.length;
    const good = await chat('req-good');
    assert.equal(good.status, 200);
    await good.text();
    const bad = await chat('req-bad', { 'x-mock-fail': 'reset-mid-stream', 'x-mock-tokens': '8' });
    assert.equal(bad.status, 200);
    await bad.text();
    const runId = bad.headers.get('x-edge-run-id');
    await waitUntil(() => lines.slice(before).some((l) => l.includes('"requestId":"req-bad"')), 'the failed request\'s log line');
    const logged = lines.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(logged.filter((l) => l.requestId === 'req-good'), [], 'nothing at info for a request that succeeded');
    const failed = logged.filter((l) => l.requestId === 'req-bad');
    assert.equal(failed.length, 1, JSON.stringify(failed));
    const line = failed[0];
    assert.equal(line.runId, runId);
    assert.equal(line.model, ALIAS);
    assert.equal(line.node, NODE_ID);
    assert.equal(line.provider, PROVIDER_ID);
    assert.equal(line.status, 200);
    assert.equal(line.outcome, 'provider_failed');
    assert.equal(typeof line.totalMs, 'number', `the line says how long the request took: ${JSON.stringify(line)}`);
    assert.equal(typeof line.queueMs, 'number', `and how long it waited for a provider: ${JSON.stringify(line)}`);
  } finally {
    await stack.close();
  }
});
