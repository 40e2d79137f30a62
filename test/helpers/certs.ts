// Throwaway PKI for TLS tests, made with the openssl CLI in a temp dir: a
// CA, a server certificate for 127.0.0.1/localhost, a client certificate
// signed by the CA, and a client certificate from an unrelated CA.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestPki {
  readonly dir: string;
  readonly caCert: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  readonly rogueCaCert: string;
  readonly rogueClientCert: string;
  readonly rogueClientKey: string;
  /** Another server certificate for 127.0.0.1/localhost from the same CA (a renewal): its own key, a new serial, valid `days`. */
  issueServer(name: string, days: number): { readonly cert: string; readonly key: string };
  /** Like issueServer, but not valid before `startsInDays` days from now (a renewal with a future start), for a year from then. */
  issueFutureServer(name: string, startsInDays: number): { readonly cert: string; readonly key: string };
  /** A self-signed CA certificate not valid before `startsInDays` days from now, for a year from then; its path. */
  issueFutureCa(name: string, startsInDays: number): string;
  /** A self-signed CA certificate valid `days` (negative: expired that many days ago); its path. */
  issueCa(name: string, days: number): string;
  remove(): void;
}

export function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function makeCa(dir: string, name: string): void {
  openssl(dir, ['req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '1', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
}

function makeLeaf(dir: string, name: string, ca: string, cn: string, ext: string, days = 1): void {
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
  openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', String(days), '-extfile', `${name}.ext`]);
}

const SERVER_EXT = 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n';

/**
 * `name`.crt and .key, valid for a year from `startsInDays` days from now: signed by the test CA, or by its own
 * key (`selfSigned`). `x509 -req` (OpenSSL 3.0) takes no start date: `ca` does, with a throwaway database.
 */
function futureSigned(dir: string, name: string, startsInDays: number, extensions: string, commonName: string, selfSigned: boolean): void {
  const db = join(dir, `${name}-db`);
  mkdirSync(db);
  writeFileSync(join(db, 'index.txt'), '');
  writeFileSync(join(db, 'serial'), '1000\n');
  writeFileSync(join(dir, `${name}.cnf`), [
    '[ca]', 'default_ca = edge', '[edge]', `database = ${db}/index.txt`, `new_certs_dir = ${db}`, `serial = ${db}/serial`,
    'default_md = sha256', 'policy = any', 'unique_subject = no', '[any]', 'commonName = supplied', '[ext]', extensions, '',
  ].join('\n'));
  openssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${commonName}`]);
  const start = new Date(Date.now() + startsInDays * 86_400_000);
  const stamp = (d: Date): string => d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
  const signer = selfSigned ? ['-selfsign', '-keyfile', `${name}.key`] : ['-cert', 'ca.crt', '-keyfile', 'ca.key'];
  openssl(dir, ['ca', '-batch', '-config', `${name}.cnf`, ...signer, '-in', `${name}.csr`, '-out', `${name}.crt`,
    '-startdate', stamp(start), '-enddate', stamp(new Date(start.getTime() + 365 * 86_400_000)), '-extensions', 'ext']);
}

export function makeTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'edge-pki-'));
  makeCa(dir, 'ca');
  makeCa(dir, 'rogue-ca');
  makeLeaf(dir, 'server', 'ca', 'localhost', SERVER_EXT);
  makeLeaf(dir, 'client', 'ca', 'gpu-1', 'extendedKeyUsage=clientAuth\n');
  makeLeaf(dir, 'rogue-client', 'rogue-ca', 'gpu-1', 'extendedKeyUsage=clientAuth\n');
  const p = (f: string): string => join(dir, f);
  return {
    dir,
    caCert: p('ca.crt'),
    serverCert: p('server.crt'),
    serverKey: p('server.key'),
    clientCert: p('client.crt'),
    clientKey: p('client.key'),
    rogueCaCert: p('rogue-ca.crt'),
    rogueClientCert: p('rogue-client.crt'),
    rogueClientKey: p('rogue-client.key'),
    issueServer: (name, days) => {
      makeLeaf(dir, name, 'ca', 'localhost', SERVER_EXT, days);
      return { cert: p(`${name}.crt`), key: p(`${name}.key`) };
    },
    issueFutureServer: (name, startsInDays) => {
      futureSigned(dir, name, startsInDays, 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth', 'localhost', false);
      return { cert: p(`${name}.crt`), key: p(`${name}.key`) };
    },
    issueFutureCa: (name, startsInDays) => {
      futureSigned(dir, name, startsInDays, 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign', name, true);
      return p(`${name}.crt`);
    },
    issueCa: (name, days) => {
      // `req -x509` takes no negative -days: a request self-signed by `x509 -req` does.
      writeFileSync(join(dir, `${name}.ext`), 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n');
      openssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
      openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-signkey', `${name}.key`, '-out', `${name}.crt`, '-days', String(days), '-extfile', `${name}.ext`]);
      return p(`${name}.crt`);
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
