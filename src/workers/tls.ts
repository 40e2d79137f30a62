// TLS on the edge's two listeners, from the material the main thread read
// and checked (shared/tls-material.ts). Both listeners take new material
// while they run: it serves every handshake from then on, and connections
// already open keep the certificate they were made with.
import * as grpc from '@grpc/grpc-js';
import type { SecureContextOptions } from 'node:tls';
import type { NodeTlsConfig } from '../shared/config-types.js';
import type { NodeTlsMaterial } from '../shared/tls-material.js';

/**
 * Credentials for the node listener: plaintext, TLS, or mutual TLS (node
 * certificates must chain to client_ca_file; with require_client_cert a node
 * without one is refused during the handshake, before any message).
 */
export function nodeServerCredentials(config: NodeTlsConfig | undefined, material: NodeTlsMaterial | undefined, handshakeTimeoutMs: number): grpc.ServerCredentials {
  if (config === undefined || material === undefined) return grpc.ServerCredentials.createInsecure();
  return new ReloadableServerCredentials(config.requireClientCert, material, handshakeTimeoutMs);
}

/**
 * grpc-js's createSsl with a way to swap the certificate: grpc-js hands the
 * new options to every server built from these credentials, which calls
 * setSecureContext. The material was checked on the main thread already, so
 * the swap cannot fail there (grpc-js would then refuse every connection).
 */
export class ReloadableServerCredentials extends grpc.ServerCredentials {
  /** `handshakeTimeoutMs`: a connection still in its handshake then is closed (node's own 120 s let one that never sent its ClientHello hold a socket far past the register timeout). */
  constructor(requireClientCert: boolean, material: NodeTlsMaterial, handshakeTimeoutMs: number) {
    // As createSsl: client certificates are asked for only when they are required.
    super({ requestCert: requireClientCert, handshakeTimeout: handshakeTimeoutMs }, contextOptions(material));
  }

  reload(material: NodeTlsMaterial): void {
    this.updateSecureContextOptions(contextOptions(material));
  }

  _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}

function contextOptions(material: NodeTlsMaterial): SecureContextOptions {
  // Buffers: a structured clone from the main thread arrives as a plain Uint8Array.
  return { cert: [Buffer.from(material.cert)], key: [Buffer.from(material.key)], ...(material.ca === null ? {} : { ca: Buffer.from(material.ca) }) };
}
