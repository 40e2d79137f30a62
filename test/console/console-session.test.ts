// A new login in the console, in a real browser (Debian's chromium driven by
// puppeteer-core) against a real stack: it starts from the edge's answer to
// the login, with no alert left from the session before (an edge that did
// not answer then, an action that failed), shown beside "live".
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { HTTPRequest, Page } from 'puppeteer-core';
import { NO_CHROMIUM, openConsolePage, type ConsolePage } from '../helpers/console-browser.js';
import { startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const TOKEN = 'console-session-admin-token';

describe('console sessions in headless chromium', { skip: NO_CHROMIUM }, () => {
  let stack: OpsStack;
  let view: ConsolePage;
  let page: Page;

  before(async () => {
    stack = await startOpsStack({ adminToken: TOKEN });
    view = await openConsolePage();
    page = view.page;
  });
  after(async () => {
    await view?.close();
    await stack?.close();
  });

  const js = <T>(expression: string): Promise<T> => view.js<T>(expression);
  const logIn = async (): Promise<void> => {
    await page.waitForSelector('#login-form', { visible: true });
    await page.type('#token', TOKEN);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#main', { visible: true });
  };

  test('a login after a session whose edge stopped answering shows no "does not answer" beside "live"', async () => {
    await page.goto(`${stack.edge.adminUrl}/console`);
    await logIn();
    // The status polls fail (a 503 from in front of the edge), the login's own request not.
    let failing = true;
    const fail = (request: HTTPRequest): void => {
      if (request.isInterceptResolutionHandled()) return;
      if (failing && new URL(request.url()).pathname === '/admin/status') {
        void request.respond({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: { code: 'unavailable', message: 'the proxy in front' } }) });
      } else void request.continue();
    };
    await page.setRequestInterception(true);
    page.on('request', fail);
    try {
      await page.waitForFunction(`/does not answer/.test(document.getElementById('banner').textContent) && !document.getElementById('banner').hidden`, { timeout: 8_000 });
      await page.click('#logout');
      failing = false;
      await logIn();
      await page.waitForFunction(`document.getElementById('conn').textContent === 'live'`, { timeout: 5_000 });
      assert.equal(await js(`document.getElementById('banner').hidden`), true, `the banner at login: ${await js(`document.getElementById('banner').textContent`)}`);
    } finally {
      page.off('request', fail);
      await page.setRequestInterception(false);
    }
  });

  /** Counts the /admin/status requests the page makes (every 2 s), answering each with `answer` (undefined: the edge's). */
  async function watchStatusPolls(answer?: (request: HTTPRequest) => void): Promise<{ count: () => number; stop: () => Promise<void> }> {
    let count = 0;
    const on = (request: HTTPRequest): void => {
      if (request.isInterceptResolutionHandled()) return;
      if (new URL(request.url()).pathname !== '/admin/status') return void request.continue();
      count++;
      if (answer === undefined) void request.continue();
      else answer(request);
    };
    await page.setRequestInterception(true);
    page.on('request', on);
    return {
      count: () => count,
      stop: async () => {
        page.off('request', on);
        await page.setRequestInterception(false);
      },
    };
  }

  /** Starts counting the DOM changes inside element `id`; read them with `window.__changes`. */
  const countChanges = (id: string): Promise<void> =>
    js(`window.__changes = 0; new MutationObserver((list) => { window.__changes += list.length; }).observe(document.getElementById(${JSON.stringify(id)}), { childList: true, characterData: true, subtree: true }); true`);

  test('an edge that keeps failing is alerted once, not again at each failed poll (the banner is role=alert)', async () => {
    await page.goto(`${stack.edge.adminUrl}/console`);
    // Logged in already (this tab's token) after the test before.
    await page.waitForFunction(`document.getElementById('conn').textContent === 'live'`, { timeout: 5_000 });
    const polls = await watchStatusPolls((request) => void request.respond({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: { code: 'unavailable', message: 'the proxy in front' } }) }));
    try {
      await page.waitForFunction(`/does not answer/.test(document.getElementById('banner').textContent) && !document.getElementById('banner').hidden`, { timeout: 8_000 });
      await countChanges('banner');
      // The polls go one after another: the third one asked means the two before it were answered and shown.
      const seen = polls.count();
      await waitUntil(() => polls.count() >= seen + 3, 'three more failed status polls', 10_000);
      assert.equal(await js(`window.__changes`), 0, 'the same alert was written again (a screen reader reads it out again)');
    } finally {
      await polls.stop();
    }
  });

  test('logging out clears what may be a secret: the client key typed for Try it, a pasted candidate config', async () => {
    await page.goto(`${stack.edge.adminUrl}/console`);
    // The tab may still hold the session before (sessionStorage): logged in at once, or asked to.
    await page.waitForFunction(`!document.getElementById('main').hidden || !document.getElementById('login').hidden`);
    if (await js<boolean>(`!document.getElementById('login').hidden`)) await logIn();
    await page.type('#try-key', 'sk-client-secret-typed-here');
    await page.type('#config-text', 'nodes: [{ id: n1, token: node-secret-pasted }]');
    await page.click('#logout');
    await page.waitForSelector('#login-form', { visible: true });
    assert.equal(await js(`document.getElementById('try-key').value`), '');
    assert.equal(await js(`document.getElementById('config-text').value`), '');
    assert.equal(await js(`document.documentElement.outerHTML.includes('secret')`), false, 'nowhere in the page');
  });
});
