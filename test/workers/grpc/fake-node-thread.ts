// A FakeNode on its own thread, so a test can stall the edge's thread while
// the node keeps heartbeating (as a node on another host does). workerData:
// { port, nodeId, token, providerId }. Posts { generation } once registered,
// then { ended } (the stream's status code, or null while open) on 'status'.
import { parentPort, workerData } from 'node:worker_threads';
import { FakeNode } from './fake-node.js';

const { port, nodeId, token, providerId } = workerData as { port: number; nodeId: string; token: string; providerId: string };
const node = new FakeNode(port);
node.register(nodeId, token, [providerId]);
const generation = await node.registered();
parentPort?.postMessage({ generation });
parentPort?.on('message', (message: string) => {
  if (message === 'status') parentPort?.postMessage({ ended: node.endedWith?.code ?? null });
  if (message === 'close') {
    node.close();
    parentPort?.close();
  }
});
