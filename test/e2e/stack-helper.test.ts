// The end-to-end stack helper itself: a config a test got wrong fails that
// test at once, leaving no listener behind that would hold the test file's
// process open until its timeout.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startStack, waitFor } from '../helpers/stack.js';

test('startStack with a config the edge refuses rejects and closes the mock provider it started', async () => {
  const servers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap').length;
  const before = servers();
  await assert.rejects(startStack({ configure: (raw) => void (raw.limits = { body_bytes: -1 }) }), /body_bytes/);
  // A closed server's handle goes on the loop's next turn.
  await waitFor(async () => servers() === before, 'no listener left open');
});
