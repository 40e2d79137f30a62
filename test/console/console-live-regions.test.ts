// The console's live regions in a real browser (Debian's chromium driven by
// puppeteer-core) against a real stack: the connection pill is role=status,
// and a screen reader says what is written into it. Set again at each status
// poll with the same word, it said "live" every 2 s.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { HTTPRequest } from 'puppeteer-core';
import { NO_CHROMIUM, openConsolePage, type ConsolePage } from '../helpers/console-browser.js';
import { startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const TOKEN = 'console-live-regions-admin-token';

describe('console live regions in headless chromium', { skip: NO_CHROMIUM }, () => {
  let stack: OpsStack;
  let view: ConsolePage;

  before(async () => {
    stack = await startOpsStack({ adminToken: TOKEN });
    view = await openConsolePage();
  });
  after(async () => {
    await view?.close();
    await stack?.close();
  });

  test('"live" is written once, not again at each status poll (the pill is role=status)', async () => {
    await view.logIn(`${stack.edge.adminUrl}/console`, TOKEN);
    await view.until(`document.getElementById('conn').textContent === 'live'`);
    // The status polls counted as the page makes them (one after another, every 2 s).
    let polls = 0;
    const count = (request: HTTPRequest): void => {
      if (request.isInterceptResolutionHandled()) return;
      if (new URL(request.url()).pathname === '/admin/status') polls++;
      void request.continue();
    };
    await view.page.setRequestInterception(true);
    view.page.on('request', count);
    try {
      await view.js(`window.__changes = 0; new MutationObserver((list) => { window.__changes += list.length; }).observe(document.getElementById('conn'), { childList: true, characterData: true, subtree: true }); true`);
      // The third poll asked means the two before it were answered and shown.
      const seen = polls;
      await waitUntil(() => polls >= seen + 3, 'three more status polls', 10_000);
      assert.equal(await view.js(`document.getElementById('conn').textContent`), 'live');
      assert.equal(await view.js(`window.__changes`), 0, '"live" was written again: a screen reader says it again');
    } finally {
      view.page.off('request', count);
      await view.page.setRequestInterception(false);
    }
  });
});
