// With I/O workers a key's count lives on the main thread, and a worker
// publishes a key's release at once only when the key has a max_concurrent
// (an unlimited key's release rides the turn's batch). A key revoked while a
// request of it was open, then given back with a limit, must have that
// request's release published at once too: else the client that read the
// answer and sent its next request (on another worker) got a 429 it did
// nothing to earn. The data plane here runs on a port that counts keys like
// the worker pool and holds back the releases a worker would batch, so the
// race is exact instead of rare.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { Agent, fetch as undiciFetch } from 'undici';
import type { KeyLimit, SchedulerPort } from '../../src/contract/scheduler-port.js';
import type { AdmitRequest } from '../../src/contract/scheduler.js';
import { KeyConcurrency } from '../../src/main/key-concurrency.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { SchedulerDriver } from '../../src/main/scheduler-driver.js';
import { startMockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { NO_TLS } from '../../src/shared/tls-material.js';
import { sha256Hex } from '../../src/workers/http/client-auth.js';
import { LocalPlane } from '../../src/workers/local-plane.js';
import { ALIAS, agentFor, edgeConfigObject, waitUntil } from '../helpers/stack.js';

const ALICE = 'sk-alice-revoked-0123';
const BOB = 'sk-bob-revoked-012345';

/** The SchedulerDriver behind a port that counts keys as the worker pool does; an unlimited key's release waits for flush(). */
function keyCountingPort(driver: SchedulerDriver): { port: SchedulerPort; keys: KeyConcurrency; flush(): void } {
  const keys = new KeyConcurrency();
  let batched: number[] = [];
  let handler: Parameters<SchedulerPort['setHandler']>[0] | undefined;
  const port = new Proxy(driver, {
    get(target, prop) {
      if (prop === 'countsKeys') return true;
      if (prop === 'setHandler') return (h: Parameters<SchedulerPort['setHandler']>[0]) => { handler = h; target.setHandler(h); };
      if (prop === 'admit') {
        return (request: AdmitRequest, key?: KeyLimit) => {
          if (key !== undefined && !keys.acquire(request.requestId, key.name, key.maxConcurrent === Infinity ? 0 : key.maxConcurrent)) {
            handler?.onReject(request.requestId, 'too_many_concurrent_requests', 1);
            return;
          }
          target.admit(request);
        };
      }
      if (prop === 'releaseKey') return (requestId: number, limited: boolean) => (limited ? keys.release(requestId) : batched.push(requestId));
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as unknown as SchedulerPort;
  return { port, keys, flush: () => { for (const id of batched) keys.release(id); batched = []; } };
}

test('a request of a key revoked and given back with a limit frees its slot at once when it ends', async () => {
  const mock = await startMockProvider({ ttftMs: 0, tokens: 2, intervalMs: 1 });
  const raw = edgeConfigObject({ capacity: 4 });
  const auth = (alice: boolean, limit?: number) => ({ api_keys: [
    { name: 'bob', key_sha256: sha256Hex(BOB) },
    ...(alice ? [{ name: 'alice', key_sha256: sha256Hex(ALICE), ...(limit === undefined ? {} : { max_concurrent: limit }) }] : []),
  ] });
  const configOf = (alice: boolean, limit?: number) => parseEdgeConfig({ ...raw, workers: { count: 0 }, auth: auth(alice, limit) }, 'test');
  const config = configOf(true);
  const driver = new SchedulerDriver(config);
  const { port, keys, flush } = keyCountingPort(driver);
  const plane = new LocalPlane(config, NO_TLS, port, silentLogger(), () => undefined);
  const ports = await plane.start(config, 'silent');
  const agent = agentFor(ports.grpcPort, mock.url);
  const registered = once(agent, 'registered');
  agent.start();
  const refresh = async (next: ReturnType<typeof configOf>) => {
    await plane.setConfig(next);
    driver.setConfig(next);
  };
  const chat = async (headers: Record<string, string> = {}) => {
    const dispatcher = new Agent({ connections: 1, pipelining: 0 });
    try {
      const res = await undiciFetch(`http://127.0.0.1:${ports.httpPort}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}`, ...headers },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
        dispatcher,
      });
      return { status: res.status, body: await res.text() };
    } finally {
      await dispatcher.close();
    }
  };
  try {
    await registered;
    // Unlimited: its release would ride the batch.
    const open = chat({ 'x-mock-tokens': '2', 'x-mock-interval-ms': '300' });
    await waitUntil(() => keys.inFlight('alice') === 1, 'the first request to hold its key slot');
    await refresh(configOf(false));
    await refresh(configOf(true, 1));
    assert.equal((await open).status, 200);
    // The client read its answer; its next request must find the slot free.
    const next = await chat();
    assert.equal(next.status, 200, `the revoked-then-limited key's ended request still held its slot: ${next.body}`);
  } finally {
    flush();
    await agent.stop();
    await plane.close();
    driver.close();
    await mock.close();
  }
});
