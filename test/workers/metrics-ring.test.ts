// edge_worker_ring_occupancy_ratio: every thread reports the fill of the
// rings it owns, and the scrape keeps the fullest (never their sum, never
// a constant).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AggregatorRegistry } from 'prom-client';
import { EdgeMetrics, ringFill, type MetricsSource } from '../../src/workers/observe/metrics.js';

function source(fill: number): MetricsSource {
  return {
    status: () => ({ nodes: [], providers: [], groups: [], liveLeases: 0 }),
    connectedNodes: () => 0,
    openRequests: () => 0,
    workers: () => 2,
    ringOccupancy: () => fill,
    configVersion: () => 1,
    shuttingDown: () => false,
    events: () => ({ subscribers: 0, published: 0, dropped: 0 }),
  };
}

test('ringFill is the fullest ring\'s fill', () => {
  assert.equal(ringFill([]), 0);
  assert.equal(ringFill([{ used: 10, capacity: 100 }, { used: 3, capacity: 4 }, { used: 0, capacity: 0 }]), 0.75);
});

test('the merged scrape shows the fullest thread\'s rings', async () => {
  const parts = [await new EdgeMetrics(source(0.25), false).scrapeJson(), await new EdgeMetrics(source(0.5), false).scrapeJson(), await new EdgeMetrics(source(0), false).scrapeJson()];
  const text = await AggregatorRegistry.aggregate(parts as Parameters<typeof AggregatorRegistry.aggregate>[0]).metrics();
  assert.match(text, /^edge_worker_ring_occupancy_ratio 0\.5$/m);
});
