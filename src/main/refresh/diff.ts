// The difference between two EdgeConfig snapshots as a flat list of
// changes, one per config key, named the way the YAML spells them
// (snake_case; `listen.http.port`). List entries with an id are keyed by it,
// not by position (`nodes[gpu-1].providers[p1].capacity`), so reordering a
// list is no change. The walk is generic on purpose: a key added to
// EdgeConfig later shows up here without code, and mutability.ts treats a
// key it does not know as restart-required. Secrets never appear in a
// change, only that they changed.
import type { EdgeConfig } from '../../shared/config-types.js';

export type ConfigValue = string | number | boolean | null | readonly ConfigValue[] | { readonly [key: string]: ConfigValue };

export interface ConfigChange {
  readonly path: string;
  /** null when the key (or the whole entry) did not exist before. */
  readonly old: ConfigValue;
  /** null when the key (or the whole entry) is gone. */
  readonly new: ConfigValue;
}

export const REDACTED = '[redacted]';

/** Keys whose values are credentials (camelCase, as in EdgeConfig). */
const SECRET_KEYS = new Set(['token', 'apiKey', 'key', 'keySha256s', 'password', 'secret']);
/** Fields that identify an entry of a list. */
const ID_KEYS = ['id', 'alias', 'name'] as const;
/** EdgeConfig keys whose YAML home differs from their name. */
const ROOT_RENAMES: Readonly<Record<string, string>> = { http: 'listen.http', grpc: 'listen.grpc' };

function snake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

type Plain = Readonly<Record<string, unknown>>;

function isPlain(value: unknown): value is Plain {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Map);
}

function idOf(value: unknown): string | undefined {
  if (!isPlain(value)) return undefined;
  for (const key of ID_KEYS) if (typeof value[key] === 'string') return value[key] as string;
  return undefined;
}

/** The YAML-shaped view of a value: snake_case keys, maps as objects, secrets redacted. */
export function viewOf(value: unknown, secret = false): ConfigValue {
  if (value === undefined || value === null) return null;
  if (secret) return REDACTED;
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return value;
  if (value instanceof Map) {
    const out: Record<string, ConfigValue> = {};
    for (const [k, v] of value) out[String(k)] = viewOf(v);
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => viewOf(v));
  if (isPlain(value)) {
    const out: Record<string, ConfigValue> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[snake(k)] = viewOf(v, SECRET_KEYS.has(k));
    return out;
  }
  return String(value);
}

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(viewOf(a)) === JSON.stringify(viewOf(b));
}

class Walker {
  readonly changes: ConfigChange[] = [];

  walk(path: string, a: unknown, b: unknown, secret: boolean): void {
    if (secret) {
      // By value, not identity: a key's digests are a list, a new array in every parsed candidate.
      if (!sameValue(a, b)) this.changes.push({ path, old: a === undefined ? null : REDACTED, new: b === undefined ? null : REDACTED });
      return;
    }
    if (a instanceof Map && b instanceof Map) {
      for (const [k, v] of a) this.walk(`${path}[${String(k)}]`, v, b.get(k), false);
      for (const [k, v] of b) if (!a.has(k)) this.walk(`${path}[${String(k)}]`, undefined, v, false);
      return;
    }
    if (Array.isArray(a) && Array.isArray(b) && this.#keyedList(path, a, b)) return;
    if (isPlain(a) && isPlain(b)) {
      for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
        this.walk(`${path}.${snake(key)}`, a[key], b[key], SECRET_KEYS.has(key));
      }
      return;
    }
    if (!sameValue(a, b)) this.changes.push({ path, old: viewOf(a), new: viewOf(b) });
  }

  /** Diffs lists of entries that carry an id by id; false when they do not. */
  #keyedList(path: string, a: readonly unknown[], b: readonly unknown[]): boolean {
    const before = new Map<string, unknown>();
    const after = new Map<string, unknown>();
    for (const item of a) {
      const id = idOf(item);
      if (id === undefined || before.has(id)) return false;
      before.set(id, item);
    }
    for (const item of b) {
      const id = idOf(item);
      if (id === undefined || after.has(id)) return false;
      after.set(id, item);
    }
    if (before.size === 0 && after.size === 0) return true;
    for (const [id, item] of before) {
      const next = after.get(id);
      if (next === undefined) this.changes.push({ path: `${path}[${id}]`, old: entryView(item), new: null });
      else this.walk(`${path}[${id}]`, item, next, false);
    }
    for (const [id, item] of after) if (!before.has(id)) this.changes.push({ path: `${path}[${id}]`, old: null, new: entryView(item) });
    return true;
  }
}

/** An added or removed list entry, without the id it is already named by. */
function entryView(item: unknown): ConfigValue {
  const view = viewOf(item);
  if (view === null || typeof view !== 'object' || Array.isArray(view)) return view;
  const { id: _id, alias: _alias, name: _name, ...rest } = view as Record<string, ConfigValue>;
  return rest;
}

/** A share (0..1) as the YAML's whole percent. */
function percent(value: ConfigValue): ConfigValue {
  return typeof value === 'number' ? Math.round(value * 100) : value;
}

/** Epoch ms as the RFC 3339 text the YAML takes. */
function isoTime(value: ConfigValue): ConfigValue {
  return typeof value === 'number' ? new Date(value).toISOString() : value;
}

/**
 * Leaves whose EdgeConfig name or unit is not the YAML's: the path the
 * operator wrote, and the value as written there (a change must name a key
 * that can be found in the file).
 */
const YAML_SPELLING: Readonly<Record<string, { readonly path: string; readonly value?: (v: ConfigValue) => ConfigValue }>> = {
  'resilience.outliers.max_ejection_share': { path: 'resilience.outliers.max_ejection_percent', value: percent },
  'resilience.outliers.failure_rate': { path: 'resilience.outliers.failure_rate_percent', value: percent },
  'bootstrap.host': { path: 'bootstrap.listen.host' },
  'bootstrap.port': { path: 'bootstrap.listen.port' },
  'bootstrap.token_expires_at': { path: 'bootstrap.token_expires_at', value: isoTime },
};

/** The same for a leaf of a list entry (its id varies): an API key's digests are `key_sha256` in the YAML, one or a list. */
const ENTRY_SPELLING: readonly (readonly [RegExp, string])[] = [[/^(auth\.api_keys\[[^\]]*\])\.key_sha256s$/, '$1.key_sha256']];

function asWritten(change: ConfigChange): ConfigChange {
  for (const [pattern, path] of ENTRY_SPELLING) if (pattern.test(change.path)) return { ...change, path: change.path.replace(pattern, path) };
  const spelling = YAML_SPELLING[change.path];
  if (spelling === undefined) return change;
  const value = spelling.value ?? ((v: ConfigValue) => v);
  return { path: spelling.path, old: change.old === null ? null : value(change.old), new: change.new === null ? null : value(change.new) };
}

/** Every change from `current` to `next`; empty when they configure the same edge. */
export function diffConfigs(current: EdgeConfig, next: EdgeConfig): ConfigChange[] {
  const walker = new Walker();
  const a = current as unknown as Plain;
  const b = next as unknown as Plain;
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    walker.walk(ROOT_RENAMES[key] ?? snake(key), a[key], b[key], SECRET_KEYS.has(key));
  }
  return walker.changes.map(asWritten);
}
