// A provider's verdict that changes while the node's Register is on its way:
// the Register carries the verdict of the moment it was written, and the edge
// starts the connection from it. A provider that failed then and passes by
// the time the edge answers must be back in rotation at once, not only at the
// next heartbeat tick (5 s by default). A proxy in front of the edge holds the
// new connection's bytes until the provider is back.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer as createHttpServer, type Server } from 'node:http';
import { connect, createServer, type Server as NetServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { parseAgentConfig } from '../../src/agent/config.js';
import { NodeAgent } from '../../src/agent/agent.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { silentLogger } from '../../src/shared/logger.js';
import { testWorkers, waitFor } from '../helpers/stack.js';

describe('a verdict that changes while Register is in flight', () => {
  let edge: RunningEdge;
  let agent: NodeAgent;
  let proxy: NetServer;
  let provider: Server;
  let providerUp = false;
  /** Set: new connections to the edge wait for it before any byte passes. */
  let hold: Promise<void> | undefined;
  let releaseHold: () => void = () => {};
  const sockets = new Set<Socket>();
  /** Connections waiting on `hold`. */
  let held = 0;

  before(async () => {
    provider = createHttpServer((req, res) => {
      req.resume();
      res.writeHead(providerUp ? 200 : 503, { 'content-type': 'application/json' }).end('{"object":"list","data":[]}');
    });
    provider.listen(0, '127.0.0.1');
    await once(provider, 'listening');
    edge = await startEdge(
      parseEdgeConfig(
        {
          listen: { http: { port: 0 }, grpc: { port: 0 } },
          heartbeat: { interval_ms: 5_000, timeout_ms: 15_000 },
          workers: { count: testWorkers() },
          nodes: [{ id: 'gpu-1', token: 'test-token', providers: [{ id: 'p', capacity: 4 }] }],
          models: [{ alias: 'm', providers: { p: 'served-p' } }],
        },
        'test',
      ),
      { logger: silentLogger() },
    );
    proxy = createServer((client) => {
      sockets.add(client);
      client.pause();
      const gate = hold ?? Promise.resolve();
      if (hold !== undefined) held++;
      void gate.then(() => {
        const upstream = connect(edge.grpcPort, '127.0.0.1');
        sockets.add(upstream);
        client.pipe(upstream).pipe(client);
        client.resume();
        const end = (): void => {
          client.destroy();
          upstream.destroy();
        };
        client.on('error', end).on('close', end);
        upstream.on('error', end).on('close', end);
      });
    });
    proxy.listen(0, '127.0.0.1');
    await once(proxy, 'listening');
    agent = new NodeAgent(
      parseAgentConfig(
        {
          edge: { address: `127.0.0.1:${(proxy.address() as AddressInfo).port}` },
          node: { id: 'gpu-1', token: 'test-token' },
          providers: [{ id: 'p', type: 'openai_compat', base_url: `http://127.0.0.1:${(provider.address() as AddressInfo).port}` }],
          reconnect: { initial_ms: 50, max_ms: 200 },
          health: { interval_ms: 50, timeout_ms: 500, unhealthy_after: 1 },
        },
        'test',
      ),
      { logger: silentLogger() },
    );
    const registered = once(agent, 'registered');
    agent.start();
    await registered;
  });
  after(async () => {
    releaseHold();
    await agent?.stop();
    await edge?.close();
    for (const socket of sockets) socket.destroy();
    proxy?.close();
    provider?.close();
  });

  const healthOf = async (): Promise<string | undefined> => (await edge.status()).providers.find((p) => p.id === 'p')?.health;

  test('a provider that passes again before the edge answers Register is in rotation once the node is registered', async () => {
    await waitFor(async () => (await healthOf()) === 'unhealthy', 'p reported unhealthy');
    hold = new Promise((resolve) => (releaseHold = resolve));
    const generation = agent.generation;
    agent.dropConnection();
    // The new connection has dialled (its Register, written with p failing, waits in the proxy).
    await waitFor(async () => held > 0, 'the agent dialled again');
    providerUp = true;
    // The agent's probe passes while its Register is held.
    await waitFor(async () => agent.probeVerdicts().every((v) => v.healthy), 'the probe passes on the agent');
    const registered = once(agent, 'registered');
    releaseHold();
    await registered;
    assert.notEqual(agent.generation, generation);
    // Well inside the 5 s heartbeat interval: the edge must not wait for the next tick.
    await waitFor(async () => (await healthOf()) === 'ok', 'p back in rotation after the registration', 2_000);
  });
});
