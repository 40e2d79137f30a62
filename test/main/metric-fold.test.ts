// Exited workers' counts: folded per series and label set (new series kept,
// the parts folded in left as they were), and added in the order that keeps
// every total exactly as the scrape before the exit had it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AggregatorRegistry } from 'prom-client';
import { foldMetrics, RetiredMetrics, type FoldableMetric } from '../../src/main/metric-fold.js';

const counter = (values: [Record<string, string>, number][]): FoldableMetric => ({ name: 'edge_requests_total', type: 'counter', values: values.map(([labels, value]) => ({ labels, value })) });

test('the last scrapes of exited workers fold into one part, summed per label set', () => {
  const retired: FoldableMetric[] = [];
  const first = [counter([[{ model: 'a', status: '200' }, 5]]), { name: 'edge_queue_wait_seconds', type: 'histogram', values: [{ metricName: 'edge_queue_wait_seconds_bucket', labels: { le: 0.1, model: 'a' }, value: 3 }, { metricName: 'edge_queue_wait_seconds_count', labels: { model: 'a' }, value: 3 }] }];
  const second = [counter([[{ status: '200', model: 'a' }, 2], [{ model: 'b', status: '502' }, 1]]), { name: 'edge_queue_wait_seconds', type: 'histogram', values: [{ metricName: 'edge_queue_wait_seconds_bucket', labels: { le: 0.1, model: 'a' }, value: 4 }, { metricName: 'edge_queue_wait_seconds_count', labels: { model: 'a' }, value: 4 }] }];
  foldMetrics(retired, first);
  foldMetrics(retired, second);
  foldMetrics(retired, second);
  assert.equal(retired.length, 2, 'one entry per metric, however many exits');
  assert.deepEqual(retired[0].values, [{ labels: { model: 'a', status: '200' }, value: 9 }, { labels: { model: 'b', status: '502' }, value: 2 }]);
  assert.deepEqual(retired[1].values.map((v) => [v.metricName, v.value]), [['edge_queue_wait_seconds_bucket', 11], ['edge_queue_wait_seconds_count', 11]]);
  assert.equal(first[0].values[0].value, 5, 'a folded-in scrape is left as it was');
});

/** What /metrics shows for `edge_requests_total` once prom-client sums the parts in the order given. */
async function total(parts: unknown[]): Promise<number> {
  const registry = AggregatorRegistry.aggregate(parts as Parameters<typeof AggregatorRegistry.aggregate>[0]);
  const [metric] = await registry.getMetricsAsJSON();
  return metric.values[0].value;
}

const part = (value: number): FoldableMetric[] => [{ ...counter([[{ model: 'a' }, value]]), help: 'h', aggregator: 'sum' } as FoldableMetric];

test('a worker that exits leaves every total exactly as the scrape before: its last scrape is added where its live part was', async () => {
  // Floats picked so the order matters: ((0.1 + 0.1) + 0.1) + 0.3 is 0.6000000000000001, ((0.1 + 0.1) + 0.3) + 0.1 is 0.6.
  const own = part(0.1);
  const live = [part(0.1), part(0.1), part(0.3)];
  const retired = new RetiredMetrics();
  const before = await total([own, ...retired.ordered(live, 3)]);
  assert.equal(before, 0.6000000000000001);
  // Worker 1 exits; its replacement has counted nothing yet.
  retired.retire(1, live[1]);
  assert.equal(await total([own, ...retired.ordered([live[0], undefined, live[2]], 3)]), before, 'the same total, not an ulp lower');
  // Its replacement counts, then exits too: again the same total.
  const replacement = part(0.3);
  const second = await total([own, ...retired.ordered([live[0], replacement, live[2]], 3)]);
  assert.ok(second >= before);
  retired.retire(1, replacement);
  assert.equal(await total([own, ...retired.ordered([live[0], undefined, live[2]], 3)]), second);
  assert.equal(live[1][0].values[0].value, 0.1, 'a retired scrape is copied, not kept');
});

test('past eight exits of one worker index its oldest retired parts fold: the count of parts stays bounded', () => {
  const retired = new RetiredMetrics();
  for (let exit = 0; exit < 20; exit++) retired.retire(0, part(1));
  const parts = retired.ordered([], 1) as FoldableMetric[][];
  assert.equal(parts.length, 8);
  assert.equal(parts.reduce((sum, p) => sum + p[0].values[0].value, 0), 20, 'nothing counted is lost');
});
