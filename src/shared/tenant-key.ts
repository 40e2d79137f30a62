// A fair-queuing tenant's 32-bit key (docs/scheduling.md): FNV-1a of the API
// key's name, or, for a fairness id a key's client sent, a keyed hash of the
// name and the id. The data path computes it per request; status and metrics
// compute it for each configured key name to show names instead of numbers.
// 0 = the anonymous tenant (no key, no fairness id).
//
// A fairness id is chosen by a client: hashed with FNV-1a (invertible byte by
// byte), an id colliding with another key's tenant (or another key's id) is
// found in a second, and its requests were charged to, and counted as, that
// tenant. The id's hash is keyed with a secret of this process (shared with
// its I/O workers), so a client cannot aim at another tenant's key.
import { createHmac, randomBytes } from 'node:crypto';

let secret: Buffer = randomBytes(16);

/** This process's fairness-id secret, for the I/O workers it starts (useTenantSecret). */
export function tenantSecret(): Uint8Array {
  return secret;
}

/** An I/O worker takes the main thread's secret, so that every thread names a tenant alike. */
export function useTenantSecret(shared: Uint8Array): void {
  secret = Buffer.from(shared);
}

export function tenantKeyOf(keyName: string, fairnessId?: string): number {
  if (fairnessId !== undefined) return createHmac('sha256', secret).update(keyName).update('\0').update(fairnessId).digest().readUInt32LE(0) || 1;
  if (keyName === '') return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < keyName.length; i++) {
    hash ^= keyName.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0 || 1;
}

/** Status label of a tenant: the key's name when `names` knows its key, else `#` and its key in hex. */
export function tenantLabel(tenantKey: number, names: ReadonlyMap<number, string>): string {
  if (tenantKey === 0) return '(anonymous)';
  return names.get(tenantKey) ?? `#${tenantKey.toString(16).padStart(8, '0')}`;
}
