// The Node version gate of the installed commands: which versions pass, and
// the message an operator reads on an older one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MINIMUM_NODE, nodeIsAtLeast, nodeVersionProblem } from '../../src/shared/node-check.js';

test('versions at or above the minimum pass, older ones do not', () => {
  assert.equal(MINIMUM_NODE, '22.12.0');
  for (const ok of ['22.12.0', 'v22.12.0', '22.12.1', '22.13.0', '23.0.0', '24.21.0', '100.0.0']) assert.equal(nodeIsAtLeast(ok), true, ok);
  for (const old of ['22.11.9', 'v22.11.0', '20.20.2', '18.20.4', '12.0.0', '0.10.48']) assert.equal(nodeIsAtLeast(old), false, old);
});

test('the message names the program, the needed version, and the node that ran it', () => {
  assert.equal(nodeVersionProblem('edge', '24.21.0'), undefined);
  const message = nodeVersionProblem('node-agent', '20.20.2', '/usr/bin/node');
  assert.ok(message !== undefined);
  assert.match(message, /^node-agent: needs Node\.js 22\.12\.0 or newer \(Node 24 LTS recommended\); this is Node\.js v20\.20\.2 \(\/usr\/bin\/node\)\.\n/);
});
