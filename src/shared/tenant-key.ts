// A fair-queuing tenant's 32-bit key (docs/scheduling.md): FNV-1a of the API
// key's name, or of the name and the fairness id the key's client sent. The
// data path computes it per request; status and metrics compute it for each
// configured key name to show names instead of numbers. 0 = the anonymous
// tenant (no key, no fairness id).
export function tenantKeyOf(keyName: string, fairnessId?: string): number {
  const text = fairnessId === undefined ? keyName : `${keyName}\0${fairnessId}`;
  if (text === '') return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0 || 1;
}

/** Status label of a tenant: the key's name when `names` knows its key, else `#` and its key in hex. */
export function tenantLabel(tenantKey: number, names: ReadonlyMap<number, string>): string {
  if (tenantKey === 0) return '(anonymous)';
  return names.get(tenantKey) ?? `#${tenantKey.toString(16).padStart(8, '0')}`;
}
