import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_LIMITS_HARDENING, limitsOf } from '../../src/shared/config-hardening.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { ConfigError } from '../../src/shared/config-reader.js';

const BASE = { nodes: [{ id: 'n', token: 't', providers: [{ id: 'p' }] }], models: [{ alias: 'm', providers: { p: 's' } }] };

function problemsOf(raw: unknown): string {
  try {
    parseEdgeConfig(raw, 'test.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems.join('\n');
  }
  assert.fail('expected a ConfigError');
}

test('hardening limits take documented defaults and are range-checked', () => {
  const config = parseEdgeConfig(BASE, 't');
  assert.deepEqual(limitsOf(config), DEFAULT_LIMITS_HARDENING);
  const set = parseEdgeConfig({ ...BASE, limits: { max_json_depth: 8, max_header_bytes: 4096, max_tunnels_per_node: 3, max_frame_bytes: 65536, tunnel_window_bytes: 65536, ttfb_timeout_ms: 0, idle_timeout_ms: 500, request_timeout_ms: 0 } }, 't');
  assert.deepEqual(limitsOf(set), { maxJsonDepth: 8, maxHeaderBytes: 4096, requestTimeoutMs: 0, maxTunnelsPerNode: 3, maxFrameBytes: 65536, ttfbTimeoutMs: 0, idleTimeoutMs: 500, sseKeepaliveMs: 15_000, offloadBytes: 262144 });
  const problems = problemsOf({ ...BASE, limits: { max_json_depth: 0, max_header_bytes: 10, max_frame_bytes: 1, ttfb_timeout_ms: -1, request_timeout_ms: 1.5, max_tunels_per_node: 2 } });
  assert.match(problems, /limits\.max_json_depth: expected an integer from 1/);
  assert.match(problems, /limits\.max_header_bytes: expected an integer from 1024/);
  assert.match(problems, /limits\.max_frame_bytes: expected an integer from 65536/);
  assert.match(problems, /limits\.ttfb_timeout_ms: expected an integer from 0/);
  assert.match(problems, /limits\.request_timeout_ms: expected an integer from 0/);
  assert.match(problems, /limits\.max_tunels_per_node: unknown key/);
  // A DATA frame is at most the flow-control window, so the window must fit the frame limit.
  const clash = problemsOf({ ...BASE, limits: { max_frame_bytes: 65536, tunnel_window_bytes: 262144 } });
  assert.match(clash, /limits\.tunnel_window_bytes: must not exceed limits\.max_frame_bytes \(65536\), found 262144/);
});

test('a config that sets nothing gets the defaults README.md and docs/hardening.md state, as literal values', () => {
  // Literals on purpose: comparing with the implementation's own constants
  // could not catch a default that drifted from the documentation.
  const config = parseEdgeConfig(BASE, 't');
  const MiB = 1024 * 1024;
  assert.deepEqual(
    {
      http: [config.http.host, config.http.port],
      grpc: [config.grpc.host, config.grpc.port],
      bodyBytes: config.limits.bodyBytes,
      tunnelTimeoutMs: config.limits.tunnelTimeoutMs,
      storedResponses: config.limits.storedResponses,
      heartbeat: [config.heartbeat.intervalMs, config.heartbeat.timeoutMs],
      longContextThresholdTokens: config.scheduler.longContextThresholdTokens,
      admin: [config.admin?.host, config.admin?.port, config.admin?.token],
      drainGraceMs: config.drain?.graceMs,
      provider: [config.nodes[0].providers[0].type, config.nodes[0].providers[0].capacity, config.nodes[0].providers[0].enabled, config.nodes[0].providers[0].maxContextTokens],
      model: [config.models[0].maxQueue, config.models[0].queueTimeoutMs],
      hardening: limitsOf(config),
    },
    {
      http: ['127.0.0.1', 8080],
      grpc: ['127.0.0.1', 50051],
      bodyBytes: 8 * MiB, // README: 8388608; hardening.md: 8 MiB
      tunnelTimeoutMs: 600_000,
      storedResponses: 100_000, // README: 100000
      heartbeat: [5_000, 15_000],
      longContextThresholdTokens: 32_768,
      admin: ['127.0.0.1', 9090, undefined],
      drainGraceMs: 30_000,
      provider: ['openai_compat', 1, true, undefined],
      model: [16, 30_000],
      hardening: {
        maxJsonDepth: 64,
        maxHeaderBytes: 16 * 1024,
        requestTimeoutMs: 300_000,
        maxTunnelsPerNode: 0,
        maxFrameBytes: 4 * MiB,
        ttfbTimeoutMs: 300_000,
        idleTimeoutMs: 120_000,
        sseKeepaliveMs: 15_000,
        offloadBytes: 256 * 1024,
      },
    },
  );
});

test('a hand-built config without the hardening keys gets the defaults', () => {
  const config = parseEdgeConfig(BASE, 't');
  const { maxJsonDepth: _a, maxHeaderBytes: _b, maxTunnelsPerNode: _c, maxFrameBytes: _d, ttfbTimeoutMs: _e, idleTimeoutMs: _f, offloadBytes: _g, ...bare } = config.limits;
  assert.deepEqual(limitsOf({ ...config, limits: bare }), DEFAULT_LIMITS_HARDENING);
});

test('tls: sections are optional; require_client_cert needs a client CA and defaults to on with one', () => {
  assert.deepEqual(parseEdgeConfig(BASE, 't').tls, { client: undefined, nodes: undefined });
  const withCa = parseEdgeConfig({ ...BASE, tls: { client: { cert_file: 'c', key_file: 'k' }, nodes: { cert_file: 'c', key_file: 'k', client_ca_file: 'ca' } } }, 't');
  assert.deepEqual(withCa.tls, { client: { certFile: 'c', keyFile: 'k' }, nodes: { certFile: 'c', keyFile: 'k', clientCaFile: 'ca', requireClientCert: true } });
  const tlsOnly = parseEdgeConfig({ ...BASE, tls: { nodes: { cert_file: 'c', key_file: 'k' } } }, 't');
  assert.equal(tlsOnly.tls?.nodes?.requireClientCert, false);
  const problems = problemsOf({ ...BASE, tls: { nodes: { cert_file: 'c', require_client_cert: true }, client: { key_file: 'k' }, other: {} } });
  assert.match(problems, /tls\.nodes\.require_client_cert: needs tls\.nodes\.client_ca_file/);
  // A CA that would be ignored is a mistake, not a softer mutual TLS.
  assert.match(problemsOf({ ...BASE, tls: { nodes: { cert_file: 'c', key_file: 'k', client_ca_file: 'ca', require_client_cert: false } } }), /require_client_cert: false with a client_ca_file would check no node certificate/);
  assert.match(problems, /tls\.nodes\.key_file: expected a non-empty string/);
  assert.match(problems, /tls\.client\.cert_file: expected a non-empty string/);
  assert.match(problems, /tls\.other: unknown key/);
});

test('a missing certificate file fails the start naming the config key', async () => {
  const { startEdge } = await import('../../src/edge/edge.js');
  const { silentLogger } = await import('../../src/shared/logger.js');
  const config = parseEdgeConfig({ ...BASE, listen: { http: { port: 0 }, grpc: { port: 0 } }, tls: { nodes: { cert_file: '/nonexistent/edge.crt', key_file: '/nonexistent/edge.key' } } }, 't');
  await assert.rejects(startEdge(config, { logger: silentLogger() }), /tls\.nodes\.(key|cert)_file: cannot read \/nonexistent/);
});

test('`edge hash-key` prints the digest auth.api_keys[].key_sha256 takes, from an argument or stdin', async () => {
  const { execFileSync } = await import('node:child_process');
  const { fileURLToPath } = await import('node:url');
  const { sha256Hex } = await import('../../src/workers/http/client-auth.js');
  const cli = fileURLToPath(new URL('../../src/edge/cli.js', import.meta.url));
  assert.equal(execFileSync(process.execPath, [cli, 'hash-key', 'sk-abc'], { encoding: 'utf8' }).trim(), sha256Hex('sk-abc'));
  assert.equal(execFileSync(process.execPath, [cli, 'hash-key'], { input: 'sk-abc\n', encoding: 'utf8' }).trim(), sha256Hex('sk-abc'));
  assert.match(sha256Hex('sk-abc'), /^[0-9a-f]{64}$/);
});
