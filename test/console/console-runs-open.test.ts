// The console's runs table when more runs are open than a page holds (a
// backlog), in a real browser (Debian's chromium driven by puppeteer-core)
// against a real stack: the open runs fill the first page, and one of them
// that finishes before "Show 50 older" is listed again on the next page,
// finished. The table shows it once, as the edge last said (finished, its
// Cancel off), not as the first page had it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'puppeteer-core';
import { NO_CHROMIUM, openConsolePage, type ConsolePage } from '../helpers/console-browser.js';
import { waitFor } from '../helpers/stack.js';
import { ALIAS, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

const TOKEN = 'console-runs-open-admin-token';
/** More open runs than a page (50) holds. */
const OPEN = 56;

describe('console runs table with more open runs than a page, in headless chromium', { skip: NO_CHROMIUM }, () => {
  let stack: OpsStack;
  let view: ConsolePage;
  let page: Page;
  const streams: Promise<string>[] = [];

  before(async () => {
    stack = await startOpsStack({ adminToken: TOKEN, capacity: 2, maxQueue: OPEN, queueTimeoutMs: 60_000, mock: { ttftMs: 0, tokens: 1, intervalMs: 0 } });
    view = await openConsolePage();
    page = view.page;
  });
  after(async () => {
    await view?.close();
    if (stack !== undefined) {
      for (const run of ((await stack.admin('/admin/runs?limit=1000')).json as { runs: { id: string; state: string }[] }).runs) {
        if (run.state !== 'finished') await stack.admin(`/admin/runs/${encodeURIComponent(run.id)}/cancel`, { method: 'POST' });
      }
      await Promise.allSettled(streams);
      await stack.close();
    }
  });

  const js = <T>(expression: string): Promise<T> => view.js<T>(expression);
  const until = (expression: string, timeout?: number): Promise<void> => view.until(expression, timeout);
  const openRuns = async (): Promise<string[]> =>
    ((await stack.admin('/admin/runs?limit=1000')).json as { runs: { id: string; state: string }[] }).runs.filter((r) => r.state !== 'finished').map((r) => r.id);

  test('a run of the first page that finished before Show 50 older shows finished, not as the first page had it', async () => {
    for (let i = 0; i < OPEN; i++) {
      streams.push(fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-mock-tokens': '600', 'x-mock-interval-ms': '100' },
        body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: `open ${i}` }] }),
      }).then((res) => res.text()));
    }
    await waitFor(async () => (await openRuns()).length === OPEN, 'every run open', 10_000);
    await view.logIn(`${stack.edge.adminUrl}/console`, TOKEN);
    await until(`document.querySelectorAll('#runs-body tr[data-state="running"]').length === 50`);
    await page.click('#live-runs');
    assert.equal(await js(`document.getElementById('live-runs').checked`), false);
    // A run of the first page finishes (cancelled elsewhere, by the API) while the table stands still.
    const first = await js<string>(`document.querySelector('#runs-body tr').dataset.run`);
    assert.equal((await stack.admin(`/admin/runs/${encodeURIComponent(first)}/cancel`, { method: 'POST' })).status, 200);
    await waitFor(async () => (await stack.admin(`/admin/runs/${encodeURIComponent(first)}`)).json.state === 'finished', 'the run finished');
    assert.equal(await js(`document.querySelector('tr[data-run="${first}"]').dataset.state`), 'running', 'Live runs off: the table stood still');
    await page.click('#runs-older');
    await until(`document.querySelectorAll('#runs-body tr').length === ${OPEN}`).catch(async () =>
      assert.fail(`${await js(`document.querySelectorAll('#runs-body tr').length`)} rows shown`));
    assert.equal(await js(`document.querySelectorAll('tr[data-run="${first}"]').length`), 1, 'shown once');
    assert.deepEqual(await js(`(() => { const row = document.querySelector('tr[data-run="${first}"]'); return [row.dataset.state, row.cells[4].textContent, row.querySelector('button').disabled]; })()`),
      ['finished', 'run_cancelled', true], 'as the edge said last: finished, nothing to cancel');
  });
});
