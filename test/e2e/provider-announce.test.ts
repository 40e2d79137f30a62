// Providers added to or removed from a running node agent's config file go
// live at its refresh_config, on the same connection (Announce): no agent
// restart, no reconnect, and a removed provider's open streams finish.
// Real parts: an edge with its admin listener, a node agent over gRPC from a
// config file on disk (dialling through a TCP relay the test can cut), mock
// providers; the openai SDK as the client.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { stringify as toYaml } from 'yaml';
import type { NodeAgent } from '../../src/agent/agent.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { startFileAgent, testWorkers, waitFor } from '../helpers/stack.js';

const NODE = 'gpu-a';

function agentRaw(grpcPort: number, providers: Record<string, string>): unknown {
  return {
    edge: { address: `127.0.0.1:${grpcPort}` },
    node: { id: NODE, token: 'gpu-a-token-long-enough' },
    providers: Object.entries(providers).map(([id, url]) => ({ id, type: 'openai_compat', base_url: url })),
    reconnect: { initial_ms: 50, max_ms: 200 },
    // Probes on (one round at start): their verdicts ride on every heartbeat, and a withdrawn provider's must stop.
    health: { interval_ms: 600_000 },
  };
}

/** A TCP relay to `port` whose open connections cut() destroys (the agent then reconnects through it). */
async function startRelay(port: number): Promise<{ port: number; cut: () => void; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : 0,
    cut: () => {
      for (const s of sockets) s.destroy();
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Chat requests a mock served (its probe's GETs left out). */
const chats = (mock: MockProvider): number => mock.requestLog.filter((r) => r.path === '/v1/chat/completions').length;

describe('providers added or removed by an agent refresh', () => {
  let relay: Awaited<ReturnType<typeof startRelay>>;
  let edge: RunningEdge;
  let slow: MockProvider;
  let fresh: MockProvider;
  let dir: string;
  let file: string;
  let agent: NodeAgent;

  async function admin(path: string, body?: unknown): Promise<{ status: number; json: any }> {
    const res = await fetch(`${edge.adminUrl}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  }
  const refresh = async (): Promise<{ status: string; message: string; result: { applied: string[]; restart_required: string[] } }> =>
    (await admin(`/admin/nodes/${NODE}/commands`, { kind: 'refresh_config' })).json.results[0];
  const health = async (provider: string): Promise<string> => (await admin('/admin/status')).json.providers.find((p: { id: string }) => p.id === provider).health;
  const client = (): OpenAI => new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 10_000 });

  /** The first `node.providers` event /admin/events carries from now on. */
  async function nextProvidersEvent(): Promise<{ node: string; added: string[]; withdrawn: string[] }> {
    const abort = new AbortController();
    const res = await fetch(`${edge.adminUrl}/admin/events?runs=0`, { signal: abort.signal });
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        const match = /event: node\.providers\ndata: (.*)\n/.exec(buffer);
        if (match !== null) return JSON.parse(match[1]);
      }
    } finally {
      abort.abort();
    }
    throw new Error('the event stream ended');
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'provider-announce-'));
    slow = await startMockProvider({ ttftMs: 0, tokens: 12, intervalMs: 40 });
    fresh = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 0 });
    edge = await startEdge(
      parseEdgeConfig(
        {
          listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
          heartbeat: { interval_ms: 200, timeout_ms: 2_000 },
          workers: { count: testWorkers() },
          admin: { host: '127.0.0.1', port: 0 },
          nodes: [{ id: NODE, token: 'gpu-a-token-long-enough', providers: [{ id: 'pa', capacity: 4 }, { id: 'pn', capacity: 4 }] }],
          models: [
            { alias: 'old-model', providers: { pa: 'm' }, queue_timeout_ms: 300 },
            { alias: 'new-model', providers: { pn: 'm' }, queue_timeout_ms: 300 },
          ],
        },
        'test',
      ),
      { logger: silentLogger(), admin: true },
    );
    relay = await startRelay(edge.grpcPort);
    file = join(dir, 'agent.yaml');
    await writeFile(file, toYaml(agentRaw(relay.port, { pa: slow.url })));
    agent = await startFileAgent(file);
  });

  after(async () => {
    await agent?.stop();
    await relay?.close();
    await edge?.close();
    await slow?.close();
    await fresh?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  test('an added provider serves at once, on the same connection', async () => {
    assert.equal(await health('pn'), 'not_announced');
    const refused = await client().chat.completions.create({ model: 'new-model', messages: [{ role: 'user', content: 'hi' }] }).catch((err: unknown) => err);
    assert.ok(refused instanceof OpenAI.APIError && refused.status === 503, `nothing serves new-model yet: ${String(refused)}`);
    const generation = agent.generation;

    await writeFile(file, toYaml(agentRaw(relay.port, { pa: slow.url, pn: fresh.url })));
    const event = nextProvidersEvent();
    await waitFor(async () => (await admin('/admin/status')).json.events.subscribers.length === 1, 'the event stream to be open');
    const answer = await refresh();
    assert.equal(answer.status, 'applied', answer.message);
    assert.deepEqual(answer.result.applied, ['providers[pn] (added)']);
    const announced = await event;
    assert.deepEqual([announced.node, announced.added, announced.withdrawn], [NODE, ['pn'], []], 'operators see the change in the event stream');
    // Probed at once, not a whole health.interval_ms (10 minutes here) later.
    await waitFor(async () => fresh.requestLog.some((r) => r.path === '/v1/models'), 'the added provider to be probed');
    await waitFor(async () => (await health('pn')) === 'ok', 'the edge to offer pn');
    const completion = await client().chat.completions.create({ model: 'new-model', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(completion.object, 'chat.completion');
    assert.equal(chats(fresh), 1, 'the new provider answered');
    assert.equal(agent.generation, generation, 'no reconnect: the same connection');
  });

  test("a removed provider takes nothing new, and its open stream finishes", async () => {
    const generation = agent.generation;
    const stream = await client().chat.completions.create({ model: 'old-model', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const chunks: string[] = [];
    const read = (async () => {
      for await (const chunk of stream) chunks.push(chunk.choices[0]?.delta?.content ?? '');
    })();
    await waitFor(async () => chunks.length > 1, 'the stream to be under way');

    await writeFile(file, toYaml(agentRaw(relay.port, { pn: fresh.url })));
    const answer = await refresh();
    assert.equal(answer.status, 'applied', answer.message);
    assert.deepEqual(answer.result.applied, ['providers[pa] (removed)']);
    await waitFor(async () => (await health('pa')) === 'not_announced', 'the edge to withdraw pa');

    await read;
    assert.equal(chunks.join('').length > 0, true);
    assert.equal(chats(slow), 1, 'only the stream reached pa');
    const refused = await client().chat.completions.create({ model: 'old-model', messages: [{ role: 'user', content: 'hi' }] }).catch((err: unknown) => err);
    assert.ok(refused instanceof OpenAI.APIError && refused.status === 503, `nothing serves old-model now: ${String(refused)}`);
    assert.equal(chats(slow), 1, 'no new request reached the removed provider');
    assert.equal(agent.generation, generation, 'no reconnect: the same connection');
    await waitFor(async () => (await admin('/admin/status')).json.providers.find((p: { id: string }) => p.id === 'pa').inFlight === 0, "pa's lease to be released");
    // The stream outlived several heartbeats (every 200 ms) since the withdrawal: none carried pa's verdict.
    const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    assert.doesNotMatch(metrics, /edge_node_protocol_events_total\{kind="unknown_probes"\} [1-9]/);
  });

  test('a reconnect registers the providers the refresh left', async () => {
    const generation = agent.generation;
    const registered = once(agent, 'registered');
    relay.cut();
    await registered;
    assert.notEqual(agent.generation, generation, 'a new connection');
    await waitFor(async () => (await health('pn')) === 'ok', 'pn offered by the new connection');
    assert.equal(await health('pa'), 'not_announced', 'the removed provider is not registered again');
    const completion = await client().chat.completions.create({ model: 'new-model', messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(completion.object, 'chat.completion');
  });
});
