// The node gateway's guards, driven against the gateway alone with a port
// that records what it asks of the scheduler:
//  - a node's token changes (or the node leaves the config) while one of its
//    connections is between the token check and the scheduler's answer: with
//    I/O workers the main thread may not know that connection yet, so the
//    worker that holds it ends it itself;
//  - probe results name only providers the node's Register announced.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { create } from '@bufbuild/protobuf';
import { ProbeResultSchema, RegisterSchema } from '../../../src/gen/edge/v1/tunnel_pb.js';
import { parseEdgeConfig } from '../../../src/main/config.js';
import type { SchedulerPort } from '../../../src/contract/scheduler-port.js';
import { MAX_UNCONFIGURED_PROVIDER_IDS, NodeGateway } from '../../../src/workers/grpc/node-gateway.js';
import type { NodeSession } from '../../../src/workers/grpc/node-session.js';
import { silentLogger } from '../../../src/shared/logger.js';
import { edgeConfigObject, NODE_ID, NODE_TOKEN } from '../../helpers/stack.js';

type Call = [string, ...unknown[]];

/** A SchedulerPort that answers nothing by itself and records every call. */
function recordingPort(): { port: SchedulerPort; calls: Call[] } {
  const calls: Call[] = [];
  const port = new Proxy({}, { get: (_target, name) => (...args: unknown[]) => void calls.push([String(name), ...args]) }) as SchedulerPort;
  return { port, calls };
}

/** The part of a NodeSession the gateway and the retirement use. */
class FakeSession {
  static #serials = 1;
  readonly serial = FakeSession.#serials++;
  readonly joinGeneration = 0;
  readonly remoteAddress = '127.0.0.1:1';
  openTunnels = 0;
  isRegistering = true;
  isActive = false;
  generation = 0;
  rejected: string | undefined;
  closed: string | undefined;
  constructor(readonly nodeId: string) {}
  reject(reason: string): void {
    this.rejected = reason;
    this.isRegistering = false;
  }
  activate(generation: number): void {
    this.isRegistering = false;
    this.isActive = true;
    this.generation = generation;
  }
  close(reason: string): void {
    this.closed = reason;
    this.isActive = false;
  }
}

function config(token: string) {
  const raw = edgeConfigObject() as { nodes: { token: string }[]; drain?: unknown };
  raw.nodes[0].token = token;
  raw.drain = { grace_ms: 400 };
  return parseEdgeConfig(raw, 'test');
}

function registered(gateway: NodeGateway, session: FakeSession): void {
  const problem = gateway.register(session as unknown as NodeSession, create(RegisterSchema, { nodeId: NODE_ID, token: NODE_TOKEN, providerIds: [] }));
  assert.equal(problem, undefined);
}

test('a registration checked against the old token is refused when the token changes before the answer, and undone after it', () => {
  const { port, calls } = recordingPort();
  const gateway = new NodeGateway(config(NODE_TOKEN), port, silentLogger());
  const session = new FakeSession(NODE_ID);
  registered(gateway, session);
  gateway.setConfig(config('rotated-after-a-leak'));
  assert.match(session.rejected ?? '', /token .* changed/);
  // The scheduler's answer to the old registration arrives: the connection it made is undone, never used.
  gateway.onConnected(session.serial, NODE_ID, 7);
  assert.deepEqual(calls.find((c) => c[0] === 'disconnect'), ['disconnect', NODE_ID, 7]);
  assert.equal(gateway.session(NODE_ID), undefined);
});

test('a connection the scheduler answered just before the token changed takes no new requests and closes by the grace\'s end', async () => {
  const { port, calls } = recordingPort();
  const gateway = new NodeGateway(config(NODE_TOKEN), port, silentLogger());
  const session = new FakeSession(NODE_ID);
  registered(gateway, session);
  gateway.onConnected(session.serial, NODE_ID, 8);
  assert.equal(session.isActive, true);
  session.openTunnels = 1;
  gateway.setConfig(config('rotated-after-a-leak'));
  assert.deepEqual(calls.find((c) => c[0] === 'setDraining'), ['setDraining', NODE_ID, true, 8]);
  await sleep(150);
  assert.equal(session.closed, undefined, 'its open request finishes first');
  session.openTunnels = 0;
  // The anchor waits out drain.grace_ms (400 ms): lanes of the node on other workers may still carry tunnels.
  await sleep(450);
  assert.match(session.closed ?? '', /token was revoked/);
});

test('an unchanged token leaves the connection alone', () => {
  const { port, calls } = recordingPort();
  const gateway = new NodeGateway(config(NODE_TOKEN), port, silentLogger());
  const session = new FakeSession(NODE_ID);
  registered(gateway, session);
  gateway.onConnected(session.serial, NODE_ID, 9);
  gateway.setConfig(config(NODE_TOKEN));
  assert.equal(calls.some((c) => c[0] === 'setDraining'), false);
  assert.equal(session.rejected, undefined);
});

test('probe results count only for the providers Register announced: another id, however long, is dropped', () => {
  const { port, calls } = recordingPort();
  const gateway = new NodeGateway(config(NODE_TOKEN), port, silentLogger());
  const session = new FakeSession(NODE_ID);
  const problem = gateway.register(session as unknown as NodeSession, create(RegisterSchema, { nodeId: NODE_ID, token: NODE_TOKEN, providerIds: ['p-known'] }));
  assert.equal(problem, undefined);
  (session as unknown as { providerIds: ReadonlySet<string> }).providerIds = new Set(['p-known']);
  gateway.onConnected(session.serial, NODE_ID, 11);
  const probe = (providerId: string, healthy: boolean) => create(ProbeResultSchema, { providerId, healthy });
  gateway.probed(session as unknown as NodeSession, [probe('p-known', false), probe('x'.repeat(600_000), false), probe('never-announced', false)]);
  const health = calls.filter((c) => c[0] === 'setProviderHealth');
  assert.deepEqual(health, [['setProviderHealth', NODE_ID, 'p-known', false, 11]]);
  assert.equal(gateway.protocolStats.unknownProbes, 2);
});

test('provider ids outside the config reach the scheduler only up to a bound, over every registration: a node reconnecting with fresh ids each time no longer grows the ring\'s names without end', () => {
  const { port, calls } = recordingPort();
  const gateway = new NodeGateway(config(NODE_TOKEN), port, silentLogger());
  const configured = config(NODE_TOKEN).nodes[0].providers[0].id;
  const passed = new Set<string>();
  const rounds = 3;
  for (let round = 0; round < rounds; round++) {
    const session = new FakeSession(NODE_ID);
    const providerIds = [configured, ...Array.from({ length: 1_000 }, (_, i) => `fresh-${round}-${i}`)];
    (session as unknown as { providerIds: ReadonlySet<string> }).providerIds = new Set(providerIds);
    assert.equal(gateway.register(session as unknown as NodeSession, create(RegisterSchema, { nodeId: NODE_ID, token: NODE_TOKEN, providerIds })), undefined);
    const [, , , ids] = calls.filter((c) => c[0] === 'register').at(-1) as [string, string, number, string[]];
    assert.ok(ids.includes(configured), 'a configured provider is always passed on');
    for (const id of ids) passed.add(id);
    gateway.onConnected(session.serial, NODE_ID, 20 + round);
    if (round === rounds - 1) {
      // The ids left out are not this connection's: their probe results are dropped like any unannounced one's.
      gateway.probed(session as unknown as NodeSession, [create(ProbeResultSchema, { providerId: 'fresh-2-999', healthy: false })]);
      assert.equal(calls.some((c) => c[0] === 'setProviderHealth' && c[2] === 'fresh-2-999'), false);
    }
  }
  assert.equal(passed.size, 1 + MAX_UNCONFIGURED_PROVIDER_IDS, `${passed.size} distinct ids passed on`);
  assert.equal(gateway.protocolStats.droppedProviderIds, rounds * 1_000 - MAX_UNCONFIGURED_PROVIDER_IDS);
});
