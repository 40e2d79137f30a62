// The scheduler's view of an EdgeConfig: which providers exist, on which
// node, and which providers serve each alias under which served name. Pure
// derivation; the Scheduler applies it to its long-lived state records.
import type { EdgeConfig, ProviderConfig } from '../../shared/config-types.js';

export const DEFAULT_MAX_QUEUE = 16;
export const DEFAULT_QUEUE_TIMEOUT_MS = 30_000;

export interface CatalogProvider {
  readonly nodeId: string;
  readonly config: ProviderConfig;
}

export interface CatalogModel {
  readonly alias: string;
  readonly maxQueue: number;
  readonly queueTimeoutMs: number;
  /** Only providers that exist in some node; sorted by provider id, then node id. */
  readonly providers: readonly { readonly providerId: string; readonly servedModel: string }[];
}

export interface Catalog {
  readonly nodeIds: ReadonlySet<string>;
  readonly providers: ReadonlyMap<string, CatalogProvider>;
  readonly models: ReadonlyMap<string, CatalogModel>;
  readonly longContextThresholdTokens: number;
}

function orDefault(value: number, fallback: number, min: number): number {
  return Number.isFinite(value) && value >= min ? value : fallback;
}

/**
 * Derives the catalog. Config validation (src/main/config.ts) rejects
 * duplicate ids; here a later duplicate simply wins, and an alias entry
 * naming an unknown provider is dropped (it can never be a candidate).
 */
export function buildCatalog(config: EdgeConfig): Catalog {
  const nodeIds = new Set<string>();
  const providers = new Map<string, CatalogProvider>();
  for (const node of config.nodes) {
    nodeIds.add(node.id);
    for (const provider of node.providers) providers.set(provider.id, { nodeId: node.id, config: provider });
  }

  const models = new Map<string, CatalogModel>();
  for (const model of config.models) {
    const entries: { providerId: string; servedModel: string; nodeId: string }[] = [];
    for (const [providerId, servedModel] of model.providers) {
      const known = providers.get(providerId);
      if (known !== undefined) entries.push({ providerId, servedModel, nodeId: known.nodeId });
    }
    entries.sort(compareEntries);
    models.set(model.alias, {
      alias: model.alias,
      // 0 is a valid max_queue (never queue); only a missing value takes the default.
      maxQueue: orDefault(model.maxQueue, DEFAULT_MAX_QUEUE, 0),
      queueTimeoutMs: orDefault(model.queueTimeoutMs, DEFAULT_QUEUE_TIMEOUT_MS, 1),
      providers: entries.map(toModelProvider),
    });
  }

  return {
    nodeIds,
    providers,
    models,
    longContextThresholdTokens: orDefault(config.scheduler.longContextThresholdTokens, Infinity, 1),
  };
}

function compareEntries(a: { providerId: string; nodeId: string }, b: { providerId: string; nodeId: string }): number {
  if (a.providerId !== b.providerId) return a.providerId < b.providerId ? -1 : 1;
  if (a.nodeId !== b.nodeId) return a.nodeId < b.nodeId ? -1 : 1;
  return 0;
}

function toModelProvider(entry: { providerId: string; servedModel: string }): { providerId: string; servedModel: string } {
  return { providerId: entry.providerId, servedModel: entry.servedModel };
}
