// The node agent end to end over real gRPC on loopback: a fake edge (grpc-js
// server) on one side, a node:http provider on the other.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { pino } from 'pino';
import { readFileSync } from 'node:fs';
import { FrameKind, type TunnelFrame } from '../../src/gen/edge/v1/tunnel_pb.js';
import { NodeAgent } from '../../src/agent/agent.js';
import type { AgentConfig } from '../../src/agent/config.js';
import { agentConfig, FakeEdge, silentLogger, waitFor, type EdgeStream } from './fake-edge.js';
import { closedPort, UpstreamServer, type UpstreamHandler } from './upstream-server.js';

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const te = new TextEncoder();

interface Rig {
  edge: FakeEdge;
  upstream: UpstreamServer;
  agent: NodeAgent;
  stream: EdgeStream;
}

/** A fake edge, one provider `p1` (api key `provider-secret`, base path /prefix) and a started, registered agent. */
async function rig(t: TestContext, handler: UpstreamHandler, configure?: (config: AgentConfig) => AgentConfig, stopGraceMs = 500): Promise<Rig> {
  const edge = await FakeEdge.start();
  const upstream = await UpstreamServer.start(handler);
  let config = agentConfig(edge.address, [{ id: 'p1', baseUrl: `${upstream.url}/prefix/`, apiKey: 'provider-secret' }]);
  if (configure !== undefined) config = configure(config);
  const agent = new NodeAgent(config, { logger: silentLogger, stopGraceMs });
  t.after(async () => {
    await agent.stop();
    edge.close();
    await upstream.close();
  });
  agent.start();
  const stream = await edge.registeredStream(0);
  await waitFor('the agent to see Registered', () => (agent.isConnected() ? true : undefined));
  return { edge, upstream, agent, stream };
}

function kinds(frames: TunnelFrame[]): FrameKind[] {
  return frames.map((f) => f.kind);
}

function dataOf(frames: TunnelFrame[]): Buffer {
  return Buffer.concat(frames.filter((f) => f.kind === FrameKind.DATA).map((f) => f.data));
}

test('registers with node id, token, agent version and provider ids; Registered sets the generation', async (t) => {
  const edge = await FakeEdge.start();
  const config = agentConfig(edge.address, [
    { id: 'gpu-1-mock', baseUrl: 'http://127.0.0.1:9' },
    { id: 'gpu-1-cli', type: 'cli' },
  ]);
  const agent = new NodeAgent(config, { logger: silentLogger });
  t.after(async () => {
    await agent.stop();
    edge.close();
  });
  assert.equal(agent.isConnected(), false);
  const registered = once(agent, 'registered', { signal: AbortSignal.timeout(2000) });
  agent.start();
  const stream = await edge.registeredStream(0);
  assert.deepEqual(
    { nodeId: stream.register?.nodeId, token: stream.register?.token, version: stream.register?.agentVersion, providers: stream.register?.providerIds },
    { nodeId: 'gpu-1', token: 'demo-node-token-change-me-7f3a9c', version: PACKAGE_VERSION, providers: ['gpu-1-mock', 'gpu-1-cli'] },
  );
  assert.deepEqual(await registered, [1]);
  assert.equal(agent.generation, 1);
  assert.equal(agent.isConnected(), true);
});

test('a tunnel streams HEADERS, DATA as the provider writes it, then END, with seq 0.. and the exact bytes', async (t) => {
  const body = te.encode('{"model":"served-model","stream":true,"messages":[{"role":"user","content":"héllo"}]}');
  const firstChunk = Buffer.from('data: {"choices":[{"delta":{"content":"hé"}}]}\n\n');
  const restChunks = [Buffer.from([0, 1, 2, 254, 255]), Buffer.from('data: [DONE]\n\n')];
  let stream: EdgeStream | undefined;
  const r = await rig(t, async (_req, res) => {
    res.writeHead(201, {
      'content-type': 'text/event-stream',
      'x-provider': 'mock',
      'keep-alive': 'timeout=5',
      connection: 'keep-alive, x-upstream-hop',
      'x-upstream-hop': 'only-this-hop',
      'set-cookie': ['a=1', 'b=2'],
    });
    res.write(firstChunk);
    // The provider holds the rest back until the edge has the first chunk: proof the agent does not buffer.
    await waitFor('first DATA at the edge', () => (stream?.framesOf(7).some((f) => f.kind === FrameKind.DATA) === true ? true : undefined));
    for (const chunk of restChunks) res.write(chunk);
    res.end();
  });
  stream = r.stream;
  r.stream.sendTunnel({
    runId: 'run-1',
    tunnelId: 7,
    providerId: 'p1',
    method: 'POST',
    path: '/v1/chat/completions',
    headers: [
      { name: 'Content-Type', value: 'application/json' },
      { name: 'x-request-id', value: 'req-42' },
      { name: 'Host', value: 'edge.example.com' },
      { name: 'Content-Length', value: '999' },
      { name: 'TE', value: 'trailers' },
      { name: 'connection', value: 'x-hop-only' },
      { name: 'x-hop-only', value: 'secret-to-this-hop' },
    ],
    body,
    stream: true,
  });

  const frames = await r.stream.terminalFrames(7);
  assert.equal(frames[0].kind, FrameKind.HEADERS);
  assert.equal(frames.at(-1)?.kind, FrameKind.END);
  assert.ok(kinds(frames).slice(1, -1).every((k) => k === FrameKind.DATA));
  assert.ok(frames.length >= 4, 'the held-back chunks came as their own DATA frames');
  assert.deepEqual(frames.map((f) => f.seq), frames.map((_, i) => i));
  assert.deepEqual(dataOf(frames), Buffer.concat([firstChunk, ...restChunks]));

  assert.equal(frames[0].status, 201);
  const responseHeaders = new Map(frames[0].headers.map((h) => [h.name, h.value]));
  assert.equal(responseHeaders.get('content-type'), 'text/event-stream');
  assert.equal(responseHeaders.get('x-provider'), 'mock');
  for (const hop of ['connection', 'keep-alive', 'transfer-encoding']) assert.equal(responseHeaders.has(hop), false, `${hop} is hop-by-hop`);
  assert.equal(responseHeaders.has('x-upstream-hop'), false, "a header the provider's Connection names stays on that hop");
  assert.deepEqual(frames[0].headers.filter((h) => h.name === 'set-cookie').map((h) => h.value), ['a=1', 'b=2'], 'a repeated header keeps every value, in order');

  const [seen] = r.upstream.requests;
  assert.equal(seen.method, 'POST');
  assert.equal(seen.url, '/prefix/v1/chat/completions');
  assert.deepEqual(seen.body, Buffer.from(body));
  assert.equal(seen.headers['content-type'], 'application/json');
  assert.equal(seen.headers['x-request-id'], 'req-42');
  assert.equal(seen.headers['content-length'], String(body.byteLength));
  assert.equal(seen.headers.host, `127.0.0.1:${r.upstream.port}`);
  assert.equal(seen.headers.te, undefined);
  assert.equal(seen.headers['x-hop-only'], undefined);
});

test("the client's authorization never reaches the provider; the provider's api_key does", async (t) => {
  const edge = await FakeEdge.start();
  const upstream = await UpstreamServer.start((_req, res) => res.end('ok'));
  const agent = new NodeAgent(
    agentConfig(edge.address, [
      { id: 'keyed', baseUrl: upstream.url, apiKey: 'provider-secret' },
      { id: 'open', baseUrl: upstream.url },
    ]),
    { logger: silentLogger },
  );
  t.after(async () => {
    await agent.stop();
    edge.close();
    await upstream.close();
  });
  agent.start();
  const stream = await edge.registeredStream(0);
  const clientAuth = [{ name: 'Authorization', value: 'Bearer client-secret' }];
  stream.sendTunnel({ tunnelId: 1, providerId: 'keyed', method: 'GET', path: '/v1/models', headers: clientAuth });
  stream.sendTunnel({ tunnelId: 2, providerId: 'open', method: 'GET', path: '/v1/models', headers: clientAuth });
  assert.equal(kinds(await stream.terminalFrames(1)).at(-1), FrameKind.END);
  assert.equal(kinds(await stream.terminalFrames(2)).at(-1), FrameKind.END);
  const authByPath = upstream.requests.map((r) => r.headers.authorization).sort();
  assert.deepEqual(authByPath, ['Bearer provider-secret', undefined]);
});

test('CANCEL aborts the upstream request at once and nothing more is sent for the tunnel', async (t) => {
  let upstreamClosedEarly = false;
  let ticker: NodeJS.Timeout | undefined;
  const r = await rig(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    ticker = setInterval(() => res.write('data: token\n\n'), 5);
    res.on('close', () => {
      clearInterval(ticker);
      upstreamClosedEarly = !res.writableFinished;
    });
  });
  t.after(() => clearInterval(ticker));
  r.stream.sendTunnel({ tunnelId: 3, providerId: 'p1', method: 'POST', path: '/v1/completions', body: te.encode('{}') });
  await waitFor('some DATA', () => (r.stream.framesOf(3).filter((f) => f.kind === FrameKind.DATA).length >= 2 ? true : undefined));
  r.stream.cancel(3);
  await waitFor('the provider to see the connection close', () => (upstreamClosedEarly ? true : undefined), 1000);
  // DATA already on the wire when the CANCEL crossed it may still land; an END or ERROR never may.
  await new Promise((resolve) => setTimeout(resolve, 80));
  const frames = r.stream.framesOf(3);
  assert.ok(kinds(frames).every((k) => k === FrameKind.HEADERS || k === FrameKind.DATA), 'neither END nor ERROR after a cancel');
  assert.equal(r.agent.isConnected(), true, 'a cancel affects only its tunnel');
});

test('connection refused -> ERROR upstream_connect_failed', async (t) => {
  const port = await closedPort();
  const r = await rig(t, (_req, res) => res.end(), (config) => ({
    ...config,
    providers: [{ id: 'p1', type: 'ollama', baseUrl: `http://127.0.0.1:${port}`, apiKey: undefined, connections: 2 }],
  }));
  r.stream.sendTunnel({ tunnelId: 4, providerId: 'p1', method: 'POST', path: '/api/chat', body: te.encode('{}') });
  const frames = await r.stream.terminalFrames(4);
  assert.deepEqual(frames.map((f) => [f.kind, f.seq, f.errorCode]), [[FrameKind.ERROR, 0, 'upstream_connect_failed']]);
  assert.match(frames[0].errorMessage, /ECONNREFUSED/);
});

test('the provider resetting mid-body -> HEADERS, DATA, then ERROR upstream_reset', async (t) => {
  const r = await rig(t, (req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: partial\n\n', () => setTimeout(() => req.socket.destroy(), 10));
  });
  r.stream.sendTunnel({ tunnelId: 5, providerId: 'p1', method: 'POST', path: '/v1/chat/completions', body: te.encode('{}') });
  const frames = await r.stream.terminalFrames(5);
  assert.deepEqual(kinds(frames), [FrameKind.HEADERS, FrameKind.DATA, FrameKind.ERROR]);
  assert.equal(frames[2].errorCode, 'upstream_reset');
  assert.equal(dataOf(frames).toString(), 'data: partial\n\n');
});

test('the provider resetting (RST) before or after its head -> an ERROR message a client understands, not a bare "read ECONNRESET"', async (t) => {
  const r = await rig(t, (req, res) => {
    if (req.url?.endsWith('/before')) {
      req.socket.resetAndDestroy();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: partial\n\n', () => setTimeout(() => req.socket.resetAndDestroy(), 10));
  });
  r.stream.sendTunnel({ tunnelId: 7, providerId: 'p1', method: 'POST', path: '/v1/chat/completions/before', body: te.encode('{}') });
  const before = await r.stream.terminalFrames(7);
  assert.deepEqual(before.map((f) => [f.kind, f.errorCode]), [[FrameKind.ERROR, 'upstream_reset']]);
  assert.equal(before[0].errorMessage, 'the provider closed the connection before answering (read ECONNRESET)');
  r.stream.sendTunnel({ tunnelId: 8, providerId: 'p1', method: 'POST', path: '/v1/chat/completions/after', body: te.encode('{}') });
  const after = await r.stream.terminalFrames(8);
  assert.deepEqual(kinds(after), [FrameKind.HEADERS, FrameKind.DATA, FrameKind.ERROR]);
  assert.equal(after[2].errorCode, 'upstream_reset');
  assert.equal(after[2].errorMessage, 'the provider closed the connection before the response was complete (read ECONNRESET)');
});

test('an unknown provider id -> ERROR unknown_provider', async (t) => {
  const r = await rig(t, (_req, res) => res.end());
  r.stream.sendTunnel({ tunnelId: 6, providerId: 'not-here', method: 'GET', path: '/' });
  const frames = await r.stream.terminalFrames(6);
  assert.deepEqual(frames.map((f) => [f.kind, f.errorCode]), [[FrameKind.ERROR, 'unknown_provider']]);
  assert.equal(r.upstream.requests.length, 0);
});

test('after the edge kills the stream the agent reconnects and registers again by itself', async (t) => {
  const r = await rig(t, (_req, res) => res.end());
  const disconnected = once(r.agent, 'disconnected', { signal: AbortSignal.timeout(2000) });
  const registered = once(r.agent, 'registered', { signal: AbortSignal.timeout(2000) });
  r.stream.kill();
  await disconnected;
  const second = await r.edge.registeredStream(1);
  assert.equal(second.register?.token, 'demo-node-token-change-me-7f3a9c');
  assert.deepEqual(await registered, [2]);
  assert.equal(r.agent.generation, 2);
});

test('a connection dropped right after it registered (another agent with the same id took over) does not restart the backoff', async (t) => {
  const edge = await FakeEdge.start();
  const agent = new NodeAgent(agentConfig(edge.address, [{ id: 'p1', baseUrl: 'http://127.0.0.1:9' }], { initialMs: 20, maxMs: 5_000 }), { logger: silentLogger });
  t.after(async () => {
    await agent.stop();
    edge.close();
  });
  // Each new connection is ended soon after it registers, as the edge ends one that another agent superseded.
  agent.on('registered', () => setTimeout(() => edge.streams.at(-1)?.kill(), 5));
  agent.start();
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  // Growing windows (20, 40, 80, ... ms) allow about ten reconnects in 1.5 s; one reset per registration, a hundred.
  const registrations = edge.streams.filter((s) => s.register !== undefined).length;
  assert.ok(registrations >= 3 && registrations <= 14, `${registrations} registrations in 1.5 s`);
});

test('a dropped connection aborts its running upstream requests, and the agent reconnects', async (t) => {
  let upstreamClosedEarly = false;
  const r = await rig(t, (_req, res) => {
    res.writeHead(200);
    res.write('started');
    res.on('close', () => (upstreamClosedEarly = !res.writableFinished));
  });
  r.stream.sendTunnel({ tunnelId: 8, providerId: 'p1', method: 'POST', path: '/v1/completions', body: te.encode('{}') });
  await waitFor('DATA', () => (r.stream.framesOf(8).some((f) => f.kind === FrameKind.DATA) ? true : undefined));
  r.agent.dropConnection();
  assert.equal(r.agent.isConnected(), false);
  await waitFor('the provider to see the close', () => (upstreamClosedEarly ? true : undefined), 1000);
  await r.edge.registeredStream(1);
  await waitFor('registered again', () => (r.agent.generation === 2 ? true : undefined));
  await waitFor('the edge to see the old stream end', () => (r.stream.closed ? true : undefined));
});

test('an edge that is not up yet: the agent keeps retrying with backoff and registers once it is', async (t) => {
  const port = await closedPort();
  const agent = new NodeAgent(agentConfig(`127.0.0.1:${port}`, [{ id: 'p', baseUrl: 'http://127.0.0.1:9' }]), { logger: silentLogger });
  let edge: FakeEdge | undefined;
  t.after(async () => {
    await agent.stop();
    edge?.close();
  });
  let failures = 0;
  agent.on('disconnected', () => failures++);
  agent.start();
  await waitFor('a few failed attempts', () => (failures >= 3 ? true : undefined));
  edge = await FakeEdge.start(undefined, port);
  await edge.registeredStream(0);
  await waitFor('registered', () => (agent.isConnected() ? true : undefined));
});

test('Rejected -> a rejected event, then it retries at the slowest pace, jittered within [max_ms/2, max_ms]', async (t) => {
  const edge = await FakeEdge.start({ kind: 'reject', reason: 'bad token for node gpu-1' });
  // The jitter's random source pinned at its bottom: the retry comes at max_ms / 2 (300 ms), never at exactly max_ms.
  const agent = new NodeAgent(agentConfig(edge.address, [{ id: 'p', baseUrl: 'http://127.0.0.1:9' }], { initialMs: 1, maxMs: 600 }), { logger: silentLogger, random: () => 0 });
  t.after(async () => {
    await agent.stop();
    edge.close();
  });
  const rejected = once(agent, 'rejected', { signal: AbortSignal.timeout(2000) });
  agent.start();
  assert.deepEqual(await rejected, ['bad token for node gpu-1']);
  const rejectedAt = Date.now();
  assert.equal(agent.isConnected(), false);

  edge.answer = { kind: 'accept' };
  await edge.registeredStream(1, 2000);
  const waited = Date.now() - rejectedAt;
  assert.ok(waited >= 280, `retried after ${waited} ms; a rejection waits at least max_ms / 2 (300), not initial_ms (1)`);
  assert.ok(waited < 500, `retried after ${waited} ms: the delay after a rejection is jittered, not max_ms (600) for every agent`);
  await waitFor('registered', () => (agent.isConnected() ? true : undefined));
});

test('silence from the edge beyond the heartbeat timeout -> the agent reconnects', async (t) => {
  const edge = await FakeEdge.start({ kind: 'accept', heartbeatIntervalMs: 40, heartbeatTimeoutMs: 200, sendHeartbeats: false });
  const agent = new NodeAgent(agentConfig(edge.address, [{ id: 'p', baseUrl: 'http://127.0.0.1:9' }]), { logger: silentLogger });
  t.after(async () => {
    await agent.stop();
    edge.close();
  });
  agent.start();
  const first = await edge.registeredStream(0);
  const registeredAt = Date.now();
  // The edge keeps the stream open but says nothing: a half-open connection.
  const [reason] = (await once(agent, 'disconnected', { signal: AbortSignal.timeout(2000) })) as [string];
  const silentFor = Date.now() - registeredAt;
  assert.ok(silentFor >= 190, `gave up after ${silentFor} ms, before the 200 ms timeout`);
  assert.match(reason, /heartbeat timeout/);
  assert.ok(first.messages.some((m) => m.msg.case === 'heartbeat'), 'the agent sent heartbeats while it waited');
  await edge.registeredStream(1);
});

test('heartbeats from the edge keep a quiet connection alive', async (t) => {
  const edge = await FakeEdge.start({ kind: 'accept', heartbeatIntervalMs: 40, heartbeatTimeoutMs: 250 });
  const agent = new NodeAgent(agentConfig(edge.address, [{ id: 'p', baseUrl: 'http://127.0.0.1:9' }]), { logger: silentLogger });
  t.after(async () => {
    await agent.stop();
    edge.close();
  });
  let disconnects = 0;
  agent.on('disconnected', () => disconnects++);
  agent.start();
  await edge.registeredStream(0);
  await new Promise((resolve) => setTimeout(resolve, 550)); // over twice the timeout
  assert.equal(disconnects, 0);
  assert.equal(edge.streams.length, 1);
});

test('stop() before the edge answered Register closes the stream and arms no reconnect', async (t) => {
  // An edge that takes the stream and never answers: the agent is still registering when it is stopped.
  const edge = await FakeEdge.start();
  edge.answer = { kind: 'silent' };
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
  const agent = new NodeAgent(agentConfig(edge.address, [{ id: 'p1', baseUrl: 'http://127.0.0.1:9' }], { initialMs: 50, maxMs: 100 }), { logger });
  t.after(() => edge.close());
  agent.start();
  await edge.registeredStream(0);
  await agent.stop();
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.deepEqual(lines.filter((l) => l.includes('reconnecting')), [], 'no reconnect announced');
  assert.equal(edge.streams.length, 1, 'and none made');
});

test('stop() sends Leaving, refuses new tunnels, lets open ones finish, and never reconnects', async (t) => {
  let finishSlow: (() => void) | undefined;
  const r = await rig(t, (_req, res) => {
    res.writeHead(200);
    res.write('first ');
    finishSlow = () => res.end('last');
  });
  r.stream.sendTunnel({ tunnelId: 9, providerId: 'p1', method: 'POST', path: '/v1/completions', body: te.encode('{}') });
  await waitFor('the slow tunnel to start', () => (finishSlow !== undefined ? true : undefined));

  const stopped = r.agent.stop();
  await waitFor('Leaving', () => (r.stream.messages.some((m) => m.msg.case === 'leaving') ? true : undefined));
  r.stream.sendTunnel({ tunnelId: 10, providerId: 'p1', method: 'GET', path: '/v1/models' });
  const refused = await r.stream.terminalFrames(10);
  assert.deepEqual(refused.map((f) => [f.kind, f.errorCode]), [[FrameKind.ERROR, 'node_leaving']]);

  finishSlow?.();
  await stopped;
  const frames = r.stream.framesOf(9);
  assert.equal(frames.at(-1)?.kind, FrameKind.END, 'the open tunnel finished before the agent left');
  assert.equal(dataOf(frames).toString(), 'first last');
  await new Promise((resolve) => setTimeout(resolve, 150));
  assert.equal(r.edge.streams.length, 1, 'no reconnect after stop');
  assert.equal(r.agent.isConnected(), false);
});

test('stop() aborts tunnels still open when the grace period ends, then closes the stream', async (t) => {
  let upstreamClosedEarly = false;
  const r = await rig(t, (_req, res) => {
    res.writeHead(200);
    res.write('never finishes');
    res.on('close', () => (upstreamClosedEarly = !res.writableFinished));
  }, undefined, 100);
  r.stream.sendTunnel({ tunnelId: 11, providerId: 'p1', method: 'POST', path: '/v1/completions', body: te.encode('{}') });
  await waitFor('DATA', () => (r.stream.framesOf(11).some((f) => f.kind === FrameKind.DATA) ? true : undefined));
  const started = Date.now();
  await r.agent.stop();
  assert.ok(Date.now() - started >= 95, 'the open tunnel got its grace period');
  await waitFor('the provider to see the close', () => (upstreamClosedEarly ? true : undefined), 1000);
  await waitFor('the edge to see the stream end', () => (r.stream.closed ? true : undefined), 1000);
  assert.ok(kinds(r.stream.framesOf(11)).every((k) => k !== FrameKind.END), 'an aborted tunnel never reports END');
});
