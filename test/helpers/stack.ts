// Starts a real stack on loopback for end-to-end tests: mock provider,
// edge (HTTP + gRPC on ephemeral ports) and a node agent dialling it.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadAgentConfig, parseAgentConfig } from '../../src/agent/config.js';
import { NodeAgent, type NodeAgentOptions } from '../../src/agent/agent.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider, type MockProviderOptions } from '../../src/mock/provider.js';
import type { EdgeConfig } from '../../src/shared/config-types.js';
import type { EdgeEvent } from '../../src/contract/events.js';
import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import { silentLogger } from '../../src/shared/logger.js';
import { FakeNode } from '../workers/grpc/fake-node.js';

export interface StackOptions {
  readonly capacity?: number;
  readonly maxQueue?: number;
  readonly queueTimeoutMs?: number;
  readonly bodyBytes?: number;
  readonly tunnelTimeoutMs?: number;
  readonly tunnelWindowBytes?: number;
  readonly mock?: MockProviderOptions;
  readonly startAgent?: boolean;
  readonly agentToken?: string;
  /** The agent's edge.streams (lanes); default 1. */
  readonly agentStreams?: number;
  /** The provider's type on both the edge and the agent (default openai_compat); vllm serves every API. */
  readonly providerType?: 'openai_compat' | 'vllm' | 'ollama';
  /** Where the agent's provider is (a scripted provider, say); default the stack's mock. */
  readonly providerUrl?: string;
  /** Edits the raw edge config (YAML-shaped) before it is parsed: extra sections, limits. */
  readonly configure?: (raw: Record<string, unknown>) => void;
  /** The edge's logger (default silent). I/O worker threads log on their own, to stdout. */
  readonly logger?: Logger;
}

export interface Stack {
  readonly edge: RunningEdge;
  readonly mock: MockProvider;
  agent: NodeAgent | undefined;
  readonly baseURL: string;
  readonly config: EdgeConfig;
  startAgent(token?: string): Promise<NodeAgent>;
  close(): Promise<void>;
}

export const NODE_ID = 'gpu-1';
export const NODE_TOKEN = 'test-token';
export const PROVIDER_ID = 'gpu-1-mock';
export const ALIAS = 'llama3';
export const SERVED = 'mock-llama-3-8b-served';
export const EMBED_ALIAS = 'embed-small';
export const EMBED_SERVED = 'mock-embed-served';

/** workers.count for end-to-end tests: EDGE_TEST_WORKERS (default 0 = the data path on the main thread). */
export function testWorkers(): number {
  const raw = process.env.EDGE_TEST_WORKERS;
  return raw === undefined || raw === '' ? 0 : Number.parseInt(raw, 10);
}

export function edgeConfigObject(options: StackOptions = {}): Record<string, unknown> {
  return {
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    limits: { body_bytes: options.bodyBytes ?? 1024 * 1024, tunnel_timeout_ms: options.tunnelTimeoutMs ?? 30_000, tunnel_window_bytes: options.tunnelWindowBytes ?? 256 * 1024 },
    heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
    workers: { count: testWorkers() },
    nodes: [
      {
        id: NODE_ID,
        token: NODE_TOKEN,
        providers: [{ id: PROVIDER_ID, type: options.providerType ?? 'openai_compat', capacity: options.capacity ?? 4, max_context_tokens: 131072 }],
      },
    ],
    models: [
      { alias: ALIAS, max_queue: options.maxQueue ?? 16, queue_timeout_ms: options.queueTimeoutMs ?? 10_000, providers: { [PROVIDER_ID]: SERVED } },
      { alias: EMBED_ALIAS, providers: { [PROVIDER_ID]: EMBED_SERVED } },
    ],
  };
}

export function agentFor(edgeGrpcPort: number, mockUrl: string, token = NODE_TOKEN, streams = 1, providerType = 'openai_compat'): NodeAgent {
  const config = parseAgentConfig(
    {
      edge: { address: `127.0.0.1:${edgeGrpcPort}`, streams },
      node: { id: NODE_ID, token },
      providers: [{ id: PROVIDER_ID, type: providerType, base_url: mockUrl }],
      reconnect: { initial_ms: 50, max_ms: 200 },
    },
    'test',
  );
  return new NodeAgent(config, { logger: silentLogger() });
}

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  const mock = await startMockProvider(options.mock ?? {});
  let config: EdgeConfig;
  let edge: RunningEdge;
  try {
    const raw = edgeConfigObject(options);
    options.configure?.(raw);
    config = parseEdgeConfig(raw, 'test');
    edge = await startEdge(config, { logger: options.logger ?? silentLogger() });
  } catch (err) {
    // A config the test got wrong fails the test, not hangs it on the mock's open listener.
    await mock.close();
    throw err;
  }
  const stack: Stack = {
    edge,
    mock,
    agent: undefined,
    baseURL: `${edge.url}/v1`,
    config,
    async startAgent(token = NODE_TOKEN): Promise<NodeAgent> {
      const agent = agentFor(edge.grpcPort, options.providerUrl ?? mock.url, token, options.agentStreams, options.providerType);
      stack.agent = agent;
      const registered = once(agent, 'registered');
      agent.start();
      if (token === NODE_TOKEN) await registered;
      return agent;
    },
    async close(): Promise<void> {
      await stack.agent?.stop();
      await edge.close();
      await mock.close();
    },
  };
  if (options.startAgent !== false) await stack.startAgent(options.agentToken);
  return stack;
}

/** A scripted node (FakeNode) in the agent's place: registered as NODE_ID with PROVIDER_ID, for a stack started with `startAgent: false`. */
export async function registeredFakeNode(stack: Stack): Promise<FakeNode> {
  const node = new FakeNode(stack.edge.grpcPort);
  node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
  await node.registered();
  return node;
}

/** A node agent from a raw (YAML-shaped) agent config, started; resolves once it registered. */
export async function startRegisteredAgent(raw: Record<string, unknown>): Promise<NodeAgent> {
  const agent = new NodeAgent(parseAgentConfig(raw, 'test'), { logger: silentLogger() });
  const registered = once(agent, 'registered');
  agent.start();
  await registered;
  return agent;
}

/** Polls until `predicate` holds; fails with `what` after `timeoutMs`. */
export async function waitUntil(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A chat completion for ALIAS (one user message) POSTed to `baseURL` (…/v1), streamed or not, with extra headers. */
export function postChat(baseURL: string, options: { readonly stream?: boolean; readonly headers?: Record<string, string> } = {}): Promise<Response> {
  return fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...options.headers },
    body: JSON.stringify({ model: ALIAS, ...(options.stream === true ? { stream: true } : {}), messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/** A non-streaming chat completion for ALIAS sent with an API key (and extra headers) to `baseURL` (…/v1). */
export function keyedChat(baseURL: string, key: string, headers: Record<string, string> = {}): Promise<Response> {
  return postChat(baseURL, { headers: { authorization: `Bearer ${key}`, ...headers } });
}

/** Polls an asynchronous predicate (e.g. over edge.inspect()) until it holds. */
export async function waitFor(predicate: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Open client requests over every thread of the data path. */
export async function openExchanges(edge: RunningEdge): Promise<number> {
  return (await edge.inspect()).openExchanges;
}

/** A node's current session as the data path holds it (whichever thread), if connected. */
export async function sessionOf(edge: RunningEdge, nodeId: string): Promise<{ generation: number; openTunnels: number } | undefined> {
  return (await edge.inspect()).sessions.find((s) => s.nodeId === nodeId);
}

/** Sum of in-flight over every provider, from the scheduler's status. */
export function inFlight(edge: RunningEdge): number {
  return edge.driver.status().providers.reduce((sum, p) => sum + p.inFlight, 0);
}

/** Requests waiting in the alias's queue (the scheduler's view; 0 for an alias it does not know). */
export function queueDepth(edge: RunningEdge, alias = ALIAS): number {
  return edge.driver.status().groups.find((g) => g.alias === alias)?.queueDepth ?? 0;
}

/** A node's providers behind one alias: edge, agent, and every bus event the edge published. */
export interface ProvidersStack {
  readonly edge: RunningEdge;
  readonly agent: NodeAgent;
  readonly events: EdgeEvent[];
  /** Stops the agent and the edge (the providers are the caller's). */
  close(): Promise<void>;
}

/**
 * One node ('gpu-1') whose providers (id -> base URL, in tie-break order,
 * capacity 4 each) all serve `alias` as `served-<id>`; `agentExtra` adds
 * agent settings (health probes, ...), `endpoints` a provider's APIs (else
 * openai_compat's defaults), `edgeExtra` edge config sections (`admin`
 * starts the admin listener; `a2a`, ...). Resolves once the agent registered.
 */
export async function startProvidersStack(
  alias: string,
  providers: Readonly<Record<string, string>>,
  agentExtra: Record<string, unknown> = {},
  endpoints: Readonly<Record<string, readonly string[]>> = {},
  edgeExtra: Record<string, unknown> = {},
): Promise<ProvidersStack> {
  const ids = Object.keys(providers);
  const edge = await startEdge(
    parseEdgeConfig(
      {
        listen: { http: { port: 0 }, grpc: { port: 0 } },
        heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
        workers: { count: testWorkers() },
        nodes: [{ id: NODE_ID, token: NODE_TOKEN, providers: ids.map((id) => ({ id, capacity: 4 })) }],
        models: [{ alias, providers: Object.fromEntries(ids.map((id) => [id, `served-${id}`])) }],
        ...edgeExtra,
      },
      'test',
    ),
    { logger: silentLogger(), admin: edgeExtra.admin !== undefined },
  );
  // What the bus is given (its subscribers are SSE readers; the admin event stream has its own tests).
  const events: EdgeEvent[] = [];
  const publish = edge.events.publish.bind(edge.events);
  edge.events.publish = (event: EdgeEvent): void => {
    events.push(event);
    publish(event);
  };
  const agent = await startRegisteredAgent({
    edge: { address: `127.0.0.1:${edge.grpcPort}` },
    node: { id: NODE_ID, token: NODE_TOKEN },
    providers: ids.map((id) => ({ id, type: 'openai_compat', base_url: providers[id], ...(endpoints[id] === undefined ? {} : { endpoints: endpoints[id] }) })),
    reconnect: { initial_ms: 50, max_ms: 200 },
    ...agentExtra,
  });
  return {
    edge,
    agent,
    events,
    async close() {
      await agent.stop();
      await edge.close();
    },
  };
}

/**
 * What the fair-queuing tests share: one provider slot (so requests queue), a
 * queue of 16 that waits up to 20 s, a mock that answers at once, and these
 * API keys (`auth.api_keys`, YAML-shaped); `configure` edits the rest.
 */
export function oneSlotWithKeys(
  apiKeys: readonly Record<string, unknown>[],
  configure?: (raw: Record<string, unknown>) => void,
): { capacity: number; maxQueue: number; queueTimeoutMs: number; mock: MockProviderOptions; configure: (raw: Record<string, unknown>) => void } {
  return {
    capacity: 1,
    maxQueue: 16,
    queueTimeoutMs: 20_000,
    mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
    configure(raw) {
      raw.auth = { api_keys: apiKeys };
      configure?.(raw);
    },
  };
}

/**
 * Takes the one provider slot of `stack` with a request that streams for a
 * minute (the mock's pace); `release()` gives it up (the client leaves, so
 * its lease ends at once) and waits for its end.
 */
export async function holdOneSlot(stack: { readonly baseURL: string; readonly edge: RunningEdge }, key: string): Promise<{ release(): Promise<void> }> {
  const gone = new AbortController();
  const holder = fetch(`${stack.baseURL}/chat/completions`, {
    method: 'POST',
    signal: gone.signal,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-mock-tokens': '2', 'x-mock-interval-ms': '60000' },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
  }).catch(() => undefined);
  await waitUntil(() => inFlight(stack.edge) === 1, 'the holder to run');
  return {
    async release() {
      gone.abort();
      await holder;
    },
  };
}

/**
 * One chat completion on a connection of its own, so that the kernel spreads such requests over the I/O
 * workers' listeners; its status (the body is read whole). `key`: sent as the Bearer API key.
 */
export async function chatOnFreshConnection(baseURL: string, model: string, key?: string): Promise<number> {
  const dispatcher = new Agent({ connections: 1, pipelining: 0 });
  try {
    const res = await request(`${baseURL}/chat/completions`, {
      method: 'POST',
      dispatcher,
      headers: key === undefined ? { 'content-type': 'application/json' } : { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.body.text();
    return res.statusCode;
  } finally {
    await dispatcher.close();
  }
}

/** A provider a test scripts by hand (startScriptedProvider). */
export interface ScriptedProvider {
  /** Its base URL, for startProvidersStack's providers. */
  readonly url: string;
  /** Cuts its open connections and stops listening. */
  close(): Promise<void>;
}

/**
 * A loopback HTTP server that calls `answer` for each request once its body
 * was read: for tests whose provider writes exact bytes (an SSE quirk, a cut,
 * a reset) that the mock cannot.
 */
export async function startScriptedProvider(answer: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>): Promise<ScriptedProvider> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => void answer(req, res));
  });
  return serveOnLoopback(server);
}

/** `server` listening on a free loopback port: its URL, and a close that cuts its open connections. */
export async function serveOnLoopback(server: Server): Promise<ScriptedProvider> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Answers 200 text/event-stream with `pieces`, each in a write of its own a turn apart (each its own chunk on the wire), then ends. */
export async function writeEventStream(res: ServerResponse, pieces: Iterable<string>): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const piece of pieces) {
    res.write(piece);
    await new Promise((resolve) => setImmediate(resolve));
  }
  res.end();
}

/** An edge serving alias `m` (chat, Messages, Responses; admin API on) from a scripted provider that streams, per request, the pieces its `x-case` header names. */
export interface EventStreamCases {
  readonly edge: RunningEdge;
  /** POSTs `body` to `path` answered by the case `name`: its whole text (a 200 is asserted) and its run id. */
  relay(path: string, name: string, body: object): Promise<{ text: string; runId: string | null }>;
  /** The run's record from /admin/runs/{id} once it is finished. */
  finishedRun<T extends { state?: string }>(runId: string | null): Promise<T>;
  close(): Promise<void>;
}

export async function startEventStreamCases(cases: Readonly<Record<string, Iterable<string>>>): Promise<EventStreamCases> {
  const provider = await startScriptedProvider((req, res) => writeEventStream(res, cases[req.headers['x-case'] as string]));
  let stack: ProvidersStack;
  try {
    stack = await startProvidersStack('m', { p: provider.url }, {}, { p: ['chat', 'messages', 'responses'] }, { admin: { host: '127.0.0.1', port: 0 } });
  } catch (err) {
    await provider.close();
    throw err;
  }
  const edge = stack.edge;
  return {
    edge,
    async relay(path, name, body) {
      const res = await fetch(`${edge.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-case': name }, body: JSON.stringify(body) });
      assert.equal(res.status, 200);
      return { text: await res.text(), runId: res.headers.get('x-edge-run-id') };
    },
    async finishedRun<T extends { state?: string }>(runId: string | null): Promise<T> {
      let record = {} as T;
      await waitFor(async () => {
        record = (await (await fetch(`${edge.adminUrl}/admin/runs/${runId}`)).json()) as T;
        return record.state === 'finished';
      }, 'the run to finish');
      return record;
    },
    async close() {
      await stack.close();
      await provider.close();
    },
  };
}

/**
 * A streamed chat completion on a client connection of its own (so the kernel spreads such
 * requests over the workers' listeners): `tokens` 50 ms apart from the mock; `done` says how it
 * ended ("status N", or "failed: …" when the connection was cut). Close `dispatcher` after.
 */
export function streamOnOwnConnection(stack: Stack, tokens = 100, headers: Record<string, string> = {}): { done: Promise<string>; dispatcher: Agent } {
  const dispatcher = new Agent({ connections: 1, pipelining: 0 });
  const done = (async () => {
    try {
      const res = await request(`${stack.baseURL}/chat/completions`, {
        method: 'POST',
        dispatcher,
        headers: { 'content-type': 'application/json', 'x-mock-tokens': String(tokens), 'x-mock-interval-ms': '50', ...headers },
        body: JSON.stringify({ model: ALIAS, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.body.text();
      return `status ${res.statusCode}`;
    } catch (err) {
      return `failed: ${(err as Error).message}`;
    }
  })();
  return { done, dispatcher };
}

/**
 * A node agent started from the config file `file`, as the CLI starts one
 * (refresh_config and its token re-read read that file again), once
 * registered. `options` add to or replace the defaults (silent, 500 ms stop grace).
 */
export async function startFileAgent(file: string, options: NodeAgentOptions = {}): Promise<NodeAgent> {
  const agent = new NodeAgent(await loadAgentConfig(file), { logger: silentLogger(), stopGraceMs: 500, reloadConfig: () => loadAgentConfig(file), ...options });
  const registered = once(agent, 'registered');
  agent.start();
  await registered;
  return agent;
}
