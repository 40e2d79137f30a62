// /admin/events over real HTTP: a client that reconnects with
// Last-Event-ID (as EventSource does) gets the events it missed while it
// was away, announced by `event: resumed`; HEAD answers the head and
// leaves no subscription behind. And a run the provider sent back to the
// queue shows in /admin/runs as queued again, not as running there.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ALIAS, NODE_ID, startOpsStack, type OpsStack } from '../main/admin/ops-stack.js';

let stack: OpsStack;

before(async () => {
  stack = await startOpsStack();
});

after(async () => {
  await stack.close();
});

interface Frame {
  readonly id: string | undefined;
  readonly event: string | undefined;
  readonly data: Record<string, unknown> | undefined;
}

/** Reads SSE frames from /admin/events until `until` holds, then closes the stream. */
async function readEvents(headers: Record<string, string>, until: (frames: Frame[]) => boolean): Promise<Frame[]> {
  const abort = new AbortController();
  // Node events only, as the console reads them.
  const res = await fetch(`${stack.edge.adminUrl as string}/admin/events?runs=0`, { headers, signal: abort.signal });
  assert.equal(res.status, 200);
  const frames: Frame[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const field = (name: string): string | undefined => block.split('\n').find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
        const data = field('data');
        if (field('event') === undefined) continue; // the opening comment, keepalives
        frames.push({ id: field('id'), event: field('event'), data: data === undefined ? undefined : (JSON.parse(data) as Record<string, unknown>) });
      }
      if (until(frames)) break;
    }
  } finally {
    abort.abort();
  }
  return frames;
}

async function subscribers(): Promise<number> {
  const status = await stack.admin('/admin/status');
  return (status.json.events.subscribers as unknown[]).length;
}

async function untilSubscribers(n: number): Promise<void> {
  const deadline = Date.now() + 5000;
  while ((await subscribers()) !== n) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} subscribers`);
    await sleep(20);
  }
}

test('a reconnect with Last-Event-ID gets the node events published while it was away, after `event: resumed`', async () => {
  const drained = readEvents({}, (frames) => frames.some((f) => f.event === 'node.draining'));
  await untilSubscribers(1);
  assert.equal((await stack.admin(`/admin/nodes/${NODE_ID}/drain`, { method: 'POST' })).status, 200);
  const first = await drained;
  const lastId = first.find((f) => f.event === 'node.draining')?.id as string;
  assert.match(lastId, /^[0-9a-f]+-\d+$/);
  await untilSubscribers(0);

  // Away: the undrain happens with nobody listening.
  assert.equal((await stack.admin(`/admin/nodes/${NODE_ID}/undrain`, { method: 'POST' })).status, 200);

  const resumed = await readEvents({ 'last-event-id': lastId }, (frames) => frames.some((f) => f.event === 'node.undrained'));
  assert.equal(resumed[0].event, 'resumed');
  assert.deepEqual(resumed[0].data, { lastEventId: lastId, replayed: 1, missed: 0, restarted: false });
  assert.equal(resumed[1].event, 'node.undrained');
  assert.equal(resumed[1].data?.node, NODE_ID);
  assert.equal(resumed.filter((f) => f.event === 'node.draining').length, 0, 'nothing it had already seen');

  // An id from some other edge process: told so, not taken for a resume.
  const foreign = await readEvents({ 'last-event-id': 'feedface-3' }, (frames) => frames.length > 0);
  assert.equal(foreign[0].event, 'resumed');
  assert.equal(foreign[0].data?.restarted, true);
});

test('a stream whose subscription the bus closes ends, so its reader knows to subscribe again', async () => {
  await untilSubscribers(0);
  // Reads until the body ends (the stack's close would end it too, too late for the race below).
  const read = readEvents({}, () => false);
  await untilSubscribers(1);
  stack.edge.events.closeAll();
  assert.equal(await Promise.race([read.then(() => 'ended'), sleep(3_000).then(() => 'still open')]), 'ended');
  await untilSubscribers(0);
});

test('/admin/events refuses a parameter it does not take, one given twice, and a buffer that is not plain digits', async () => {
  for (const [query, message] of [
    ['run=0', /unknown parameter "run"; \/admin\/events takes buffer, runs/],
    ['runs=0&runs=1', /runs is given more than once/],
    ['buffer=1e3', /buffer must be an integer/],
    ['buffer=0x10', /buffer must be an integer/],
  ] as const) {
    const res = await fetch(`${stack.edge.adminUrl as string}/admin/events?${query}`);
    assert.equal(res.status, 400, query);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, message, query);
  }
  assert.equal(await subscribers(), 0);
});

test('HEAD /admin/events answers its head at once and subscribes nobody', async () => {
  await untilSubscribers(0);
  const url = new URL(stack.edge.adminUrl as string);
  const head = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(`HEAD /admin/events HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    });
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete head within 3 s; got ${JSON.stringify(text)}`));
    }, 3000);
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n\r\n')) {
        clearTimeout(timer);
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', reject);
  });
  assert.match(head, /^HTTP\/1\.1 200 /);
  assert.match(head, /content-type: text\/event-stream/i);
  assert.equal(await subscribers(), 0);
});

test('a run its provider sent back (503 with Retry-After) is listed as queued again, on no provider, until its next grant', async () => {
  // The only provider refuses once and is held for 2 s: the request waits in the queue meanwhile.
  stack.mock.misbehave({ fail: 'status:503,retry-after:2', count: 1 });
  const answer = fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const deadline = Date.now() + 1500;
  let queued: Record<string, unknown> | undefined;
  while (queued === undefined && Date.now() < deadline) {
    queued = ((await stack.admin('/admin/runs?state=queued')).json.runs as Record<string, unknown>[])[0];
    if (queued === undefined || queued.attempts !== 1) queued = undefined;
    await sleep(20);
  }
  const running = (await stack.admin('/admin/runs?state=running')).json.runs as unknown[];
  assert.ok(queued !== undefined, `not listed as queued after its first attempt; running: ${JSON.stringify(running)}`);
  assert.equal(queued.node, null);
  assert.equal(queued.provider, null);
  const res = await answer;
  assert.equal(res.status, 200);
  await res.arrayBuffer();
  // With I/O workers the records trail the response by a batch.
  let record = (await stack.admin(`/admin/runs/${res.headers.get('x-edge-run-id')}`)).json;
  for (let tries = 0; record.state !== 'finished' && tries < 100; tries++) {
    await sleep(20);
    record = (await stack.admin(`/admin/runs/${res.headers.get('x-edge-run-id')}`)).json;
  }
  assert.equal(record.attempts, 2);
  assert.equal(record.outcome, 'end');
});

// The admin listener as an abusive or buggy caller meets it. Every event is
// written to every stream on the main thread, which the scheduler shares:
// streams are capped. An inline config is parsed there too: the refresh
// body is capped at 4 MiB (16 MiB stalled every client request for 8 s).
// A trickled request is cut at 30 s (node:http checks that every 30 s, too
// slow for this suite: the test reads the server's setting).
test('the admin listener bounds what one caller can hold: event streams, the refresh body, a request that never ends', async () => {
  const { MAX_EVENT_STREAMS } = await import('../../src/main/admin/events-route.js');
  const open: AbortController[] = [];
  try {
    const before = await subscribers();
    for (let i = before; i < MAX_EVENT_STREAMS; i++) {
      const abort = new AbortController();
      open.push(abort);
      const res = await fetch(`${stack.edge.adminUrl as string}/admin/events?runs=0`, { signal: abort.signal });
      assert.equal(res.status, 200, `stream ${i}`);
    }
    const refused = await stack.admin('/admin/events');
    assert.equal(refused.status, 503);
    assert.equal(refused.json.error.code, 'too_many_subscribers');
    assert.equal(refused.headers.get('retry-after'), '5');
  } finally {
    for (const abort of open) abort.abort();
  }
  // One closed, one opens again.
  for (let i = 0; i < 50 && (await subscribers()) >= MAX_EVENT_STREAMS; i++) await sleep(20);
  const again = new AbortController();
  const res = await fetch(`${stack.edge.adminUrl as string}/admin/events?runs=0`, { signal: again.signal });
  assert.equal(res.status, 200);
  again.abort();

  const huge = await fetch(`${stack.edge.adminUrl as string}/admin/config/refresh`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ mode: 'evaluate', config: `# ${'x'.repeat(5 * 1024 * 1024)}` }),
  });
  assert.equal(huge.status, 413);
  await huge.arrayBuffer();

  const server = (stack.edge as unknown as { admin: { app: { server: { requestTimeout: number; maxConnections: number } } } }).admin.app.server;
  assert.equal(server.requestTimeout, 30_000);
  assert.equal(server.maxConnections, 1024);
});

test('a repeated drain or undrain publishes no event: the stream tells of changes only', async () => {
  await untilSubscribers(0);
  const flips = (frames: Frame[]): string[] => frames.filter((f) => f.event === 'node.draining' || f.event === 'node.undrained').map((f) => f.event as string);
  // Read until a drain follows an undrain: the last step below.
  const read = readEvents({}, (frames) => flips(frames).join().includes('node.undrained,node.draining'));
  await untilSubscribers(1);
  for (const step of ['drain', 'drain', 'undrain', 'undrain', 'drain']) {
    const res = await stack.admin(`/admin/nodes/${NODE_ID}/${step}`, { method: 'POST' });
    assert.equal(res.status, 200, step);
    assert.equal(res.json.draining, step === 'drain');
  }
  assert.deepEqual(flips(await read), ['node.draining', 'node.undrained', 'node.draining']);
  assert.equal((await stack.admin(`/admin/nodes/${NODE_ID}/undrain`, { method: 'POST' })).status, 200);
});
