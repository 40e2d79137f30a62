// The console's API keys panel in a real browser (Debian's chromium driven by
// puppeteer-core) against a real stack with client API keys: what each key
// may use, what it holds open against its limit, what it used, and its Runs
// button filtering the runs table to it. The numbers are checked against
// what the clients were answered.
//
// CONSOLE_SCREENSHOTS=<dir> also saves the panel there (docs/console/keys.png).
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'puppeteer-core';
import { NO_CHROMIUM, openConsolePage, type ConsolePage } from '../helpers/console-browser.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { applyApiKeys, ALIAS, inFlight, startOpsStack, waitUntil, type OpsStack } from '../main/admin/ops-stack.js';

const TOKEN = 'console-keys-admin-token';
const SHOTS = process.env.CONSOLE_SCREENSHOTS;
const ALICE = 'sk-console-alice-012345';
const BOB = 'sk-console-bob-98765432';
const CAROL = 'sk-console-carol-0123456';
const PADDED_CAROL = 'sk-console-pad-carol-0123';

describe('console API keys panel in headless chromium', { skip: NO_CHROMIUM }, () => {
  let stack: OpsStack;
  let view: ConsolePage;
  let page: Page;

  before(async () => {
    stack = await startOpsStack({
      adminToken: TOKEN,
      capacity: 4,
      mock: { ttftMs: 0, tokens: 4, intervalMs: 1 },
      apiKeys: [
        { name: 'alice', key_sha256: sha256Hex(ALICE), models: [ALIAS], max_concurrent: 1, requests_per_minute: 600, tokens_per_minute: 50_000 },
        { name: 'bob', key_sha256: sha256Hex(BOB) },
        // Two keys whose names differ only by spaces at the ends: the config takes any name without brackets.
        { name: 'carol', key_sha256: sha256Hex(CAROL) },
        { name: ' carol ', key_sha256: sha256Hex(PADDED_CAROL) },
      ],
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
  const cells = (name: string): Promise<string[]> => js(`Array.from(document.querySelector('#keys-body tr[data-name="${name}"]')?.cells ?? []).map((c) => c.textContent)`);
  const chat = (key: string, headers: Record<string, string> = {}, stream = false): Promise<Response> =>
    fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
      body: JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }),
    });

  test('each key with its models and limit; its open request, requests, errors and tokens as its clients were answered', async () => {
    await view.logIn(`${stack.edge.adminUrl}/console`, TOKEN);
    await page.waitForSelector('#keys-body tr[data-name="bob"]');
    assert.equal(await js('document.getElementById("keys-empty").hidden'), true, 'auth is on: no "auth is off" text');
    // Nothing spent yet: each limit is whole.
    assert.deepEqual(await cells('alice'), ['alice', ALIAS, '0 / 1', '600/min\n50,000\u00a0tokens/min', '600\n50.0\u00a0k', '0', '0', '0', '0', 'Runs']);
    assert.deepEqual(await cells('bob'), ['bob', 'all', '0', '–', '–', '0', '0', '0', '0', 'Runs']);

    // Alice holds her one slot with a slow stream: the panel shows her at her limit, and her second request is refused.
    const holder = await chat(ALICE, { 'x-mock-tokens': '3', 'x-mock-interval-ms': '2500' }, true);
    assert.equal(holder.status, 200);
    const refused = await chat(ALICE);
    assert.equal(refused.status, 429);
    await refused.arrayBuffer();
    let bobCompletion = 0;
    for (let i = 0; i < 2; i++) {
      const answer = (await (await chat(BOB)).json()) as { usage: { completion_tokens: number } };
      bobCompletion += answer.usage.completion_tokens;
    }
    await until(`document.querySelector('#keys-body tr[data-name="alice"]')?.cells[2].textContent === '1 / 1'`);
    assert.equal(await js(`document.querySelector('#keys-body tr[data-name="alice"]').cells[2].className`), 'num warn', 'at its limit: marked');
    if (SHOTS !== undefined) {
      mkdirSync(SHOTS, { recursive: true });
      await (await page.$('#keys'))?.screenshot({ path: `${SHOTS}/keys.png` });
    }
    await holder.text();
    await waitUntil(() => inFlight(stack.edge) === 0, 'every lease released', 10_000);
    await until(`document.querySelector('#keys-body tr[data-name="alice"]')?.cells[5].textContent === '2'`);
    const alice = await cells('alice');
    assert.deepEqual([alice[2], alice[3], alice[5], alice[6]], ['0 / 1', '600/min\n50,000\u00a0tokens/min', '2', '1'], 'one served, one refused at the limit');
    // Two requests taken of 600 (refilling at 10 a second), and the tokens the served one used of 50,000.
    const [requestsLeft, tokensLeft] = alice[4].split('\n');
    assert.ok(Number(requestsLeft) >= 598 && Number(requestsLeft) <= 600, alice[4]);
    assert.match(tokensLeft, /^(49\.\d|50\.0)\u00a0k$/);
    assert.equal(await js(`document.querySelector('#keys-body tr[data-name="alice"]').cells[6].title`), '429 ×1', 'the errors by status on hover');
    assert.equal(await js(`document.querySelector('#keys-body tr[data-name="alice"]').cells[6].className`), 'num bad');
    assert.equal(alice[8], '3', "the stream's three tokens");
    await until(`document.querySelector('#keys-body tr[data-name="bob"]')?.cells[5].textContent === '2'`);
    assert.equal((await cells('bob'))[8], String(bobCompletion));
  });

  test('a key a refresh removed stays, greyed, with what it used and no models: it no longer authenticates', async () => {
    const { status } = await applyApiKeys(stack, (stack.raw.auth as { api_keys: { name: string }[] }).api_keys.filter((k) => k.name !== 'bob'));
    assert.equal(status, 200);
    await until(`document.querySelector('#keys-body tr[data-name="bob"]')?.classList.contains('gone') === true`);
    // Not "all": the API's models null (every model) is what the config no longer grants it.
    assert.deepEqual((await cells('bob')).slice(0, 6), ['bob (removed)', '–', '0', '–', '–', '2']);
  });

  test("a key's Runs button shows that key's runs only, a removed key's too", async () => {
    await page.click('#keys-body tr[data-name="bob"] button[data-action="runs"]');
    assert.equal(await js('document.getElementById("runs-key").value'), 'bob');
    await until(`(() => { const rows = Array.from(document.querySelectorAll('#runs-body tr')); return rows.length === 2 && rows.every((r) => r.cells[2].textContent === 'bob'); })()`);
  });

  test("a key's Runs button shows that key's runs, also when its name has spaces at the ends", async () => {
    for (const key of [CAROL, CAROL, PADDED_CAROL]) await (await chat(key)).arrayBuffer();
    await page.waitForSelector('#keys-body tr[data-key=" carol "] button[data-action="runs"]');
    await page.click('#keys-body tr[data-key=" carol "] button[data-action="runs"]');
    // Its one run, never the two of 'carol', the key its trimmed name would be.
    await until(`(() => { const rows = Array.from(document.querySelectorAll('#runs-body tr')); return rows.length === 1 && rows[0].cells[2].textContent === '" carol "'; })()`);
    // Quoted where spaces at its ends would make it read as another key's name (HTML collapses them).
    assert.equal(await js(`document.querySelector('#keys-body tr[data-key=" carol "]').cells[0].textContent`), '" carol "');
    assert.equal(await js(`document.querySelector('#keys-body tr[data-key="carol"]').cells[0].textContent`), 'carol');
    await page.click('#keys-body tr[data-key="carol"] button[data-action="runs"]');
    await until(`(() => { const rows = Array.from(document.querySelectorAll('#runs-body tr')); return rows.length === 2 && rows.every((r) => r.cells[2].textContent === 'carol'); })()`);
  });
});
