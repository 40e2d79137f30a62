// The console's runs table paging back past its newest 50, in a real browser
// (Debian's chromium driven by puppeteer-core) against a real stack: each
// "Show 50 older" adds the next page of GET /admin/runs below the rows
// shown, in the admin API's order, and turns Live runs off (a poll would put
// the newest page back); Live runs on again shows the newest page; a page
// whose starting run the edge dropped meanwhile (runs.max_finished) says so
// and shows the newest runs instead of an error-less empty table; a run
// cancelled on an older page shows so in its row, the pages shown kept.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'puppeteer-core';
import { NO_CHROMIUM, openConsolePage, type ConsolePage } from '../helpers/console-browser.js';
import { waitFor } from '../helpers/stack.js';
import { ALIAS, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

const TOKEN = 'console-runs-admin-token';
const MAX_FINISHED = 130;

describe('console runs table paging in headless chromium', { skip: NO_CHROMIUM }, () => {
  let stack: OpsStack;
  let view: ConsolePage;
  let page: Page;

  before(async () => {
    stack = await startOpsStack({
      adminToken: TOKEN,
      capacity: 4,
      // Room for more open runs than a page holds (the cancel test): the default 16 would refuse them.
      maxQueue: 60,
      queueTimeoutMs: 60_000,
      mock: { ttftMs: 0, tokens: 1, intervalMs: 0 },
      configure: (raw) => {
        raw.runs = { max_finished: MAX_FINISHED };
      },
    });
    view = await openConsolePage();
    page = view.page;
  });
  after(async () => {
    await view?.close();
    await stack?.close();
  });

  const js = <T>(expression: string): Promise<T> => view.js<T>(expression);
  const until = (expression: string, timeout?: number): Promise<void> => view.until(expression, timeout);
  const shownIds = (): Promise<string[]> => js(`Array.from(document.querySelectorAll('#runs-body tr')).map((row) => row.dataset.run)`);
  const send = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) {
      const res = await fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: `run ${i}` }] }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
  };
  const adminIds = async (): Promise<string[]> => {
    const list = await stack.admin('/admin/runs?limit=1000');
    assert.equal(list.status, 200);
    return (list.json as { runs: { id: string; state: string }[] }).runs.map((r) => r.id);
  };

  test('Show 50 older adds the next pages in the API order, turning Live runs off; Live runs on shows the newest page again', async () => {
    await send(120);
    await view.logIn(`${stack.edge.adminUrl}/console`, TOKEN);
    await until(`document.querySelectorAll('#runs-body tr').length === 50`);
    const expected = await adminIds();
    assert.equal(expected.length, 120);
    assert.deepEqual(await shownIds(), expected.slice(0, 50));
    assert.equal(await js(`document.getElementById('runs-older').hidden`), false, 'older runs are kept: the button shows');
    assert.equal(await js(`document.getElementById('runs-shown').textContent`), '50 shown of 120 kept');
    assert.equal(await js(`document.getElementById('live-runs').checked`), true);

    await page.click('#runs-older');
    await until(`document.querySelectorAll('#runs-body tr').length === 100`);
    assert.deepEqual(await shownIds(), expected.slice(0, 100));
    assert.equal(await js(`document.getElementById('live-runs').checked`), false, 'Live runs went off');
    await page.click('#runs-older');
    await until(`document.querySelectorAll('#runs-body tr').length === 120`);
    assert.deepEqual(await shownIds(), expected);
    assert.equal(await js(`document.getElementById('runs-older').hidden`), true, 'the oldest kept run is shown: no button');
    assert.equal(await js(`document.activeElement?.id`), 'runs-shown', "the hidden button's focus went to the count beside it");
    assert.equal(await js(`document.getElementById('runs-shown').textContent`), '120 shown of 120 kept');

    // Off, the table keeps the pages shown while a new run is made; on again, the newest page comes back at once, the new run first.
    await send(1);
    const newest = (await adminIds())[0];
    assert.equal((await shownIds()).length, 120);
    await page.click('#live-runs');
    await until(`document.querySelectorAll('#runs-body tr').length === 50 && document.querySelector('#runs-body tr')?.dataset.run === ${JSON.stringify(newest)}`);
    assert.equal(await js(`document.getElementById('runs-older').hidden`), false);
  });

  test("new runs coming in leave what a screen reader reads out alone: the rows shown, not the edge's count that grows with each run", async () => {
    // After the test before: live, the newest page (50 rows) under no key filter.
    await until(`document.getElementById('live-runs').checked && document.querySelectorAll('#runs-body tr').length === 50`);
    const kept = (await adminIds()).length;
    assert.ok(kept + 3 <= MAX_FINISHED, `room for 3 more kept runs: ${kept}`);
    await js(`window.__said = 0; for (const region of document.querySelectorAll('.runs-more [aria-live]')) new MutationObserver((list) => { window.__said += list.length; }).observe(region, { childList: true, characterData: true, subtree: true }); true`);
    await send(3);
    await until(`document.getElementById('runs-shown').textContent === '50 shown of ${kept + 3} kept'`);
    assert.equal(await js(`window.__said`), 0, 'the polite live region was rewritten by the polls: read out at each new run');
  });

  test('Show 50 older pressed while a new key filter is on its way adds no page of that key to the rows of the old filter', async () => {
    await until(`document.querySelectorAll('#runs-body tr').length === 50 && !document.getElementById('runs-older').hidden`);
    // The key's first page is held on its way (a slow edge): the rows shown are still every key's, the button theirs.
    type Request = import('puppeteer-core').HTTPRequest;
    const held: Request[] = [];
    let onHeld = (): void => {};
    const firstHeld = new Promise<void>((resolve) => (onHeld = resolve));
    const hold = (request: Request): void => {
      if (request.isInterceptResolutionHandled()) return;
      const url = new URL(request.url());
      if (url.pathname === '/admin/runs' && url.searchParams.has('key') && !url.searchParams.has('before')) {
        held.push(request);
        onHeld();
      } else void request.continue();
    };
    await page.setRequestInterception(true);
    page.on('request', hold);
    try {
      await page.type('#runs-key', 'nobody');
      await until(`document.getElementById('runs-key').value === 'nobody'`);
      // A press that the button's state allows or not: clicked as the DOM would take it.
      await js(`document.getElementById('runs-older').click()`);
      await firstHeld;
    } finally {
      page.off('request', hold);
      for (const request of held) await request.continue();
      await page.setRequestInterception(false);
    }
    // The key has no run: its first page, not every key's rows under its name.
    await until(`document.getElementById('runs-empty-key').hidden === false`).catch(async () =>
      assert.fail(`${(await shownIds()).length} rows shown under the key filter "nobody"; runs-shown: ${await js(`document.getElementById('runs-shown').textContent`)}`));
    assert.deepEqual(await shownIds(), []);
    await js(`(() => { const box = document.getElementById('runs-key'); box.value = ''; box.dispatchEvent(new Event('input')); })()`);
    // As the next test starts: every key's runs, Live runs on.
    if (!(await js<boolean>(`document.getElementById('live-runs').checked`))) await page.click('#live-runs');
    await until(`document.querySelectorAll('#runs-body tr').length === 50`);
  });

  test('an older page whose starting run was dropped meanwhile (runs.max_finished) says so and shows the newest runs', async () => {
    await until(`document.querySelectorAll('#runs-body tr').length === 50`);
    await page.click('#live-runs');
    assert.equal(await js(`document.getElementById('live-runs').checked`), false);
    const stale = await shownIds();
    // Enough new runs that the last row shown, where the next page would start, is no longer kept.
    await send(MAX_FINISHED);
    assert.equal((await stack.admin(`/admin/runs/${encodeURIComponent(stale.at(-1) as string)}`)).status, 404);
    assert.deepEqual(await shownIds(), stale, 'Live runs off: the table kept its view');
    await page.click('#runs-older');
    await until(`document.getElementById('banner').textContent.includes('no longer keeps the run the older page started after')`);
    const newest = (await adminIds()).slice(0, 50);
    await until(`document.querySelector('#runs-body tr')?.dataset.run === ${JSON.stringify(newest[0])}`);
    assert.deepEqual(await shownIds(), newest);
  });

  test('Cancel on an older page shows the run cancelled in its row, the pages shown kept (not the newest page again)', async () => {
    // More open runs than a page holds, so some are on the second page: open runs come first, the newest queued first.
    const OPEN = 56;
    const streams: Promise<string>[] = [];
    for (let i = 0; i < OPEN; i++) {
      streams.push(fetch(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-mock-tokens': '600', 'x-mock-interval-ms': '100' },
        body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: `open ${i}` }] }),
      }).then((res) => res.text()));
    }
    try {
      await waitFor(async () => ((await stack.admin('/admin/runs?limit=1000')).json as { runs: { state: string }[] }).runs.filter((r) => r.state !== 'finished').length === OPEN, 'every run open', 10_000);
      if (!(await js<boolean>(`document.getElementById('live-runs').checked`))) await page.click('#live-runs');
      await until(`Array.from(document.querySelectorAll('#runs-body tr')).filter((row) => row.dataset.state === 'running').length === 50`);
      await page.click('#runs-older');
      await until(`document.querySelectorAll('#runs-body tr').length === 100`);
      const shown = await shownIds();
      const target = await js<string>(`Array.from(document.querySelectorAll('#runs-body tr')).slice(50).find((row) => row.dataset.state === 'running').dataset.run`);
      await page.click(`tr[data-run="${target}"] button[data-action="cancel"]`);
      await waitFor(async () => (await stack.admin(`/admin/runs/${encodeURIComponent(target)}`)).json.outcome === 'run_cancelled', 'the run cancelled');
      await until(`document.querySelector('tr[data-run="${target}"]')?.dataset.state === 'finished'`).catch(async () =>
        assert.fail(`the cancelled run's row: ${await js(`document.querySelector('tr[data-run="${target}"]')?.cells[4].textContent ?? 'gone'`)}; ${(await shownIds()).length} rows shown`));
      assert.equal(await js(`document.querySelector('tr[data-run="${target}"]').cells[4].textContent`), 'run_cancelled');
      assert.deepEqual(await shownIds(), shown, 'the pages shown stay, in their order');
      assert.equal(await js(`document.getElementById('live-runs').checked`), false);
    } finally {
      for (const run of ((await stack.admin('/admin/runs?limit=1000')).json as { runs: { id: string; state: string }[] }).runs) {
        if (run.state !== 'finished') await stack.admin(`/admin/runs/${encodeURIComponent(run.id)}/cancel`, { method: 'POST' });
      }
      await Promise.allSettled(streams);
    }
  });
});
