// TLS to the edge's node listener, from the agent's `edge.tls` section:
// the CA that signed the edge's certificate, and this node's own
// certificate and key when the edge requires mutual TLS. Files are read
// once per config (reconnects reuse the credentials).
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { ConfigReader } from '../shared/config-reader.js';

export interface AgentTlsConfig {
  /** CA bundle the edge's certificate must chain to. */
  readonly caFile: string;
  /** This node's client certificate (mutual TLS); with keyFile. */
  readonly certFile: string | undefined;
  readonly keyFile: string | undefined;
  /** Name to check the edge's certificate against when it differs from the address's host. */
  readonly serverName: string | undefined;
}

/** `edge.tls: { ca_file, cert_file?, key_file?, server_name? }`; undefined = plaintext. */
export function readAgentTls(r: ConfigReader, raw: unknown): AgentTlsConfig | undefined {
  const obj = r.object('edge.tls', raw, true);
  if (obj === undefined) return undefined;
  r.noUnknownKeys('edge.tls', obj, ['ca_file', 'cert_file', 'key_file', 'server_name']);
  const certFile = r.optionalString('edge.tls.cert_file', obj.cert_file);
  const keyFile = r.optionalString('edge.tls.key_file', obj.key_file);
  if ((certFile === undefined) !== (keyFile === undefined)) r.problems.push('edge.tls: cert_file and key_file go together (the client certificate and its key)');
  return { caFile: r.string('edge.tls.ca_file', obj.ca_file), certFile, keyFile, serverName: r.optionalString('edge.tls.server_name', obj.server_name) };
}

const cache = new WeakMap<AgentTlsConfig, grpc.ChannelCredentials>();

function read(path: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`${path}: cannot read ${file}: ${(err as Error).message}`);
  }
}

/** Channel credentials for the edge connection: insecure without a tls section. */
export function edgeCredentials(tls: AgentTlsConfig | undefined): grpc.ChannelCredentials {
  if (tls === undefined) return grpc.credentials.createInsecure();
  let credentials = cache.get(tls);
  if (credentials === undefined) {
    credentials = grpc.credentials.createSsl(
      read('edge.tls.ca_file', tls.caFile),
      tls.keyFile === undefined ? null : read('edge.tls.key_file', tls.keyFile),
      tls.certFile === undefined ? null : read('edge.tls.cert_file', tls.certFile),
    );
    cache.set(tls, credentials);
  }
  return credentials;
}

/** Channel options TLS needs on top of the connection's own. */
export function tlsChannelOptions(tls: AgentTlsConfig | undefined): grpc.ChannelOptions {
  return tls?.serverName === undefined ? {} : { 'grpc.ssl_target_name_override': tls.serverName, 'grpc.default_authority': tls.serverName };
}
