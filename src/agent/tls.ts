// TLS to the edge's node listener, from the agent's `edge.tls` section:
// the CA that signed the edge's certificate, and this node's own
// certificate and key when the edge requires mutual TLS. The files are read
// again at each connection, so a renewed node certificate is presented from
// the next reconnect on; while they are unchanged the lanes share one
// credentials object (grpc-js then shares one connection among them).
import { createHash } from 'node:crypto';
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

const loaded = new WeakMap<AgentTlsConfig, { readonly digest: string; readonly credentials: grpc.ChannelCredentials }>();

function read(path: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`${path}: cannot read ${file}: ${(err as Error).message}`);
  }
}

/**
 * Channel credentials for the edge connection: insecure without a tls
 * section. Files that do not load at a reconnect (unreadable, or a
 * renewal halfway through: the new certificate beside the old key, a
 * half-written PEM) leave the last good credentials in use, and
 * `onStale` says why; with none yet, it throws (the caller retries).
 */
export function edgeCredentials(tls: AgentTlsConfig | undefined, onStale?: (err: Error) => void): grpc.ChannelCredentials {
  if (tls === undefined) return grpc.credentials.createInsecure();
  const last = loaded.get(tls);
  try {
    const ca = read('edge.tls.ca_file', tls.caFile);
    const key = tls.keyFile === undefined ? null : read('edge.tls.key_file', tls.keyFile);
    const cert = tls.certFile === undefined ? null : read('edge.tls.cert_file', tls.certFile);
    const digest = createHash('sha256').update(ca).update('\0').update(key ?? '').update('\0').update(cert ?? '').digest('hex');
    if (last?.digest === digest) return last.credentials;
    // createSsl builds the secure context now: a certificate and key that are not a pair throw here.
    const credentials = grpc.credentials.createSsl(ca, key, cert);
    loaded.set(tls, { digest, credentials });
    return credentials;
  } catch (err) {
    if (last === undefined) throw err;
    onStale?.(err as Error);
    return last.credentials;
  }
}

/** Channel options TLS needs on top of the connection's own. */
export function tlsChannelOptions(tls: AgentTlsConfig | undefined): grpc.ChannelOptions {
  return tls?.serverName === undefined ? {} : { 'grpc.ssl_target_name_override': tls.serverName, 'grpc.default_authority': tls.serverName };
}
