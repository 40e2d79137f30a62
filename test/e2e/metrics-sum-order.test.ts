// With three or more I/O workers, a histogram's _sum on /metrics is the sum
// of three or more floating-point parts; added in the order the workers
// happened to answer the scrape, the same totals came out an ulp apart from
// one scrape to the next (0.792907045 -> 0.7929070449999999), a drop
// Prometheus reads as a counter reset. Three workers, pinned: with two the
// two parts add up the same either way.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { monotoneSamples, parsePromText } from '../helpers/prom-text.js';
import { PROVIDER_ID, SERVED, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';
import { chatOnFreshConnection } from '../helpers/stack.js';

const WORKERS = 3;

describe(`/metrics totals with ${WORKERS} I/O workers`, () => {
  let stack: OpsStack;
  before(async () => {
    stack = await startOpsStack({
      capacity: 8,
      mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
      configure: (raw) => {
        raw.workers = { count: WORKERS };
        (raw.models as unknown[]).push(...['b', 'c'].map((alias) => ({ alias, providers: { [PROVIDER_ID]: SERVED } })));
      },
    });
  });
  after(async () => {
    await stack.close();
  });

  test('never go down from one scrape to the next, whichever worker answers the scrape first', async () => {
    const aliases = ['llama3', 'b', 'c'];
    let running = true;
    let n = 0;
    // Fresh connections: the kernel spreads them over the workers, so every worker holds part of each sum.
    const traffic = Array.from({ length: 4 }, async () => {
      while (running) await chatOnFreshConnection(stack.baseURL, aliases[n++ % aliases.length]);
    });
    const problems: string[] = [];
    let last = new Map<string, number>();
    let scrapes = 0;
    try {
      for (; scrapes < 40; scrapes++) {
        const now = monotoneSamples(parsePromText(await stack.metrics()));
        for (const [series, value] of now) {
          const before = last.get(series);
          if (before !== undefined && value < before) problems.push(`${series}: ${before} -> ${value} (scrape ${scrapes})`);
        }
        last = now;
      }
    } finally {
      running = false;
      await Promise.all(traffic);
    }
    const planes = (await stack.edge.inspect()).planes;
    assert.equal(planes.length, WORKERS);
    assert.ok(planes.filter((p) => p.requests > 0).length > 1, 'the requests reached more than one worker');
    assert.deepEqual(problems, []);
  });
});
