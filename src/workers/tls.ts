// TLS material for the edge's two listeners, read from the files the config
// names. Read once at start (a certificate change needs a restart): a
// missing or unreadable file fails the start with the config path in it.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { StartError } from '../shared/start-error.js';
import * as grpc from '@grpc/grpc-js';
import type { TlsConfig } from '../shared/config-types.js';

export interface HttpsMaterial {
  readonly key: Buffer;
  readonly cert: Buffer;
}

function read(path: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new StartError(`${path}: cannot read ${resolve(file)}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** Key and certificate for the client listener, or undefined for plain HTTP. */
export function clientHttpsMaterial(tls: TlsConfig | undefined): HttpsMaterial | undefined {
  const client = tls?.client;
  if (client === undefined) return undefined;
  return { key: read('tls.client.key_file', client.keyFile), cert: read('tls.client.cert_file', client.certFile) };
}

/**
 * Credentials for the node listener: plaintext, TLS, or mutual TLS (node
 * certificates must chain to client_ca_file; with require_client_cert a node
 * without one is refused during the handshake, before any message).
 */
export function nodeServerCredentials(tls: TlsConfig | undefined): grpc.ServerCredentials {
  const nodes = tls?.nodes;
  if (nodes === undefined) return grpc.ServerCredentials.createInsecure();
  const ca = nodes.clientCaFile === undefined ? null : read('tls.nodes.client_ca_file', nodes.clientCaFile);
  return grpc.ServerCredentials.createSsl(
    ca,
    [{ private_key: read('tls.nodes.key_file', nodes.keyFile), cert_chain: read('tls.nodes.cert_file', nodes.certFile) }],
    nodes.requireClientCert,
  );
}
