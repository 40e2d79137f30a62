// Exited workers' counts fold into one part: summed per series and label
// set, new series kept, the parts folded in left as they were.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { foldMetrics, type FoldableMetric } from '../../src/main/metric-fold.js';

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
