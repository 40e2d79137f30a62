import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { autoNodeFlags, missingNodeFlags, nodeFlagProblem } from '../../src/shared/node-flags.js';

const NODE_FLAGS_MODULE = new URL('../../src/shared/node-flags.js', import.meta.url).href;

/**
 * A child Node with auto's heap sizes on its command line calls
 * applyNodeFlags(wanted), then does what a large upload does to the heap:
 * 200 KB buffers that die young, with a little JS garbage beside them.
 * Prints the flags it runs with and the mark-compacts and scavenges it ran.
 */
const BIG_BUFFERS = `
import { PerformanceObserver, constants } from 'node:perf_hooks';
const { applyNodeFlags, runningNodeFlags } = await import(process.argv[1]);
const notApplied = applyNodeFlags(JSON.parse(process.argv[2]));
const counts = { major: 0, minor: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) counts.major++;
    if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MINOR) counts.minor++;
  }
}).observe({ entryTypes: ['gc'] });
let kept = [];
for (let i = 0; i < 3000; i++) {
  Buffer.allocUnsafe(200 * 1024).fill(i & 0xff);
  kept.push({ i, text: 'x'.repeat(50) + i });
  if (kept.length > 100) kept = [];
}
setTimeout(() => console.log(JSON.stringify({ notApplied, flags: runningNodeFlags(), ...counts })), 20);
`;

function bigBuffers(wanted: readonly string[]): Promise<{ notApplied: unknown; flags: string[]; major: number; minor: number }> {
  return new Promise((resolve, reject) => {
    const args = ['--max-semi-space-size=32', '--initial-old-space-size=128', '--input-type=module', '-e', BIG_BUFFERS, NODE_FLAGS_MODULE, JSON.stringify(wanted)];
    execFile(process.execPath, args, { timeout: 20_000 }, (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout))));
  });
}

test("auto leaves the event loop a core (one V8 helper thread fewer than the cores, none added where Node's 4 already do) and floors the old generation on every host", () => {
  const heap = ['--max-semi-space-size=32', '--initial-old-space-size=128'];
  assert.deepEqual(autoNodeFlags(1), ['--v8-pool-size=1', ...heap]);
  assert.deepEqual(autoNodeFlags(2), ['--v8-pool-size=1', ...heap]);
  assert.deepEqual(autoNodeFlags(4), ['--v8-pool-size=3', ...heap]);
  assert.deepEqual(autoNodeFlags(5), heap);
  assert.deepEqual(autoNodeFlags(64), heap);
});

test('only heap and GC-thread sizes are accepted, each with an integer, and the external-memory switch either way', () => {
  assert.equal(nodeFlagProblem('--v8-pool-size=2'), undefined);
  assert.equal(nodeFlagProblem('--max-old-space-size=4096'), undefined);
  assert.equal(nodeFlagProblem('--initial-old-space-size=256'), undefined);
  assert.equal(nodeFlagProblem('--external-memory-accounted-in-global-limit'), undefined);
  assert.equal(nodeFlagProblem('--no-external-memory-accounted-in-global-limit'), undefined);
  for (const bad of ['--inspect=0.0.0.0:9229', '--v8-pool-size', '--v8-pool-size=two', '--max-semi-space-size=-1', 'v8-pool-size=1', '--require=/tmp/x.js', '--external-memory-accounted-in-global-limit=1', '--no-v8-pool-size']) {
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
  // --no-x is the operator's word on x.
  const sw = ['--external-memory-accounted-in-global-limit'];
  assert.deepEqual(missingNodeFlags(sw, ['--no-external-memory-accounted-in-global-limit'], undefined), []);
  assert.deepEqual(missingNodeFlags(sw, [], '--no_external_memory_accounted_in_global_limit'), []);
  assert.deepEqual(missingNodeFlags(sw, ['--no-warnings'], undefined), sw);
});

test("an operator who sized V8's heap as a whole gets no generation sizes added (V8 aborts on --max-heap-size with both max sizes)", () => {
  const auto = ['--v8-pool-size=1', '--max-semi-space-size=32', '--initial-old-space-size=128'];
  assert.deepEqual(missingNodeFlags(auto, ['--max-heap-size=2048', '--max-old-space-size=1536'], undefined), ['--v8-pool-size=1']);
  assert.deepEqual(missingNodeFlags(auto, [], '--initial-heap-size=256'), ['--v8-pool-size=1']);
  assert.deepEqual(missingNodeFlags(auto, ['--min_semi_space_size=4'], undefined), ['--v8-pool-size=1']);
  // --max-old-space-size alone is a generation size: only that name is the operator's.
  assert.deepEqual(missingNodeFlags([...auto, '--max-old-space-size=4096'], ['--max-old-space-size=8192'], undefined), auto);
});

test('the external-memory switch, when listed, is set in the running process (no restart), and big short-lived buffers stop costing full GCs', async () => {
  const sw = '--external-memory-accounted-in-global-limit';
  // Opt-in: it trades memory for CPU (docs/operations.md, "Runtime flags").
  assert.ok(!autoNodeFlags(2).includes(sw) && !autoNodeFlags(64).includes(sw));
  const [without, withSwitch] = await Promise.all([bigBuffers([]), bigBuffers([sw])]);
  // The sizes were on the command line already: nothing to restart for, nothing left unapplied.
  assert.equal(withSwitch.notApplied, undefined);
  assert.deepEqual(withSwitch.flags.slice(-1), [sw]);
  assert.ok(!without.flags.includes(sw));
  // 600 MB of buffers: V8's own trigger runs a full GC per 64 MB of them; counted in the heap's limit, scavenges free them.
  const gcs = (r: { major: number; minor: number }): string => `${r.major} mark-compacts, ${r.minor} scavenges`;
  assert.ok(without.major >= 4, `without the switch: ${gcs(without)}`);
  assert.ok(withSwitch.major <= without.major / 4, `with the switch: ${gcs(withSwitch)}; without: ${gcs(without)}`);
  assert.ok(withSwitch.minor >= 1, `with the switch: ${gcs(withSwitch)}`);
});
