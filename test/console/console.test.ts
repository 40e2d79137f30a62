// The operator console in a real browser: Debian's chromium (never a
// downloaded one) driven by puppeteer-core against a real stack on
// loopback (edge with the admin listener and a token, mock provider, node
// agent started by the test). Each step checks what an operator sees and,
// where the console acts, what the edge's own API then says.
//
// CONSOLE_SCREENSHOTS=<dir> also saves the main views there (the README's
// pictures in docs/console/ come from this).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import type { NodeAgent } from '../../src/agent/agent.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { agentFor, ALIAS, edgeConfigObject, inFlight, NODE_ID, NODE_TOKEN, startRegisteredAgent, testWorkers, waitFor, waitUntil } from '../helpers/stack.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const TOKEN = 'console-test-admin-token';
const SHOTS = process.env.CONSOLE_SCREENSHOTS;

describe('operator console in headless chromium', { skip: existsSync(CHROMIUM) ? false : `no ${CHROMIUM} (apt-get install -y chromium)` }, () => {
  let mock: MockProvider;
  let edge: RunningEdge;
  let agent: NodeAgent | undefined;
  let browser: Browser;
  let page: Page;
  let raw: Record<string, unknown>;
  /** The config file the edge was started from: an empty box evaluates and applies it. */
  let configDir: string;
  let configFile: string;
  let holdStatusMs = 0;
  /** Answers the next /admin/try as the client listener refusing an API key does (401, no admin realm). */
  let refuseNextTry = false;
  /** Answers this many of the next /admin/status requests 503, as an edge failing inside would. */
  let failStatus = 0;
  /** Refuses the next drain POST as the edge does when the node is not connected (409 node_not_connected). */
  let refuseNextDrain = false;
  /** Delays the next /admin/config/refresh request. */
  let holdNextRefreshMs = 0;
  /**
   * Answers the next /admin/status with the edge's state at the moment it was asked, delivered this
   * many ms later (a slow answer, older than what happens meanwhile); `staleTaken` resolves once taken.
   */
  let staleStatusMs = 0;
  let staleTaken: (() => void) | undefined;

  const adminStatus = async (): Promise<{ nodes: { id: string; connected: boolean; draining: boolean }[] }> => {
    const res = await fetch(`${edge.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(res.status, 200);
    return (await res.json()) as { nodes: { id: string; connected: boolean; draining: boolean }[] };
  };
  // Browser-side code goes as strings: this file compiles without the DOM library.
  const js = <T>(expression: string): Promise<T> => page.evaluate(expression) as Promise<T>;
  const until = async (expression: string, timeout = 5_000): Promise<void> => {
    await page.waitForFunction(expression, { timeout });
  };
  const text = (selector: string): Promise<string> => js(`document.querySelector(${JSON.stringify(selector)})?.textContent ?? ''`);
  const cellsOf = (selector: string): Promise<string[]> => js(`Array.from(document.querySelector(${JSON.stringify(selector)}).cells).map((c) => c.textContent)`);
  const setValue = (selector: string, value: string): Promise<void> =>
    js(`(() => { const el = document.querySelector(${JSON.stringify(selector)}); el.value = ${JSON.stringify(value)}; el.dispatchEvent(new Event('input')); })()`);
  const shot = async (name: string, selector?: string): Promise<void> => {
    if (SHOTS === undefined) return;
    mkdirSync(SHOTS, { recursive: true });
    if (selector === undefined) await page.screenshot({ path: `${SHOTS}/${name}.png` });
    else await (await page.$(selector))?.screenshot({ path: `${SHOTS}/${name}.png` });
  };

  before(async () => {
    mock = await startMockProvider({ ttftMs: 30, tokens: 12, intervalMs: 40 });
    raw = edgeConfigObject();
    raw.admin = { host: '127.0.0.1', port: 0, token: TOKEN };
    configDir = mkdtempSync(join(tmpdir(), 'console-config-'));
    configFile = join(configDir, 'edge.json');
    writeFileSync(configFile, JSON.stringify(raw));
    edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger(), admin: true, configFile });
    browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'], headless: true });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
    // Lets a test hold the page's status polls back, so what it sees must come from the event stream.
    await page.setRequestInterception(true);
    page.on('request', (request) => {
      const go = (): void => void request.continue().catch(() => undefined);
      const status = request.url().endsWith('/admin/status');
      const respond = (code: number, body: unknown): void =>
        void request.respond({ status: code, contentType: 'application/json', body: JSON.stringify(body) }).catch(() => undefined);
      if (refuseNextTry && request.url().endsWith('/admin/try')) {
        refuseNextTry = false;
        respond(401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error', param: null, code: 'invalid_api_key' } });
      } else if (status && failStatus > 0) {
        failStatus--;
        respond(503, { error: { code: 'unavailable', message: 'the edge is starting' } });
      } else if (refuseNextDrain && request.method() === 'POST' && request.url().endsWith('/drain')) {
        refuseNextDrain = false;
        respond(409, { error: { code: 'node_not_connected', message: `node ${NODE_ID} is not connected` } });
      } else if (holdNextRefreshMs > 0 && request.url().endsWith('/admin/config/refresh')) {
        setTimeout(go, holdNextRefreshMs);
        holdNextRefreshMs = 0;
      } else if (status && staleStatusMs > 0) {
        const delay = staleStatusMs;
        staleStatusMs = 0;
        void adminStatus().then((snapshot) => {
          staleTaken?.();
          setTimeout(() => respond(200, snapshot), delay);
        });
      } else if (status && holdStatusMs > 0) setTimeout(go, holdStatusMs);
      else go();
    });
  });

  after(async () => {
    await browser?.close();
    await agent?.stop();
    await edge?.close();
    await mock?.close();
    rmSync(configDir, { recursive: true, force: true });
  });

  test('/ leads to the login form; a wrong token is refused, the right one opens the console and stays out of the URL', async () => {
    await page.goto(`${edge.adminUrl}/`);
    assert.equal(new URL(page.url()).pathname, '/console');
    await page.waitForSelector('#login-form', { visible: true });
    // Not rendered, not just flagged: a stylesheet's display once beat the hidden attribute.
    assert.equal(await js('getComputedStyle(document.getElementById("main")).display'), 'none', 'the console stays out of sight until login');
    await page.type('#token', 'not-the-token');
    await page.keyboard.press('Enter');
    await until(`/rejected/.test(document.getElementById('login-error').textContent)`);
    await shot('login');
    await page.type('#token', TOKEN);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#main', { visible: true });
    // Once seen in CI with the token not yet stored: #main counted as visible while still hidden (see console.css).
    const afterLogin = await js<{ stored: string | null; mainHidden: boolean; error: string }>(
      `({ stored: sessionStorage.getItem('edge-admin-token'), mainHidden: document.getElementById('main').hidden, error: document.getElementById('login-error').textContent })`,
    );
    assert.equal(afterLogin.stored, TOKEN, `the page right after login: ${JSON.stringify(afterLogin)}`);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    assert.equal(await js('document.getElementById("main").hidden'), false, 'still logged in');
    assert.equal(await js(`sessionStorage.getItem('edge-admin-token')`), TOKEN);
    assert.ok(!page.url().includes(TOKEN), 'the token is never in the URL');
    // The page shows the configured, not yet connected node.
    await page.waitForSelector(`tr[data-node="${NODE_ID}"][data-state="offline"]`);
    // A reload in the same tab keeps the session (sessionStorage).
    await page.reload();
    await page.waitForSelector('#main', { visible: true });
  });

  test('a token with a character no header can carry is refused as such, once, not retried as an edge that did not answer', async () => {
    await js(`sessionStorage.removeItem('edge-admin-token')`);
    await page.reload();
    await page.waitForSelector('#login-form', { visible: true });
    const statusAsked: string[] = [];
    const onRequest = (request: { url(): string }): void => {
      if (request.url().endsWith('/admin/status')) statusAsked.push(request.url());
    };
    page.on('request', onRequest);
    try {
      // A zero-width space copied along with the token: fetch() refuses the header before anything is sent.
      await setValue('#token', `${TOKEN}\u200b`);
      await js(`document.getElementById('login-form').requestSubmit()`);
      await until(`/cannot carry/.test(document.getElementById('login-error').textContent)`, 3_000).catch(async () => assert.fail(`login error: ${await text('#login-error')}`));
      await new Promise((resolve) => setTimeout(resolve, 2_500)); // past the 2 s a retry would take
      assert.match(await text('#login-error'), /cannot carry/, 'the message stays: nothing is retried');
      assert.deepEqual(statusAsked, []);
      assert.equal(await js(`sessionStorage.getItem('edge-admin-token')`), null);
    } finally {
      page.off('request', onRequest);
    }
    await page.type('#token', TOKEN);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#main', { visible: true });
  });

  test('an edge failing at login does not cost the operator the token: the page asks again and opens once it answers', async () => {
    failStatus = 2;
    await page.reload();
    await until(`/did not answer \\(HTTP 503 unavailable: the edge is starting\\).*Trying again/.test(document.getElementById('login-error').textContent)`);
    assert.equal(await js(`sessionStorage.getItem('edge-admin-token')`), TOKEN, 'a failing edge is no verdict on the token');
    await page.waitForSelector('#main', { visible: true, timeout: 8_000 });
    assert.equal(failStatus, 0);
  });

  test('a node shows as connected within 2 s of its agent starting', async () => {
    await page.waitForSelector('#conn[data-state="ok"]');
    // Status polls answer only after 3 s from here: the node must turn connected from its event.
    holdStatusMs = 3_000;
    const started = performance.now();
    agent = agentFor(edge.grpcPort, mock.url);
    const registered = once(agent, 'registered');
    agent.start();
    await page.waitForSelector(`tr[data-node="${NODE_ID}"][data-state="connected"]`, { timeout: 2_000 });
    const elapsed = performance.now() - started;
    await registered;
    assert.ok(elapsed < 2_000, `connected after ${elapsed.toFixed(0)} ms`);
    holdStatusMs = 0;
    // Lanes and heartbeat age arrive with the next status poll.
    await until(`(() => { const row = document.querySelector('tr[data-node="${NODE_ID}"]'); return row !== null && row.cells[3].textContent === '1' && / ms$/.test(row.cells[6].textContent); })()`);
  });

  test('a running stream appears among the runs and finishes there', async () => {
    const response = await fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-tokens': '60', 'x-mock-interval-ms': '50' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'count' }] }),
    });
    assert.equal(response.status, 200);
    const runId = response.headers.get('x-edge-run-id') as string;
    assert.ok(runId);
    // The stream lasts 3 s: the page must show it while it runs.
    await page.waitForSelector(`tr[data-run="${runId}"][data-state="running"]`, { timeout: 2_500 });
    await shot('runs-running', '#runs');
    await response.text(); // the stream ends
    await page.waitForSelector(`tr[data-run="${runId}"][data-state="finished"]`, { timeout: 3_000 });
    const cells = await cellsOf(`tr[data-run="${runId}"]`);
    assert.equal(cells[1], ALIAS);
    // No API keys in this config: no key.
    assert.equal(cells[2], '–');
    assert.equal(cells[4], 'end');
    assert.equal(cells[5], '200');
    assert.match(cells[7] ?? '', /\d( ms| s)$/);
  });

  test('cancel a run from its row: the client\'s stream ends with run_cancelled and the row shows it finished so', async () => {
    const response = await fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-mock-tokens': '400', 'x-mock-interval-ms': '25' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'long' }] }),
    });
    assert.equal(response.status, 200);
    const runId = response.headers.get('x-edge-run-id') as string;
    const body = response.text();
    const button = `tr[data-run="${runId}"][data-state="running"] button[data-action="cancel"]`;
    await page.waitForSelector(button, { timeout: 2_500 });
    await page.click(button);
    assert.match(await body, /"code":"run_cancelled"/, 'the client is told in-band');
    await page.waitForSelector(`tr[data-run="${runId}"][data-state="finished"]`, { timeout: 2_500 });
    const cells = await cellsOf(`tr[data-run="${runId}"]`);
    assert.equal(cells[4], 'run_cancelled');
    assert.equal(await page.$eval(`tr[data-run="${runId}"] button[data-action="cancel"]`, (b) => (b as unknown as { disabled: boolean }).disabled), true);
  });

  test('the key box shows one API key\'s runs only (GET /admin/runs?key=), and every run again once cleared', async () => {
    await until(`document.querySelectorAll('#runs-body tr').length > 0`);
    // No API keys in this config: the keys panel says auth is off, no run has a key, and a key's filter empties the table and says why.
    await until(`!document.getElementById('keys-empty').hidden && document.getElementById('keys-note').hidden && document.querySelectorAll('#keys-body tr').length === 0`);
    const asked: string[] = [];
    const onRequest = (request: { url(): string }): void => {
      if (request.url().includes('/admin/runs?')) asked.push(request.url());
    };
    page.on('request', onRequest);
    try {
      await setValue('#runs-key', 'team-a');
      await until(`document.querySelectorAll('#runs-body tr').length === 0 && !document.getElementById('runs-empty-key').hidden && document.getElementById('runs-empty').hidden`);
      assert.equal(await text('#runs-empty-key-name'), 'team-a');
      assert.ok(asked.some((url) => url.endsWith('&key=team-a')), asked.join('\n'));
      await setValue('#runs-key', '');
      await until(`document.querySelectorAll('#runs-body tr').length > 0 && document.getElementById('runs-empty-key').hidden`);
    } finally {
      page.off('request', onRequest);
    }
  });

  test('drain and undrain toggle the node in the page and in /admin/status', async () => {
    const row = `tr[data-node="${NODE_ID}"]`;
    await page.click(`${row} button[data-action="drain"]`);
    await page.waitForSelector(`${row}[data-state="draining"]`, { timeout: 2_000 });
    assert.equal((await adminStatus()).nodes.find((n) => n.id === NODE_ID)?.draining, true);
    // Keyboard: the same button, focused and pressed with Enter.
    await page.focus(`${row} button[data-action="undrain"]`);
    await page.keyboard.press('Enter');
    await page.waitForSelector(`${row}[data-state="connected"]`, { timeout: 2_000 });
    assert.equal((await adminStatus()).nodes.find((n) => n.id === NODE_ID)?.draining, false);
  });

  test('an agent a drain command drained reconnects drained: its node event shows it so, not as connected and drainable', async () => {
    const row = `tr[data-node="${NODE_ID}"]`;
    const command = async (kind: string): Promise<void> => {
      const res = await fetch(`${edge.adminUrl}/admin/nodes/${NODE_ID}/commands`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ kind }) });
      assert.equal(res.status, 200);
    };
    await command('drain');
    await page.waitForSelector(`${row}[data-state="draining"]`, { timeout: 2_000 });
    // Status polls answer only after 3 s from here: what the row shows on reconnecting comes from the node events.
    holdStatusMs = 3_000;
    try {
      await js(`(() => { const row = document.querySelector('${row}'); window.__states = [row.dataset.state]; new MutationObserver(() => { if (window.__states.at(-1) !== row.dataset.state) window.__states.push(row.dataset.state); }).observe(row, { attributes: true }); })()`);
      const generation = (await cellsOf(row))[2];
      const registered = once(agent as NodeAgent, 'registered');
      (agent as NodeAgent).dropConnection();
      await registered;
      await until(`window.__states.includes('offline') && document.querySelector('${row}').cells[2].textContent !== ${JSON.stringify(generation)}`);
      // The generation the page shows moved on: the node.connected event was applied.
      assert.equal(await js(`document.querySelector('${row}').dataset.state`), 'draining', `the row went ${await js<string[]>('window.__states')}`);
      assert.equal(await js(`document.querySelector('${row} button').dataset.action`), 'undrain');
    } finally {
      holdStatusMs = 0;
      await command('undrain');
    }
    await page.waitForSelector(`${row}[data-state="connected"]`, { timeout: 5_000 });
  });

  test('a drain the edge refuses shows why until an action succeeds; a status answer older than a drain does not undo it', async () => {
    const row = `tr[data-node="${NODE_ID}"]`;
    refuseNextDrain = true;
    await page.click(`${row} button[data-action="drain"]`);
    await until(`/drain ${NODE_ID} failed: HTTP 409 node_not_connected/.test(document.getElementById('banner').textContent) && !document.getElementById('banner').hidden`);
    await page.click(`${row} button[data-action="drain"]`);
    await page.waitForSelector(`${row}[data-state="draining"]`, { timeout: 2_000 });
    await until(`document.getElementById('banner').hidden`, 2_000).catch(async () => assert.fail(`the banner stayed: ${await text('#banner')}`));

    // A status poll is taken while the node drains and answers late; meanwhile the node is undrained.
    const taken = new Promise<void>((resolve) => (staleTaken = resolve));
    staleStatusMs = 1_200;
    await taken;
    const undrained = await fetch(`${edge.adminUrl}/admin/nodes/${NODE_ID}/undrain`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(undrained.status, 200);
    await page.waitForSelector(`${row}[data-state="connected"]`, { timeout: 2_000 });
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // the stale answer has landed
    assert.equal(await js(`document.querySelector('${row}').dataset.state`), 'connected', 'the older answer did not put the drain back');
  });

  test('config refresh evaluate shows the diff split into live and restart-required, apply commits the live part', async () => {
    // The running config itself: no change, said as such (not "Apply would commit the changes below" over an empty list).
    await setValue('#config-text', JSON.stringify(raw));
    await page.click('#evaluate');
    await until(`/^No change/.test(document.getElementById('config-outcome')?.textContent)`, 5_000).catch(async () => assert.fail(`outcome: ${await text('#config-outcome')}`));
    assert.equal(await js(`document.getElementById('apply').disabled`), true);
    const models = structuredClone(raw.models) as Record<string, unknown>[];
    models[0].max_queue = 7;
    const candidate = { ...raw, models, admin: { ...(raw.admin as object), port: 1 } };
    await setValue('#config-text', JSON.stringify(candidate, null, 2));
    await page.click('#evaluate');
    await page.waitForSelector('#diff-mutable li');
    assert.match(await text('#diff-mutable'), /models\[0\]\.max_queue|models\.llama3\.max_queue|max_queue/);
    assert.match(await text('#diff-restart'), /admin\.port/);
    assert.match(await text('#config-outcome'), /refused \(restart_required\)/);
    assert.equal(await js(`document.getElementById('apply').disabled`), true);
    await shot('config', '#config');

    // Without the restart-required part, Apply goes through and the queue changes.
    const applicable = { ...raw, models };
    await setValue('#config-text', JSON.stringify(applicable));
    await page.click('#evaluate');
    await until(`/Apply would commit/.test(document.getElementById('config-outcome')?.textContent)`);
    assert.equal(await text('#diff-restart h3'), 'Need a restart (0)');
    await page.click('#apply');
    await until(`/^Applied: config version 2/.test(document.getElementById('config-outcome')?.textContent)`);
    await until(`document.querySelector('tr[data-model="${ALIAS}"]')?.children[1].textContent === '0 / 7'`);
    // The concerned node's own answer (this agent was not started from a file, so it cannot re-read one): shown, marked.
    const answer = await text(`#config-nodes li[data-node="${NODE_ID}"]`);
    assert.match(answer, new RegExp(`^${NODE_ID}: (failed|applied|restart_required)`), answer);
    if (!answer.includes(': applied')) assert.equal(await js(`document.querySelector('#config-nodes li[data-node="${NODE_ID}"]').className`), 'error');
  });

  test('an evaluation that answers after the text changed does not enable Apply for the new text', async () => {
    const candidate = (maxQueue: number): string => {
      const models = structuredClone(raw.models) as Record<string, unknown>[];
      models[0].max_queue = maxQueue;
      return JSON.stringify({ ...raw, models });
    };
    holdNextRefreshMs = 800;
    await setValue('#config-text', candidate(9));
    await page.click('#evaluate');
    await setValue('#config-text', candidate(8)); // edited while the evaluation is on its way
    await until(`/Apply would commit/.test(document.getElementById('config-outcome')?.textContent)`);
    assert.equal(await js(`document.getElementById('apply').disabled`), true, 'Apply waits for an evaluation of what is in the box');
    await page.click('#evaluate');
    await until(`!document.getElementById('apply').disabled`);
    // While an Apply is on its way, Evaluate waits: its answer must not drop the Apply's (what was committed).
    holdNextRefreshMs = 800;
    await page.click('#apply');
    assert.equal(await js(`document.getElementById('evaluate').disabled`), true, 'Evaluate is off during the Apply');
    await until(`/^Applied: config version/.test(document.getElementById('config-outcome')?.textContent)`);
    assert.equal(await js(`document.getElementById('evaluate').disabled`), false);
    await setValue('#config-text', '');
  });

  test('with an empty box Apply commits the file as evaluated, and refuses it when the file changed in between', async () => {
    const withQueue = (maxQueue: number): string => {
      const models = structuredClone(raw.models) as Record<string, unknown>[];
      models[0].max_queue = maxQueue;
      return JSON.stringify({ ...raw, models });
    };
    const queueShown = (maxQueue: number): Promise<void> => until(`document.querySelector('tr[data-model="${ALIAS}"]')?.children[1].textContent === '0 / ${maxQueue}'`);
    await setValue('#config-text', '');
    writeFileSync(configFile, withQueue(11));
    await page.click('#evaluate');
    await until(`/Apply would commit/.test(document.getElementById('config-outcome')?.textContent)`);
    // Someone edits the file after the operator read the evaluation: Apply must not commit what nobody evaluated.
    writeFileSync(configFile, withQueue(12));
    await page.click('#apply');
    await until(`/^Rejected \\(source_changed\\)/.test(document.getElementById('config-outcome')?.textContent)`);
    assert.match(await text('#config-result'), /changed since it was evaluated/);
    assert.notEqual(await js(`document.querySelector('tr[data-model="${ALIAS}"]')?.children[1].textContent`), '0 / 12', 'the unevaluated file was committed');
    // Evaluated again, it applies.
    await page.click('#evaluate');
    await until(`/Apply would commit/.test(document.getElementById('config-outcome')?.textContent)`);
    await page.click('#apply');
    await until(`/^Applied: config version/.test(document.getElementById('config-outcome')?.textContent)`);
    await queueShown(12);
  });

  test('the try-it box streams the answer as it arrives', async () => {
    await page.select('#try-model', ALIAS);
    await setValue('#try-prompt', 'Say something');
    const samples: number[] = [];
    await page.click('#try-send');
    // Sample the output's length while the answer streams (12 tokens, 40 ms apart).
    const deadline = Date.now() + 5_000;
    while (Date.now() < deadline) {
      const [length, done] = await js<[number, boolean]>(`[document.getElementById('try-output').textContent.length, /^Done/.test(document.getElementById('try-meta').textContent)]`);
      samples.push(length);
      if (done) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const final = samples[samples.length - 1];
    assert.ok(final > 0, 'some text arrived');
    assert.ok(samples.some((n) => n > 0 && n < final), `text grew in steps before the end (samples: ${samples.join(',')})`);
    assert.match(await text('#try-meta'), /^Done · run \S+ · provider /);
    await shot('try-it', '#try');
  });

  test('try-it: Stop mid-stream says Stopped, and a stream cut by an error says Failed, neither "Done"', async () => {
    await page.select('#try-model', ALIAS);
    // Stop pressed in the same turn the first token shows: eleven more are 40 ms apart, so the answer is far from whole.
    await js(`(() => {
      const output = document.getElementById('try-output');
      const observer = new MutationObserver(() => {
        if (output.textContent === '') return;
        observer.disconnect();
        document.getElementById('try-stop').click();
      });
      observer.observe(output, { childList: true, characterData: true, subtree: true });
    })()`);
    await page.click('#try-send');
    await until(`!document.getElementById('try-send').disabled && document.getElementById('try-output').textContent !== ''`);
    assert.match(await text('#try-meta'), /^Stopped\b/);
    // The provider resets the connection after the first bytes: the edge ends the stream with an error event.
    mock.misbehave({ fail: 'reset-mid-stream', count: 1 });
    await page.click('#try-send');
    await until(`!document.getElementById('try-send').disabled && /\\[error: /.test(document.getElementById('try-output').textContent)`);
    assert.match(await text('#try-meta'), /^Failed\b.* · run \S+/);
  });

  test('a try-it request refused for its API key says so; the operator stays logged in', async () => {
    refuseNextTry = true;
    await setValue('#try-key', 'sk-wrong');
    await page.click('#try-send');
    await until(`/^HTTP 401: invalid_api_key/.test(document.getElementById('try-meta').textContent)`);
    assert.equal(await js<string | null>(`sessionStorage.getItem('edge-admin-token')`), TOKEN, 'the admin token is kept');
    assert.equal(await js<boolean>(`document.getElementById('login')?.hidden ?? true`), true, 'the login form stays hidden');
    await setValue('#try-key', '');
  });

  test('the page never makes the edge build run events; live runs off stops the runs poll, nodes stay live; back on, runs return', async () => {
    const subscribers = async (): Promise<{ runs: boolean }[]> => {
      const res = await fetch(`${edge.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${TOKEN}` } });
      return ((await res.json()) as { events: { subscribers: { runs: boolean }[] } }).events.subscribers;
    };
    const chat = async (): Promise<string> => {
      const res = await fetch(`${edge.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }) });
      await res.text();
      return res.headers.get('x-edge-run-id') as string;
    };
    // An open page subscribes for node events only: per-request events cost the data path, a poll does not.
    assert.deepEqual((await subscribers()).map((s) => s.runs), [false]);
    const polls: string[] = [];
    const onRequest = (request: { url(): string }): void => {
      if (request.url().includes('/admin/runs')) polls.push(request.url());
    };
    page.on('request', onRequest);
    try {
      await page.click('#live-runs');
      await new Promise((resolve) => setTimeout(resolve, 1_200)); // a poll already on its way may land
      const before = polls.length;
      const unseen = await chat();
      // Node events still arrive: a drain shows at once.
      await page.click(`tr[data-node="${NODE_ID}"] button[data-action="drain"]`);
      await page.waitForSelector(`tr[data-node="${NODE_ID}"][data-state="draining"]`, { timeout: 2_000 });
      await page.click(`tr[data-node="${NODE_ID}"] button[data-action="undrain"]`);
      await page.waitForSelector(`tr[data-node="${NODE_ID}"][data-state="connected"]`, { timeout: 2_000 });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      assert.equal(polls.length, before, 'no runs poll while live runs is off');
      assert.equal(await page.$(`tr[data-run="${unseen}"]`), null, 'the run sent while off is not shown');
      await page.click('#live-runs');
      await page.waitForSelector(`tr[data-run="${unseen}"]`, { timeout: 2_500 });
      assert.ok(polls.length > before, 'polling resumed');
      assert.ok(polls.every((url) => url.endsWith('/admin/runs?limit=50')), polls.join(', '));
      // Off across a reload: the page still shows the runs as they were when it loaded, not "No runs yet".
      await page.click('#live-runs');
      await page.reload();
      await page.waitForSelector('#main', { visible: true });
      assert.equal(await js(`document.getElementById('live-runs').checked`), false);
      await page.waitForSelector(`tr[data-run="${unseen}"]`, { timeout: 2_500 });
      assert.equal(await js(`document.getElementById('runs-empty').hidden`), true);
      await page.click('#live-runs');
    } finally {
      page.off('request', onRequest);
    }
  });

  /**
   * What the runs table cuts that it must not: a number's unit (the numeric cells have no ellipsis worth reading) or
   * the Cancel button. Each numeric column is also tried with the widest text it can show (format.ts), in a copy of
   * a real row measured and removed within this one evaluation. Columns are found by their header, not their place.
   */
  const runsCutJs = `(() => {
    const table = document.querySelector('table.runs');
    const row = table.tBodies[0].rows[0];
    if (row === undefined) return ['no runs to measure'];
    const names = Array.from(table.tHead.rows[0].cells, (th) => th.textContent);
    const widest = { Status: '200', Queue: '59 min 59 s', Total: '59 min 59 s', Sent: '1023.9 KiB' };
    const copy = row.cloneNode(true);
    row.after(copy);
    for (const [name, text] of Object.entries(widest)) copy.cells[names.indexOf(name)].textContent = text;
    const cut = [];
    for (const r of [row, copy]) {
      for (const c of r.cells) if (c.classList.contains('num') && c.scrollWidth > c.clientWidth) cut.push(c.textContent);
      const button = r.querySelector('button[data-action="cancel"]');
      const b = button.getBoundingClientRect(), cell = button.parentElement.getBoundingClientRect();
      if (b.left < cell.left || b.right > cell.right) cut.push('the Cancel button');
    }
    copy.remove();
    return cut;
  })()`;

  /** Every row's action button (Drain, Reset, Runs, Cancel) its cell cuts: each column must hold its button whole. */
  const buttonsCutJs = `Array.from(document.querySelectorAll('tbody button')).filter((button) => {
    const b = button.getBoundingClientRect(), cell = button.parentElement;
    const c = cell.getBoundingClientRect(), style = getComputedStyle(cell);
    return b.left < c.left + parseFloat(style.paddingLeft) - 0.5 || b.right > c.right - parseFloat(style.paddingRight) + 0.5;
  }).map((button) => button.closest('table').classList[1] + ': ' + button.textContent)`;

  test('the views at 1280×800 and at phone width', async () => {
    if (SHOTS !== undefined) {
      // A little traffic for the charts (the series samples every 5 s).
      for (let i = 0; i < 3; i++) {
        await Promise.all(Array.from({ length: 8 }, () => fetch(`${edge.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }) }).then((r) => r.text())));
        await new Promise((resolve) => setTimeout(resolve, 5_200));
      }
      await js("window.scrollTo(0, 0); document.activeElement?.blur(); document.querySelectorAll('.scroll').forEach((e) => { e.scrollLeft = 0; })");
      await page.waitForSelector('#chart-rps polyline');
      await shot('overview');
      // isMobile reloads the page: wait for the console to be back with its charts.
      await page.setViewport({ width: 390, height: 844, isMobile: true });
      await page.waitForSelector('#chart-rps polyline');
      // The runs come from their own poll, which may answer after the charts.
      await page.waitForSelector('#runs-body tr');
      await js('window.scrollTo(0, 0)');
      await shot('phone');
      await page.setViewport({ width: 1280, height: 800 });
    }
    // Nothing overflows the page horizontally at phone width (tables scroll inside their panel).
    await page.setViewport({ width: 390, height: 844 });
    const overflowJs = 'document.documentElement.scrollWidth - document.documentElement.clientWidth';
    await until(`${overflowJs} <= 0`, 3_000).catch(async () => assert.fail(`page is ${await js<number>(overflowJs)} px wider than a phone`));
    // Leaving isMobile (the screenshots' phone view) reloads the page: its runs come with their first poll.
    await page.waitForSelector('#runs-body tr');
    assert.deepEqual(await js<string[]>(runsCutJs), [], 'runs table cells cut at phone width');
    await page.waitForSelector('#nodes-body button');
    assert.deepEqual(await js<string[]>(buttonsCutJs), [], 'row buttons cut at phone width');
    await page.setViewport({ width: 1280, height: 800 });
    assert.deepEqual(await js<string[]>(runsCutJs), [], 'runs table cells cut at 1280×800');
    assert.deepEqual(await js<string[]>(buttonsCutJs), [], 'row buttons cut at 1280×800');
    // Every y-axis label is inside its chart ("0.50 req/s" was cut to ".50 req/s" at the left edge).
    const cutJs = `Array.from(document.querySelectorAll('svg text.axis')).filter((t) => t.getBBox().x < 0).map((t) => t.textContent)`;
    await until(`document.querySelectorAll('svg text.axis').length > 0`);
    assert.deepEqual(await js<string[]>(cutJs), [], 'axis labels cut at the chart edge');
    // Whatever the data: the widest y-axis labels each unit can get (a p95 of 1000 ms was cut by two pixels).
    const widest = await js<string[]>(`(async () => {
      const { drawChart } = await import('/console/chart.js');
      const cut = [];
      for (const [max, unit] of [[1000, 'ms'], [50000, 'ms'], [200000, 'ms'], [0.5, 'req/s'], [20000, 'req/s']]) {
        const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
        svg.style.width = '600px';
        document.body.append(svg);
        const now = Date.now();
        drawChart(svg, [now - 1000, now], [{ name: 'p95', className: 'k1', values: [max / 2, max] }], unit, 900000, now);
        for (const t of svg.querySelectorAll('text.axis')) if (t.getBBox().x < 0) cut.push(t.textContent);
        svg.remove();
      }
      return cut;
    })()`);
    assert.deepEqual(widest, [], 'axis labels cut at the chart edge, for the widest values');
    // A narrow column cuts a long id short: the whole of it is the cell's title.
    assert.equal(await js(`document.querySelector('tr[data-node] > *').title`), NODE_ID);
    // The provider row names the API the provider speaks.
    const expected = ['gpu-1-mock', NODE_ID, 'ok', 'OpenAI', '0 / 4'];
    const providerJs = `JSON.stringify(Array.from(document.querySelector('tr[data-provider]').cells).slice(0, 5).map((c) => c.textContent))`;
    await until(`${providerJs} === ${JSON.stringify(JSON.stringify(expected))}`, 5_000).catch(async () => assert.deepEqual((await cellsOf('tr[data-provider]')).slice(0, 5), expected));
  });

  test('the model queues cut no number, at phone width nor beside the nodes at 1280×800', async () => {
    // Each number column tried with the widest text it shows in a busy edge, in a copy of a real row, as the runs'.
    const queuesCutJs = `(() => {
      const table = document.querySelector('table.queues');
      const row = table.tBodies[0].rows[0];
      if (row === undefined) return ['no queue to measure'];
      const names = Array.from(table.tHead.rows[0].cells, (th) => th.textContent);
      const widest = { Depth: '999 / 1000', 'Oldest wait': '59 min 59 s', Rejects: '999 /min', Timeout: '5 min 0 s' };
      const copy = row.cloneNode(true);
      row.after(copy);
      for (const [name, text] of Object.entries(widest)) copy.cells[names.indexOf(name)].textContent = text;
      const cut = [];
      for (const r of [table.tHead.rows[0], row, copy]) for (const c of r.cells) if ((c.classList.contains('num') || r === table.tHead.rows[0]) && c.scrollWidth > c.clientWidth) cut.push(c.textContent);
      copy.remove();
      return cut;
    })()`;
    await page.waitForSelector('#queues-body tr');
    await page.setViewport({ width: 390, height: 844 });
    assert.deepEqual(await js<string[]>(queuesCutJs), [], 'queue cells cut at phone width');
    await page.setViewport({ width: 1280, height: 800 });
    assert.deepEqual(await js<string[]>(queuesCutJs), [], 'queue cells cut at 1280×800');
    assert.equal(await js(`(() => { const s = document.querySelector('table.queues').parentElement; return s.scrollWidth - s.clientWidth; })()`), 0, 'the queues need no scrolling at 1280×800');
  });

  test('a page left open does not pile up listeners, and its charts follow the edge\'s clock, not a skewed browser\'s', async () => {
    const second = await browser.newPage();
    try {
      // This browser's clock runs 20 minutes ahead; abort listeners are counted as they come and go.
      await second.evaluateOnNewDocument(`(() => {
        sessionStorage.setItem('edge-admin-token', ${JSON.stringify(TOKEN)});
        const realNow = Date.now;
        Date.now = () => realNow() + 20 * 60_000;
        window.__abortListeners = 0;
        const add = EventTarget.prototype.addEventListener;
        const remove = EventTarget.prototype.removeEventListener;
        const live = new WeakMap();
        EventTarget.prototype.addEventListener = function (type, listener, options) {
          if (this instanceof AbortSignal && type === 'abort' && !(live.get(this)?.has(listener))) {
            if (!live.has(this)) live.set(this, new Set());
            live.get(this).add(listener);
            window.__abortListeners++;
          }
          return add.call(this, type, listener, options);
        };
        EventTarget.prototype.removeEventListener = function (type, listener, options) {
          if (this instanceof AbortSignal && type === 'abort' && live.get(this)?.delete(listener)) window.__abortListeners--;
          return remove.call(this, type, listener, options);
        };
      })()`);
      await second.goto(`${edge.adminUrl}/console`);
      await second.waitForSelector('#main', { visible: true });
      await second.waitForSelector('#chart-rps polyline', { timeout: 7_000 }).catch(() => assert.fail('no line on the chart: its points were placed by the browser\'s clock'));
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const early = (await second.evaluate('window.__abortListeners')) as number;
      await new Promise((resolve) => setTimeout(resolve, 4_000)); // four runs polls, two status polls
      const later = (await second.evaluate('window.__abortListeners')) as number;
      assert.ok(later - early <= 2, `abort listeners went from ${early} to ${later} in 4 s`);
    } finally {
      await second.close();
    }
  });

  test('a node, then the edge, going away: the page says so and what to do; logout ends the session', async () => {
    await agent?.stop();
    agent = undefined;
    await page.waitForSelector(`tr[data-node="${NODE_ID}"][data-state="offline"]`, { timeout: 2_000 });
    assert.match(await text(`tr[data-node="${NODE_ID}"] td`), /start its node agent/);
    await edge.close();
    await page.waitForSelector('#conn[data-state="warn"], #conn[data-state="down"]', { timeout: 5_000 });
    await until(`!document.getElementById('banner').hidden`);
    assert.match(await text('#banner'), /(disconnected|does not answer).*(running|Retrying|Reconnecting)/i);
    await page.click('#logout');
    await page.waitForSelector('#login-form', { visible: true });
    assert.equal(await js(`sessionStorage.getItem('edge-admin-token')`), null);
  });
});

// A second stack: two providers behind one alias (so one can be ejected) on
// fixed ports once started (so the edge can go away and come back where the
// open page expects it).
describe('operator console: a first visit, a provider reset, the edge going away and back', { skip: existsSync(CHROMIUM) ? false : `no ${CHROMIUM}` }, () => {
  let mock: MockProvider;
  let edge: RunningEdge;
  let agent: NodeAgent;
  let browser: Browser;
  let page: Page;
  let raw: Record<string, unknown>;
  /** Every answer of 400 or more, and every failed request, the page has seen (what its devtools list in red). */
  const failures: string[] = [];

  const js = <T>(expression: string): Promise<T> => page.evaluate(expression) as Promise<T>;
  const admin = async (path: string, init: RequestInit = {}): Promise<Response> => fetch(`${edge.adminUrl}${path}`, { ...init, headers: { authorization: `Bearer ${TOKEN}` } });
  const subscribers = async (): Promise<number> => ((await (await admin('/admin/status')).json()) as { events: { subscribers: unknown[] } }).events.subscribers.length;
  const health = async (provider: string): Promise<string | undefined> =>
    ((await (await admin('/admin/status')).json()) as { providers: { id: string; health: string }[] }).providers.find((p) => p.id === provider)?.health;
  /** Logged in, whatever an earlier test left: each test below stands on its own. */
  const loggedIn = async (): Promise<void> => {
    if (page.url().endsWith('/console') && (await js<boolean>(`!document.getElementById('main').hidden`))) return;
    if (!page.url().endsWith('/console')) await page.goto(`${edge.adminUrl}/console`);
    await js(`sessionStorage.setItem('edge-admin-token', ${JSON.stringify(TOKEN)})`);
    await page.reload();
    await page.waitForSelector('#main', { visible: true });
  };
  /** Polls the edge's own answer (not the page) until it holds. */
  const eventually = async (what: string, check: () => Promise<boolean>, timeout = 5_000): Promise<void> => {
    const deadline = Date.now() + timeout;
    while (!(await check().catch(() => false))) {
      if (Date.now() > deadline) assert.fail(`not within ${timeout} ms: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  before(async () => {
    mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
    raw = {
      listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
      admin: { host: '127.0.0.1', port: 0, token: TOKEN },
      heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
      workers: { count: testWorkers() },
      nodes: [{ id: NODE_ID, token: NODE_TOKEN, providers: [{ id: 'a-bad', capacity: 4 }, { id: 'b-good', capacity: 4 }] }],
      models: [{ alias: ALIAS, providers: { 'a-bad': 'served-a-bad', 'b-good': 'served-b-good' } }],
    };
    edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger(), admin: true });
    // The same ports from now on: a restarted edge is where the page and the agent look for it.
    raw.listen = { http: { host: '127.0.0.1', port: edge.httpPort }, grpc: { host: '127.0.0.1', port: edge.grpcPort } };
    raw.admin = { host: '127.0.0.1', port: edge.adminPort, token: TOKEN };
    agent = await startRegisteredAgent({
      edge: { address: `127.0.0.1:${edge.grpcPort}` },
      node: { id: NODE_ID, token: NODE_TOKEN },
      providers: ['a-bad', 'b-good'].map((id) => ({ id, type: 'openai_compat', base_url: mock.url })),
      reconnect: { initial_ms: 50, max_ms: 200 },
    });
    browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'], headless: true });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
    page.on('response', (response) => {
      if (response.status() >= 400) failures.push(`${response.status()} ${response.url()}`);
    });
    page.on('requestfailed', (request) => void failures.push(`${request.failure()?.errorText ?? 'failed'} ${request.url()}`));
  });

  after(async () => {
    await browser?.close();
    await agent?.stop();
    await edge?.close();
    await mock?.close();
  });

  test('a first visit asks for the token without a failed request; logging in makes none either', async () => {
    await page.goto(`${edge.adminUrl}/console`);
    await page.waitForSelector('#login-form', { visible: true });
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // whatever the page asks for by itself has answered
    assert.deepEqual(failures, [], 'requests that failed while the page loaded');
    assert.equal(await js(`document.getElementById('login-error').textContent`), '');
    await page.type('#token', TOKEN);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#main', { visible: true });
    await page.waitForSelector('#conn[data-state="ok"]');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.deepEqual(failures, [], 'requests that failed once logged in');
  });

  test('an ejected provider has a Reset button: pressed, the page confirms it and shows the provider ok, as the edge does', async () => {
    // Five failures in a row eject 'a-bad' (it sorts first, so it takes every request until then).
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${edge.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-mock-fail': 'status:500' },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.arrayBuffer();
      await waitUntil(() => inFlight(edge) === 0, 'the lease to be released');
    }
    assert.equal(await health('a-bad'), 'ejected');
    await loggedIn();
    const row = 'tr[data-provider="a-bad"]';
    const button = `${row} button[data-action="reset"]`;
    await page.waitForSelector(`${button}:enabled`, { visible: true, timeout: 5_000 });
    assert.equal(await js(`document.querySelector('${row}').cells[2].textContent`), 'ejected');
    assert.equal(await js(`document.querySelector('tr[data-provider="b-good"] button[data-action="reset"]').disabled`), true, 'nothing to reset on a healthy provider');
    await page.click(button);
    await page.waitForFunction(`/provider a-bad reset; it takes requests again/.test(document.getElementById('providers-note')?.textContent ?? '')`, { timeout: 3_000 });
    await page.waitForFunction(`document.querySelector('${row}').cells[2].textContent === 'ok'`, { timeout: 3_000 });
    assert.equal(await js(`document.querySelector('${button}').disabled`), true, 'nothing left to reset');
    assert.equal(await health('a-bad'), 'ok');
    assert.equal(await js(`document.getElementById('banner').hidden`), true);
  });

  test('the edge closing every event stream: the page subscribes again within 5 s', async () => {
    await loggedIn();
    await eventually('the page to hold one event stream', async () => (await subscribers()) === 1);
    edge.events.closeAll();
    assert.equal(await subscribers(), 0);
    await eventually('the page to subscribe again', async () => (await subscribers()) === 1);
    await page.waitForSelector('#conn[data-state="ok"]', { timeout: 5_000 });
  });

  test('an event stream the edge refuses (every slot taken) shows the edge\'s reason, not "check that the edge is running"', async () => {
    await loggedIn();
    // Logged out, the page holds no stream (a page navigated away may keep its socket a while).
    await page.click('#logout');
    await eventually('the page to let go of its stream', async () => (await subscribers()) === 0);
    // Every slot the edge has (64), held by other readers, as by other console tabs.
    const others = new AbortController();
    const held = await Promise.all(Array.from({ length: 64 }, () => fetch(`${edge.adminUrl}/admin/events?runs=0`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: others.signal })));
    try {
      assert.deepEqual([...new Set(held.map((r) => r.status))], [200]);
      await loggedIn();
      await page.waitForFunction(`/too_many_subscribers/.test(document.getElementById('banner').textContent)`, { timeout: 5_000 }).catch(async () =>
        assert.fail(`banner: ${await js<string>(`document.getElementById('banner').textContent`)}`));
      const shown = await js<string>(`document.getElementById('banner').textContent`);
      assert.match(shown, /HTTP 503 too_many_subscribers: 64 event streams are open already; close one/);
      assert.doesNotMatch(shown, /check that the edge is running/, 'the edge answered: it is running');
      assert.equal(await js(`document.getElementById('conn').dataset.state`), 'warn');
    } finally {
      others.abort();
    }
    await page.waitForSelector('#conn[data-state="ok"]', { timeout: 5_000 });
    await page.waitForFunction(`document.getElementById('banner').hidden`, { timeout: 3_000 });
  });

  test('a console left for another page holds no event stream slot; back, it is live again', async () => {
    await loggedIn();
    await page.waitForSelector('#conn[data-state="ok"]', { timeout: 5_000 });
    assert.equal(await subscribers(), 1);
    await page.goto(`${edge.adminUrl}/metrics`);
    await eventually('the page left to let go of its stream', async () => (await subscribers()) === 0);
    await page.goBack();
    await page.waitForSelector('#conn[data-state="ok"]', { timeout: 5_000 });
    await eventually('the page back to subscribe again', async () => (await subscribers()) === 1);
  });

  test('an edge that stops answering (stopped, or cut off by the network) is "edge unreachable" once a poll goes 5 s unanswered, not "live"; back, live again', async () => {
    // A relay in front of the admin listener that can hold every byte both ways, as a lost network or a stopped
    // process does: connections stay open and nothing comes back.
    let held: [Socket, Buffer][] | null = null;
    const sockets = new Set<Socket>();
    const relay = createServer((client) => {
      const upstream = connect(Number(new URL(edge.adminUrl as string).port), '127.0.0.1');
      for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
        sockets.add(from);
        from.on('data', (chunk: Buffer) => (held === null ? to.write(chunk) : held.push([to, chunk])));
        from.on('error', () => undefined);
        from.on('close', () => {
          sockets.delete(from);
          to.destroy();
        });
      }
    });
    relay.listen(0, '127.0.0.1');
    await once(relay, 'listening');
    const other = await browser.newPage();
    try {
      await other.goto(`http://127.0.0.1:${(relay.address() as { port: number }).port}/console`);
      await other.waitForSelector('#login-form', { visible: true });
      await other.type('#token', TOKEN);
      await other.keyboard.press('Enter');
      await other.waitForSelector('#conn[data-state="ok"]', { timeout: 5_000 });
      held = [];
      await other.waitForSelector('#conn[data-state="down"]', { timeout: 15_000 }).catch(async () =>
        assert.fail(`the pill still says ${await other.evaluate('document.getElementById("conn").textContent')}`));
      assert.match((await other.evaluate(`document.getElementById("banner").textContent`)) as string, /does not answer \(no answer within 5 s\)/);
      const waiting: [Socket, Buffer][] = held;
      held = null;
      for (const [to, chunk] of waiting) if (!to.destroyed) to.write(chunk);
      await other.waitForSelector('#conn[data-state="ok"]', { timeout: 5_000 });
    } finally {
      await other.close();
      for (const socket of sockets) socket.destroy();
      relay.close();
    }
  });

  test('the edge going away: one steady "edge unreachable"; back, the page is live again by itself', async () => {
    await loggedIn();
    await page.waitForSelector('#conn[data-state="ok"]', { timeout: 5_000 });
    // Every text the connection pill shows, in order.
    await js(`(() => {
      const pill = document.getElementById('conn');
      window.__conn = [pill.textContent];
      new MutationObserver(() => { if (window.__conn.at(-1) !== pill.textContent) window.__conn.push(pill.textContent); }).observe(pill, { childList: true, characterData: true, subtree: true });
    })()`);
    await edge.close();
    await page.waitForSelector('#conn[data-state="down"]', { timeout: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 6_000)); // three retries of each source
    const shown = await js<string[]>('window.__conn');
    const first = shown.indexOf('edge unreachable');
    assert.ok(first > 0, `the pill said: ${shown.join(' → ')}`);
    assert.deepEqual(shown.slice(first), ['edge unreachable'], `once unreachable, the pill kept saying so: ${shown.join(' → ')}`);
    assert.match(await js<string>(`document.getElementById('banner').textContent`), /does not answer/);

    edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger(), admin: true });
    // "live" means the event stream is open again, not just that a status poll answered.
    await page.waitForSelector('#conn[data-state="ok"]', { timeout: 6_000 });
    assert.equal(await subscribers(), 1, 'live, and subscribed to the restarted edge');
    await page.waitForFunction(`document.getElementById('banner').hidden`, { timeout: 3_000 });
    // The agent dials the restarted edge too: its node event reaches the page.
    await page.waitForSelector(`tr[data-node="${NODE_ID}"][data-state="connected"]`, { timeout: 5_000 });
    assert.equal(await js(`document.getElementById('main').hidden`), false, 'still logged in');
  });
});

describe('operator console: a provider out of rotation says why', { skip: existsSync(CHROMIUM) ? false : `no ${CHROMIUM}` }, () => {
  let mock: MockProvider;
  let edge: RunningEdge;
  let agent: NodeAgent;
  let browser: Browser;
  let page: Page;

  const js = <T>(expression: string): Promise<T> => page.evaluate(expression) as Promise<T>;
  const health = async (): Promise<Record<string, string>> => {
    const res = await fetch(`${edge.adminUrl}/admin/status`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return Object.fromEntries(((await res.json()) as { providers: { id: string; health: string }[] }).providers.map((p) => [p.id, p.health]));
  };
  const cellOf = (provider: string): Promise<{ text: string; title: string }> =>
    js(`(() => { const c = document.querySelector('tr[data-provider="${provider}"]').cells[2]; return { text: c.textContent, title: c.title }; })()`);
  const nodeConfig = (retyped: string): Record<string, unknown> => ({
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    admin: { host: '127.0.0.1', port: 0, token: TOKEN },
    heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
    workers: { count: testWorkers() },
    nodes: [{
      id: NODE_ID,
      token: NODE_TOKEN,
      providers: [
        { id: 'p-ok', capacity: 2 },
        { id: 'p-off', capacity: 2, enabled: false },
        { id: 'p-unannounced', capacity: 2 },
        { id: 'p-retyped', type: retyped, capacity: 2 },
        { id: 'p-sick', capacity: 2 },
      ],
    }],
    models: [{ alias: ALIAS, providers: { 'p-ok': 'm', 'p-off': 'm', 'p-unannounced': 'm', 'p-retyped': 'm', 'p-sick': 'm' } }],
  });

  before(async () => {
    mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
    edge = await startEdge(parseEdgeConfig(nodeConfig('openai_compat'), 'test'), { logger: silentLogger(), admin: true });
    // The agent runs all but p-unannounced, and probes p-sick where the mock answers 404.
    agent = await startRegisteredAgent({
      edge: { address: `127.0.0.1:${edge.grpcPort}` },
      node: { id: NODE_ID, token: NODE_TOKEN },
      health: { interval_ms: 200, unhealthy_after: 1 },
      providers: [
        ...['p-ok', 'p-off', 'p-retyped'].map((id) => ({ id, type: 'openai_compat', base_url: mock.url })),
        { id: 'p-sick', type: 'openai_compat', base_url: mock.url, health_path: '/no-such-path' },
      ],
      reconnect: { initial_ms: 50, max_ms: 200 },
    });
    browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'], headless: true });
    page = await browser.newPage();
    await page.goto(`${edge.adminUrl}/console`);
    await js(`sessionStorage.setItem('edge-admin-token', ${JSON.stringify(TOKEN)})`);
    await page.reload();
    await page.waitForSelector('#main', { visible: true });
  });

  after(async () => {
    await browser?.close();
    await agent?.stop();
    await edge?.close();
    await mock?.close();
  });

  test('disabled, not announced, unhealthy by probe and draining each carry a reason, not just the health word', async () => {
    // A refresh makes p-retyped a cli provider while its agent runs it as openai_compat: out, as not announced.
    const res = await fetch(`${edge.adminUrl}/admin/config/refresh`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'apply', config: JSON.stringify(nodeConfig('cli')) }),
    });
    assert.equal(((await res.json()) as { status: string }).status, 'applied');
    const expected = { 'p-ok': 'ok', 'p-off': 'disabled', 'p-unannounced': 'not_announced', 'p-retyped': 'not_announced', 'p-sick': 'unhealthy' };
    await waitFor(async () => JSON.stringify(await health()) === JSON.stringify(Object.fromEntries(Object.keys(expected).sort().map((k) => [k, expected[k as keyof typeof expected]]))), 'the edge to see each provider so');
    await page.waitForFunction(`document.querySelector('tr[data-provider="p-retyped"]')?.cells[2].textContent === 'not announced' && document.querySelector('tr[data-provider="p-sick"]')?.cells[2].textContent === 'unhealthy'`, { timeout: 5_000 });
    assert.match((await cellOf('p-off')).title, /enabled: false in the edge config/);
    assert.match((await cellOf('p-unannounced')).title, /did not offer it when it registered.*restart the agent/);
    // The agent did announce p-retyped: the reason names the type disagreement, with the edge config's type.
    assert.match((await cellOf('p-retyped')).title, /its type there differs from the edge config's cli/);
    assert.match((await cellOf('p-sick')).title, /health probe of it fails/);
    assert.equal((await cellOf('p-ok')).title, 'ok');

    const drained = await fetch(`${edge.adminUrl}/admin/nodes/${NODE_ID}/drain`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(drained.status, 200);
    await page.waitForFunction(`document.querySelector('tr[data-provider="p-ok"]').cells[2].textContent === 'draining'`, { timeout: 5_000 });
    assert.match((await cellOf('p-ok')).title, new RegExp(`node ${NODE_ID} is draining; Undrain it`));
  });
});
