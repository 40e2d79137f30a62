// ab.ts --gc reads V8's --trace-gc-nvp lines through this summary.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { summariseGcNvp } from '../../bench/profile/gc-nvp.js';

// Shortened from a real log (Node 24): the byte count `promoted=` comes before the node count `promoted=`.
const LOG = [
  '[5984:0x2649d000:0] 14641 ms: pause=7.5 mutator=125.7 gc=s reduce_memory=0 scavenge=7.53 allocated=21645824 promoted=6171488 new_space_survived=4776152 nodes_promoted=1 promoted=1 promotion_rate=100.0%',
  'some other log line with gc in it',
  '[5984:0x2649d000:0] 14790 ms: pause=8.5 mutator=139.9 gc=s reduce_memory=0 allocated=23334760 promoted=2048 new_space_survived=1024 promoted=1',
  '[5984:0x2649d000:0] 15001 ms: pause=3.0 mutator=80.1 gc=mc reduce_memory=0 mark=2.1',
].join('\n');

test('scavenges and full collections are counted apart, with mean pauses, survivors and promoted bytes per scavenge', () => {
  const s = summariseGcNvp(LOG);
  assert.equal(s.scavenges, 2);
  assert.equal(s.scavengePauseMs, 8);
  assert.equal(s.survivedKb, (4776152 + 1024) / 2 / 1024);
  assert.equal(s.promotedKb, (6171488 + 2048) / 2 / 1024);
  assert.equal(s.fullGcs, 1);
  assert.equal(s.fullPauseMs, 3);
});

test('a log with no collection reads as zeros, not NaN', () => {
  assert.deepEqual(summariseGcNvp('listening on 127.0.0.1:8080\n'), { scavenges: 0, scavengePauseMs: 0, survivedKb: 0, promotedKb: 0, fullGcs: 0, fullPauseMs: 0 });
});
