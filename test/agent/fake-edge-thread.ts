// A FakeEdge on its own thread, so a test can stall the agent's thread
// while the edge keeps heartbeating (as an edge on another host does). It
// accepts every Register (heartbeats every 100 ms, timeout 400 ms told) and
// never judges the agent's silence. Posts { address } once listening, then
// { registrations } on 'status'.
import { parentPort } from 'node:worker_threads';
import { FakeEdge } from './fake-edge.js';

const edge = await FakeEdge.start({ kind: 'accept', heartbeatIntervalMs: 100, heartbeatTimeoutMs: 400 });
parentPort?.postMessage({ address: edge.address });
parentPort?.on('message', (message: string) => {
  if (message === 'status') parentPort?.postMessage({ registrations: edge.streams.length });
  if (message === 'close') {
    edge.close();
    parentPort?.close();
  }
});
