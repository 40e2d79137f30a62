// Certificate renewal without a restart: an operator (or certbot) writes a
// new certificate over the files tls names and refreshes (SIGHUP or the admin
// API). Both listeners then serve it to every new handshake, connections
// already open keep working on the old one, a pair that does not load is
// refused with the listener's config key and changes nothing, and the expiry
// metric follows what is served.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { after, before, describe, test } from 'node:test';
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

function serialOf(file: string): string {
  return new X509Certificate(readFileSync(file)).serialNumber;
}

async function handshake(port: number, pki: TestPki, alpn: string, clientCert: boolean): Promise<TLSSocket> {
  const socket = connect({ host: '127.0.0.1', servername: 'localhost', port, ca: readFileSync(pki.caCert), ALPNProtocols: [alpn], ...(clientCert ? { cert: readFileSync(pki.clientCert), key: readFileSync(pki.clientKey) } : {}) });
  await once(socket, 'secureConnect');
  return socket;
}

/** The serial of the certificate a new connection to `port` is served. */
async function servedSerial(port: number, pki: TestPki, alpn: string, clientCert = false): Promise<string> {
  const socket = await handshake(port, pki, alpn, clientCert);
  const serial = socket.getPeerCertificate().serialNumber;
  socket.destroy();
  return serial;
}

/** One GET /healthz on an open HTTP/1.1 connection: its status line. */
async function getHealth(socket: TLSSocket): Promise<string> {
  // A data listener, not an async iterator: leaving one of those destroys the socket, which must stay open.
  const text = await new Promise<string>((resolve, reject) => {
    let got = '';
    const onData = (chunk: Buffer): void => {
      got += String(chunk);
      const head = got.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(got);
      if (head < 0 || length === null || got.length < head + 4 + Number(length[1])) return;
      socket.off('data', onData).off('error', reject);
      resolve(got);
    };
    socket.on('data', onData).once('error', reject);
    socket.write('GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n');
  });
  return text.slice(0, text.indexOf('\r\n'));
}

describe('certificates renewed in place while the edge runs', { skip }, () => {
  let pki: TestPki;
  let mock: MockProvider;
  let edge: RunningEdge;
  let agent: NodeAgent;
  let raw: Record<string, unknown>;
  const live = { cert: '', key: '' };
  let renewed: { cert: string; key: string };

  before(async () => {
    pki = makeTestPki();
    renewed = pki.issueServer('renewed', 2);
    live.cert = join(pki.dir, 'live.crt');
    live.key = join(pki.dir, 'live.key');
    copyFileSync(pki.serverCert, live.cert);
    copyFileSync(pki.serverKey, live.key);
    mock = await startMockProvider({ tokens: 3 });
    raw = edgeConfigObject();
    raw.tls = {
      client: { cert_file: live.cert, key_file: live.key },
      nodes: { cert_file: live.cert, key_file: live.key, client_ca_file: pki.caCert, require_client_cert: true },
    };
    edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
    agent = new NodeAgent(
      parseAgentConfig(
        {
          edge: { address: `127.0.0.1:${edge.grpcPort}`, tls: { ca_file: pki.caCert, cert_file: pki.clientCert, key_file: pki.clientKey } },
          node: { id: NODE_ID, token: NODE_TOKEN },
          providers: [{ id: PROVIDER_ID, type: 'openai_compat', base_url: mock.url }],
        },
        'test',
      ),
      { logger: silentLogger() },
    );
    agent.start();
    await waitUntil(() => agent.isConnected(), 'registration over mutual TLS', 5_000);
  });
  after(async () => {
    await agent?.stop();
    await edge?.close();
    await mock?.close();
    pki?.remove();
  });

  async function chat(): Promise<number> {
    const client = new UndiciAgent({ connect: { ca: readFileSync(pki.caCert) } });
    try {
      const res = await undiciFetch(`${edge.url}/v1/chat/completions`, {
        dispatcher: client,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: ALIAS, messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.arrayBuffer();
      return res.status;
    } finally {
      await client.close();
    }
  }

  async function expiryMetric(): Promise<Record<string, number>> {
    const text = await edge.scrapeMetrics();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^edge_tls_certificate_expiry_timestamp_seconds\{listener="(\w+)"\} (\S+)$/gm)) out[m[1]] = Number(m[2]);
    return out;
  }

  test('a renewal written over the files is served to new handshakes after an apply, with no config change', async () => {
    const original = serialOf(pki.serverCert);
    assert.equal(await servedSerial(edge.httpPort, pki, 'http/1.1'), original);
    assert.equal(await servedSerial(edge.grpcPort, pki, 'h2', true), original);
    const notAfter = (file: string): number => Date.parse(new X509Certificate(readFileSync(file)).validTo) / 1000;
    assert.deepEqual(await expiryMetric(), { client: notAfter(pki.serverCert), nodes: notAfter(pki.serverCert) });
    // A client connection made before the renewal.
    const open = await handshake(edge.httpPort, pki, 'http/1.1', false);
    assert.equal(await getHealth(open), 'HTTP/1.1 200 OK');
    const versionBefore = edge.configVersion;

    copyFileSync(renewed.key, live.key);
    copyFileSync(renewed.cert, live.cert);
    const evaluated = await edge.refresh({ mode: 'evaluate', config: raw });
    assert.equal(evaluated.applicable, true);
    assert.deepEqual(evaluated.changes, [], 'no config key changed');
    assert.deepEqual(
      evaluated.certificates.map((c) => [c.listener, c.changed]),
      [
        ['client', true],
        ['nodes', true],
      ],
    );
    assert.equal(await servedSerial(edge.httpPort, pki, 'http/1.1'), original, 'an evaluate swaps nothing');

    const applied = await edge.refresh({ mode: 'apply', config: raw });
    assert.equal(applied.status, 'applied');
    assert.deepEqual(applied.reasons, []);
    assert.equal(applied.configVersion, versionBefore, 'the config itself did not change');
    assert.equal(applied.certificates[0].notAfter, new Date(notAfter(renewed.cert) * 1000).toISOString());
    const fresh = serialOf(renewed.cert);
    assert.notEqual(fresh, original);
    assert.equal(await servedSerial(edge.httpPort, pki, 'http/1.1'), fresh, 'the client listener serves the renewal');
    assert.equal(await servedSerial(edge.grpcPort, pki, 'h2', true), fresh, 'the node listener serves the renewal');
    assert.deepEqual(await expiryMetric(), { client: notAfter(renewed.cert), nodes: notAfter(renewed.cert) });

    // What was open keeps working: the client's connection on its old certificate, the node's session.
    assert.equal(await getHealth(open), 'HTTP/1.1 200 OK');
    assert.equal(open.getPeerCertificate().serialNumber, original);
    open.destroy();
    assert.equal(agent.isConnected(), true);
    assert.equal(await chat(), 200);

    const again = await edge.refresh({ mode: 'apply', config: raw });
    assert.equal(again.status, 'unchanged', 'the same files again: nothing to swap');
  });

  test('a certificate and key that are not a pair are refused, naming the listener, and nothing is swapped', async () => {
    const serving = await servedSerial(edge.httpPort, pki, 'http/1.1');
    // A half-finished renewal: the new certificate is there, its key not yet.
    copyFileSync(pki.serverCert, live.cert);
    copyFileSync(renewed.key, live.key);
    for (const mode of ['evaluate', 'apply'] as const) {
      const result = await edge.refresh({ mode, config: raw });
      assert.equal(result.rejection, 'invalid_config', mode);
      assert.equal(result.applicable, false);
      assert.ok(result.reasons.some((r) => r.startsWith('tls.client: ') && r.includes('are not a certificate and its key')), result.reasons.join('\n'));
      assert.ok(result.reasons.some((r) => r.startsWith('tls.nodes: ')), result.reasons.join('\n'));
    }
    assert.equal(await servedSerial(edge.httpPort, pki, 'http/1.1'), serving);
    assert.equal(await servedSerial(edge.grpcPort, pki, 'h2', true), serving);
    assert.equal(await chat(), 200);
    copyFileSync(renewed.cert, live.cert);
  });

  test('an expired certificate written over the files is refused, naming the listener and its expiry, and nothing is swapped', async () => {
    const serving = await servedSerial(edge.httpPort, pki, 'http/1.1');
    // A renewal job that wrote back an old certificate: it loads, but no client or node would accept it.
    const expired = pki.issueServer('expired', -1);
    const savedCert = readFileSync(live.cert);
    const savedKey = readFileSync(live.key);
    copyFileSync(expired.key, live.key);
    copyFileSync(expired.cert, live.cert);
    const expiredAt = new Date(new X509Certificate(readFileSync(expired.cert)).validTo).toISOString();
    for (const mode of ['evaluate', 'apply'] as const) {
      const result = await edge.refresh({ mode, config: raw });
      assert.equal(result.rejection, 'invalid_config', mode);
      assert.equal(result.applicable, false);
      assert.ok(result.reasons.some((r) => r.startsWith('tls.client: ') && r.includes(`expired at ${expiredAt}`)), result.reasons.join('\n'));
      assert.ok(result.reasons.some((r) => r.startsWith('tls.nodes: ') && r.includes('expired at')), result.reasons.join('\n'));
    }
    assert.equal(await servedSerial(edge.httpPort, pki, 'http/1.1'), serving);
    assert.equal(await servedSerial(edge.grpcPort, pki, 'h2', true), serving);
    assert.ok((await expiryMetric()).client * 1000 > Date.now(), 'the metric still shows the served certificate');
    assert.equal(await chat(), 200);
    writeFileSync(live.key, savedKey);
    writeFileSync(live.cert, savedCert);
  });

  test('a certificate not valid yet written over the files is refused, naming the listener and its start, and nothing is swapped', async () => {
    const serving = await servedSerial(edge.httpPort, pki, 'http/1.1');
    // A renewal issued with a start days ahead: it loads, but no client or node would accept it before then.
    const future = pki.issueFutureServer('future', 2);
    const savedCert = readFileSync(live.cert);
    const savedKey = readFileSync(live.key);
    copyFileSync(future.key, live.key);
    copyFileSync(future.cert, live.cert);
    const startsAt = new Date(new X509Certificate(readFileSync(future.cert)).validFrom).toISOString();
    for (const mode of ['evaluate', 'apply'] as const) {
      const result = await edge.refresh({ mode, config: raw });
      assert.equal(result.rejection, 'invalid_config', mode);
      assert.equal(result.applicable, false);
      assert.ok(result.reasons.some((r) => r.startsWith('tls.client: ') && r.includes(`is not valid before ${startsAt}`)), result.reasons.join('\n'));
      assert.ok(result.reasons.some((r) => r.startsWith('tls.nodes: ') && r.includes('is not valid before')), result.reasons.join('\n'));
    }
    assert.equal(await servedSerial(edge.httpPort, pki, 'http/1.1'), serving);
    assert.equal(await servedSerial(edge.grpcPort, pki, 'h2', true), serving);
    assert.equal(await chat(), 200);
    writeFileSync(live.key, savedKey);
    writeFileSync(live.cert, savedCert);
  });

  test('new file paths are a live change; TLS on or off still takes a restart', async () => {
    const other = pki.issueServer('elsewhere', 3);
    const moved = structuredClone(raw) as { tls: { client: Record<string, unknown> } };
    moved.tls.client = { cert_file: other.cert, key_file: other.key };
    const version = edge.configVersion;
    const applied = await edge.refresh({ mode: 'apply', config: moved });
    assert.equal(applied.status, 'applied', applied.reasons.join('\n'));
    assert.deepEqual(
      applied.changes.map((c) => [c.path, c.mutable]),
      [
        ['tls.client.cert_file', true],
        ['tls.client.key_file', true],
      ],
    );
    assert.equal(applied.configVersion, version + 1);
    assert.deepEqual(
      applied.certificates.map((c) => [c.listener, c.changed]),
      [
        ['client', true],
        ['nodes', false],
      ],
    );
    assert.equal(await servedSerial(edge.httpPort, pki, 'http/1.1'), serialOf(other.cert));

    const plain = structuredClone(moved) as { tls: Record<string, unknown> };
    delete plain.tls.client;
    const off = await edge.refresh({ mode: 'apply', config: plain });
    assert.equal(off.rejection, 'restart_required');
    assert.deepEqual(off.reasons, [`tls.client: needs a restart (TLS on or off, and whether node certificates are required, are fixed when the listeners are bound)`]);
    assert.equal(await servedSerial(edge.httpPort, pki, 'http/1.1'), serialOf(other.cert));
  });
});

describe('node certificates renewed in place, and the CA nodes are checked against', { skip }, () => {
  let pki: TestPki;
  let mock: MockProvider;
  let edge: RunningEdge;
  let raw: Record<string, unknown>;
  const agents: NodeAgent[] = [];

  before(async () => {
    pki = makeTestPki();
    mock = await startMockProvider({ tokens: 3 });
    raw = edgeConfigObject();
    raw.tls = { nodes: { cert_file: pki.serverCert, key_file: pki.serverKey, client_ca_file: pki.caCert, require_client_cert: true } };
    edge = await startEdge(parseEdgeConfig(raw, 'test'), { logger: silentLogger() });
  });
  after(async () => {
    for (const agent of agents) await agent.stop();
    await edge?.close();
    await mock?.close();
    pki?.remove();
  });

  function agentWith(files: { cert: string; key: string; ca: string }): NodeAgent {
    const agent = new NodeAgent(
      parseAgentConfig(
        {
          edge: { address: `127.0.0.1:${edge.grpcPort}`, tls: { ca_file: files.ca, cert_file: files.cert, key_file: files.key } },
          node: { id: NODE_ID, token: NODE_TOKEN },
          providers: [{ id: PROVIDER_ID, type: 'openai_compat', base_url: mock.url }],
          reconnect: { initial_ms: 50, max_ms: 100 },
        },
        'test',
      ),
      { logger: silentLogger() },
    );
    agents.push(agent);
    return agent;
  }

  test('an agent refused for its certificate registers once a good one is written over its files, without a restart', async () => {
    const files = { cert: join(pki.dir, 'node.crt'), key: join(pki.dir, 'node.key'), ca: pki.caCert };
    copyFileSync(pki.rogueClientCert, files.cert);
    copyFileSync(pki.rogueClientKey, files.key);
    const agent = agentWith(files);
    let refused = 0;
    agent.on('disconnected', () => refused++);
    agent.start();
    await waitUntil(() => refused >= 2, 'two refused attempts', 5_000);
    assert.equal(agent.isConnected(), false);
    copyFileSync(pki.clientKey, files.key);
    copyFileSync(pki.clientCert, files.cert);
    await waitUntil(() => agent.isConnected(), 'registration with the renewed certificate', 5_000);
    await agent.stop();
  });

  test('a reconnect while the node\'s files are half renewed (a certificate beside a key that is not its own) keeps the last good ones; no crash', async () => {
    const files = { cert: join(pki.dir, 'half.crt'), key: join(pki.dir, 'half.key'), ca: pki.caCert };
    copyFileSync(pki.clientCert, files.cert);
    copyFileSync(pki.clientKey, files.key);
    const agent = agentWith(files);
    agent.start();
    await waitUntil(() => agent.isConnected(), 'registration', 5_000);
    // Halfway: the key is another certificate's. The reconnect dials with what it had.
    copyFileSync(pki.rogueClientKey, files.key);
    let disconnects = 0;
    agent.on('disconnected', () => disconnects++);
    agent.dropConnection();
    await waitUntil(() => disconnects >= 1 && agent.isConnected(), 'a reconnect with the last good credentials', 5_000);
    copyFileSync(pki.clientKey, files.key);
    agent.dropConnection();
    await waitUntil(() => disconnects >= 2 && agent.isConnected(), 'a reconnect once the files are whole', 5_000);
    await agent.stop();
  });

  test('a client_ca_file whose every certificate expired is refused (no node certificate would verify); a bundle with a valid one beside it is taken', async () => {
    const expired = pki.issueCa('expired-ca', -1);
    const alone = structuredClone(raw) as { tls: { nodes: Record<string, unknown> } };
    alone.tls.nodes.client_ca_file = expired;
    const refused = await edge.refresh({ mode: 'evaluate', config: alone });
    assert.equal(refused.rejection, 'invalid_config');
    assert.ok(refused.reasons.some((r) => r.startsWith('tls.nodes.client_ca_file: ') && r.includes('every certificate in it expired')), refused.reasons.join('\n'));
    // Mid-rotation: the old CA, expired, beside the current one.
    const bundle = join(pki.dir, 'bundle.crt');
    writeFileSync(bundle, Buffer.concat([readFileSync(expired), readFileSync(pki.caCert)]));
    const rotating = structuredClone(raw) as { tls: { nodes: Record<string, unknown> } };
    rotating.tls.nodes.client_ca_file = bundle;
    const taken = await edge.refresh({ mode: 'evaluate', config: rotating });
    assert.equal(taken.applicable, true, taken.reasons.join('\n'));
    await assert.rejects(startEdge(parseEdgeConfig(alone, 'test'), { logger: silentLogger() }), /every certificate in it expired/, 'refused at start too');
  });

  test('a client_ca_file whose certificates are not valid yet is refused, naming the first start', async () => {
    const future = pki.issueFutureCa('future-ca', 30);
    const early = structuredClone(raw) as { tls: { nodes: Record<string, unknown> } };
    early.tls.nodes.client_ca_file = future;
    const refused = await edge.refresh({ mode: 'evaluate', config: early });
    assert.equal(refused.rejection, 'invalid_config');
    assert.ok(refused.reasons.some((r) => r.startsWith('tls.nodes.client_ca_file: ') && r.includes('no certificate in it is valid yet (the first from 20')), refused.reasons.join('\n'));
  });

  test('a new client_ca_file is a live change: node handshakes from then on are checked against it', async () => {
    const rotated = structuredClone(raw) as { tls: { nodes: Record<string, unknown> } };
    rotated.tls.nodes.client_ca_file = pki.rogueCaCert;
    const applied = await edge.refresh({ mode: 'apply', config: rotated });
    assert.equal(applied.status, 'applied', applied.reasons.join('\n'));
    assert.deepEqual(applied.certificates.map((c) => [c.listener, c.changed]), [['nodes', true]]);
    const rogue = agentWith({ cert: pki.rogueClientCert, key: pki.rogueClientKey, ca: pki.caCert });
    rogue.start();
    await waitUntil(() => rogue.isConnected(), 'registration with a certificate from the new CA', 5_000);
    await rogue.stop();
    const old = agentWith({ cert: pki.clientCert, key: pki.clientKey, ca: pki.caCert });
    let refused = 0;
    old.on('disconnected', () => refused++);
    old.start();
    await waitUntil(() => refused >= 2, 'two refused attempts with a certificate of the old CA', 5_000);
    assert.equal(old.isConnected(), false);
  });
});
