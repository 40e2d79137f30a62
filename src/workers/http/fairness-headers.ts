// What a request asks of fair queuing (docs/scheduling.md), read from its API
// key and two headers: `x-edge-priority` may lower the key's priority band,
// never raise it; `x-edge-fairness-id` names the tenant, only for a key that
// allows it (fairness_header) or when client auth is off. Tenants travel to
// the scheduler as 32-bit keys (FNV-1a), 0 being the anonymous tenant.
import type { IncomingHttpHeaders } from 'node:http';
import type { ApiKeyState } from './client-auth.js';
import { tenantKeyOf } from '../../shared/tenant-key.js';

export interface RequestFairness {
  readonly priority: number;
  readonly tenantKey: number;
  readonly weight: number;
}

export const ANONYMOUS_FAIRNESS: RequestFairness = Object.freeze({ priority: 0, tenantKey: 0, weight: 1 });

/** Lowest band a request may ask for (config allows the same range). */
export const MIN_PRIORITY = -100;
const PRIORITY = /^-?\d{1,3}$/;
// Printable ASCII as x-edge-session: an end user's name with a space is its own tenant, not the key's.
const FAIRNESS_ID = /^[\x20-\x7e]{1,256}$/;

export function requestFairnessOf(headers: IncomingHttpHeaders, key: ApiKeyState | undefined): RequestFairness {
  const asked = headers['x-edge-priority'];
  const fairnessId = headers['x-edge-fairness-id'];
  if (asked === undefined && fairnessId === undefined) return key === undefined ? ANONYMOUS_FAIRNESS : key.fairness;
  const keyPriority = key?.priority ?? 0;
  let priority = keyPriority;
  // An unreadable value is ignored (the key's band applies): a hint, never a reason to refuse.
  if (typeof asked === 'string' && PRIORITY.test(asked)) priority = Math.max(MIN_PRIORITY, Math.min(keyPriority, Number(asked)));
  const mayName = key === undefined || key.fairnessHeader;
  const named = mayName && typeof fairnessId === 'string' && FAIRNESS_ID.test(fairnessId) ? fairnessId : undefined;
  // A key's own ids are its own: two keys naming the same id are two tenants.
  const tenantKey = named !== undefined ? tenantKeyOf(key?.name ?? '', named) : (key?.tenantKey ?? 0);
  return { priority, tenantKey, weight: key?.weight ?? 1 };
}
