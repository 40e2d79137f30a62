// A stall of our own event loop (a long GC, a long synchronous turn) is not
// the peer's silence. Timers run before the loop polls its sockets, so after
// a stall longer than the heartbeat timeout the check used to run before the
// peer's heartbeats, already waiting in the socket, were read, and dropped
// every connection at once. Each side now judges a silence again after the
// reads of that turn.
//  - The edge: its gRPC sessions live on the main thread at workers.count 0;
//    the node runs on its own thread and keeps heartbeating through the stall.
//  - The agent: a stand-in edge on its own thread keeps heartbeating while
//    the agent, on the main thread here, is stalled.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { test } from 'node:test';
import { NodeAgent } from '../../src/agent/agent.js';
import { silentLogger } from '../../src/shared/logger.js';
import { agentConfig } from '../agent/fake-edge.js';
import { NODE_ID, NODE_TOKEN, PROVIDER_ID, sessionOf, startStack, testWorkers } from '../helpers/stack.js';

const HEARTBEAT = { interval_ms: 100, timeout_ms: 400 };
const STALL_MS = 1_500;

function stall(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy: nothing else runs on this thread
  }
}

test('the edge keeps a node that heartbeated through a stall of the edge\'s own loop', { skip: testWorkers() > 0 ? 'the node sessions live in an I/O worker at workers.count > 0' : false }, async () => {
  const stack = await startStack({ startAgent: false, configure: (raw) => (raw.heartbeat = HEARTBEAT) });
  const node = new Worker(new URL('../workers/grpc/fake-node-thread.js', import.meta.url), { workerData: { port: stack.edge.grpcPort, nodeId: NODE_ID, token: NODE_TOKEN, providerId: PROVIDER_ID } });
  try {
    const [{ generation }] = (await once(node, 'message')) as [{ generation: number }];
    stall(STALL_MS);
    await new Promise((resolve) => setTimeout(resolve, 300)); // three heartbeat checks after it
    node.postMessage('status');
    const [{ ended }] = (await once(node, 'message')) as [{ ended: number | null }];
    assert.equal(ended, null, 'the node\'s stream is still open');
    assert.equal((await sessionOf(stack.edge, NODE_ID))?.generation, generation, 'the same session, not dropped for a heartbeat timeout');
  } finally {
    node.postMessage('close');
    await once(node, 'exit');
    await stack.close();
  }
});

test('the agent keeps an edge that heartbeated through a stall of the agent\'s own loop', async () => {
  const edge = new Worker(new URL('../agent/fake-edge-thread.js', import.meta.url));
  const [{ address }] = (await once(edge, 'message')) as [{ address: string }];
  const agent = new NodeAgent(agentConfig(address, [{ id: PROVIDER_ID, baseUrl: 'http://127.0.0.1:9' }]), { logger: silentLogger() });
  try {
    let registrations = 0;
    agent.on('registered', () => registrations++);
    const registered = once(agent, 'registered');
    agent.start();
    await registered;
    stall(STALL_MS);
    await new Promise((resolve) => setTimeout(resolve, 300)); // three heartbeat ticks after it
    assert.equal(registrations, 1, 'the agent did not drop its connection and register again');
    edge.postMessage('status');
    const [{ registrations: seen }] = (await once(edge, 'message')) as [{ registrations: number }];
    assert.equal(seen, 1, 'the edge saw one Register stream');
  } finally {
    await agent.stop();
    edge.postMessage('close');
    await once(edge, 'exit');
  }
});
