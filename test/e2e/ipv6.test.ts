// The edge on IPv6 loopback: both listeners bound to `::1` (the gRPC one
// through grpc-js, which needs the address bracketed, or node:net in
// worker mode), an agent dialing `[::1]:<port>`, and a request through.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, test } from 'node:test';
import { parseAgentConfig } from '../../src/agent/config.js';
import { NodeAgent } from '../../src/agent/agent.js';
import { silentLogger } from '../../src/shared/logger.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge } from '../../src/edge/edge.js';
import { ALIAS, edgeConfigObject, NODE_ID, NODE_TOKEN, PROVIDER_ID, startStack, type Stack } from '../helpers/stack.js';

let stack: Stack | undefined;
let agent: NodeAgent | undefined;
after(async () => {
  await agent?.stop();
  await stack?.close();
});

test('listen hosts ::1 and [::1] serve, and an agent dialing [::1]:port registers and carries a request', async () => {
  stack = await startStack({
    startAgent: false,
    mock: { ttftMs: 0, tokens: 2, intervalMs: 1 },
    configure(raw) {
      // Both spellings: the bracketed one as a URL writes it.
      raw.listen = { http: { host: '[::1]', port: 0 }, grpc: { host: '::1', port: 0 } };
    },
  });
  assert.match(stack.edge.url, /^http:\/\/\[::1\]:\d+$/);
  const config = parseAgentConfig(
    {
      edge: { address: `[::1]:${stack.edge.grpcPort}` },
      node: { id: NODE_ID, token: NODE_TOKEN },
      providers: [{ id: PROVIDER_ID, type: 'openai_compat', base_url: stack.mock.url }],
      reconnect: { initial_ms: 50, max_ms: 200 },
    },
    'test',
  );
  agent = new NodeAgent(config, { logger: silentLogger() });
  const registered = once(agent, 'registered');
  agent.start();
  await registered;
  const res = await fetch(`${stack.edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { choices: { message: { content: string } }[] };
  assert.equal(typeof body.choices[0].message.content, 'string');
});

test('an admin host written as a URL writes it ([::1]) binds, and its API answers there', async () => {
  const raw = edgeConfigObject();
  raw.admin = { host: '[::1]', port: 0 };
  const edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger(), admin: true });
  try {
    assert.match(edge.adminUrl ?? '', /^http:\/\/\[::1\]:\d+$/);
    const res = await fetch(`${edge.adminUrl}/admin/status`);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  } finally {
    await edge.close();
  }
});
