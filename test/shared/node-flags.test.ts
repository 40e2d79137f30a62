import assert from 'node:assert/strict';
import { test } from 'node:test';
import { autoNodeFlags, missingNodeFlags, nodeFlagProblem } from '../../src/shared/node-flags.js';

test("auto leaves the event loop a core (one V8 helper thread fewer than the cores, none added where Node's 4 already do) and floors the old generation on every host", () => {
  const heap = ['--max-semi-space-size=32', '--initial-old-space-size=128'];
  assert.deepEqual(autoNodeFlags(1), ['--v8-pool-size=1', ...heap]);
  assert.deepEqual(autoNodeFlags(2), ['--v8-pool-size=1', ...heap]);
  assert.deepEqual(autoNodeFlags(4), ['--v8-pool-size=3', ...heap]);
  assert.deepEqual(autoNodeFlags(5), heap);
  assert.deepEqual(autoNodeFlags(64), heap);
});

test('only heap and GC-thread sizes are accepted, each with an integer', () => {
  assert.equal(nodeFlagProblem('--v8-pool-size=2'), undefined);
  assert.equal(nodeFlagProblem('--max-old-space-size=4096'), undefined);
  assert.equal(nodeFlagProblem('--initial-old-space-size=256'), undefined);
  for (const bad of ['--inspect=0.0.0.0:9229', '--v8-pool-size', '--v8-pool-size=two', '--max-semi-space-size=-1', 'v8-pool-size=1', '--require=/tmp/x.js']) {
    assert.match(nodeFlagProblem(bad) ?? '', /expected one of --v8-pool-size=<integer>/, bad);
  }
});

test('a flag is missing unless its name was given on the command line or in NODE_OPTIONS, in either spelling', () => {
  const wanted = ['--v8-pool-size=1', '--max-semi-space-size=8'];
  assert.deepEqual(missingNodeFlags(wanted, [], undefined), wanted);
  assert.deepEqual(missingNodeFlags(wanted, ['--v8-pool-size=3', '--cpu-prof'], undefined), ['--max-semi-space-size=8']);
  assert.deepEqual(missingNodeFlags(wanted, [], ' --max_semi_space_size=16  --enable-source-maps'), ['--v8-pool-size=1']);
  assert.deepEqual(missingNodeFlags(wanted, ['--v8-pool-size=1'], '--max-semi-space-size=8'), []);
  assert.deepEqual(missingNodeFlags([], ['--cpu-prof'], undefined), []);
});

test("an operator who sized V8's heap as a whole gets no generation sizes added (V8 aborts on --max-heap-size with both max sizes)", () => {
  const auto = ['--v8-pool-size=1', '--max-semi-space-size=32', '--initial-old-space-size=128'];
  assert.deepEqual(missingNodeFlags(auto, ['--max-heap-size=2048', '--max-old-space-size=1536'], undefined), ['--v8-pool-size=1']);
  assert.deepEqual(missingNodeFlags(auto, [], '--initial-heap-size=256'), ['--v8-pool-size=1']);
  assert.deepEqual(missingNodeFlags(auto, ['--min_semi_space_size=4'], undefined), ['--v8-pool-size=1']);
  // --max-old-space-size alone is a generation size: only that name is the operator's.
  assert.deepEqual(missingNodeFlags([...auto, '--max-old-space-size=4096'], ['--max-old-space-size=8192'], undefined), auto);
});
