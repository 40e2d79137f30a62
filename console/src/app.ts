// The operator console: logs in with the admin token (kept in this tab's
// sessionStorage, sent only as a bearer header), then keeps the page live
// from five sources: the /admin/events stream (node events only, read with
// fetch() because EventSource cannot send a header), /admin/status every
// 2 s, /admin/runs every second, /admin/series every 5 s for the charts and
// /admin/keys every 5 s for the API keys.
// Runs are polled, not streamed: a stream would make the edge build and
// serialise two events per request for as long as the page is open, a cost
// that grows with load; a poll of the newest 50 records costs the same at
// 10 req/s as at 10,000 (bench/console-cost.ts measures it). Tables are
// updated in place, cell by cell, so focus and layout stay put as numbers
// change.
import { drawChart } from './chart.js';
import { bytes, clock, count, ms, percent, rate, uptime } from './format.js';
import { readSse } from './sse.js';

const TOKEN_KEY = 'edge-admin-token';
const LIVE_RUNS_KEY = 'edge-console-live-runs';
const STATUS_EVERY_MS = 2_000;
const SERIES_EVERY_MS = 5_000;
/** As the charts: each read gathers every I/O worker's counters. */
const KEYS_EVERY_MS = 5_000;
const RUNS_EVERY_MS = 1_000;
const EVENTS_RETRY_MS = 2_000;
const MAX_RUNS = 50;
const SPAN_MS = 15 * 60_000;

// --- shapes of the admin API (only what the page reads) -------------------------

interface NodeRow { id: string; connected: boolean; generation: number; agentVersion: string | null; draining: boolean; openTunnels: number; configured: boolean; lanes?: number; heartbeatAgeMs?: number | null }
interface ProviderRow { id: string; node: string; capacity: number; inFlight: number; queued: number; loadRatio: number; health: string; servedModels: string[]; type?: string | null; outlier?: { phase: string; until?: string | null; reason?: string; ejections?: number } | null; overload?: { limit: number; heldUntil: string | null } | null }
interface GroupFairness {
  bands: { priority: number; queued: number; tenants: { tenant: string; queued: number }[] }[];
  tenants: { tenant: string; dispatched: number; share: number }[];
}
interface GroupRow { model: string; queueDepth: number; maxQueue: number; queueTimeoutMs: number; oldestWaitMs?: number; rejectsPerMinute?: number; policy?: string; fairness?: GroupFairness }

/** Fair queuing in one cell: depth per band and tenant, then each tenant's share of dispatches (docs/scheduling.md). */
function fairnessText(g: GroupRow): string {
  if (g.fairness === undefined) return g.policy ?? 'fifo';
  const bands = g.fairness.bands.map((b) => `p${b.priority}: ${b.tenants.map((t) => `${t.tenant} ${t.queued}`).join(', ')}`);
  const shares = g.fairness.tenants.map((t) => `${t.tenant} ${Math.round(t.share * 100)}%`).join(', ');
  return ['fair', ...bands, shares === '' ? '' : `shares ${shares}`].filter((s) => s !== '').join(' · ');
}
interface Status { edge: { version: string; uptimeSeconds: number; configVersion: number; openRequests: number; shuttingDown: boolean }; nodes: NodeRow[]; providers: ProviderRow[]; groups: GroupRow[] }
interface SeriesPoint { t: number; reqPerSec: number; ttfbP50Ms: number | null; ttfbP95Ms: number | null; queueP50Ms: number | null; queueP95Ms: number | null }
/** A record of GET /admin/runs, as far as the page reads it. */
interface Run { id: string; model: string; key?: string | null; provider: string | null; state: 'queued' | 'running' | 'finished'; outcome: string | null; status: number | null; queueMs: number | null; totalMs: number | null; bytesOut: number }
/** A key of GET /admin/keys, as far as the page reads it. */
interface KeyRow { name: string; configured: boolean; models: string[] | null; maxConcurrent: number | null; requestsPerMinute?: number | null; tokensPerMinute?: number | null; requestsLeft?: number | null; tokensLeft?: number | null; inFlight: number; requests: { total: number; errors: number; byStatus: Record<string, number> }; tokens: { prompt: number; completion: number } }
interface Change { path: string; old: unknown; new: unknown; mutable: boolean; effect: string }
/** A concerned node's answer to an apply: applied, restart_required, failed, timeout, not_connected, unsupported. */
interface NodeRefresh { node: string; status: string; message: string }
interface RefreshResult { mode: string; status: string; rejection: string | null; sourceDigest: string | null; applicable: boolean; configVersion: number; changes: Change[]; reasons: string[]; notified: { node: string }[]; retired: string[]; nodes?: NodeRefresh[]; certificates?: CertificateReport[] }
interface CertificateReport { listener: string; changed: boolean; subject: string; notAfter: string }

const $ = <T extends Element = HTMLElement>(id: string): T => document.getElementById(id) as unknown as T;

class Unauthorized extends Error {}

/** A non-2xx answer from the admin API, with its error body's code and message (docs/operations.md). */
class HttpError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

// --- session ------------------------------------------------------------------------

let token: string | null = sessionStorage.getItem(TOKEN_KEY);
let live: AbortController | null = null;
let status: Status | null = null;
/** The newest runs, newest first, as the last poll returned them. */
let runs: Run[] = [];

async function api(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  if (token !== null && token !== '') headers.set('authorization', `Bearer ${token}`);
  const res = await fetch(path, { ...init, headers, cache: 'no-store' });
  // Only the admin's own refusal is about the token: /admin/try passes the client listener's 401 (an API key) through.
  if (res.status === 401 && (res.headers.get('www-authenticate') ?? '').includes('realm="edge-admin"')) throw new Unauthorized('token rejected');
  return res;
}

/**
 * How long a poll or an action waits for its answer. A fetch has no limit of its own, and an edge that
 * is stopped or cut off by the network accepts the connection (or holds it) and answers nothing: the
 * page kept saying "live" over numbers that no longer moved.
 */
const ANSWER_TIMEOUT_MS = 5_000;

/** The body of a 2xx answer; any other status throws HttpError carrying the admin API's own error code and message. */
async function json<T>(path: string, init: RequestInit = {}): Promise<T> {
  const timeout = AbortSignal.timeout(ANSWER_TIMEOUT_MS);
  try {
    return await answer<T>(path, { ...init, signal: timeout });
  } catch (err) {
    if (timeout.aborted && !(err instanceof Unauthorized)) throw new Error(`no answer within ${ANSWER_TIMEOUT_MS / 1000} s`);
    throw err;
  }
}

async function answer<T>(path: string, init: RequestInit): Promise<T> {
  const res = await api(path, init);
  const body = (await res.json().catch(() => undefined)) as (T & { error?: { code?: string; message?: string } }) | undefined;
  if (!res.ok || body === undefined) {
    const error = body?.error;
    throw new HttpError(res.status, error?.code ?? '', error?.message ?? `HTTP ${res.status}${res.statusText === '' ? '' : ` ${res.statusText}`}`);
  }
  return body;
}

function describeFailure(err: unknown): string {
  return err instanceof HttpError ? `HTTP ${err.status}${err.code === '' ? '' : ` ${err.code}`}: ${err.message}` : (err as Error).message;
}

function setConn(text: string, state: 'ok' | 'warn' | 'down' | 'off'): void {
  const pill = $('conn');
  // Set again at each poll: rewritten with the same word, the role=status said it again every 2 s.
  if (pill.textContent !== text) pill.textContent = text;
  pill.dataset.state = state;
}

/** The last status poll failed (the edge down, or failing). */
let statusFailing = false;
/** The event stream: opening (after login), open, or lost and being reopened. */
let eventsState: 'opening' | 'open' | 'lost' = 'opening';

/**
 * The pill, from both live sources at once. Each used to set it on its own
 * schedule: with the edge down the stream's retries said "reconnecting…"
 * and the status poll's "edge unreachable", in turn, every 2 s. And "live"
 * only while the stream is open: a status answer alone misses node events.
 */
function showConn(): void {
  if (live === null) return;
  if (statusFailing) setConn('edge unreachable', 'down');
  else if (eventsState === 'open') setConn('live', 'ok');
  else setConn(eventsState === 'opening' ? 'connecting…' : 'reconnecting…', 'warn');
}

/**
 * One alert, several sources: the status poll and the event stream each
 * clear only their own line when they recover, and an action's failure
 * stays until the next action succeeds or ACTION_BANNER_MS pass.
 */
type BannerSource = 'status' | 'events' | 'action';
const banners = new Map<BannerSource, string>();
const ACTION_BANNER_MS = 20_000;
let actionBannerTimer: ReturnType<typeof setTimeout> | undefined;

function banner(source: BannerSource, text: string | null): void {
  // The same line again (each failed poll, each reconnect try, every 2 s) leaves the alert as it is: rewritten, a
  // screen reader read the role=alert out again each time.
  const same = text !== null && banners.get(source) === text;
  if (text === null) {
    if (!banners.delete(source)) return;
  } else banners.set(source, text);
  if (source === 'action') {
    clearTimeout(actionBannerTimer);
    actionBannerTimer = text === null ? undefined : setTimeout(() => banner('action', null), ACTION_BANNER_MS);
  }
  if (same) return;
  const el = $('banner');
  el.hidden = banners.size === 0;
  el.replaceChildren(...Array.from(banners.values(), (line) => {
    const p = document.createElement('p');
    p.textContent = line;
    return p;
  }));
}

function showLogin(message = ''): void {
  live?.abort();
  live = null;
  $('main').hidden = true;
  $('login').hidden = false;
  $('logout').hidden = true;
  $('login-error').textContent = message;
  setConn('not logged in', 'off');
  $('token').focus();
}

/** Only the latest login attempt decides: an older one answering late (the page's first probe, a wrong token) is ignored. */
let loginAttempt = 0;

const LOGIN_RETRY_MS = 2_000;

/** A character past U+00FF (a zero-width space or curly quote pasted with the token): no HTTP header can carry it, and fetch() refuses it. */
const NOT_IN_A_HEADER = /[^\u0000-\u00ff]/;

async function login(candidate: string): Promise<void> {
  const attempt = ++loginAttempt;
  if (NOT_IN_A_HEADER.test(candidate)) {
    // Not the edge's verdict, and asking again would fail the same way: said as what it is, once.
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin('That token has a character an HTTP header cannot carry (a stray character pasted with it?). Check admin.token in the edge config.');
    return;
  }
  token = candidate;
  try {
    const first = await json<Status>('/admin/status');
    if (attempt !== loginAttempt) return;
    sessionStorage.setItem(TOKEN_KEY, candidate);
    start(first);
  } catch (err) {
    if (attempt !== loginAttempt) return;
    if (err instanceof Unauthorized) {
      token = null;
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin('That token was rejected. Check admin.token in the edge config.');
      return;
    }
    // Only the edge's refusal says the token is wrong: an edge that is down or failing keeps it, and is asked again.
    showLogin(`The edge did not answer (${describeFailure(err)}). Is it running? Trying again every ${LOGIN_RETRY_MS / 1000} s.`);
    setTimeout(() => {
      if (attempt === loginAttempt) void login(candidate);
    }, LOGIN_RETRY_MS);
  }
}

function logout(): void {
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  // What the operator typed that may be a secret (a client key, a candidate config with tokens) goes with the session:
  // hidden behind the login form, it stayed in the page for whoever uses the tab next.
  trying?.abort();
  ($('try-key') as HTMLInputElement).value = '';
  ($('config-text') as HTMLTextAreaElement).value = '';
  showLogin('Logged out.');
}

function onUnauthorized(): void {
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  showLogin('The edge no longer accepts this token (changed or restarted with another). Log in again.');
}

function start(first: Status): void {
  live?.abort();
  live = new AbortController();
  const signal = live.signal;
  $('login').hidden = true;
  $('main').hidden = false;
  $('logout').hidden = false;
  statusFailing = false;
  eventsState = 'opening';
  // A new session, from the edge's answer to the login: an alert of the one before (the edge not answering, an
  // action that failed) stood beside "live" until the next poll or its own timeout.
  for (const source of Array.from(banners.keys())) banner(source, null);
  lastStatusAt = Date.now();
  renderStatus(first);
  showConn();
  void pollStatus(signal);
  void pollSeries(signal);
  void pollKeys(signal);
  void pollRuns(signal);
  void streamEvents(signal);
  $('main').focus({ preventScroll: true });
}

// --- live sources -------------------------------------------------------------------

/** Resolves after `msec`, or at once on abort; either way its abort listener goes (three loops sleep on one signal for hours). */
const sleep = (msec: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, msec);
    signal.addEventListener('abort', done, { once: true });
  });

async function pollStatus(signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    await sleep(STATUS_EVERY_MS, signal);
    if (signal.aborted) return;
    await refreshStatus();
  }
}

/** When the numbers on the page were last taken from /admin/status. */
let lastStatusAt = Date.now();
/**
 * Counts changes the page applied between polls (a node event, an
 * action's answer). A status answer requested before one of them may
 * predate it: rendered, it would undo what the page already shows until
 * the next poll, so it is dropped.
 */
let liveChanges = 0;

async function refreshStatus(): Promise<void> {
  const seen = liveChanges;
  try {
    const next = await json<Status>('/admin/status');
    statusFailing = false;
    banner('status', null);
    showConn();
    if (seen !== liveChanges) return;
    lastStatusAt = Date.now();
    renderStatus(next);
  } catch (err) {
    if (err instanceof Unauthorized) return onUnauthorized();
    statusFailing = true;
    banner('status', `The edge at ${location.host} does not answer (${describeFailure(err)}). Is it running? Retrying every 2 s; the numbers below are from ${clock(lastStatusAt)} or earlier.`);
    showConn();
  }
}

async function pollSeries(signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      const series = await json<{ points: SeriesPoint[]; now?: number }>('/admin/series');
      // The edge's clock, not this browser's: a skewed laptop would slide every point off the chart.
      renderCharts(series.points, series.now ?? Date.now());
    } catch (err) {
      if (err instanceof Unauthorized) return onUnauthorized();
    }
    await sleep(SERIES_EVERY_MS, signal);
  }
}

async function pollKeys(signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      renderKeys(await json<{ auth: boolean; keys: KeyRow[] }>('/admin/keys'));
    } catch (err) {
      if (err instanceof Unauthorized) return onUnauthorized();
    }
    await sleep(KEYS_EVERY_MS, signal);
  }
}

function liveRuns(): boolean {
  return sessionStorage.getItem(LIVE_RUNS_KEY) !== '0';
}

/** Node events: they change the fleet's state between status polls. Run events are never asked for (see the top). */
async function streamEvents(signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      const res = await api('/admin/events?runs=0', { signal });
      if (!res.ok || res.body === null) {
        // The edge's own reason (503 too_many_subscribers: other tabs hold every stream), not just its status.
        const error = ((await res.json().catch(() => undefined)) as { error?: { code?: string; message?: string } } | undefined)?.error;
        throw new HttpError(res.status, error?.code ?? '', error?.message ?? `HTTP ${res.status}`);
      }
      eventsState = 'open';
      showConn();
      banner('events', null);
      await readSse(res.body, (m) => onEvent(m.event, m.data), signal);
      if (signal.aborted) return;
      throw new Error('stream ended');
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof Unauthorized) return onUnauthorized();
      eventsState = 'lost';
      showConn();
      // An edge that answered is running: its refusal is said as such, not as a lost connection.
      banner('events', err instanceof HttpError
        ? `Live events refused (${describeFailure(err)}). Asking again every 2 s; node changes show with the next status poll meanwhile.`
        : `Live events disconnected (${(err as Error).message}). Reconnecting every 2 s; if this lasts, check that the edge is running.`);
    }
    await sleep(EVENTS_RETRY_MS, signal);
  }
}

/** The runs table's key filter (an API key's name; '' = every run). */
let runsKey = '';
/** Where the next older page of the table starts (the `next` of its last page); null: no older run is kept. */
let runsOlder: string | null = null;
/** Runs the edge keeps (open and finished, every key), from the latest page. */
let runsKept = 0;
/** Bumped by each load of the table: only the latest one's answer is drawn (a poll answered after a click on Older, or one for a key filter since changed, is dropped). */
let runsLoad = 0;

interface RunsPage { runs?: Run[]; next?: string | null; kept?: number }

function runsQuery(key: string, before: string | null): string {
  return `/admin/runs?limit=${MAX_RUNS}${before === null ? '' : `&before=${encodeURIComponent(before)}`}${key === '' ? '' : `&key=${encodeURIComponent(key)}`}`;
}

/** The newest runs (of the filtered key), as the table shows them; redrawn when no later load started meanwhile. */
async function loadRuns(): Promise<void> {
  const load = ++runsLoad;
  const list = await json<RunsPage>(runsQuery(runsKey, null));
  if (Array.isArray(list.runs) && load === runsLoad) {
    runs = list.runs;
    runsOlder = list.next ?? null;
    runsKept = list.kept ?? runsKept;
    renderRuns();
  }
}

/**
 * The next older page, added below the rows shown. Live runs goes off first: its next poll would put the
 * newest page back in their place.
 */
async function loadOlderRuns(): Promise<void> {
  const before = runsOlder;
  if (before === null) return;
  setLiveRuns(false);
  const load = ++runsLoad;
  let page: RunsPage;
  try {
    page = await json<RunsPage>(runsQuery(runsKey, before));
  } catch (err) {
    if (err instanceof Unauthorized) return onUnauthorized();
    if (load !== runsLoad) return;
    // The page's last run was dropped meanwhile (past runs.max_finished): there is no "after it" to ask for.
    const dropped = err instanceof HttpError && err.code === 'run_not_found';
    banner('action', dropped
      ? 'The edge no longer keeps the run the older page started after (runs.max_finished): showing the newest runs again.'
      : `older runs failed: ${describeFailure(err)}`);
    if (dropped) await loadRuns().catch((e: unknown) => (e instanceof Unauthorized ? onUnauthorized() : undefined));
    return;
  }
  if (!Array.isArray(page.runs) || load !== runsLoad) return;
  banner('action', null);
  // A run that finished between the two pages may be listed in both (open above, finished here): shown once, in
  // its row, as this page has it. The row kept the older record, open with its Cancel on, for a finished run.
  const latest = new Map(page.runs.map((r) => [r.id, r]));
  const shown = new Set(runs.map((r) => r.id));
  runs = runs.map((r) => latest.get(r.id) ?? r).concat(page.runs.filter((r) => !shown.has(r.id)));
  runsOlder = page.next ?? null;
  runsKept = page.kept ?? runsKept;
  const button = $('runs-older');
  const hadFocus = document.activeElement === button;
  renderRuns();
  // The oldest page hides the button that had the keyboard's focus: it goes to the count beside it, not to the page's top.
  if (hadFocus && button.hidden) $('runs-shown').focus();
}

function setLiveRuns(on: boolean): void {
  $<HTMLInputElement>('live-runs').checked = on;
  sessionStorage.setItem(LIVE_RUNS_KEY, on ? '1' : '0');
}

/** The newest runs, once a second while "Live runs" is on; off, the table keeps its last view. */
async function pollRuns(signal: AbortSignal): Promise<void> {
  // One poll at login whatever the switch says: "off" keeps the last view, and a page just (re)loaded has none
  // (an empty table would claim "No runs yet").
  let first = true;
  while (!signal.aborted) {
    if (first || liveRuns()) {
      first = false;
      try {
        await loadRuns();
      } catch (err) {
        if (err instanceof Unauthorized) return onUnauthorized();
      }
    }
    await sleep(RUNS_EVERY_MS, signal);
  }
}

function onEvent(type: string, data: string): void {
  let e: Record<string, unknown>;
  try {
    e = JSON.parse(data) as Record<string, unknown>;
  } catch {
    return;
  }
  const node = typeof e.node === 'string' ? status?.nodes.find((n) => n.id === e.node) : undefined;
  switch (type) {
    case 'node.connected':
      // An agent a drain command drained keeps it across reconnects: it registers drained (`drained`), and no node.draining follows.
      if (node) Object.assign(node, { connected: true, generation: e.generation, agentVersion: e.agentVersion, draining: e.drained === true, lanes: Math.max(1, node.lanes ?? 0), heartbeatAgeMs: 0 });
      break;
    case 'node.disconnected':
      // The edge forgets a node's drain when its connection goes (a reconnect starts undrained unless the agent says otherwise).
      if (node && node.generation === e.generation) Object.assign(node, { connected: false, draining: false, lanes: 0, heartbeatAgeMs: null, openTunnels: 0 });
      break;
    case 'node.draining':
    case 'node.undrained':
      if (node) node.draining = type === 'node.draining';
      break;
    default:
      return;
  }
  liveChanges++;
  if (status) renderStatus(status);
}

// --- rendering ----------------------------------------------------------------------

/** Keeps one <tr> per key, creating, updating in place and removing as needed. */
function syncRows<T>(tbody: HTMLTableSectionElement, items: readonly T[], key: (item: T) => string, columns: number, fill: (row: HTMLTableRowElement, cells: HTMLTableCellElement[], item: T) => void): void {
  const existing = new Map<string, HTMLTableRowElement>();
  for (const row of Array.from(tbody.rows)) existing.set(row.dataset.key ?? '', row);
  // Moving a row drops the keyboard focus inside it: given back below, so an operator's Tab + Enter still reaches the button.
  const focused = document.activeElement instanceof HTMLElement && tbody.contains(document.activeElement) ? document.activeElement : null;
  let previous: HTMLTableRowElement | null = null;
  for (const item of items) {
    const k = key(item);
    let row = existing.get(k);
    existing.delete(k);
    if (row === undefined) {
      row = document.createElement('tr');
      row.dataset.key = k;
      for (let i = 0; i < columns; i++) row.append(document.createElement(i === 0 ? 'th' : 'td'));
      (row.cells[0] as HTMLTableCellElement).setAttribute('scope', 'row');
    }
    const wanted: Element | null = previous === null ? tbody.firstElementChild : previous.nextElementSibling;
    if (wanted !== row) tbody.insertBefore(row, wanted);
    fill(row, Array.from(row.cells), item);
    previous = row;
  }
  for (const row of existing.values()) row.remove();
  if (focused !== null && focused.isConnected && document.activeElement !== focused) focused.focus();
}

function set(cell: HTMLElement, text: string, className = ''): void {
  if (cell.textContent !== text) {
    cell.textContent = text;
    // A narrow column cuts the text short (ellipsis): the whole of it on hover.
    cell.title = text;
  }
  if (className !== '' || cell.className !== '') if (cell.className !== className) cell.className = className;
}

function nodeState(n: NodeRow): [string, string] {
  if (!n.connected) return ['offline', 'bad'];
  if (n.draining) return ['draining', 'warn'];
  return ['connected', 'ok'];
}

/**
 * Why a provider takes no (or fewer) requests, in the operator's terms and with what to do
 * (docs/operations.md, Status): the health word alone ("not announced") left them to guess, and a
 * provider whose type the edge config changed under a running agent reads "not announced" although
 * the agent does run it.
 */
function healthReason(p: ProviderRow): string {
  const o = p.outlier;
  switch (p.health) {
    case 'offline': return `offline: node ${p.node} is not connected; start its node agent`;
    case 'not_announced': return `not announced: the agent of node ${p.node} did not offer it when it registered (it is not in the agent's providers[], or its type there differs from the edge config's${p.type ? ` ${p.type}` : ''}); it gets no requests until the agent runs it as configured (restart the agent with it)`;
    case 'disabled': return p.type === null ? 'disabled: gone from the edge config; it finishes its open requests and gets no new ones' : 'disabled: enabled: false in the edge config';
    case 'draining': return `draining: node ${p.node} is draining; Undrain it under Nodes`;
    case 'unhealthy': return `unhealthy: the node agent's health probe of it fails (its health_path, else the type's default); back in rotation once a probe passes`;
    case 'overloaded': return `overloaded: it answered 429/503; held at ${p.overload?.limit ?? '?'} of ${p.capacity} concurrent requests${p.overload?.heldUntil ? ` until ${new Date(p.overload.heldUntil).toLocaleTimeString()}` : ''}`;
  }
  // Why it is out of rotation, and until when: the API's outlier record.
  if (o !== null && o !== undefined && o.phase !== 'healthy') return `${o.phase.replace('_', ' ')}${o.until ? ` until ${new Date(o.until).toLocaleTimeString()}` : ''}${o.reason ? `: ${o.reason}` : ''}${o.ejections ? ` (ejections: ${o.ejections})` : ''}`;
  return p.health.replace('_', ' ');
}

/** Provider types as the API each speaks to its node agent. */
const API_NAMES: Record<string, string> = { openai_compat: 'OpenAI', vllm: 'vLLM (OpenAI)', ollama: 'Ollama', cli: 'CLI' };

function renderStatus(next: Status): void {
  status = next;
  const e = next.edge;
  set($('edge-summary'), `v${e.version} · up ${uptime(e.uptimeSeconds)} · config v${e.configVersion} · ${e.openRequests} open${e.shuttingDown ? ' · SHUTTING DOWN' : ''}`);

  $('nodes-empty').hidden = next.nodes.length > 0;
  syncRows($<HTMLTableSectionElement>('nodes-body'), next.nodes, (n) => n.id, 8, (row, c, n) => {
    const [state, cls] = nodeState(n);
    row.dataset.node = n.id;
    row.dataset.state = state;
    set(c[0], n.id);
    set(c[1], n.connected ? state : 'offline: start its node agent', `state ${cls}`);
    set(c[2], n.generation > 0 ? String(n.generation) : '–', 'num');
    set(c[3], n.lanes === undefined ? '–' : String(n.lanes), 'num');
    set(c[4], String(n.openTunnels), 'num');
    set(c[5], n.agentVersion ?? '–');
    set(c[6], n.heartbeatAgeMs === null || n.heartbeatAgeMs === undefined ? '–' : ms(n.heartbeatAgeMs), 'num');
    let button = c[7].querySelector('button');
    if (button === null) {
      button = document.createElement('button');
      button.type = 'button';
      button.addEventListener('click', () => void toggleDrain(n.id));
      c[7].append(button);
    }
    button.disabled = !n.connected;
    const label = n.draining ? 'Undrain' : 'Drain';
    if (button.textContent !== label) button.textContent = label;
    button.setAttribute('aria-label', `${label} node ${n.id}`);
    button.dataset.action = n.draining ? 'undrain' : 'drain';
  });

  $('providers-empty').hidden = next.providers.length > 0;
  syncRows($<HTMLTableSectionElement>('providers-body'), next.providers, (p) => p.id, 9, (row, c, p) => {
    row.dataset.provider = p.id;
    set(c[0], p.id);
    set(c[1], p.node);
    set(c[2], p.health.replace('_', ' '), `state ${p.health === 'ok' ? 'ok' : p.health === 'draining' ? 'warn' : 'bad'}`);
    set(c[3], API_NAMES[p.type ?? ''] ?? p.type ?? '–');
    set(c[4], `${p.inFlight} / ${p.capacity}`, 'num');
    set(c[5], String(p.queued), 'num');
    set(c[6], percent(p.loadRatio), 'num');
    set(c[7], p.servedModels.join(', ') || '–');
    c[7].title = p.servedModels.join(', '); // the cell may cut the list short
    // The reason on hover, set on every render: one set only when the health word changed stayed behind when the reason did.
    const reason = healthReason(p);
    if (c[2].title !== reason) c[2].title = reason;
    const o = p.outlier;
    // Enabled only where there is a breaker to reset (ejected or half-open), whatever the health cell shows first; kept in place otherwise so the row does not reflow.
    const button = rowButton(c[8], 'Reset', 'reset', `Reset provider ${p.id}`, () => void resetProvider(p.id));
    button.disabled = o === null || o === undefined || (o.phase !== 'ejected' && o.phase !== 'half_open');
  });

  $('queues-empty').hidden = next.groups.length > 0;
  syncRows($<HTMLTableSectionElement>('queues-body'), next.groups, (g) => g.model, 6, (row, c, g) => {
    row.dataset.model = g.model;
    set(c[0], g.model);
    set(c[1], `${g.queueDepth} / ${g.maxQueue}`, 'num');
    set(c[2], ms(g.oldestWaitMs ?? 0), 'num');
    set(c[3], rate(g.rejectsPerMinute ?? 0, '/min'), 'num');
    set(c[4], ms(g.queueTimeoutMs), 'num');
    set(c[5], fairnessText(g));
  });

  const select = $<HTMLSelectElement>('try-model');
  const models = next.groups.map((g) => g.model);
  if (Array.from(select.options).map((o) => o.value).join('\n') !== models.join('\n')) {
    const chosen = select.value;
    select.replaceChildren(...models.map((m) => new Option(m, m, false, m === chosen)));
  }
}

/** A key's name as shown: quoted when spaces at its ends would make it look like another key's (HTML collapses them). */
function keyLabel(name: string): string {
  return name !== name.trim() || name === '' ? JSON.stringify(name) : name;
}

/** "401 ×3, 429 ×2": what the key's errors were, most frequent first (the Errors cell's hover). */
function errorStatuses(byStatus: Record<string, number>): string {
  const errors = Object.entries(byStatus).filter(([status]) => !status.startsWith('2'));
  errors.sort((a, b) => b[1] - a[1]);
  return errors.map(([status, n]) => `${status} ×${n}`).join(', ');
}

function renderKeys(view: { auth: boolean; keys: KeyRow[] }): void {
  $('keys-empty').hidden = view.auth || view.keys.length > 0;
  $('keys-note').hidden = !($('keys-empty').hidden);
  syncRows($<HTMLTableSectionElement>('keys-body'), view.keys, (k) => k.name, 10, (row, c, k) => {
    row.dataset.name = k.name;
    // Gone from the config (a refresh removed or renamed it): kept in view with what it used.
    row.classList.toggle('gone', !k.configured);
    set(c[0], k.configured ? keyLabel(k.name) : `${keyLabel(k.name)} (removed)`);
    // A removed key is let in nowhere: its models null is no grant, not "every model".
    set(c[1], !k.configured ? '–' : k.models === null ? 'all' : k.models.join(', ') || 'none');
    set(c[2], k.maxConcurrent === null ? String(k.inFlight) : `${k.inFlight} / ${k.maxConcurrent}`, k.maxConcurrent !== null && k.inFlight >= k.maxConcurrent ? 'num warn' : 'num');
    set(c[3], rateLimits(k), 'num');
    // What is left now, a line per limit as the limits are: none left (or a debt) is the key being refused.
    const left = [k.requestsLeft, k.tokensLeft].filter((n): n is number => typeof n === 'number');
    set(c[4], left.length === 0 ? '–' : left.map((n) => count(n).replaceAll(' ', '\u00a0')).join('\n'), left.some((n) => n < 1) ? 'num warn' : 'num');
    set(c[5], count(k.requests.total), 'num');
    set(c[6], count(k.requests.errors), k.requests.errors > 0 ? 'num bad' : 'num');
    const statuses = errorStatuses(k.requests.byStatus);
    if (statuses !== '') c[6].title = statuses;
    set(c[7], count(k.tokens.prompt), 'num');
    set(c[8], count(k.tokens.completion), 'num');
    rowButton(c[9], 'Runs', 'runs', `Show the runs of key ${k.name}`, () => showRunsOf(k.name));
  });
}

/** A key's requests_per_minute and tokens_per_minute, as one cell ('–': neither): exact, as configured (counts are rounded, limits are not). */
function rateLimits(k: KeyRow): string {
  const limits: string[] = [];
  if (typeof k.requestsPerMinute === 'number') limits.push(`${k.requestsPerMinute.toLocaleString('en-US')}/min`);
  if (typeof k.tokensPerMinute === 'number') limits.push(`${k.tokensPerMinute.toLocaleString('en-US')} tokens/min`);
  // A line each, never broken inside one (the column is narrow).
  return limits.length === 0 ? '–' : limits.map((limit) => limit.replaceAll(' ', '\u00a0')).join('\n');
}

/** The runs table, filtered to one key, brought into view. */
function showRunsOf(name: string): void {
  const box = $<HTMLInputElement>('runs-key');
  box.value = name;
  // The name as it is, not through the box's input handler: that trims what is typed, and a key's name may
  // have spaces at its ends (" carol " would show the runs of "carol", another key).
  filterRuns(name);
  $('runs').scrollIntoView({ block: 'start' });
}

/**
 * The table for the key filter `key` (live or not: it must not show another key's runs under it). Until
 * its first page comes, the rows shown are the old filter's: no older page of the new key is added to
 * them (Show 50 older pressed meanwhile did, and dropped that first page as an older load).
 */
function filterRuns(key: string): void {
  runsKey = key;
  runsOlder = null;
  $('runs-older').hidden = true;
  void loadRuns().catch((err: unknown) => {
    if (err instanceof Unauthorized) onUnauthorized();
  });
}

function renderRuns(): void {
  $('runs-empty').hidden = runs.length > 0 || runsKey !== '';
  $('runs-empty-key').hidden = runs.length > 0 || runsKey === '';
  set($('runs-empty-key-name'), runsKey);
  $('runs-older').hidden = runsOlder === null;
  // With a key filter the edge's count is of every key's runs: only the rows shown are said. Only the rows shown
  // are a live region (what Show 50 older changes): the count kept grows with every request, and read out with
  // them it was said again at each poll while traffic came in.
  set($('runs-shown-rows'), runs.length === 0 ? '' : `${count(runs.length)} shown`);
  set($('runs-shown-kept'), runs.length === 0 || runsKey !== '' ? '' : ` of ${count(runsKept)} kept`);
  syncRows($<HTMLTableSectionElement>('runs-body'), runs, (r) => r.id, 10, (row, c, r) => {
    row.dataset.run = r.id;
    // The page's two states: still open (queued or running) or finished.
    row.dataset.state = r.state === 'finished' ? 'finished' : 'running';
    set(c[0], r.id);
    set(c[1], r.model);
    // The client API key's name (auth.api_keys); none while auth is off.
    set(c[2], r.key === null || r.key === undefined ? '–' : keyLabel(r.key));
    set(c[3], r.provider ?? '–');
    set(c[4], r.outcome ?? r.state, `state ${r.state !== 'finished' ? 'warn' : r.outcome === 'end' ? 'ok' : 'bad'}`);
    set(c[5], r.status === null ? '–' : String(r.status), 'num');
    set(c[6], ms(r.queueMs), 'num');
    set(c[7], ms(r.totalMs), 'num');
    set(c[8], r.state === 'finished' ? bytes(r.bytesOut) : '–', 'num');
    const button = rowButton(c[9], 'Cancel', 'cancel', `Cancel run ${r.id}`, () => void cancelRun(r.id));
    // Kept in place once finished (disabled) so the row does not reflow.
    button.disabled = r.state === 'finished';
  });
}

function renderCharts(points: readonly SeriesPoint[], now: number): void {
  const times = points.map((p) => p.t);
  $('charts-empty').hidden = points.length > 0;
  drawChart($<SVGSVGElement>('chart-rps'), times, [{ name: 'req/s', className: 'k1', values: points.map((p) => p.reqPerSec) }], 'req/s', SPAN_MS, now);
  drawChart($<SVGSVGElement>('chart-ttfb'), times, [
    { name: 'p50', className: 'k1', values: points.map((p) => p.ttfbP50Ms) },
    { name: 'p95', className: 'k2', values: points.map((p) => p.ttfbP95Ms) },
  ], 'ms', SPAN_MS, now);
  drawChart($<SVGSVGElement>('chart-queue'), times, [
    { name: 'p50', className: 'k1', values: points.map((p) => p.queueP50Ms) },
    { name: 'p95', className: 'k2', values: points.map((p) => p.queueP95Ms) },
  ], 'ms', SPAN_MS, now);
}

// --- actions ------------------------------------------------------------------------

async function toggleDrain(nodeId: string): Promise<void> {
  const node = status?.nodes.find((n) => n.id === nodeId);
  if (node === undefined) return;
  const action = node.draining ? 'undrain' : 'drain';
  try {
    const answer = await json<{ draining?: boolean }>(`/admin/nodes/${encodeURIComponent(nodeId)}/${action}`, { method: 'POST' });
    banner('action', null);
    node.draining = answer.draining === true;
    liveChanges++;
    if (status) renderStatus(status);
    await refreshStatus();
  } catch (err) {
    if (err instanceof Unauthorized) onUnauthorized();
    else banner('action', `${action} ${nodeId} failed: ${describeFailure(err)}`);
  }
}

/** The row's action button in `cell`, made on the row's first render (its row keeps its id, so the handler stays right). */
function rowButton(cell: HTMLElement, text: string, action: string, label: string, onClick: () => void): HTMLButtonElement {
  let button = cell.querySelector('button');
  if (button === null) {
    button = document.createElement('button');
    button.type = 'button';
    button.textContent = text;
    button.dataset.action = action;
    button.setAttribute('aria-label', label);
    button.addEventListener('click', onClick);
    cell.append(button);
  }
  return button;
}

/** Clears the provider's outlier breaker: it takes requests again at once (docs/operations.md); the note says what happened, the row follows. */
async function resetProvider(providerId: string): Promise<void> {
  const button = document.querySelector<HTMLButtonElement>(`tr[data-provider="${CSS.escape(providerId)}"] button[data-action="reset"]`);
  // Off while asked (one reset per press); the row's next render sets it from the provider's state.
  if (button !== null) button.disabled = true;
  try {
    const answer = await json<{ reset?: boolean }>(`/admin/providers/${encodeURIComponent(providerId)}/reset`, { method: 'POST' });
    banner('action', null);
    $('providers-note').textContent = answer.reset === true
      ? `${clock(Date.now())}: provider ${providerId} reset; it takes requests again.`
      : `${clock(Date.now())}: provider ${providerId} had nothing to reset (back in rotation already).`;
    // A status answer asked for before the reset would show it ejected again until the next poll.
    liveChanges++;
    await refreshStatus();
  } catch (err) {
    if (button !== null) button.disabled = false;
    if (err instanceof Unauthorized) onUnauthorized();
    else banner('action', `reset ${providerId} failed: ${describeFailure(err)}`);
  }
}

/** The run's upstream request is aborted (or its cli process killed); its row then shows it finished as run_cancelled. */
async function cancelRun(runId: string): Promise<void> {
  try {
    await json<unknown>(`/admin/runs/${encodeURIComponent(runId)}/cancel`, { method: 'POST' });
    banner('action', null);
  } catch (err) {
    if (err instanceof Unauthorized) return onUnauthorized();
    banner('action', `cancel ${runId} failed: ${describeFailure(err)}`);
  }
  // The run's own record, into its row where it is: reloading the newest page instead took away the older
  // pages shown (Show 50 older, Live runs off), and the cancelled run with them.
  try {
    const run = await json<Run>(`/admin/runs/${encodeURIComponent(runId)}`);
    const at = runs.findIndex((r) => r.id === runId);
    if (at < 0) return;
    runs = runs.with(at, run);
    renderRuns();
  } catch (err) {
    if (err instanceof Unauthorized) onUnauthorized();
  }
}

function show(value: unknown): string {
  return value === null || value === undefined ? '(none)' : typeof value === 'string' ? value : JSON.stringify(value);
}

function nodeAnswers(nodes: readonly NodeRefresh[]): HTMLElement {
  const section = document.createElement('div');
  section.id = 'config-nodes';
  const h = document.createElement('h3');
  const pending = nodes.filter((n) => n.status !== 'applied').length;
  h.textContent = `Nodes (${nodes.length}${pending > 0 ? `, ${pending} not applied` : ''})`;
  const ul = document.createElement('ul');
  for (const n of nodes) {
    const li = document.createElement('li');
    li.dataset.node = n.node;
    li.className = n.status === 'applied' ? 'ok-text' : 'error';
    li.textContent = `${n.node}: ${n.status}${n.message === '' ? '' : ` (${n.message})`}`;
    ul.append(li);
  }
  section.append(h, ul);
  return section;
}

function changeList(title: string, changes: readonly Change[], id: string): HTMLElement {
  const section = document.createElement('div');
  section.id = id;
  const h = document.createElement('h3');
  h.textContent = `${title} (${changes.length})`;
  section.append(h);
  if (changes.length === 0) {
    const p = document.createElement('p');
    p.className = 'empty';
    p.textContent = 'none';
    section.append(p);
    return section;
  }
  const ul = document.createElement('ul');
  ul.className = 'changes';
  for (const c of changes) {
    const li = document.createElement('li');
    const code = document.createElement('code');
    code.textContent = c.path;
    li.append(code, ` ${show(c.old)} → ${show(c.new)} `);
    const effect = document.createElement('span');
    effect.className = 'hint';
    effect.textContent = c.effect;
    li.append(effect);
    ul.append(li);
  }
  section.append(ul);
  return section;
}

/** The text the last evaluation that allows Apply was of: Apply sends exactly that, never an edit made since. */
let evaluatedText: string | null = null;
/** With an empty box the edge evaluated its config file: Apply names that file's digest, so an edit made to it since is refused. */
let evaluatedDigest: string | null = null;
/** Only the latest Evaluate or Apply decides what the panel shows: an older one answering late is ignored. */
let refreshAttempt = 0;

async function refresh(mode: 'evaluate' | 'apply'): Promise<void> {
  const out = $('config-result');
  const applyButton = $<HTMLButtonElement>('apply');
  const text = mode === 'apply' && evaluatedText !== null ? evaluatedText : $<HTMLTextAreaElement>('config-text').value.trim();
  const attempt = ++refreshAttempt;
  applyButton.disabled = true;
  const digest = mode === 'apply' && text === '' ? evaluatedDigest : null;
  evaluatedText = null;
  evaluatedDigest = null;
  // An Apply's answer says what was committed: no Evaluate may supersede it while it is on its way.
  const evaluateButton = $<HTMLButtonElement>('evaluate');
  if (mode === 'apply') evaluateButton.disabled = true;
  out.textContent = mode === 'evaluate' ? 'Evaluating…' : 'Applying…';
  try {
    // 400 and 409 carry a refresh result too (invalid, or refused for a restart): shown like a 200.
    const res = await api('/admin/config/refresh', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(text !== '' ? { mode, config: text } : digest !== null ? { mode, source_digest: digest } : { mode }),
    });
    const r = (await res.json().catch(() => ({}))) as RefreshResult & { error?: { code?: string; message?: string } };
    if (attempt !== refreshAttempt) return;
    out.replaceChildren();
    if (r.error !== undefined || typeof (r as { status?: unknown }).status !== 'string') {
      out.textContent = `Refused: ${r.error?.message ?? `HTTP ${res.status}`}`;
      return;
    }
    const head = document.createElement('p');
    head.id = 'config-outcome';
    const renewed = (r.certificates ?? []).filter((c) => c.changed);
    const verdict = r.status === 'applied' && r.changes.length === 0 ? `Applied: certificates reloaded (${renewed.map((c) => c.listener).join(', ')}); the config is unchanged.`
      : r.status === 'applied' ? `Applied: config version ${r.configVersion}; ${r.notified.length} node(s) notified${r.retired.length ? `, retired ${r.retired.join(', ')}` : ''}.`
      : r.status === 'unchanged' || (r.status === 'evaluated' && r.applicable && r.changes.length === 0 && renewed.length === 0) ? 'No change: the candidate equals the running config, and the certificate files what is served.'
      : r.status === 'rejected' ? `Rejected (${r.rejection}): nothing changed.`
      : r.applicable ? 'Evaluated: Apply would commit the mutable changes below.' : `Evaluated: Apply would be refused (${r.rejection}).`;
    head.textContent = verdict;
    head.className = r.status === 'rejected' || (!r.applicable && r.status === 'evaluated') ? 'error' : 'ok-text';
    out.append(head, changeList('Applied live', r.changes.filter((c) => c.mutable), 'diff-mutable'), changeList('Need a restart', r.changes.filter((c) => !c.mutable), 'diff-restart'));
    if (r.reasons.length > 0) {
      const ul = document.createElement('ul');
      ul.className = 'reasons';
      for (const reason of r.reasons) {
        const li = document.createElement('li');
        li.textContent = reason;
        ul.append(li);
      }
      out.append(ul);
    }
    // Which hosts took it: a node that failed, timed out or needs a restart is one to look at.
    if (r.nodes !== undefined && r.nodes.length > 0) out.append(nodeAnswers(r.nodes));
    if (r.certificates !== undefined && r.certificates.length > 0) out.append(certificateList(r.certificates, mode));
    // Apply only for what was evaluated: text edited while the answer was on its way is not. Renewed certificates alone are worth an apply.
    const applicable = mode === 'evaluate' && r.applicable && (r.changes.length > 0 || renewed.length > 0) && $<HTMLTextAreaElement>('config-text').value.trim() === text;
    evaluatedText = applicable ? text : null;
    evaluatedDigest = applicable && text === '' ? r.sourceDigest : null;
    applyButton.disabled = !applicable;
    if (mode === 'apply') void refreshStatus();
  } catch (err) {
    if (attempt !== refreshAttempt) return;
    if (err instanceof Unauthorized) onUnauthorized();
    else out.textContent = `The edge did not answer: ${(err as Error).message}`;
  } finally {
    if (mode === 'apply') evaluateButton.disabled = false;
  }
}

/** Each TLS listener's certificate as the files hold it: renewed (swapped in by Apply) or as served. */
function certificateList(certificates: readonly CertificateReport[], mode: string): HTMLElement {
  const section = document.createElement('div');
  section.id = 'config-certificates';
  const title = document.createElement('h4');
  title.textContent = 'TLS certificates';
  const ul = document.createElement('ul');
  for (const c of certificates) {
    const li = document.createElement('li');
    const state = !c.changed ? 'as served' : mode === 'apply' ? 'renewed: swapped in' : 'renewed: Apply swaps it in';
    li.textContent = `${c.listener}: ${c.subject || 'subject unknown'}, expires ${c.notAfter || 'unknown'} (${state})`;
    li.className = c.changed ? 'diff-mutable' : '';
    ul.append(li);
  }
  section.append(title, ul);
  return section;
}

let trying: AbortController | null = null;

async function tryIt(): Promise<void> {
  const model = $<HTMLSelectElement>('try-model').value;
  const prompt = $<HTMLTextAreaElement>('try-prompt').value;
  const key = $<HTMLInputElement>('try-key').value;
  const output = $('try-output');
  const meta = $('try-meta');
  if (model === '') {
    meta.textContent = 'No model to send to: the edge config has no models[].';
    return;
  }
  trying?.abort();
  trying = new AbortController();
  const signal = trying.signal;
  output.textContent = '';
  meta.textContent = `Sending to ${model}…`;
  $<HTMLButtonElement>('try-stop').disabled = false;
  $<HTMLButtonElement>('try-send').disabled = true;
  const started = performance.now();
  try {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (key !== '') headers['x-edge-client-key'] = key;
    const res = await api('/admin/try', { method: 'POST', headers, signal, body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: prompt }] }) });
    const run = res.headers.get('x-edge-run-id');
    const where = [run && `run ${run}`, res.headers.get('x-edge-provider') && `provider ${res.headers.get('x-edge-provider')}`, res.headers.get('x-edge-queue-ms') && `queued ${res.headers.get('x-edge-queue-ms')} ms`].filter(Boolean).join(' · ');
    if (!res.ok || res.body === null) {
      const body = (await res.json().catch(() => ({}))) as { error?: { message?: string; code?: string } };
      meta.textContent = `HTTP ${res.status}: ${body.error?.code ?? ''} ${body.error?.message ?? ''}`.trim();
      return;
    }
    meta.textContent = `Streaming · ${where}`;
    let firstAt = 0;
    /** An error event in the stream (the provider cut it, a cancel): the answer is not whole. */
    let failed = false;
    await readSse(res.body, (m) => {
      if (m.data === '[DONE]') return;
      try {
        const chunk = JSON.parse(m.data) as { choices?: { delta?: { content?: string } }[]; error?: { message: string } };
        if (chunk.error) {
          failed = true;
          output.append(`\n[error: ${chunk.error.message}]`);
        }
        const text = chunk.choices?.[0]?.delta?.content;
        if (text) {
          if (firstAt === 0) firstAt = performance.now();
          output.append(text);
        }
      } catch {
        // not JSON: ignore
      }
    }, signal);
    // Stop cancels the body's reader, which ends the read like the stream's own end: not "Done".
    const verdict = signal.aborted ? 'Stopped' : failed ? 'Failed (see the error below)' : 'Done';
    meta.textContent = `${verdict} · ${where} · first token ${ms(firstAt > 0 ? firstAt - started : null)} · total ${ms(performance.now() - started)}`;
  } catch (err) {
    if (err instanceof Unauthorized) onUnauthorized();
    else meta.textContent = signal.aborted ? 'Stopped.' : `Failed: ${(err as Error).message}`;
  } finally {
    $<HTMLButtonElement>('try-stop').disabled = true;
    $<HTMLButtonElement>('try-send').disabled = false;
  }
}

// --- wiring -------------------------------------------------------------------------

function init(): void {
  $('login-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = $<HTMLInputElement>('token');
    const value = input.value;
    input.value = '';
    void login(value);
  });
  $('logout').addEventListener('click', logout);
  $('evaluate').addEventListener('click', () => void refresh('evaluate'));
  $('apply').addEventListener('click', () => void refresh('apply'));
  $('config-text').addEventListener('input', () => {
    evaluatedText = null;
    $<HTMLButtonElement>('apply').disabled = true;
  });
  $('try-form').addEventListener('submit', (event) => {
    event.preventDefault();
    void tryIt();
  });
  $('try-stop').addEventListener('click', () => trying?.abort());
  const liveRunsBox = $<HTMLInputElement>('live-runs');
  liveRunsBox.checked = liveRuns();
  liveRunsBox.addEventListener('change', () => {
    setLiveRuns(liveRunsBox.checked);
    // Back on: the newest page at once, not at the next tick (older pages shown give way to it).
    if (liveRunsBox.checked) void loadRuns().catch((err: unknown) => (err instanceof Unauthorized ? onUnauthorized() : undefined));
  });
  $('runs-older').addEventListener('click', () => void loadOlderRuns());
  const keyBox = $<HTMLInputElement>('runs-key');
  keyBox.addEventListener('input', () => filterRuns(keyBox.value.trim()));
  // A page left for another may stay in the tab's back-forward cache with its sources open, and its event
  // stream holds one of the edge's slots (64) meanwhile: they stop on leaving, and start again if it comes back.
  window.addEventListener('pagehide', () => live?.abort());
  window.addEventListener('pageshow', (event) => {
    if (event.persisted && token !== null) void login(token);
  });
  // The page says whether the admin listener has a token (console-routes.ts). Without one (loopback only) it needs no
  // login; with one, only a token this tab already holds is tried: a request without any would be a 401 (a red line in devtools).
  if (token !== null) void login(token);
  else if (document.querySelector<HTMLMetaElement>('meta[name="edge-admin-auth"]')?.content === 'none') void login('');
  else showLogin();
}

init();
