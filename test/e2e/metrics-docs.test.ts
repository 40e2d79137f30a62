// The metrics table of docs/operations.md against a real /metrics scrape
// after traffic: every edge_* family the edge exports is in the table with
// its type and labels, and every family the table lists is exported.
// EDGE_TEST_WORKERS=2 checks the merged scrape of the I/O workers.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { ALIAS, NODE_ID, sample, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';
import { waitFor } from '../helpers/stack.js';

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

test('a request that left the queue without a slot: in edge_requests_total by status, in edge_rejects_total only when the edge ended it, in no latency histogram', async () => {
  const before = await stack.metrics();
  const count = (text: string, name: string, labels: Record<string, string>): number => sample(text, name, labels) ?? 0;
  assert.equal((await stack.admin(`/admin/nodes/${NODE_ID}/drain`, { method: 'POST' })).status, 200);
  const body = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'q' }] });
  const leaving = new AbortController();
  const left = fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: leaving.signal }).catch(() => 'aborted');
  const cancelled = fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'to-cancel' }, body });
  let queued: { id: string; requestId: string }[] = [];
  await waitFor(async () => (queued = (await stack.admin('/admin/runs?state=queued')).json.runs).length === 2, 'two queued runs');
  const toCancel = queued.find((run) => run.requestId === 'to-cancel') as { id: string };
  assert.equal((await stack.admin(`/admin/runs/${toCancel.id}/cancel`, { method: 'POST' })).status, 200);
  leaving.abort();
  assert.equal(await left, 'aborted');
  assert.equal((await cancelled).status, 499);
  await waitFor(async () => (await stack.admin('/admin/runs?state=queued')).json.runs.length === 0, 'no queued run');
  assert.equal((await stack.admin(`/admin/nodes/${NODE_ID}/undrain`, { method: 'POST' })).status, 200);
  const after = await stack.metrics();
  const delta = (name: string, labels: Record<string, string>): number => count(after, name, labels) - count(before, name, labels);
  assert.equal(delta('edge_requests_total', { model: ALIAS, provider: '', status: '499' }), 2, 'both: status 499');
  assert.equal(delta('edge_rejects_total', { reason: 'run_cancelled' }), 1, 'the cancel is a refusal');
  assert.equal(delta('edge_rejects_total', { reason: 'client_closed' }), 0, 'the client leaving is not');
  assert.equal(delta('edge_queue_wait_seconds_count', { model: ALIAS }), 0, 'no slot: not in the queue-wait histogram');
  assert.equal(delta('edge_request_duration_seconds_count', { model: ALIAS }), 0, 'nor in the latency one');
});
