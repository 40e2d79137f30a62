// A stack whose node is a hand-driven FakeNode (registered as the stack's
// node, serving its provider) instead of a real agent: for tests that script
// the node's frames.
import { FakeNode } from '../workers/grpc/fake-node.js';
import { NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack, type Stack, type StackOptions } from './stack.js';

export async function stackWithFakeNode(options: StackOptions = {}): Promise<{ stack: Stack; node: FakeNode }> {
  const stack = await startStack({ ...options, startAgent: false });
  const node = new FakeNode(stack.edge.grpcPort);
  node.register(NODE_ID, NODE_TOKEN, [PROVIDER_ID]);
  await node.registered();
  return { stack, node };
}
