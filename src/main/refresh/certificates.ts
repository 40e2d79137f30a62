// The certificates the listeners serve, as the main thread knows them. A
// refresh re-reads the files tls names (their paths may be unchanged: a
// renewal rewrites them in place) and this tells what differs from what is
// served; an apply then hands the new material to every thread.
import { describeCertificate, type CertificateInfo, type TlsMaterial } from '../../shared/tls-material.js';

export type TlsListener = 'client' | 'nodes';

/** One listener's certificate in a refresh result. */
export interface CertificateReport {
  readonly listener: TlsListener;
  /** True when the files differ from what the listener serves (an apply swaps them in). */
  readonly changed: boolean;
  readonly subject: string;
  /** ISO 8601 expiry of the certificate the files hold ('' when it could not be parsed). */
  readonly notAfter: string;
}

export class ServedCertificates {
  #material: TlsMaterial;
  #info = new Map<TlsListener, CertificateInfo>();

  constructor(material: TlsMaterial) {
    this.#material = material;
    this.#info = infoOf(material);
  }

  get material(): TlsMaterial {
    return this.#material;
  }

  /** Each TLS listener's certificate, for the expiry metric and status. */
  served(): ReadonlyMap<TlsListener, CertificateInfo> {
    return this.#info;
  }

  /** What `candidate` would change, listener by listener (a listener without TLS is not listed). */
  compare(candidate: TlsMaterial): CertificateReport[] {
    const reports: CertificateReport[] = [];
    for (const [listener, info] of infoOf(candidate)) {
      reports.push({ listener, changed: this.#info.get(listener)?.digest !== info.digest, subject: info.subject, notAfter: info.notAfter });
    }
    return reports;
  }

  /** The threads serve `material` now. */
  commit(material: TlsMaterial): void {
    this.#material = material;
    this.#info = infoOf(material);
  }
}

function infoOf(material: TlsMaterial): Map<TlsListener, CertificateInfo> {
  const info = new Map<TlsListener, CertificateInfo>();
  if (material.client !== undefined) info.set('client', describeCertificate(material.client));
  if (material.nodes !== undefined) info.set('nodes', describeCertificate(material.nodes));
  return info;
}
