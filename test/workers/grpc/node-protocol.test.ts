// The node protocol's bad-input corpus, through a hand-driven node on real
// gRPC: every misbehaviour is dropped or fenced with a counter, never a
// crash, never another tunnel's bytes, and no lease outlives it.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, afterEach, before, describe, test } from 'node:test';
import { ALIAS, inFlight, NODE_ID, NODE_TOKEN, openExchanges, PROVIDER_ID, sessionOf, startStack, testWorkers, waitFor, waitUntil, type Stack } from '../../helpers/stack.js';
import { MAX_SESSION_VIOLATIONS } from '../../../src/workers/grpc/frame-guard.js';
import { MAX_BATCH_FRAMES } from '../../../src/workers/grpc/node-session.js';
import type { TunnelFrame } from '../../../src/gen/edge/v1/tunnel_pb.js';
import { FakeNode, JSON_HEADERS, SSE } from './fake-node.js';
import { announceMessage, dataFrame, heartbeatMessage, leavingMessage, registerMessage } from '../../../src/agent/frames.js';
import { pino } from 'pino';
import type { EdgeEvent } from '../../../src/contract/events.js';

function chat(stack: Stack, stream = true): Promise<Response> {
  return fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: ALIAS, stream, messages: [{ role: 'user', content: 'hi' }] }),
  });
}

async function errorCode(res: Response): Promise<string> {
  return ((await res.json()) as { error: { code: string } }).error.code;
}

describe('node protocol: bad input from a node', () => {
  let stack: Stack;
  const nodes: FakeNode[] = [];
  const stats = async (): Promise<Record<string, number>> => (await stack.edge.inspect()).protocolStats;

  async function connect(): Promise<FakeNode> {
    const node = new FakeNode(stack.edge.grpcPort);
    nodes.push(node);
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    await node.registered();
    return node;
  }

  before(async () => {
    stack = await startStack({ startAgent: false, configure: (raw) => void Object.assign(raw.limits as object, { max_frame_bytes: 64 * 1024, tunnel_window_bytes: 64 * 1024, ttfb_timeout_ms: 700 }) });
  });
  afterEach(async () => {
    for (const node of nodes.splice(0)) node.close();
    await waitFor(async () => inFlight(stack.edge) === 0 && (await openExchanges(stack.edge)) === 0, 'no lease and no exchange left');
    assert.deepEqual(stack.edge.driver.scheduler.checkInvariants(), []);
  });
  after(async () => {
    // The edge survived the corpus: a real agent still gets served.
    await stack.startAgent();
    const res = await chat(stack, false);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    await stack.close();
  });

  test('a node that keeps its stream open but stops heartbeating is dropped after heartbeat.timeout_ms; its tunnels fail with node_disconnected', async () => {
    const TIMEOUT_MS = stack.config.heartbeat.timeoutMs;
    assert.equal(TIMEOUT_MS, 1_000, 'the stack helper sets heartbeat.timeout_ms 1000');
    const node = await connect();
    const before = { ...(await stats()) };
    const pending = chat(stack);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, 'data: {"ok":1}\n\n');
    const res = await pending;
    assert.equal(res.status, 200);
    node.stopHeartbeat();
    const silentAt = performance.now();
    // Nothing closes the TCP connection or the stream from the node's side: only the edge's heartbeat check can end this.
    const body = await Promise.race([res.text(), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), TIMEOUT_MS * 5))]);
    assert.ok(body !== undefined, `the silent node was not dropped within ${TIMEOUT_MS * 5} ms`);
    const droppedAfterMs = performance.now() - silentAt;
    const events = body.split('\n\n').filter((e) => e.length > 0);
    assert.equal(events[0], 'data: {"ok":1}');
    assert.equal((JSON.parse(events.at(-1)?.slice(6) ?? '{}') as { error?: { code?: string } }).error?.code, 'node_disconnected', body);
    assert.ok(droppedAfterMs >= TIMEOUT_MS - stack.config.heartbeat.intervalMs - 50 && droppedAfterMs < TIMEOUT_MS * 3, `dropped ${Math.round(droppedAfterMs)} ms after going silent (timeout ${TIMEOUT_MS} ms)`);
    await node.ended; // the edge ended the silent node's stream (the node never did)
    assert.equal((await stats()).heartbeatTimeouts - before.heartbeatTimeouts, 1);
    await waitFor(async () => (await sessionOf(stack.edge, NODE_ID)) === undefined, 'the session to be gone');
    assert.equal(stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.connected, false);
  });

  test('a node that heartbeats but stops reading its stream is dropped after heartbeat.timeout_ms: what the edge queued for it is freed, its tunnels fail', async () => {
    const TIMEOUT_MS = stack.config.heartbeat.timeoutMs;
    const node = await connect();
    const before = { ...(await stats()) };
    // It still sends heartbeats, but takes nothing: once its client's buffer (16 messages) and the stream's HTTP/2
    // window (64 KiB) are full, every later request (with its body) and heartbeat would pile up in the edge for good.
    node.call.pause();
    const body = JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'x'.repeat(300 * 1024) }] });
    for (let round = 0; round < 12 && (await sessionOf(stack.edge, NODE_ID)) !== undefined; round++) {
      const answers = await Promise.all(Array.from({ length: 4 }, () => fetch(`${stack.baseURL}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })));
      for (const res of answers) {
        // A clear error in the API's format: no answer in time, or the node dropped under it (its retry then waits,
        // as an arrival would, for a node that never comes back here: its queue deadline answers).
        const code = await errorCode(res);
        assert.ok((res.status === 504 && code === 'first_byte_timeout') || (res.status === 502 && code === 'node_disconnected') || (res.status === 503 && code === 'no_provider_available'), `${res.status} ${code}`);
      }
    }
    await waitFor(async () => (await sessionOf(stack.edge, NODE_ID)) === undefined, 'the node that does not read to be dropped', TIMEOUT_MS * 3);
    const after = await stats();
    assert.equal(after.stalledReaders - (before.stalledReaders ?? 0), 1);
    assert.equal(after.heartbeatTimeouts, before.heartbeatTimeouts, 'its heartbeats kept coming: not a silent node');
    assert.equal(stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.connected, false);
    node.call.resume();
    await node.ended;
  });

  test('frames for tunnels never opened are dropped and counted; past the limit the node is fenced', async () => {
    const node = await connect();
    const before = { ...(await stats()) };
    const pending = chat(stack);
    const t = await node.nextTunnel();
    for (let i = 0; i < MAX_SESSION_VIOLATIONS; i++) node.data(t.tunnelId + 1000 + i, 0, 'junk');
    node.answer(t.tunnelId, ['{"ok":1}']);
    const res = await pending;
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'data: {"ok":1}\n\n', 'the open tunnel got exactly its own bytes');
    assert.equal((await stats()).unknownTunnelFrames - before.unknownTunnelFrames, MAX_SESSION_VIOLATIONS);
    assert.equal(node.endedWith, undefined, 'still connected at the limit');
    node.data(0, 0, 'one too many');
    await node.ended;
    const rejected = node.received.find((m) => m.msg.case === 'rejected');
    assert.match(rejected?.msg.case === 'rejected' ? rejected.msg.value.reason : '', /fenced for protocol violations/);
    assert.equal((await stats()).nodesFenced - before.nodesFenced, 1);
    await waitUntil(() => stack.edge.driver.status().nodes.every((n) => !n.connected), 'the node to be offline');
    // What an operator sees: the same counts in /metrics, whatever thread held the session.
    const metrics = await stack.edge.scrapeMetrics();
    const counted = (kind: string): number => Number(new RegExp(`^edge_node_protocol_events_total\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(metrics)?.[1] ?? 0);
    const now = await stats();
    assert.equal(counted('nodes_fenced'), now.nodesFenced);
    assert.equal(counted('unknown_tunnel_frames'), now.unknownTunnelFrames);
    assert.ok(counted('unknown_tunnel_frames') >= MAX_SESSION_VIOLATIONS);
  });

  test('frames in flight when the edge cancelled a tunnel are dropped as late frames, never a violation', async () => {
    const node = await connect();
    const before = { ...(await stats()) };
    const abort = new AbortController();
    const pending = fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      signal: abort.signal,
    });
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, 'data: a\n\n');
    const res = await pending;
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    abort.abort();
    await node.waitFor((m) => m.msg.case === 'cancel' && m.msg.value.tunnelId === t.tunnelId);
    node.data(t.tunnelId, 2, 'data: b\n\n');
    node.end(t.tunnelId, 3);
    await waitFor(async () => (await stats()).lateFrames === before.lateFrames + 2, 'both late frames to be counted');
    assert.equal((await stats()).framesAfterEnd, before.framesAfterEnd, 'a late frame after a cancel is no violation');
    assert.equal(node.endedWith, undefined, 'late frames never fence a node');
  });

  test('frames after the node\'s own END or ERROR are violations: a node that keeps sending them is fenced', async () => {
    const node = await connect();
    const before = { ...(await stats()) };
    const first = chat(stack);
    const t1 = await node.nextTunnel();
    node.answer(t1.tunnelId, ['a']);
    assert.equal(await (await first).text(), 'data: a\n\n');
    const second = chat(stack, false);
    const t2 = await node.nextTunnel();
    node.error(t2.tunnelId, 0, 'upstream_error');
    assert.equal((await second).status, 502);
    await (await second).arrayBuffer();
    for (let i = 0; i < MAX_SESSION_VIOLATIONS; i++) node.data(i % 2 === 0 ? t1.tunnelId : t2.tunnelId, 3 + i, 'after the end');
    await waitFor(async () => (await stats()).framesAfterEnd === before.framesAfterEnd + MAX_SESSION_VIOLATIONS, 'every frame after END/ERROR to count');
    assert.equal((await stats()).lateFrames, before.lateFrames, 'not taken for late frames');
    assert.equal(node.endedWith, undefined, 'still connected at the limit');
    node.end(t1.tunnelId, 100);
    await node.ended;
    const rejected = node.received.find((m) => m.msg.case === 'rejected');
    assert.match(rejected?.msg.case === 'rejected' ? rejected.msg.value.reason : '', /frames after END or ERROR/);
    assert.equal((await stats()).nodesFenced - before.nodesFenced, 1);
    await waitUntil(() => stack.edge.driver.status().nodes.every((n) => !n.connected), 'the node to be offline');
  });

  test('heartbeat silence is measured on a monotonic clock: a wall-clock jump of a minute drops no node', async () => {
    const node = await connect();
    const before = { ...(await stats()) };
    const realNow = Date.now;
    // The stack's heartbeat timeout is 1 s, checked every 200 ms. The node keeps quiet for 700 ms
    // (within the timeout) while the wall clock jumps a minute ahead: several checks see the jump.
    node.pauseHeartbeats();
    Date.now = () => realNow() + 60_000;
    try {
      await new Promise((resolve) => setTimeout(resolve, 700));
    } finally {
      Date.now = realNow;
      node.resumeHeartbeats();
    }
    assert.equal((await stats()).heartbeatTimeouts, before.heartbeatTimeouts, 'no session dropped for the clock step');
    assert.equal(node.endedWith, undefined);
    const pending = chat(stack);
    const t = await node.nextTunnel();
    node.answer(t.tunnelId, ['still here']);
    assert.equal(await (await pending).text(), 'data: still here\n\n');
  });

  test('Registered advertises limits.max_frame_bytes, the largest DATA payload the node may send', async () => {
    const node = await connect();
    const registered = node.received.find((m) => m.msg.case === 'registered');
    assert.equal(registered?.msg.case === 'registered' ? registered.msg.value.maxFrameBytes : undefined, 64 * 1024);
  });

  test('headers a client names in Connection are not forwarded to the node (RFC 9110 7.6.1)', async () => {
    const node = await connect();
    const pending = new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', connection: 'keep-alive, X-Hop-Secret, x-other-hop', 'x-hop-secret': 's3cret', 'x-other-hop': '1', 'x-end-to-end': 'kept' },
      }, resolve);
      req.on('error', reject);
      req.end(JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }));
    });
    const t = await node.nextTunnel();
    node.answer(t.tunnelId, ['ok']);
    const res = await pending;
    res.resume();
    const names = t.headers.map((h) => h.name.toLowerCase());
    assert.ok(names.includes('x-end-to-end'), 'an end-to-end header is forwarded');
    assert.deepEqual(names.filter((n) => n === 'x-hop-secret' || n === 'x-other-hop' || n === 'connection'), [], 'nominated headers stay at the edge');
  });

  test('x-edge-* headers from the provider are dropped; the client sees only the edge\'s own', async () => {
    const node = await connect();
    const pending = chat(stack);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, [...SSE, { $typeName: 'edge.v1.Header', name: 'X-Edge-Node', value: 'forged' }, { $typeName: 'edge.v1.Header', name: 'x-edge-overhead-ms', value: '0' }, { $typeName: 'edge.v1.Header', name: 'x-edge-hop-ms', value: '0' }, { $typeName: 'edge.v1.Header', name: 'x-provider-own', value: 'kept' }]);
    node.data(t.tunnelId, 1, 'data: x\n\n');
    node.end(t.tunnelId, 2);
    const res = await pending;
    await res.text();
    assert.equal(res.headers.get('x-edge-node'), NODE_ID);
    assert.notEqual(res.headers.get('x-edge-overhead-ms'), '0, 0');
    assert.doesNotMatch(res.headers.get('x-edge-overhead-ms') ?? '', /,/);
    assert.equal(res.headers.get('x-provider-own'), 'kept');
    // This node measures no provider time (upstream_us 0, as an older agent): the edge claims no split.
    assert.equal(res.headers.get('x-edge-hop-ms'), null);
    assert.equal(res.headers.get('x-edge-upstream-ms'), null);
  });

  test('a gap or a duplicate in seq fails that tunnel only (502 node_protocol_error, CANCEL sent); its neighbour completes', async () => {
    const node = await connect();
    const good = chat(stack);
    const tGood = await node.nextTunnel();
    const gap = chat(stack);
    const tGap = await node.nextTunnel();
    const dup = chat(stack);
    const tDup = await node.nextTunnel();
    node.headers(tGood.tunnelId, 0);
    node.data(tGap.tunnelId, 1, 'skipped HEADERS (seq 0)');
    node.headers(tDup.tunnelId, 0);
    node.headers(tDup.tunnelId, 0);
    node.data(tGood.tunnelId, 1, 'data: good\n\n');
    node.end(tGood.tunnelId, 2);
    assert.equal((await gap).status, 502);
    assert.equal(await errorCode(await gap), 'node_protocol_error');
    const dupRes = await dup;
    assert.equal(dupRes.status, 200, 'headers had gone out before the duplicate');
    assert.match(await dupRes.text(), /"code":"node_protocol_error"/);
    assert.equal(await (await good).text(), 'data: good\n\n');
    await waitUntil(() => node.cancels().length === 2, 'both CANCELs to reach the node');
    assert.deepEqual(node.cancels().map((c) => c.tunnelId).sort(), [tGap.tunnelId, tDup.tunnelId].sort());
    assert.ok((await stats()).outOfOrderFrames >= 2);
  });

  test('an empty DATA frame between chunks neither ends nor corrupts the client\'s body, and the keep-alive connection serves the next answer', async () => {
    const node = await connect();
    // One connection for both requests: a stray chunk terminator would show up as junk at the start of the second answer.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = (): Promise<{ status: number; body: string; socket: unknown }> =>
      new Promise((resolve, reject) => {
        const body = JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] });
        const req = http.request(`${stack.baseURL}/chat/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, socket: req.socket }));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(body);
      });
    try {
      for (let round = 0; round < 2; round++) {
        const answer = post();
        const tunnel = await node.nextTunnel();
        node.headers(tunnel.tunnelId, 0);
        node.data(tunnel.tunnelId, 1, `data: first ${round}\n\n`);
        node.data(tunnel.tunnelId, 2, '');
        node.data(tunnel.tunnelId, 3, `data: second ${round}\n\n`);
        node.data(tunnel.tunnelId, 4, '');
        node.end(tunnel.tunnelId, 5);
        const got = await answer;
        assert.equal(got.status, 200);
        assert.equal(got.body, `data: first ${round}\n\ndata: second ${round}\n\n`);
      }
    } finally {
      agent.destroy();
    }
  });

  test('DATA before HEADERS, END before HEADERS and a second HEADERS each fail their tunnel', async () => {
    const node = await connect();
    const before = (await stats()).badFrameSequences;
    const a = chat(stack);
    const ta = await node.nextTunnel();
    const b = chat(stack);
    const tb = await node.nextTunnel();
    const c = chat(stack);
    const tc = await node.nextTunnel();
    node.data(ta.tunnelId, 0, 'no headers yet');
    node.end(tb.tunnelId, 0);
    node.headers(tc.tunnelId, 0);
    node.data(tc.tunnelId, 1, 'data: x\n\n');
    node.headers(tc.tunnelId, 2);
    assert.equal(await errorCode(await a), 'node_protocol_error');
    assert.equal(await errorCode(await b), 'node_protocol_error');
    assert.match(await (await c).text(), /^data: x\n\ndata: \{"error".*"node_protocol_error"/);
    assert.equal((await stats()).badFrameSequences - before, 3);
  });

  test('an ERROR frame before HEADERS gives the mapped status; an unknown code is a 502 upstream_error', async () => {
    const node = await connect();
    const a = chat(stack);
    const ta = await node.nextTunnel();
    node.error(ta.tunnelId, 0, 'upstream_timeout');
    assert.equal((await a).status, 504);
    const b = chat(stack);
    const tb = await node.nextTunnel();
    node.error(tb.tunnelId, 0, 'what-is-this', 'x'.repeat(10_000));
    const res = await b;
    assert.equal(res.status, 502);
    assert.equal(await errorCode(res), 'upstream_error');
  });

  test('a DATA frame over max_frame_bytes fails its tunnel only; a message over the transport cap ends the node connection', async () => {
    const node = await connect();
    const before = (await stats()).oversizedFrames;
    const big = chat(stack);
    const tBig = await node.nextTunnel();
    const small = chat(stack);
    const tSmall = await node.nextTunnel();
    node.headers(tBig.tunnelId, 0);
    node.send(dataFrame(tBig.tunnelId, 1, new Uint8Array(64 * 1024 + 1)));
    assert.match(await (await big).text(), /"code":"node_protocol_error"/);
    assert.equal((await stats()).oversizedFrames, before + 1);
    node.answer(tSmall.tunnelId, ['small']);
    assert.equal(await (await small).text(), 'data: small\n\n', 'the other tunnel is untouched');
    // Far over the limit: grpc-js refuses the message and the stream ends.
    const pending = chat(stack, false);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0, JSON_HEADERS);
    node.send(dataFrame(t.tunnelId, 1, new Uint8Array(1024 * 1024)));
    // Headers may or may not have been flushed: either way the client must not get a complete-looking body.
    const res = await pending.catch((e: unknown) => e);
    if (res instanceof Response) await assert.rejects(res.text(), 'the truncated response is cut, not passed off as whole');
    else assert.ok(res instanceof Error);
    const status = await node.ended;
    assert.match(status.details, /larger than max/);
  });

  test('a HEADERS frame over the 64 KiB response head limit fails its tunnel only (502 node_protocol_error, counted, CANCEL), wherever the client landed', async () => {
    const node = await connect();
    const before = (await stats()).oversizedFrames;
    const big = chat(stack, false);
    const tBig = await node.nextTunnel();
    const small = chat(stack);
    const tSmall = await node.nextTunnel();
    // 100 KiB: inside the transport cap, far past any head the agent reads from a provider.
    node.headers(tBig.tunnelId, 0, [...JSON_HEADERS, { $typeName: 'edge.v1.Header', name: 'x-padding', value: 'a'.repeat(100 * 1024) }]);
    node.data(tBig.tunnelId, 1, '{}');
    node.end(tBig.tunnelId, 2);
    const res = await big;
    assert.equal(res.status, 502);
    assert.equal(await errorCode(res), 'node_protocol_error');
    assert.equal((await stats()).oversizedFrames, before + 1);
    const cancel = await node.waitFor((m) => m.msg.case === 'cancel' && m.msg.value.tunnelId === tBig.tunnelId);
    assert.match(cancel.msg.case === 'cancel' ? cancel.msg.value.reason : '', /HEADERS frame of \d+ header bytes/);
    node.answer(tSmall.tunnelId, ['small']);
    assert.equal(await (await small).text(), 'data: small\n\n', 'the other tunnel is untouched');
  });

  test('DATA past the flow-control window fails that tunnel only, as a counted violation with CANCEL; credit granted widens it', async () => {
    const node = await connect();
    const before = { ...(await stats()) };
    const pending = chat(stack);
    const t = await node.nextTunnel();
    assert.equal(t.initialCredit, 64 * 1024);
    const event = (c: string): Buffer => Buffer.from(`data: ${c.repeat(40 * 1024 - 8)}\n\n`);
    node.headers(t.tunnelId, 0);
    // Two 40 KiB frames in one message: no credit can come back between them, so the second is past the 64 KiB window.
    const frames = [1, 2].map((seq) => dataFrame(t.tunnelId, seq, event('x')).msg.value as TunnelFrame);
    node.send({ $typeName: 'edge.v1.NodeMessage', msg: { case: 'frameBatch', value: { $typeName: 'edge.v1.FrameBatch', frames } } });
    const res = await pending;
    // The first frame went out; the stream ends with the error, in band.
    assert.match(await res.text(), /^data: x+\n\ndata: \{"error".*"code":"node_protocol_error"/);
    const cancel = await node.waitFor((m) => m.msg.case === 'cancel' && m.msg.value.tunnelId === t.tunnelId);
    assert.match(cancel.msg.case === 'cancel' ? cancel.msg.value.reason : '', /protocol error: .*flow-control window/);
    const after = await stats();
    assert.equal(after.windowOverruns - (before.windowOverruns ?? 0), 1, 'counted as a window overrun');
    assert.equal(after.lateFrames, before.lateFrames, 'the overrun is the violation, not a late frame');

    // A node that waits for the credit the client's reads earn may send past the initial window.
    const second = chat(stack);
    const t2 = await node.nextTunnel();
    node.headers(t2.tunnelId, 0);
    node.send(dataFrame(t2.tunnelId, 1, event('y')));
    const ok = await second;
    const reader = (ok.body as ReadableStream<Uint8Array>).getReader();
    let got = 0;
    while (got < 40 * 1024) got += (await reader.read()).value?.length ?? 0;
    await node.waitFor((m) => m.msg.case === 'credit' && m.msg.value.tunnelId === t2.tunnelId);
    node.send(dataFrame(t2.tunnelId, 2, event('z')));
    node.end(t2.tunnelId, 3);
    for (let r = await reader.read(); !r.done; r = await reader.read()) got += r.value.length;
    assert.equal(got, 80 * 1024, 'both frames relayed whole');
    assert.equal((await stats()).windowOverruns, after.windowOverruns);
  });

  test('an ERROR frame with 100 KiB of text (up to max_frame_bytes fit) reaches the client and the run record cut to 4,096 characters', async () => {
    const node = await connect();
    const pending = chat(stack, false);
    const t = await node.nextTunnel();
    node.error(t.tunnelId, 0, 'upstream_error', `E${'r'.repeat(100 * 1024)}`);
    const res = await pending;
    assert.equal(res.status, 502);
    const message = ((await res.json()) as { error: { message: string } }).error.message;
    assert.ok(message.length < 5_000, `the client got ${message.length} characters`);
    const runId = res.headers.get('x-request-id') ?? '';
    await waitUntil(() => stack.edge.runs.get(runId)?.state === 'finished', 'the run to be recorded');
    // The last thousand runs are kept: with the default 4 MiB max_frame_bytes a node could make each of them megabytes.
    const kept = stack.edge.runs.get(runId)?.error ?? '';
    assert.match(kept, /^Er+…$/);
    assert.ok(kept.length <= 4_097, `the run record kept ${kept.length} characters`);
  });

  test('a second Register on one stream is ignored; the session keeps working', async () => {
    const node = await connect();
    const before = (await stats()).duplicateRegisters;
    node.register(NODE_ID, 'wrong-token', [PROVIDER_ID]);
    await waitFor(async () => (await stats()).duplicateRegisters === before + 1, 'the duplicate to be counted');
    const pending = chat(stack);
    const t = await node.nextTunnel();
    node.answer(t.tunnelId, ['still fine']);
    assert.equal(await (await pending).text(), 'data: still fine\n\n');
  });

  test('a second Register sent right behind the first, before any answer, is ignored too: the node stays connected and serves', async () => {
    const node = new FakeNode(stack.edge.grpcPort);
    nodes.push(node);
    const before = (await stats()).duplicateRegisters;
    // With I/O workers the first one's answer comes from the scheduler's thread: the second arrives while it is awaited.
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
    await node.registered();
    await waitFor(async () => (await stats()).duplicateRegisters === before + 1, 'the duplicate to be counted');
    assert.equal(node.received.filter((m) => m.msg.case === 'registered').length, 1, 'registered once');
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.ok(stack.edge.driver.status().nodes.some((n) => n.id === NODE_ID && n.connected), 'still connected');
    const pending = chat(stack);
    const t = await node.nextTunnel();
    node.answer(t.tunnelId, ['served']);
    assert.equal(await (await pending).text(), 'data: served\n\n');
  });

  test('a node\'s own text (agent_version, a Leaving reason) is cut before it is kept, and Leaving said again is ignored: the event history stays small', async () => {
    const events: EdgeEvent[] = [];
    const subscription = stack.edge.events.subscribe({ readable: (sub) => { for (let e = sub.shift(); e !== undefined; e = sub.shift()) events.push(e.event); } }, 4096, false);
    try {
      const node = new FakeNode(stack.edge.grpcPort);
      nodes.push(node);
      node.send(registerMessage(NODE_ID, NODE_TOKEN, `v${'9'.repeat(100_000)}`, [PROVIDER_ID]));
      await node.registered();
      // The agent says Leaving once per stream; this one repeats it, each with 100 KB of text (the history keeps 1,024 events).
      const before = (await stats()).unknownTunnelFrames;
      for (let i = 0; i < 20; i++) node.send(leavingMessage(`going ${i} ${'x'.repeat(100_000)}`));
      // A frame behind them, counted once every Leaving before it was read.
      node.data(1_000_000, 0, 'marker');
      await waitFor(async () => (await stats()).unknownTunnelFrames === before + 1, 'the messages to be read');
      node.close();
      await waitUntil(() => events.some((e) => e.type === 'node.disconnected' && e.node === NODE_ID), 'the node to be gone');
      const connected = events.filter((e) => e.type === 'node.connected');
      assert.equal(connected.length, 1);
      assert.ok(connected[0].type === 'node.connected' && connected[0].agentVersion.length <= 129, 'agent_version cut');
      const leaving = events.filter((e) => e.type === 'node.leaving');
      assert.equal(leaving.length, 1, 'one node.leaving for one stream');
      assert.ok(leaving[0].type === 'node.leaving' && leaving[0].reason.startsWith('going 0 ') && leaving[0].reason.length <= 4_097, 'its reason cut');
      assert.ok(JSON.stringify(events).length < 20_000, `the events took ${JSON.stringify(events).length} characters`);
    } finally {
      subscription.close();
    }
  });

  test('a second connection with the same node id supersedes the first: its tunnels fail, the new one serves', async () => {
    const first = await connect();
    const genBefore = stack.edge.driver.status().nodes[0].generation;
    const pending = chat(stack);
    const t = await first.nextTunnel();
    first.headers(t.tunnelId, 0);
    first.data(t.tunnelId, 1, 'data: partial\n\n');
    const res = await pending;
    const second = await connect();
    assert.ok(stack.edge.driver.status().nodes[0].generation > genBefore);
    assert.match(await res.text(), /^data: partial\n\ndata: \{"error".*"node_disconnected"/);
    await first.ended;
    // Frames from the superseded stream can no longer reach anyone.
    const next = chat(stack);
    const t2 = await second.nextTunnel();
    second.answer(t2.tunnelId, ['from the new session']);
    assert.equal(await (await next).text(), 'data: from the new session\n\n');
    assert.ok((await stats()).supersededSessions >= 1);
  });

  test('frames before Register are dropped; a node that never registers is closed after the register timeout', async () => {
    const before = { ...(await stats()) };
    const node = new FakeNode(stack.edge.grpcPort);
    nodes.push(node);
    node.data(1, 0, 'too early');
    const status = await node.ended;
    assert.ok(status);
    assert.equal((await stats()).framesBeforeRegister - before.framesBeforeRegister, 1);
    assert.equal((await stats()).registerTimeouts - before.registerTimeouts, 1);
  });

  test('an unknown node or a bad token is rejected and counted, with one answer for both (the ids are not told)', async () => {
    const before = (await stats()).rejectedRegistrations;
    for (const [id, token] of [['nobody', NODE_TOKEN], [NODE_ID, 'bad-token']]) {
      const node = new FakeNode(stack.edge.grpcPort);
      nodes.push(node);
      node.register(id, token, [PROVIDER_ID]);
      await assert.rejects(node.registered(), /^Error: rejected: unknown node id or bad token$/);
      await node.ended;
    }
    assert.equal((await stats()).rejectedRegistrations - before, 2);
  });

  test('a Register announcing too many or too long provider ids is rejected before anything reaches the scheduler', async () => {
    const before = (await stats()).rejectedRegistrations;
    const cases: [string[], RegExp][] = [
      [Array.from({ length: 1025 }, (_, i) => `p-${i}`), /more than 1024 provider ids/],
      [[PROVIDER_ID, 'x'.repeat(1_000)], /longer than 256 bytes/],
    ];
    for (const [ids, reason] of cases) {
      const node = new FakeNode(stack.edge.grpcPort);
      nodes.push(node);
      node.register(NODE_ID, NODE_TOKEN, ids);
      await assert.rejects(node.registered(), reason);
      await node.ended;
    }
    assert.equal((await stats()).rejectedRegistrations - before, 2);
    // The edge (and, with workers, the worker that took the stream) is unharmed.
    const node = await connect();
    const pending = chat(stack);
    const t = await node.nextTunnel();
    node.answer(t.tunnelId, ['fine']);
    assert.equal(await (await pending).text(), 'data: fine\n\n');
  });

  test('an Announce or a Register with more endpoint lists or probe results than providers it may name is refused: the edge does no per-entry work for them', async () => {
    const node = await connect();
    const before = { ...(await stats()) };
    // One entry per provider is what an agent sends; each entry costs a lookup among the ids, so a message of
    // hundreds of thousands (up to the transport cap) held the node's thread for about a second, again per Announce.
    const endpoints = new Map(Array.from({ length: 1025 }, (_, i) => [`p-${i}`, ['chat']] as const));
    node.send(announceMessage([PROVIDER_ID], endpoints, [], new Map()));
    node.send(announceMessage([PROVIDER_ID], new Map(), Array.from({ length: 1025 }, () => ({ providerId: PROVIDER_ID, healthy: false, detail: '' })), new Map()));
    await waitFor(async () => (await stats()).refusedAnnounces - before.refusedAnnounces === 2, 'both Announces to be refused');
    const other = new FakeNode(stack.edge.grpcPort);
    nodes.push(other);
    other.send(registerMessage(NODE_ID, NODE_TOKEN, 'fake-node/1', [PROVIDER_ID], 0, 0, endpoints));
    await assert.rejects(other.registered(), /more than 1024 provider endpoint lists/);
    // Still offered and healthy as before: the refused Announce's failing probes changed nothing.
    const pending = chat(stack);
    const t = await node.nextTunnel();
    node.answer(t.tunnelId, ['fine']);
    assert.equal(await (await pending).text(), 'data: fine\n\n');
  });

  test('a FrameBatch of more frames than allowed fences the node; its tunnels fail', async () => {
    const node = await connect();
    const before = (await stats()).nodesFenced;
    const pending = chat(stack);
    const t = await node.nextTunnel();
    node.headers(t.tunnelId, 0);
    node.data(t.tunnelId, 1, 'data: partial\n\n'); // past the first byte: no retry elsewhere
    const res = await pending;
    const frames = Array.from({ length: MAX_BATCH_FRAMES + 1 }, (_, i) => dataFrame(t.tunnelId, i + 2, new Uint8Array(0)).msg.value as TunnelFrame);
    node.send({ $typeName: 'edge.v1.NodeMessage', msg: { case: 'frameBatch', value: { $typeName: 'edge.v1.FrameBatch', frames } } });
    assert.match(await res.text(), /^data: partial\n\ndata: \{"error".*"node_disconnected"/);
    await node.ended;
    assert.equal((await stats()).nodesFenced - before, 1);
  });

  test('a node that never answers a tunnel: the time-to-first-byte timeout fires and CANCEL reaches the node', async () => {
    const node = await connect();
    const pending = chat(stack, false);
    const t = await node.nextTunnel();
    const res = await pending;
    assert.equal(res.status, 504);
    assert.equal(await errorCode(res), 'first_byte_timeout');
    await node.waitFor((m) => m.msg.case === 'cancel' && m.msg.value.tunnelId === t.tunnelId);
    // Its answer, when it finally comes, is a late frame for nobody.
    node.answer(t.tunnelId, ['too late']);
  });
});

describe('a node\'s probe detail in the edge log', { skip: testWorkers() > 0 ? 'I/O workers log to their own stdout' : false }, () => {
  test('is cut as an ERROR frame\'s text is: a verdict with a megabyte of detail logs kilobytes', async () => {
    const lines: string[] = [];
    const stack = await startStack({ startAgent: false, logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }) });
    try {
      const node = new FakeNode(stack.edge.grpcPort);
      node.send(registerMessage(NODE_ID, NODE_TOKEN, 'v1', [PROVIDER_ID]));
      await node.registered();
      node.send(heartbeatMessage(Date.now(), [{ providerId: PROVIDER_ID, healthy: false, detail: `refused ${'x'.repeat(1_000_000)}` }]));
      await waitUntil(() => lines.some((line) => line.includes('provider health probe fails')), 'the verdict to be logged');
      const line = lines.find((l) => l.includes('provider health probe fails')) as string;
      assert.match(line, /"detail":"refused x+…"/);
      assert.ok(line.length < 5_000, `a log line of ${line.length} characters`);
      node.close();
    } finally {
      await stack.close();
    }
  });
});
