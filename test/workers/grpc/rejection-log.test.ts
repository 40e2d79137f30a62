// Registrations refused for their credentials are the one thing anyone who
// reaches the node listener can cause: a peer guessing tokens (or sending a
// huge node id) must not turn into a flood of log lines. Each refusal still
// counts (rejectedRegistrations); the log says it once per 10 s, with how
// many it left out, and never more than 128 characters of the claimed id.
// Streams that never send Register are the same kind of thing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LogThrottle } from '../../../src/shared/log-throttle.js';
import { createLogger } from '../../../src/shared/logger.js';
import { NODE_ID, PROVIDER_ID, startStack } from '../../helpers/stack.js';
import { FakeNode } from './fake-node.js';

test('LogThrottle: one line per interval, carrying the count it left out', () => {
  const throttle = new LogThrottle(10_000);
  assert.equal(throttle.take(0), 0);
  assert.equal(throttle.take(1), undefined);
  assert.equal(throttle.take(9_999), undefined);
  assert.equal(throttle.take(10_000), 2);
  assert.equal(throttle.take(20_001), 0);
});

// The I/O workers log to their own stdout: the log is read in the single-thread mode.
const SINGLE_THREAD = { skip: Number(process.env.EDGE_TEST_WORKERS ?? 0) > 0 ? 'the I/O workers log to their own stdout' : false };

/** Twenty registrations with bad tokens (the first claiming a 10,000-character id): what the edge logged at `level` meanwhile. */
async function twentyRefusals(level: string): Promise<string[]> {
  const lines: string[] = [];
  const stack = await startStack({ startAgent: false, logger: createLogger('edge', level, { destination: { write: (line: string) => void lines.push(line) } }) });
  try {
    const before = lines.length;
    for (let i = 0; i < 20; i++) {
      const node = new FakeNode(stack.edge.grpcPort);
      node.register(i === 0 ? 'x'.repeat(10_000) : NODE_ID, `guess-${i}`, [PROVIDER_ID]);
      await assert.rejects(node.registered(), /unknown node id or bad token/);
      await node.ended;
      node.close();
    }
    return lines.slice(before);
  } finally {
    await stack.close();
  }
}

test('twenty refused registrations log one line, with the claimed id cut short', SINGLE_THREAD, async () => {
  const rejected = (await twentyRefusals('warn')).filter((line) => line.includes('"msg":"node rejected"'));
  assert.equal(rejected.length, 1, rejected.join('\n'));
  const entry = JSON.parse(rejected[0]) as { node: string };
  assert.equal(entry.node.length, 128);
});

// At the default level too: the session a refusal closes must not add a line of its own per refusal (nor the whole claimed id).
test('refused registrations at info: one line in all, no line repeating the claimed id', SINGLE_THREAD, async () => {
  const logged = await twentyRefusals('info');
  assert.equal(logged.length, 1, logged.map((l) => l.slice(0, 300)).join('\n'));
  assert.ok(logged.every((line) => !line.includes('x'.repeat(129))));
});

test('twenty streams that never register: each is closed and counted, the log says it once', SINGLE_THREAD, async () => {
  const lines: string[] = [];
  const stack = await startStack({ startAgent: false, logger: createLogger('edge', 'warn', { destination: { write: (line: string) => void lines.push(line) } }) });
  try {
    const before = (await stack.edge.inspect()).protocolStats.registerTimeouts;
    const silent = Array.from({ length: 20 }, () => new FakeNode(stack.edge.grpcPort));
    await Promise.all(silent.map((node) => node.ended));
    for (const node of silent) node.close();
    assert.equal((await stack.edge.inspect()).protocolStats.registerTimeouts - before, 20);
    const logged = lines.filter((line) => line.includes('no Register in time'));
    assert.equal(logged.length, 1, logged.join('\n'));
  } finally {
    await stack.close();
  }
});
