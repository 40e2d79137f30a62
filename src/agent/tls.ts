// TLS to the edge's node listener, from the agent's `edge.tls` section:
// the CA that signed the edge's certificate, and this node's own
// certificate and key when the edge requires mutual TLS. The files are read
// again at each connection, so a renewed node certificate is presented from
// the next reconnect on; while they are unchanged the lanes share one
// credentials object (grpc-js then shares one connection among them).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { ConfigReader } from '../shared/config-reader.js';
import { bareHost } from '../shared/url-host.js';

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

/** How long a diagnosis waits for the edge's verdict on this node's certificate after the handshake. */
const VERDICT_WAIT_MS = 1_000;
/** Longest a diagnosis takes before its handshake is done. */
const DIAGNOSIS_LIMIT_MS = 5_000;

/**
 * Why dialling the edge fails, found by one plain TLS connection with the
 * same files. grpc-js says only "Failed to connect" when the edge refuses
 * this node's certificate (TLS 1.3 sends that verdict after the handshake),
 * when the edge speaks no TLS, or when it speaks TLS to an agent without
 * `edge.tls`; the operator needs the reason. Undefined when nothing is learned.
 */
export function diagnoseEdgeDial(address: string, tls: AgentTlsConfig | undefined, limitMs = DIAGNOSIS_LIMIT_MS): Promise<string | undefined> {
  const colon = address.lastIndexOf(':');
  const host = bareHost(address.slice(0, colon));
  const port = Number(address.slice(colon + 1));
  const servername = tls?.serverName ?? (/^[\d.]+$|:/.test(host) ? undefined : host);
  return new Promise((resolve) => {
    let socket: TLSSocket;
    let secure = false;
    let timer: NodeJS.Timeout | undefined;
    const done = (reason: string | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(reason);
    };
    try {
      // Without edge.tls there is no CA to check against: the question is only whether the edge speaks TLS.
      const files =
        tls === undefined
          ? { rejectUnauthorized: false }
          : { ca: readFileSync(tls.caFile), cert: tls.certFile === undefined ? undefined : readFileSync(tls.certFile), key: tls.keyFile === undefined ? undefined : readFileSync(tls.keyFile) };
      socket = tlsConnect({ host, port, servername, ALPNProtocols: ['h2'], ...files });
    } catch (err) {
      resolve((err as Error).message);
      return;
    }
    // Bounded as a whole: an edge that takes the TCP connection and then says nothing holds no socket here.
    timer = setTimeout(done, limitMs, undefined);
    socket.on('secureConnect', () => {
      secure = true;
      if (tls === undefined) done("the edge's node listener speaks TLS: give the agent edge.tls (ca_file, and cert_file / key_file when the edge requires client certificates)");
      else {
        // The edge's verdict on this node's certificate comes as an alert after the handshake: read it.
        socket.resume();
        clearTimeout(timer);
        timer = setTimeout(done, VERDICT_WAIT_MS, undefined);
      }
    });
    socket.on('error', (err: Error) => {
      if (tls === undefined) done(undefined);
      else if (secure) done(`the edge refused this node's certificate (${opensslReason(err)})`);
      else if (/wrong version number|packet length too long|ECONNRESET|socket disconnected/i.test(err.message)) done(`no TLS handshake with the edge (${opensslReason(err)}): does its node listener have tls.nodes?`);
      else done(opensslReason(err));
    });
    socket.on('close', () => done(tls === undefined ? undefined : secure ? "the edge closed the connection right after the TLS handshake: it refuses this node's certificate (edge.tls.cert_file: not signed by the CA the edge trusts, expired, or missing)" : 'the edge closed the connection during the TLS handshake'));
  });
}

/** OpenSSL's reason without its routine and source location: `tlsv1 alert unknown ca`. */
function opensslReason(err: Error): string {
  return err.message.replace(/^.*SSL routines:[^:]*:/, '').replace(/:\.\.\/deps\/openssl.*$/, '').trim();
}
