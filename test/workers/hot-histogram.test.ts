// HotHistogram must be indistinguishable from prom-client's Histogram to
// whoever scrapes: the same observations give the same /metrics text, the
// same JSON, and the same result once several threads' JSON is merged by
// AggregatorRegistry (the worker mode's /metrics).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AggregatorRegistry, Histogram, Registry } from 'prom-client';
import { HotHistogram } from '../../src/workers/observe/hot-histogram.js';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const OBSERVATIONS: [string, number][] = [
  ['a', 0],
  ['a', 0.005],
  ['a', 0.0051],
  ['b', 0.3],
  ['a', 2.5],
  ['a', 99],
  ['b', 1e-9],
  ['c"\\x', 0.07],
];

function pair(observations: readonly [string, number][]): { reference: Registry; hot: Registry } {
  const reference = new Registry();
  const hot = new Registry();
  const r = new Histogram({ name: 'h_seconds', help: 'help text', labelNames: ['model'] as const, buckets: BUCKETS, registers: [reference] });
  const h = new HotHistogram({ name: 'h_seconds', help: 'help text', labelName: 'model', buckets: BUCKETS, registry: hot });
  for (const [model, value] of observations) {
    r.labels(model).observe(value);
    h.labels(model).observe(value);
  }
  return { reference, hot };
}

test('the text exposition is byte for byte the same as prom-client Histogram\'s', async () => {
  const { reference, hot } = pair(OBSERVATIONS);
  assert.equal(await hot.metrics(), await reference.metrics());
});

test('the JSON, and several registries merged by AggregatorRegistry, are the same', async () => {
  const one = pair(OBSERVATIONS);
  const two = pair(OBSERVATIONS.slice(2));
  assert.deepEqual(await one.hot.getMetricsAsJSON(), await one.reference.getMetricsAsJSON());
  const merged = (parts: unknown[]) => AggregatorRegistry.aggregate(parts as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
  assert.equal(
    await merged([await one.hot.getMetricsAsJSON(), await two.hot.getMetricsAsJSON()]),
    await merged([await one.reference.getMetricsAsJSON(), await two.reference.getMetricsAsJSON()]),
  );
});
