// Runs as records: every request is a run whose lifecycle (queued,
// dispatched, started, first byte, finished with its outcome) shows on
// /admin/events and whose record /admin/runs and /admin/runs/{id} return,
// with the right outcome for a successful, a failed and a cancelled run;
// the records stay within runs.max_finished however many runs go by. Runs
// with I/O workers too (EDGE_TEST_WORKERS): the records live on the main
// thread either way.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CLI_ALIAS, startCliStack, type CliStack } from '../helpers/cli-stack.js';
import { waitFor } from '../helpers/stack.js';

let stack: CliStack;

before(async () => {
  stack = await startCliStack({ runs: { max_finished: 6 } });
});

after(async () => {
  await stack.close();
});

/** Reads /admin/events in the background and keeps every event's data. */
class EventReader {
  readonly events: Record<string, any>[] = [];
  readonly #abort = new AbortController();
  #done: Promise<void> | undefined;

  async open(url: string): Promise<void> {
    const res = await fetch(url, { signal: this.#abort.signal });
    assert.equal(res.status, 200);
    const decoder = new TextDecoder();
    let buffer = '';
    this.#done = (async () => {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = frame.split('\n').find((line) => line.startsWith('data: '));
          if (data !== undefined) this.events.push(JSON.parse(data.slice(6)));
        }
      }
    })().catch(() => {});
  }

  of(runId: string): string[] {
    return this.events.filter((e) => e.runId === runId).map((e) => (e.type === 'run.finished' ? `${e.type}:${e.outcome}` : e.type));
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await this.#done;
  }
}

function post(prompt: string, session: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-edge-session': session },
    body: JSON.stringify({ model: CLI_ALIAS, stream: true, messages: [{ role: 'user', content: prompt }] }),
    signal,
  });
}

test('a successful, a failed and a cancelled run: their events on /admin/events and their records in /admin/runs', async () => {
  const reader = new EventReader();
  await reader.open(`${stack.edge.adminUrl as string}/admin/events`);

  const ok = await post('echo hello runs', 'runs-ok');
  const okId = ok.headers.get('x-edge-run-id') as string;
  assert.match(await ok.text(), /hello/);

  const failed = await post('fail', 'runs-failed');
  const failedId = failed.headers.get('x-edge-run-id') as string;
  assert.equal(failed.status, 502);
  await failed.text();

  const abort = new AbortController();
  const cancelled = await post('orphan', 'runs-cancelled', abort.signal);
  const cancelledId = cancelled.headers.get('x-edge-run-id') as string;
  const body = (cancelled.body as ReadableStream<Uint8Array>).getReader();
  await body.read();
  abort.abort();

  await waitFor(async () => reader.of(cancelledId).includes('run.finished:client_closed'), 'the cancelled run to finish', 5_000);
  await reader.close();
  assert.deepEqual(reader.of(okId), ['run.queued', 'run.dispatched', 'run.started', 'run.first_byte', 'run.finished:end']);
  assert.deepEqual(reader.of(failedId), ['run.queued', 'run.dispatched', 'run.started', 'run.finished:error']);
  assert.deepEqual(reader.of(cancelledId), ['run.queued', 'run.dispatched', 'run.started', 'run.first_byte', 'run.finished:client_closed']);
  const dispatched = reader.events.find((e) => e.runId === okId && e.type === 'run.dispatched') ?? {};
  assert.equal(dispatched.adapter, 'cli');
  assert.equal(dispatched.node, 'gpu-1');

  const list = await stack.admin('/admin/runs?state=finished');
  assert.equal(list.status, 200);
  const outcomes = Object.fromEntries(list.json.runs.map((r: any) => [r.id, r.outcome]));
  assert.equal(outcomes[okId], 'end');
  assert.equal(outcomes[failedId], 'error');
  assert.equal(outcomes[cancelledId], 'client_closed');

  const one = await stack.admin(`/admin/runs/${okId}`);
  assert.equal(one.status, 200);
  assert.equal(one.json.model, CLI_ALIAS);
  assert.equal(one.json.provider, 'gpu-1-cli');
  assert.equal(one.json.node, 'gpu-1');
  assert.equal(one.json.session, 'runs-ok');
  assert.equal(one.json.state, 'finished');
  assert.equal(one.json.status, 200);
  assert.ok(one.json.bytesOut > 0);
  for (const mark of ['queuedAt', 'dispatchedAt', 'firstByteAt', 'finishedAt']) assert.ok(!Number.isNaN(Date.parse(one.json[mark])), `${mark}: ${one.json[mark]}`);
  assert.ok(one.json.totalMs >= one.json.ttfbMs && one.json.ttfbMs >= one.json.queueMs);

  const failedRecord = await stack.admin(`/admin/runs/${failedId}`);
  assert.match(failedRecord.json.error, /exited with code 3: fixture: something went wrong/);

  const bySession = await stack.admin('/admin/runs?session=runs-failed');
  assert.deepEqual(bySession.json.runs.map((r: any) => r.id), [failedId]);
  assert.equal((await stack.admin('/admin/runs?node=gpu-9')).json.runs.length, 0);
  assert.equal((await stack.admin('/admin/runs?model=llama3')).json.runs.length, 0);
  assert.equal((await stack.admin('/admin/runs?state=sideways')).status, 400);
  assert.equal((await stack.admin('/admin/runs/run-nope')).status, 404);
});

test('an open run is listed as running; more runs than runs.max_finished keep only the newest', async () => {
  // A command that writes nothing sends no response head: the run is found by its session.
  const abort = new AbortController();
  const open = post('sleep', 'runs-open', abort.signal).catch(() => undefined);
  await waitFor(async () => (await stack.admin('/admin/runs?state=running')).json.runs.length === 1, 'the open run to be dispatched');
  const running = (await stack.admin('/admin/runs?state=running')).json.runs;
  assert.equal(running[0].session, 'runs-open');
  assert.equal(running[0].node, 'gpu-1');
  assert.equal(running[0].outcome, null);
  abort.abort();
  await open;

  const ids: string[] = [];
  for (let i = 0; i < 9; i++) {
    const res = await post(`echo ${i}`, `bound-${i}`);
    ids.push(res.headers.get('x-edge-run-id') as string);
    await res.text();
  }
  await waitFor(async () => (await stack.admin(`/admin/runs/${ids[8]}`)).json.state === 'finished', 'the last run to be recorded');
  const list = await stack.admin('/admin/runs?limit=1000');
  assert.equal(list.json.maxFinished, 6);
  assert.deepEqual(list.json.runs.map((r: any) => r.id), ids.slice(3).reverse());
  assert.ok(list.json.evicted >= 3);
  assert.equal((await stack.admin(`/admin/runs/${ids[0]}`)).status, 404);

  // Pages: limit, and before (the last id of the page before), walk the same order.
  const paged: string[] = [];
  for (let pages = 0; pages < 10; pages++) {
    const page = await stack.admin(`/admin/runs?limit=4${paged.length === 0 ? '' : `&before=${paged.at(-1)}`}`);
    assert.equal(page.status, 200);
    if (page.json.runs.length === 0) break;
    paged.push(...page.json.runs.map((r: any) => r.id));
  }
  assert.deepEqual(paged, ids.slice(3).reverse());
  // Or each page's `next`, passed as is; null after the last full page's successor.
  const byNext: string[] = [];
  let next: string | null = null;
  for (let pages = 0; pages < 10; pages++) {
    const page = await stack.admin(`/admin/runs?limit=2${next === null ? '' : `&before=${encodeURIComponent(next)}`}`);
    assert.equal(page.status, 200);
    byNext.push(...page.json.runs.map((r: any) => r.id));
    next = page.json.next;
    if (next === null) break;
    assert.match(next, /^finished:/, 'every run here is finished: the cursor says so');
  }
  assert.deepEqual(byNext, ids.slice(3).reverse());
  assert.equal((await stack.admin(`/admin/runs?before=${ids[0]}`)).status, 404, 'a page after a run no longer kept');
  // What would otherwise quietly return page one, or nothing.
  for (const query of ['offset=5', 'status=finished', 'model=a&model=b', 'limit=0x10', 'limit=1e3', 'limit=0']) {
    const res = await stack.admin(`/admin/runs?${query}`);
    assert.equal(res.status, 400, query);
    assert.equal(res.json.error.code, 'invalid_request', query);
  }
});
