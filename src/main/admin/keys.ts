// The body of GET /admin/keys: each client API key as the operator needs it
// at a glance: what the config grants it (models, max_concurrent, fair
// queuing), what it holds open now, and what it has used since the edge
// started (requests by status, tokens by model). Built on request from what
// the edge keeps anyway: the config snapshot, the per-key open counts the
// admission checks, and the per-key counters of /metrics (every thread's,
// as the console's charts read them). Never the key or its digest.
import type { KeyLoadEntry } from '../../contract/data-path.js';
import type { ApiKeyConfig, EdgeConfig } from '../../shared/config-types.js';

const KEY_REQUESTS = 'edge_key_requests_total';
const KEY_TOKENS = 'edge_key_tokens_total';
/** What a reading reads: the metrics a keys source must hand over. */
export const KEY_METRICS: readonly string[] = [KEY_REQUESTS, KEY_TOKENS];

export interface KeyTokens {
  readonly prompt: number;
  readonly completion: number;
}

export interface KeyView {
  readonly name: string;
  /** False: gone from the config (renamed or removed) with requests still open or counted under the name. */
  readonly configured: boolean;
  /** Aliases the key may use; null: every model. */
  readonly models: readonly string[] | null;
  /** null: no limit. */
  readonly maxConcurrent: number | null;
  /** null: no limit. */
  readonly requestsPerMinute: number | null;
  /** null: no limit. */
  readonly tokensPerMinute: number | null;
  /** What the key has left of its requests_per_minute now (whole requests); null: no limit. */
  readonly requestsLeft: number | null;
  /** What the key has left of its tokens_per_minute now (below 0: a debt it is paying back); null: no limit. */
  readonly tokensLeft: number | null;
  readonly priority: number;
  readonly weight: number;
  readonly fairnessHeader: boolean;
  /** Requests of the key open now (queued or relaying). */
  readonly inFlight: number;
  /** Since the edge started: requests that reached the data path, by HTTP status (499: the client left first). */
  readonly requests: { readonly total: number; readonly errors: number; readonly byStatus: Readonly<Record<string, number>> };
  /** Since the edge started: tokens the usage of completed responses reported, in all and by model alias. */
  readonly tokens: KeyTokens & { readonly byModel: Readonly<Record<string, KeyTokens>> };
}

export interface KeysView {
  /** False: auth.api_keys is empty, every request is let in and nothing is counted by key. */
  readonly auth: boolean;
  readonly keys: readonly KeyView[];
}

/** Open requests by key name, as the admission counts them (keys with none may be left out), and what rate-limited keys have left. */
export type KeyLoad = readonly KeyLoadEntry[];

interface MetricJson {
  readonly name?: string;
  readonly values?: readonly { readonly value: number; readonly labels?: Record<string, string | number> }[];
}

class Usage {
  total = 0;
  errors = 0;
  // No prototype: a label is the config's (an alias may be "__proto__" or "constructor"), never one of Object's.
  readonly byStatus: Record<string, number> = Object.create(null) as Record<string, number>;
  prompt = 0;
  completion = 0;
  readonly byModel: Record<string, { prompt: number; completion: number }> = Object.create(null) as Record<string, { prompt: number; completion: number }>;
}

/** Sums the per-key counters over every thread's prom-client JSON. */
function usageOf(parts: readonly unknown[][]): Map<string, Usage> {
  const out = new Map<string, Usage>();
  const of = (key: string): Usage => {
    let usage = out.get(key);
    if (usage === undefined) out.set(key, (usage = new Usage()));
    return usage;
  };
  for (const part of parts) {
    for (const raw of part) {
      const metric = raw as MetricJson;
      if (metric.values === undefined || (metric.name !== KEY_REQUESTS && metric.name !== KEY_TOKENS)) continue;
      for (const v of metric.values) {
        const key = v.labels?.key;
        if (typeof key !== 'string' || !(v.value > 0)) continue;
        const usage = of(key);
        if (metric.name === KEY_REQUESTS) {
          const status = String(v.labels?.status ?? '');
          usage.total += v.value;
          if (!status.startsWith('2')) usage.errors += v.value;
          usage.byStatus[status] = (usage.byStatus[status] ?? 0) + v.value;
          continue;
        }
        const model = String(v.labels?.model ?? '');
        const tokens = (usage.byModel[model] ??= { prompt: 0, completion: 0 });
        if (v.labels?.kind === 'prompt') {
          usage.prompt += v.value;
          tokens.prompt += v.value;
        } else if (v.labels?.kind === 'completion') {
          usage.completion += v.value;
          tokens.completion += v.value;
        }
      }
    }
  }
  return out;
}

const NO_USAGE = new Usage();

/** What a configured key has left of its rate limits (`entry`: its keyLoad entry); null for a limit it does not have. */
export function limitsLeft(key: ApiKeyConfig, entry: KeyLoadEntry | undefined): { readonly requestsLeft: number | null; readonly tokensLeft: number | null } {
  return {
    // A bucket never taken from is full.
    requestsLeft: key.requestsPerMinute === undefined ? null : Math.floor(entry?.requestsLeft ?? key.requestsPerMinute),
    tokensLeft: key.tokensPerMinute === undefined ? null : Math.floor(entry?.tokensLeft ?? key.tokensPerMinute),
  };
}

/** Each configured key with a rate limit and what it has left of it (the edge_key_*_left gauges). */
export function keysLeftOf(config: EdgeConfig, load: KeyLoad): { name: string; requestsLeft: number | null; tokensLeft: number | null }[] {
  const limited = (config.auth?.apiKeys ?? []).filter((k) => k.requestsPerMinute !== undefined || k.tokensPerMinute !== undefined);
  if (limited.length === 0) return [];
  const entries = new Map(load.map((e) => [e.name, e]));
  return limited.map((k) => ({ name: k.name, ...limitsLeft(k, entries.get(k.name)) }));
}

/**
 * Configured keys in config order, then names the config no longer has but
 * that still hold requests or were counted (a rename, a removal), by name.
 */
export function buildKeysView(config: EdgeConfig, load: KeyLoad, parts: readonly unknown[][]): KeysView {
  const configured = config.auth?.apiKeys ?? [];
  const usage = usageOf(parts);
  const open = new Map<string, number>();
  const levels = new Map<string, KeyLoadEntry>();
  for (const k of load) {
    open.set(k.name, (open.get(k.name) ?? 0) + k.inFlight);
    if (k.requestsLeft !== undefined || k.tokensLeft !== undefined) levels.set(k.name, k);
  }
  const view = (name: string, key: (typeof configured)[number] | undefined): KeyView => {
    const used = usage.get(name) ?? NO_USAGE;
    return {
      name,
      configured: key !== undefined,
      models: key?.models ?? null,
      maxConcurrent: key?.maxConcurrent ?? null,
      requestsPerMinute: key?.requestsPerMinute ?? null,
      tokensPerMinute: key?.tokensPerMinute ?? null,
      ...(key === undefined ? { requestsLeft: null, tokensLeft: null } : limitsLeft(key, levels.get(name))),
      priority: key?.priority ?? 0,
      weight: key?.weight ?? 1,
      fairnessHeader: key?.fairnessHeader ?? false,
      inFlight: open.get(name) ?? 0,
      requests: { total: used.total, errors: used.errors, byStatus: used.byStatus },
      tokens: { prompt: used.prompt, completion: used.completion, byModel: used.byModel },
    };
  };
  const names = new Set(configured.map((k) => k.name));
  const gone = new Set<string>();
  for (const name of [...open.keys(), ...usage.keys()]) if (!names.has(name) && ((open.get(name) ?? 0) > 0 || usage.has(name))) gone.add(name);
  return {
    auth: configured.length > 0,
    keys: [...configured.map((k) => view(k.name, k)), ...[...gone].sort().map((name) => view(name, undefined))],
  };
}
