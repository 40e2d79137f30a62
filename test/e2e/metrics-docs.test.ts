// The metrics table of docs/operations.md against a real /metrics scrape
// after traffic: every edge_* family the edge exports is in the table with
// its type and labels, and every family the table lists is exported.
// EDGE_TEST_WORKERS=2 checks the merged scrape of the I/O workers.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { ALIAS, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

interface Family {
  type: string;
  labels: Set<string>;
}

/** The table's rows: a row may list several families (`a`, `b`), with one type each or one for all, and labels per family split by ` / `. */
function documented(): Map<string, Family> {
  const text = readFileSync(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
  const lines = text.slice(text.indexOf('\n## Metrics\n')).split('\n');
  const first = lines.findIndex((l) => l.startsWith('| metric | type | labels |'));
  const out = new Map<string, Family>();
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    const [names, types, labels] = line.slice(1).split(/(?<!\\)\|/).map((c) => c.trim());
    const families = [...names.matchAll(/`([^`]+)`/g)].map((m) => m[1]).filter((n) => n.startsWith('edge_'));
    const typeList = types.split(', ').map((t) => t.replace(/s$/, ''));
    // `direction`: `to_node`, `to_client` names one label and its values.
    const labelParts = labels.split(' / ').map((part) => new Set([...part.split(':')[0].matchAll(/`([^`]+)`/g)].map((m) => m[1])));
    families.forEach((name, i) => {
      out.set(name, { type: typeList[Math.min(i, typeList.length - 1)], labels: labelParts[labelParts.length === families.length ? i : 0] });
    });
  }
  return out;
}

/** The families of a Prometheus text scrape: type from `# TYPE`, label names from the samples (a histogram's `le` left out). */
function scraped(text: string): Map<string, Family> {
  const out = new Map<string, Family>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) out.set(type[1], { type: type[2], labels: new Set() });
    const sample = /^([a-z_:][a-z0-9_:]*)\{([^}]*)\}/.exec(line);
    if (!sample) continue;
    const family = out.get(sample[1]) ?? out.get(sample[1].replace(/_(bucket|sum|count)$/, ''));
    for (const m of sample[2].matchAll(/([a-z_]+)="/g)) if (m[1] !== 'le') family?.labels.add(m[1]);
  }
  return out;
}

let stack: OpsStack;
before(async () => {
  stack = await startOpsStack({ mock: { ttftMs: 5, tokens: 3, intervalMs: 1 } });
});
after(async () => {
  await stack.close();
});

test('docs/operations.md lists every edge_* metric family /metrics exports, with its type and labels, and no other', async () => {
  for (const stream of [false, true]) {
    const res = await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }) });
    await res.text();
    assert.equal(res.status, 200);
  }
  // A refusal and a refresh, so that their labelled families have samples.
  await (await fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'nope', messages: [] }) })).text();
  assert.equal((await stack.admin('/admin/config/refresh', { method: 'POST', body: { mode: 'evaluate', config: stack.raw } })).status, 200);

  const docs = documented();
  const scrape = scraped(await stack.metrics());
  const exported = [...scrape.keys()].filter((n) => n.startsWith('edge_')).sort();
  assert.deepEqual(exported, [...docs.keys()].sort(), 'edge_* families exported vs documented');
  for (const name of exported) {
    const got = scrape.get(name) as Family;
    const want = docs.get(name) as Family;
    assert.equal(got.type, want.type, `${name}: type`);
    // Families with no sample yet (no retry, no fair queuing, no TLS) show no labels to compare.
    if (got.labels.size > 0 || want.labels.size === 0) assert.deepEqual([...got.labels].sort(), [...want.labels].sort(), `${name}: labels`);
  }
  assert.ok(exported.length > 30, 'the table was read');
  assert.ok([...scrape.keys()].some((n) => n.startsWith('process_')) && scrape.has('nodejs_eventloop_lag_p99_seconds'), 'prom-client default metrics');
});
