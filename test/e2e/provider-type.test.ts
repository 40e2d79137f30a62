// A provider that is a cli command on the node but not in the edge's catalog
// (its `type: cli` left out there, so the catalog's default openai_compat
// applied), or the other way round. The edge's retry rules follow its own
// catalog (a cli run is never re-run elsewhere, an http request may be,
// x-should-retry tells the SDKs which) while the agent runs what its own
// config says. Before, the edge sent such a provider requests as http and
// the agent ran the command. Now the agent announces each provider's type
// at Register, and a provider that is cli on one side only gets no requests
// on that connection, with an error in the log saying what to fix.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { registerMessage } from '../../src/agent/frames.js';
import { createLogger } from '../../src/shared/logger.js';
import { ALIAS, NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack } from '../helpers/stack.js';
import { FakeNode, JSON_HEADERS } from '../workers/grpc/fake-node.js';

async function scenario(nodeType: string): Promise<{ status: number; tunnels: number; log: string }> {
  let log = '';
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      log += chunk.toString();
      done();
    },
  });
  const stack = await startStack({ startAgent: false, queueTimeoutMs: 400, logger: createLogger('edge', 'info', { destination }) });
  const node = new FakeNode(stack.edge.grpcPort);
  try {
    node.send(registerMessage(NODE_ID, NODE_TOKEN, 'fake-node/1', [PROVIDER_ID], 0, 0, new Map([[PROVIDER_ID, ['chat']]]), [], false, [], new Map([[PROVIDER_ID, nodeType]])));
    await node.registered();
    let tunnels = 0;
    void (async () => {
      for (;;) {
        const t = await node.nextTunnel().catch(() => undefined);
        if (t === undefined) return;
        tunnels++;
        node.headers(t.tunnelId, 0, JSON_HEADERS);
        node.data(t.tunnelId, 1, JSON.stringify({ id: 'c', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] }));
        node.end(t.tunnelId, 2);
      }
    })();
    const res = await fetch(`${stack.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    return { status: res.status, tunnels, log };
  } finally {
    node.close();
    await stack.close();
  }
}

// The I/O workers log to their own stdout: the log is read in the single-thread mode only.
const workersLogElsewhere = Number(process.env.EDGE_TEST_WORKERS ?? 0) > 0;

test('a provider the node runs as a cli command, typed http in the edge catalog, is sent no request', async () => {
  const { status, tunnels, log } = await scenario('cli');
  assert.equal(tunnels, 0, 'the request reached the node');
  assert.equal(status, 503);
  if (!workersLogElsewhere) assert.match(log, /provider is a cli command on one side only: it gets no requests on this connection/);
});

test('the same type on both sides, or two http types, is served as before', async () => {
  for (const nodeType of ['openai_compat', 'vllm', '']) {
    const { status, tunnels, log } = await scenario(nodeType);
    assert.equal(status, 200, nodeType);
    assert.equal(tunnels, 1, nodeType);
    if (!workersLogElsewhere) {
      assert.doesNotMatch(log, /cli command on one side only/);
      if (nodeType === 'vllm') assert.match(log, /provider's type differs between the edge's config and the agent's/);
    }
  }
});
