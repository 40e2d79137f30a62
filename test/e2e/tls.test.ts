// TLS on both listeners with a PKI made in the test run: nodes need a client
// certificate from the configured CA (mutual TLS) to connect at all; a node
// with none, with one from another CA, or speaking plaintext is refused
// during the handshake; with a valid one it registers and serves traffic,
// which clients reach over HTTPS.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { Agent as UndiciAgent, fetch as undiciFetch } from 'undici';
import { NodeAgent } from '../../src/agent/agent.js';
import { parseAgentConfig } from '../../src/agent/config.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { startEdge, type RunningEdge } from '../../src/edge/edge.js';
import { startMockProvider, type MockProvider } from '../../src/mock/provider.js';
import { silentLogger } from '../../src/shared/logger.js';
import { hasOpenssl, makeTestPki, type TestPki } from '../helpers/certs.js';
import { ALIAS, edgeConfigObject, NODE_ID, NODE_TOKEN, PROVIDER_ID, waitUntil } from '../helpers/stack.js';

const skip = hasOpenssl() ? false : 'the openssl CLI is not installed';

function agentWith(edge: RunningEdge, mock: MockProvider, tls: Record<string, string> | undefined): NodeAgent {
  const config = parseAgentConfig(
    {
      edge: { address: `127.0.0.1:${edge.grpcPort}`, ...(tls === undefined ? {} : { tls }) },
      node: { id: NODE_ID, token: NODE_TOKEN },
      providers: [{ id: PROVIDER_ID, type: 'openai_compat', base_url: mock.url }],
      reconnect: { initial_ms: 50, max_ms: 100 },
    },
    'test',
  );
  return new NodeAgent(config, { logger: silentLogger() });
}

/**
 * True when the agent registered within `ms`; false when it did not and its
 * connection attempts failed (so "refused" is never just "slow").
 */
async function registersWithin(agent: NodeAgent, ms: number): Promise<boolean> {
  let failedAttempts = 0;
  agent.on('disconnected', () => failedAttempts++);
  agent.start();
  try {
    await waitUntil(() => agent.isConnected(), 'registration', ms);
    return true;
  } catch {
    assert.ok(failedAttempts > 0, 'the agent tried and was refused, not merely slow');
    return false;
  } finally {
    await agent.stop();
  }
}

describe('TLS and mutual TLS', { skip }, () => {
  let pki: TestPki;
  let mock: MockProvider;
  let edge: RunningEdge;
  let client: UndiciAgent;

  before(async () => {
    pki = makeTestPki();
    mock = await startMockProvider({ tokens: 3 });
    const raw = edgeConfigObject();
    raw.tls = {
      client: { cert_file: pki.serverCert, key_file: pki.serverKey },
      nodes: { cert_file: pki.serverCert, key_file: pki.serverKey, client_ca_file: pki.caCert, require_client_cert: true },
    };
    edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
    client = new UndiciAgent({ connect: { ca: readFileSync(pki.caCert) } });
  });
  after(async () => {
    await edge?.close();
    await mock?.close();
    await client?.close();
    pki?.remove();
  });

  test('the client listener speaks HTTPS only', async () => {
    assert.match(edge.url, /^https:\/\//);
    const res = await undiciFetch(`${edge.url}/healthz`, { dispatcher: client });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    await assert.rejects(fetch(`${edge.url.replace('https:', 'http:')}/healthz`), 'plain HTTP is not answered');
  });

  test('a node without a client certificate, with one from another CA, or in plaintext is refused', async () => {
    assert.equal(await registersWithin(agentWith(edge, mock, { ca_file: pki.caCert }), 500), false, 'no client certificate');
    assert.equal(
      await registersWithin(agentWith(edge, mock, { ca_file: pki.caCert, cert_file: pki.rogueClientCert, key_file: pki.rogueClientKey }), 500),
      false,
      'client certificate from another CA',
    );
    assert.equal(await registersWithin(agentWith(edge, mock, undefined), 500), false, 'plaintext');
    assert.equal(
      await registersWithin(agentWith(edge, mock, { ca_file: pki.rogueCaCert, cert_file: pki.clientCert, key_file: pki.clientKey }), 500),
      false,
      'the node does not trust the edge certificate',
    );
    assert.equal(edge.driver.status().nodes[0].connected, false);
  });

  test('a refused dial says why, where grpc-js says only "Failed to connect": a certificate the edge refuses, TLS on the edge only', async () => {
    const diagnosis = async (tls: Record<string, string> | undefined, to = edge): Promise<string> => {
      const agent = agentWith(to, mock, tls);
      // Bounded: a dial that is never diagnosed fails the test instead of hanging the suite.
      const said = new Promise<string>((resolve, reject) => {
        agent.once('dial-diagnosis', resolve);
        setTimeout(() => reject(new Error('no dial diagnosis within 10 s')), 10_000).unref();
      });
      agent.start();
      try {
        return await said;
      } finally {
        await agent.stop();
      }
    };
    assert.match(await diagnosis({ ca_file: pki.caCert, cert_file: pki.rogueClientCert, key_file: pki.rogueClientKey }), /^the edge closed the connection right after the TLS handshake: it refuses this node's certificate/);
    assert.match(await diagnosis(undefined), /^the edge's node listener speaks TLS: give the agent edge\.tls/);
    const plain = await startEdge(parseEdgeConfig(edgeConfigObject(), 'test'), { logger: silentLogger() });
    try {
      assert.match(await diagnosis({ ca_file: pki.caCert, cert_file: pki.clientCert, key_file: pki.clientKey }, plain), /^no TLS handshake with the edge .*does its node listener have tls\.nodes\?/);
    } finally {
      await plain.close();
    }
  });

  test('a node with a valid client certificate registers and serves traffic over HTTPS', async () => {
    const agent = agentWith(edge, mock, { ca_file: pki.caCert, cert_file: pki.clientCert, key_file: pki.clientKey });
    agent.start();
    try {
      await waitUntil(() => agent.isConnected(), 'registration over mutual TLS', 3_000);
      // A fresh connection: the shared client's was handed to node:https at its GET /healthz.
      const fresh = new UndiciAgent({ connect: { ca: readFileSync(pki.caCert) } });
      const res = await undiciFetch(`${edge.url}/v1/chat/completions`, {
        dispatcher: fresh,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { object: string };
      assert.equal(body.object, 'chat.completion');
      // Read off the TLS socket by the lean HTTP/1.1 connection, not node:https's parser.
      const planes = (await edge.inspect()).planes;
      assert.ok(planes.reduce((n, p) => n + p.lean.requests, 0) >= 1, 'the API POST was read by the lean connection');
      await fresh.close();
      // And through the official SDK, streaming, trusting the test CA.
      const sdk = new OpenAI({ baseURL: `${edge.url}/v1`, apiKey: 'x', maxRetries: 0, fetchOptions: { dispatcher: client } });
      const stream = await sdk.chat.completions.create({ model: ALIAS, stream: true, messages: [] });
      let chunks = 0;
      for await (const _ of stream) chunks++;
      assert.ok(chunks > 0);
    } finally {
      await agent.stop();
    }
  });
});

describe('TLS without client certificates', { skip }, () => {
  test('with require_client_cert false a node needs only to trust the edge', async () => {
    const pki = makeTestPki();
    const mock = await startMockProvider({ tokens: 2 });
    const raw = edgeConfigObject();
    raw.tls = { nodes: { cert_file: pki.serverCert, key_file: pki.serverKey } };
    const edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
    try {
      assert.equal(await registersWithin(agentWith(edge, mock, { ca_file: pki.caCert }), 3_000), true);
      assert.equal(await registersWithin(agentWith(edge, mock, undefined), 500), false, 'plaintext is still refused');
    } finally {
      await edge.close();
      await mock.close();
      pki.remove();
    }
  });
});

describe('TLS on the node listener: a connection that never finishes its handshake', { skip }, () => {
  test('is closed within the register timeout (min(10 s, heartbeat.timeout_ms)), not after Node\'s 120 s', async () => {
    const pki = makeTestPki();
    const raw = edgeConfigObject(); // heartbeat.timeout_ms 1000: a stream must register within 1 s
    raw.tls = { nodes: { cert_file: pki.serverCert, key_file: pki.serverKey, client_ca_file: pki.caCert, require_client_cert: true } };
    const edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
    try {
      // TCP connected, no ClientHello: anyone who reaches the listener can open many such.
      const socket = connect(edge.grpcPort, '127.0.0.1');
      socket.on('error', () => {});
      await once(socket, 'connect');
      const outcome = await Promise.race([once(socket, 'close').then(() => 'closed'), new Promise((resolve) => setTimeout(resolve, 15_000, 'still open after 15 s'))]);
      socket.destroy();
      assert.equal(outcome, 'closed');
    } finally {
      await edge.close();
      pki.remove();
    }
  });
});

describe('TLS: closing with a client still in its handshake', { skip }, () => {
  test('a connection that never finishes its TLS handshake does not hold up the end of a drain', async () => {
    const pki = makeTestPki();
    try {
      const raw = edgeConfigObject();
      raw.tls = { client: { cert_file: pki.serverCert, key_file: pki.serverKey } };
      const edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
      // TCP connected, no ClientHello: neither node:http nor the lean connection holds it yet.
      const socket = connect(edge.httpPort, '127.0.0.1');
      socket.on('error', () => {});
      await once(socket, 'connect');
      await new Promise((resolve) => setTimeout(resolve, 100));
      // The drain a SIGTERM starts: nothing in flight, then every connection is cut and the edge closes.
      const closed = edge.shutdown(200).then(() => 'closed');
      // Node's handshake timeout is 120 s: without the cut, the close at the drain's end waits for it.
      const outcome = await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 10_000, 'still open after 10 s'))]);
      assert.equal(outcome, 'closed');
      assert.ok(socket.destroyed || (await Promise.race([once(socket, 'close').then(() => true), new Promise((resolve) => setTimeout(resolve, 2_000, false))])), 'the half-open TLS connection was cut');
      socket.destroy();
    } finally {
      pki.remove();
    }
  });
});

describe('TLS: a client that never finishes its handshake', { skip }, () => {
  test('is closed within the head\'s deadline (min(60 s, request_timeout_ms)), as a silent plain-HTTP client is, not after Node\'s 120 s', async () => {
    const pki = makeTestPki();
    const raw = edgeConfigObject();
    raw.tls = { client: { cert_file: pki.serverCert, key_file: pki.serverKey } };
    (raw.limits as Record<string, unknown>).request_timeout_ms = 1_000;
    const edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
    try {
      // TCP connected, no ClientHello (or one a byte a minute): it holds a socket and a file descriptor meanwhile.
      const socket = connect(edge.httpPort, '127.0.0.1');
      socket.on('error', () => {});
      await once(socket, 'connect');
      const started = Date.now();
      const outcome = await Promise.race([once(socket, 'close').then(() => 'closed'), new Promise((resolve) => setTimeout(resolve, 15_000, 'still open after 15 s'))]);
      socket.destroy();
      assert.equal(outcome, 'closed');
      assert.ok(Date.now() - started >= 900, 'not cut before its deadline');
    } finally {
      await edge.close();
      pki.remove();
    }
  });
});
