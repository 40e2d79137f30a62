// The TLS material the edge's two listeners serve. The main thread reads the
// files the config names, at start and on every config refresh, checks them
// once and hands the same bytes to every thread that owns a listener: a
// renewed certificate goes live without a restart, and a bad one is refused
// before any listener sees it. The checks are shared with check-config.
import { X509Certificate, createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { TlsConfig } from './config-types.js';

export interface KeyPairMaterial {
  readonly cert: Uint8Array;
  readonly key: Uint8Array;
}

export interface NodeTlsMaterial extends KeyPairMaterial {
  /** The CA node certificates must chain to; null without tls.nodes.client_ca_file. */
  readonly ca: Uint8Array | null;
}

/** What each listener serves; undefined = that listener is plaintext. */
export interface TlsMaterial {
  readonly client: KeyPairMaterial | undefined;
  readonly nodes: NodeTlsMaterial | undefined;
}

export const NO_TLS: TlsMaterial = { client: undefined, nodes: undefined };

/** What an operator wants to know of a served certificate (the first of its chain). */
export interface CertificateInfo {
  readonly subject: string;
  /** ISO 8601. */
  readonly notAfter: string;
  readonly notAfterMs: number;
  /** When it becomes valid (NaN: unknown). */
  readonly notBeforeMs: number;
  /** SHA-256 of the certificate file and key file bytes: tells a renewal from a re-read of the same files. */
  readonly digest: string;
}

type Reader = (file: string) => Buffer;

/** The one problem a file that cannot be read makes: its config key, the absolute path (a check run elsewhere says where it looked), the errno. */
export function unreadable(path: string, file: string, err: unknown): string {
  return `${path}: cannot read ${resolve(file)}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
}

/** The bytes a config's tls section names, or undefined with problems pushed (each names the config key). */
function collect(tls: TlsConfig | undefined, problems: string[], read: Reader): TlsMaterial | undefined {
  const before = problems.length;
  const file = (path: string, name: string): Buffer | undefined => {
    try {
      return read(name);
    } catch (err) {
      problems.push(unreadable(path, name, err));
      return undefined;
    }
  };
  let client: KeyPairMaterial | undefined;
  let nodes: NodeTlsMaterial | undefined;
  if (tls?.client !== undefined) {
    const cert = file('tls.client.cert_file', tls.client.certFile);
    const key = file('tls.client.key_file', tls.client.keyFile);
    if (cert !== undefined && key !== undefined && keyPairOk(problems, 'tls.client', { cert, key }, tls.client) && currentlyValid(problems, 'tls.client', cert, tls.client.certFile)) client = { cert, key };
  }
  if (tls?.nodes !== undefined) {
    const n = tls.nodes;
    const cert = file('tls.nodes.cert_file', n.certFile);
    const key = file('tls.nodes.key_file', n.keyFile);
    const ca = n.clientCaFile === undefined ? null : file('tls.nodes.client_ca_file', n.clientCaFile);
    const pairOk = cert !== undefined && key !== undefined && keyPairOk(problems, 'tls.nodes', { cert, key }, n) && currentlyValid(problems, 'tls.nodes', cert, n.certFile);
    const caFine = ca === null || (ca !== undefined && caOk(problems, 'tls.nodes.client_ca_file', ca, n.clientCaFile ?? ''));
    if (pairOk && caFine) nodes = { cert, key, ca: ca ?? null };
  }
  return problems.length === before ? { client, nodes } : undefined;
}

/**
 * True while the certificate is valid (not expired, not before its start); else false with a problem naming
 * `path` pushed. Either loads, but no client or node accepts it: a refresh would swap it in for a working one
 * (a renewal job that wrote back an old file, or a renewal issued with a future start) and fail every
 * handshake from then on. The edge's own listeners only: an agent keeps starting on an expired certificate,
 * to register once a renewal is written over it.
 */
function currentlyValid(problems: string[], path: string, cert: Uint8Array, file: string): boolean {
  const { notAfter, notAfterMs, notBeforeMs } = describeCertificate({ cert, key: new Uint8Array(0) });
  const now = Date.now();
  if (notAfterMs <= now) {
    problems.push(`${path}: ${resolve(file)} expired at ${notAfter}: no client or node would accept it`);
    return false;
  }
  if (!notYetValid(notBeforeMs, now)) return true;
  problems.push(`${path}: ${resolve(file)} is not valid before ${new Date(notBeforeMs).toISOString()}: no client or node would accept it yet`);
  return false;
}

/**
 * How far a certificate's start may be ahead of the edge's clock: one issued a moment ago on a host whose
 * clock runs a little ahead is taken (clients' clocks differ from the edge's anyway).
 */
const NOT_BEFORE_SKEW_MS = 5 * 60_000;

/** A start (ms; NaN: unknown, not a reason to refuse) still ahead of `now`, past the skew allowed. */
function notYetValid(notBeforeMs: number, now: number): boolean {
  return notBeforeMs > now + NOT_BEFORE_SKEW_MS;
}

/** Start: the files read synchronously; undefined with problems pushed. */
export function readTlsMaterialSync(tls: TlsConfig | undefined, problems: string[]): TlsMaterial | undefined {
  return collect(tls, problems, (file) => readFileSync(file));
}

/** A refresh: the files read without blocking the event loop on a slow disk; undefined with problems pushed. */
export async function readTlsMaterial(tls: TlsConfig | undefined, problems: string[]): Promise<TlsMaterial | undefined> {
  const files = new Map<string, Buffer | Error>();
  const names = [tls?.client?.certFile, tls?.client?.keyFile, tls?.nodes?.certFile, tls?.nodes?.keyFile, tls?.nodes?.clientCaFile];
  for (const name of names) {
    if (name === undefined || files.has(name)) continue;
    files.set(name, await readFile(name).catch((err: Error) => err));
  }
  return collect(tls, problems, (file) => {
    const got = files.get(file);
    if (got instanceof Error || got === undefined) throw got ?? new Error('not read');
    return got;
  });
}

/** True when `pair` is a certificate and its key; else false with a problem naming `path` pushed. */
export function keyPairOk(problems: string[], path: string, pair: KeyPairMaterial, files: { readonly certFile: string; readonly keyFile: string }): boolean {
  try {
    createSecureContext({ cert: Buffer.from(pair.cert), key: Buffer.from(pair.key) });
    return true;
  } catch (err) {
    problems.push(`${path}: ${resolve(files.certFile)} and ${resolve(files.keyFile)} are not a certificate and its key: ${(err as Error).message}`);
    return false;
  }
}

/**
 * True when `ca` holds a usable PEM certificate, not every one of them expired; else false with a problem
 * naming `path` pushed. An expired CA loads, but no certificate it signed verifies: every node (or, for an
 * agent, the edge) would fail its handshake with a TLS error that does not say why.
 */
export function caOk(problems: string[], path: string, ca: Uint8Array, file: string): boolean {
  // createSecureContext takes a CA file with no certificate in it without a word: look for one.
  if (!Buffer.from(ca).includes('-----BEGIN CERTIFICATE-----')) {
    problems.push(`${path}: ${resolve(file)} holds no PEM certificate`);
    return false;
  }
  try {
    createSecureContext({ ca: Buffer.from(ca) });
  } catch (err) {
    problems.push(`${path}: ${resolve(file)}: ${(err as Error).message}`);
    return false;
  }
  const validities = certificateValidities(Buffer.from(ca));
  const now = Date.now();
  // A bundle mid-rotation holds an old CA beside the new one: refused only when none is valid now.
  if (validities.length === 0 || validities.some((v) => !(v.notAfterMs <= now) && !notYetValid(v.notBeforeMs, now))) return true;
  if (validities.every((v) => v.notAfterMs <= now)) {
    problems.push(`${path}: ${resolve(file)}: every certificate in it expired (the last at ${new Date(Math.max(...validities.map((v) => v.notAfterMs))).toISOString()}): no certificate it signed would verify`);
  } else {
    problems.push(`${path}: ${resolve(file)}: no certificate in it is valid yet (the first from ${new Date(Math.min(...validities.filter((v) => !(v.notAfterMs <= now)).map((v) => v.notBeforeMs))).toISOString()}): no certificate it signed would verify`);
  }
  return false;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The validity (ms) of each PEM certificate in `pem` that parses. */
function certificateValidities(pem: Buffer): { readonly notBeforeMs: number; readonly notAfterMs: number }[] {
  const out: { notBeforeMs: number; notAfterMs: number }[] = [];
  for (const block of pem.toString('latin1').match(PEM_CERTIFICATE) ?? []) {
    try {
      const x509 = new X509Certificate(block);
      const notAfterMs = Date.parse(x509.validTo);
      if (!Number.isNaN(notAfterMs)) out.push({ notBeforeMs: Date.parse(x509.validFrom), notAfterMs });
    } catch {
      // One OpenSSL takes but X509Certificate does not: its expiry is unknown, not a reason to refuse the file.
    }
  }
  return out;
}

/** The served certificate's subject and expiry, and a digest of the pair (and CA) that changes when any file does. */
export function describeCertificate(pair: KeyPairMaterial & { readonly ca?: Uint8Array | null }): CertificateInfo {
  const digest = createHash('sha256').update(pair.cert).update('\0').update(pair.key).update('\0').update(pair.ca ?? new Uint8Array(0)).digest('hex');
  try {
    const x509 = new X509Certificate(Buffer.from(pair.cert));
    const notAfterMs = Date.parse(x509.validTo);
    return { subject: x509.subject.replaceAll('\n', ', '), notAfter: new Date(notAfterMs).toISOString(), notAfterMs, notBeforeMs: Date.parse(x509.validFrom), digest };
  } catch {
    // A format X509Certificate does not parse but OpenSSL serves: the expiry is unknown, not a reason to refuse it.
    return { subject: '', notAfter: '', notAfterMs: Number.NaN, notBeforeMs: Number.NaN, digest };
  }
}
