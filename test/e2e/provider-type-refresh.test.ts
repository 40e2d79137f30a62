// A config refresh that makes a provider cli on one side only (the edge's
// `type` changed while the connected agent still announces its own) is held
// to the rule Register applies (provider-type.test.ts): that provider gets
// no requests on the connection, status says it is not announced, and an
// error is logged. Before, the check ran at Register only: the refresh
// applied, requests went to the agent as cli runs and failed there (502
// upstream_error). A refresh that makes the types agree again
// gives it back without a reconnect.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { createLogger } from '../../src/shared/logger.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { NODE_ID, NODE_TOKEN, startRegisteredAgent, testWorkers, waitUntil } from '../helpers/stack.js';

const STAYS = 'p1';
const RETYPED = 'p2';

function edgeConfig(retypedAs: string): Record<string, unknown> {
  return {
    listen: { http: { host: '127.0.0.1', port: 0 }, grpc: { host: '127.0.0.1', port: 0 } },
    heartbeat: { interval_ms: 200, timeout_ms: 1_000 },
    workers: { count: testWorkers() },
    nodes: [{ id: NODE_ID, token: NODE_TOKEN, providers: [{ id: STAYS, type: 'openai_compat', capacity: 4 }, { id: RETYPED, type: retypedAs, capacity: 4 }] }],
    models: [
      { alias: 'stays', providers: { [STAYS]: 'served-p1' } },
      { alias: 'retyped', queue_timeout_ms: 300, providers: { [RETYPED]: 'served-p2' } },
    ],
  };
}

// The I/O workers log to their own stdout: the log is read in the single-thread mode only.
const workersLogElsewhere = testWorkers() > 0;
const TYPE_ERROR = /provider is a cli command on one side only: it gets no requests on this connection/g;

interface Running {
  readonly edge: RunningEdge;
  readonly mock: MockProvider;
  readonly client: OpenAI;
  /** What the edge logged (the single-thread mode's only). */
  log(): string;
  close(): Promise<void>;
}

/** An edge typing RETYPED as `retypedAs`, and an agent running both providers as openai_compat (RETYPED serving `endpoints`). */
async function start(retypedAs: string, endpoints?: readonly string[]): Promise<Running> {
  const mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
  let log = '';
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      log += chunk.toString();
      done();
    },
  });
  const edge = await startEdge(parseEdgeConfig(edgeConfig(retypedAs), 'test'), { logger: createLogger('edge', 'info', { destination }) });
  const agent = await startRegisteredAgent({
    edge: { address: `127.0.0.1:${edge.grpcPort}` },
    node: { id: NODE_ID, token: NODE_TOKEN },
    providers: [
      { id: STAYS, type: 'openai_compat', base_url: mock.url },
      { id: RETYPED, type: 'openai_compat', base_url: mock.url, ...(endpoints === undefined ? {} : { endpoints }) },
    ],
    reconnect: { initial_ms: 50, max_ms: 200 },
  });
  return {
    edge,
    mock,
    client: new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'unused', maxRetries: 0 }),
    log: () => log,
    async close() {
      await agent.stop();
      await edge.close();
      await mock.close();
    },
  };
}

function chat(stack: Running, model: string) {
  return stack.client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
}

function provider(stack: Running, id: string) {
  return stack.edge.driver.status().providers.find((p) => p.id === id);
}

function generation(stack: Running): number | undefined {
  return stack.edge.driver.status().nodes.find((n) => n.id === NODE_ID)?.generation;
}

/** The request is refused as for an alias with no provider available, in OpenAI's format, and never reaches the provider. */
async function refusedUnsent(stack: Running, model: string): Promise<void> {
  const before = stack.mock.stats.requests;
  const refused = await chat(stack, model).then(
    () => assert.fail('served by a provider typed cli at the edge and openai_compat at the node'),
    (err: unknown) => err,
  );
  assert.ok(refused instanceof OpenAI.APIError, String(refused));
  assert.equal(refused.status, 503);
  assert.equal((refused.error as { code?: string }).code, 'no_provider_available');
  assert.equal(stack.mock.stats.requests, before, 'nothing reached the provider');
}

describe('a refresh that changes a provider type against what its node announced', () => {
  let stack: Running;
  before(async () => {
    stack = await start('openai_compat');
  });
  after(async () => {
    await stack?.close();
  });

  test('the retyped provider gets no request until a refresh makes the types agree again', async () => {
    assert.equal((await chat(stack, 'retyped')).model, 'served-p2');
    const connected = generation(stack);

    const toCli = await stack.edge.refresh({ mode: 'apply', config: edgeConfig('cli') });
    assert.equal(toCli.status, 'applied', JSON.stringify(toCli));
    await waitUntil(() => provider(stack, RETYPED)?.announced === false, `${RETYPED} out of rotation after the refresh`);
    // As at Register: not announced, serving what its config says.
    assert.deepEqual(provider(stack, RETYPED)?.endpoints, ['chat']);
    await refusedUnsent(stack, 'retyped');
    // The node's other provider is served as before.
    assert.equal(provider(stack, STAYS)?.announced, true);
    assert.equal((await chat(stack, 'stays')).model, 'served-p1');
    if (!workersLogElsewhere) assert.equal(stack.log().match(TYPE_ERROR)?.length, 1, stack.log());

    // The same config again changes nothing, and logs nothing more.
    assert.equal((await stack.edge.refresh({ mode: 'apply', config: edgeConfig('cli') })).status, 'unchanged');

    const back = await stack.edge.refresh({ mode: 'apply', config: edgeConfig('openai_compat') });
    assert.equal(back.status, 'applied', JSON.stringify(back));
    await waitUntil(() => provider(stack, RETYPED)?.announced === true, `${RETYPED} back in rotation`);
    assert.equal((await chat(stack, 'retyped')).model, 'served-p2');
    assert.equal(generation(stack), connected, 'no reconnect was needed');
    if (!workersLogElsewhere) assert.equal(stack.log().match(TYPE_ERROR)?.length, 1, stack.log());
  });
});

describe('a refresh that fixes a type the node was refused for at Register', () => {
  let stack: Running;
  before(async () => {
    stack = await start('cli', ['chat', 'embeddings']);
  });
  after(async () => {
    await stack?.close();
  });

  test('the provider gets requests, with the APIs its node announced, without a reconnect', async () => {
    assert.equal(provider(stack, RETYPED)?.announced, false);
    await refusedUnsent(stack, 'retyped');
    const connected = generation(stack);

    const fixed = await stack.edge.refresh({ mode: 'apply', config: edgeConfig('openai_compat') });
    assert.equal(fixed.status, 'applied', JSON.stringify(fixed));
    await waitUntil(() => provider(stack, RETYPED)?.announced === true, `${RETYPED} in rotation after the refresh`);
    assert.deepEqual(provider(stack, RETYPED)?.endpoints, ['chat', 'embeddings']);
    assert.equal((await chat(stack, 'retyped')).model, 'served-p2');
    assert.equal(generation(stack), connected, 'no reconnect was needed');
  });
});
