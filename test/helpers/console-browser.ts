// One headless chromium page (Debian's chromium driven by puppeteer-core, never
// a browser download) for the console's browser tests, with the helpers each
// of them needs: evaluate, wait for a condition, log in.
import { existsSync } from 'node:fs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** A describe's `skip` on a host without chromium. */
export const NO_CHROMIUM: string | false = existsSync(CHROMIUM) ? false : `no ${CHROMIUM} (apt-get install -y chromium)`;

export interface ConsolePage {
  readonly browser: Browser;
  readonly page: Page;
  /** The page's value of `expression`. */
  js<T>(expression: string): Promise<T>;
  /** Waits until `expression` is true on the page. */
  until(expression: string, timeout?: number): Promise<void>;
  /** Opens `consoleUrl` and logs in with `token` at the login form. */
  logIn(consoleUrl: string, token: string): Promise<void>;
  close(): Promise<void>;
}

/** A page at 1280×800. */
export async function openConsolePage(): Promise<ConsolePage> {
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'], headless: true });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  return {
    browser,
    page,
    js: <T>(expression: string) => page.evaluate(expression) as Promise<T>,
    // Generous: these files run beside others on a 2-core CI host, where a poll and a redraw can take seconds.
    async until(expression, timeout = 20_000) {
      await page.waitForFunction(expression, { timeout });
    },
    async logIn(consoleUrl, token) {
      await page.goto(consoleUrl);
      await page.waitForSelector('#login-form', { visible: true });
      await page.type('#token', token);
      await page.keyboard.press('Enter');
    },
    close: () => browser.close(),
  };
}
