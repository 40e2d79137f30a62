// Readers for the edge config's hardening sections: `auth:` (client API
// keys), `tls:` (client and node listeners) and the extra `limits:` keys.
// Kept apart from config.ts so each section reads on one screen.
import { noBrackets, type ConfigReader } from './config-reader.js';
import type { ApiKeyConfig, AuthConfig, EdgeConfig, LimitsHardening, NodeTlsConfig, TlsConfig, TlsFilesConfig } from './config-types.js';
import { MAX_REQUEST_HEAD_BYTES } from './wire-limits.js';

const DAY_MS = 86_400_000;
const SHA256_HEX = /^[0-9a-f]{64}$/;

export const HARDENING_LIMIT_KEYS = [
  'max_json_depth',
  'max_header_bytes',
  'request_timeout_ms',
  'max_tunnels_per_node',
  'max_frame_bytes',
  'ttfb_timeout_ms',
  'idle_timeout_ms',
  'sse_keepalive_ms',
  'offload_bytes',
] as const;

export const DEFAULT_LIMITS_HARDENING: LimitsHardening = Object.freeze({
  maxJsonDepth: 64,
  maxHeaderBytes: 16 * 1024,
  // node:http's own default: a slow or stalled upload cannot hold a connection and its buffered body for ever.
  requestTimeoutMs: 300_000,
  maxTunnelsPerNode: 0,
  maxFrameBytes: 4 * 1024 * 1024,
  ttfbTimeoutMs: 300_000,
  idleTimeoutMs: 120_000,
  sseKeepaliveMs: 15_000,
  offloadBytes: 256 * 1024,
});

export const NO_AUTH: AuthConfig = Object.freeze({ apiKeys: Object.freeze([]) });
export const NO_TLS: TlsConfig = Object.freeze({ client: undefined, nodes: undefined });

/** The `limits:` keys beyond body_bytes and tunnel_timeout_ms. */
export function readLimitsHardening(r: ConfigReader, limits: Record<string, unknown>): LimitsHardening {
  const d = DEFAULT_LIMITS_HARDENING;
  return {
    maxJsonDepth: r.integer('limits.max_json_depth', limits.max_json_depth, 1, 10_000, d.maxJsonDepth),
    maxHeaderBytes: r.integer('limits.max_header_bytes', limits.max_header_bytes, 1024, MAX_REQUEST_HEAD_BYTES, d.maxHeaderBytes),
    requestTimeoutMs: r.integer('limits.request_timeout_ms', limits.request_timeout_ms, 0, DAY_MS, d.requestTimeoutMs),
    maxTunnelsPerNode: r.integer('limits.max_tunnels_per_node', limits.max_tunnels_per_node, 0, 1_000_000, d.maxTunnelsPerNode),
    maxFrameBytes: r.integer('limits.max_frame_bytes', limits.max_frame_bytes, 64 * 1024, 1 << 30, d.maxFrameBytes),
    ttfbTimeoutMs: r.integer('limits.ttfb_timeout_ms', limits.ttfb_timeout_ms, 0, DAY_MS, d.ttfbTimeoutMs),
    idleTimeoutMs: r.integer('limits.idle_timeout_ms', limits.idle_timeout_ms, 0, DAY_MS, d.idleTimeoutMs),
    sseKeepaliveMs: r.integer('limits.sse_keepalive_ms', limits.sse_keepalive_ms, 0, DAY_MS, d.sseKeepaliveMs),
    offloadBytes: r.integer('limits.offload_bytes', limits.offload_bytes, 0, 1 << 30, d.offloadBytes),
  };
}

/** `auth: { api_keys: [{ name, key_sha256, models?, max_concurrent?, requests_per_minute?, tokens_per_minute? }] }`. */
/** Secrets one API key may be known by at once: a rotation's old and new, with room for a slow client. */
const MAX_KEY_SECRETS = 4;

export function readAuth(r: ConfigReader, raw: unknown, aliases: ReadonlySet<string>): AuthConfig {
  if (raw === undefined) return NO_AUTH;
  const obj = authMapping(r, 'auth', raw);
  if (obj === undefined) return NO_AUTH;
  r.noUnknownKeys('auth', obj, ['api_keys']);
  const apiKeys: ApiKeyConfig[] = [];
  const names = new Set<string>();
  const digests = new Set<string>();
  if (obj.api_keys !== undefined && !Array.isArray(obj.api_keys)) r.problems.push(`auth.api_keys: expected a list, found ${authValueKind(obj.api_keys)}`);
  for (const [i, item] of (Array.isArray(obj.api_keys) ? obj.api_keys : []).entries()) {
    const path = `auth.api_keys[${i}]`;
    const key = authMapping(r, path, item);
    if (key === undefined) continue;
    r.noUnknownKeys(path, key, ['name', 'key_sha256', 'models', 'max_concurrent', 'requests_per_minute', 'tokens_per_minute', 'priority', 'weight', 'fairness_header']);
    const name = r.string(`${path}.name`, key.name);
    noBrackets(r, `${path}.name`, name);
    if (names.has(name)) r.problems.push(`${path}.name: duplicate name ${JSON.stringify(name)}`);
    names.add(name);
    // One digest, or a few while a secret is rotated (the old beside the new, under the one name).
    const listed: unknown[] = Array.isArray(key.key_sha256) ? key.key_sha256 : [key.key_sha256];
    const keySha256s: string[] = [];
    if (listed.length === 0 || listed.length > MAX_KEY_SECRETS) r.problems.push(`${path}.key_sha256: one digest, or a list of 1 to ${MAX_KEY_SECRETS} (the secrets the key is known by while one is rotated)`);
    for (const [j, value] of listed.entries()) {
      const at = Array.isArray(key.key_sha256) ? `${path}.key_sha256[${j}]` : `${path}.key_sha256`;
      if (typeof value !== 'string' || !SHA256_HEX.test(value.toLowerCase())) {
        // Never echo the value: a key pasted here by mistake is a secret.
        r.problems.push(`${at}: expected 64 hex digits (sha256 of the key; \`edge hash-key\` prints it), value not shown`);
        continue;
      }
      const digest = value.toLowerCase();
      if (digests.has(digest)) r.problems.push(`${at}: the same key is listed twice`);
      digests.add(digest);
      keySha256s.push(digest);
    }
    let models: string[] | undefined;
    if (key.models !== undefined) {
      models = [];
      for (const [j, m] of r.list(`${path}.models`, key.models).entries()) {
        const alias = r.string(`${path}.models[${j}]`, m);
        if (alias !== '' && !aliases.has(alias)) r.problems.push(`${path}.models[${j}]: no model with alias ${JSON.stringify(alias)} in models[]`);
        models.push(alias);
      }
    }
    apiKeys.push({
      name,
      keySha256s,
      models,
      maxConcurrent: r.optionalInteger(`${path}.max_concurrent`, key.max_concurrent, 1, 1_000_000),
      ...optionalRate(r, path, key),
      ...optionalFairness(r, path, key),
    });
  }
  return { apiKeys };
}

/**
 * What was found under `auth` where a mapping or list belongs, never the value itself: a key pasted there
 * (`api_keys: [sk-…]`, `api_keys: sk-…`) is a secret, and problems reach logs and the admin API.
 */
function authValueKind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return `a ${typeof value} (value not shown: it may be a key; list entries as { name, key_sha256 }, \`edge hash-key\` prints the digest)`;
}

function authMapping(r: ConfigReader, path: string, value: unknown): Record<string, unknown> | undefined {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  r.problems.push(`${path}: expected a mapping, found ${authValueKind(value)}`);
  return undefined;
}

/** A key's fair-queuing fields, present only when configured (so a config without them compares equal to before). */
function optionalFairness(r: ConfigReader, path: string, key: Record<string, unknown>): Pick<ApiKeyConfig, 'priority' | 'weight' | 'fairnessHeader'> {
  const out: { priority?: number; weight?: number; fairnessHeader?: boolean } = {};
  const priority = r.optionalInteger(`${path}.priority`, key.priority, -100, 100);
  if (priority !== undefined) out.priority = priority;
  const weight = r.optionalInteger(`${path}.weight`, key.weight, 1, 1000);
  if (weight !== undefined) out.weight = weight;
  if (key.fairness_header !== undefined) out.fairnessHeader = r.boolean(`${path}.fairness_header`, key.fairness_header, false);
  return out;
}

/** Absent when unset, so that a config without it diffs and prints as before. */
function optionalRate(r: ConfigReader, path: string, key: Record<string, unknown>): Pick<ApiKeyConfig, 'requestsPerMinute' | 'tokensPerMinute'> {
  const out: { requestsPerMinute?: number; tokensPerMinute?: number } = {};
  const perMinute = r.optionalInteger(`${path}.requests_per_minute`, key.requests_per_minute, 1, 10_000_000);
  if (perMinute !== undefined) out.requestsPerMinute = perMinute;
  const tokens = r.optionalInteger(`${path}.tokens_per_minute`, key.tokens_per_minute, 1, 1_000_000_000);
  if (tokens !== undefined) out.tokensPerMinute = tokens;
  return out;
}

function readFiles(r: ConfigReader, path: string, obj: Record<string, unknown>): TlsFilesConfig {
  return { certFile: r.string(`${path}.cert_file`, obj.cert_file), keyFile: r.string(`${path}.key_file`, obj.key_file) };
}

/** `tls: { client?: { cert_file, key_file }, nodes?: { cert_file, key_file, client_ca_file?, require_client_cert? } }`. */
export function readTls(r: ConfigReader, raw: unknown): TlsConfig {
  const obj = r.object('tls', raw, true);
  if (obj === undefined) return NO_TLS;
  r.noUnknownKeys('tls', obj, ['client', 'nodes']);
  let client: TlsFilesConfig | undefined;
  const clientObj = r.object('tls.client', obj.client, true);
  if (clientObj !== undefined) {
    r.noUnknownKeys('tls.client', clientObj, ['cert_file', 'key_file']);
    client = readFiles(r, 'tls.client', clientObj);
  }
  let nodes: NodeTlsConfig | undefined;
  const nodesObj = r.object('tls.nodes', obj.nodes, true);
  if (nodesObj !== undefined) {
    r.noUnknownKeys('tls.nodes', nodesObj, ['cert_file', 'key_file', 'client_ca_file', 'require_client_cert']);
    const clientCaFile = r.optionalString('tls.nodes.client_ca_file', nodesObj.client_ca_file);
    const requireClientCert = r.boolean('tls.nodes.require_client_cert', nodesObj.require_client_cert, clientCaFile !== undefined);
    if (requireClientCert && clientCaFile === undefined) r.problems.push('tls.nodes.require_client_cert: needs tls.nodes.client_ca_file to check client certificates against');
    // grpc-js has no "verify if presented": without the requirement no certificate is even asked for, and the CA would be ignored.
    if (!requireClientCert && clientCaFile !== undefined) r.problems.push('tls.nodes.require_client_cert: false with a client_ca_file would check no node certificate at all (none is asked for); set it true, or drop client_ca_file for TLS without client certificates');
    nodes = { ...readFiles(r, 'tls.nodes', nodesObj), clientCaFile, requireClientCert };
  }
  return { client, nodes };
}

/** The hardening limits of a config, defaults filled in for hand-built configs. */
export function limitsOf(config: EdgeConfig): LimitsHardening {
  const l = config.limits;
  const d = DEFAULT_LIMITS_HARDENING;
  return {
    maxJsonDepth: l.maxJsonDepth ?? d.maxJsonDepth,
    maxHeaderBytes: l.maxHeaderBytes ?? d.maxHeaderBytes,
    requestTimeoutMs: l.requestTimeoutMs ?? d.requestTimeoutMs,
    maxTunnelsPerNode: l.maxTunnelsPerNode ?? d.maxTunnelsPerNode,
    maxFrameBytes: l.maxFrameBytes ?? d.maxFrameBytes,
    ttfbTimeoutMs: l.ttfbTimeoutMs ?? d.ttfbTimeoutMs,
    idleTimeoutMs: l.idleTimeoutMs ?? d.idleTimeoutMs,
    sseKeepaliveMs: l.sseKeepaliveMs ?? d.sseKeepaliveMs,
    offloadBytes: l.offloadBytes ?? d.offloadBytes,
  };
}
