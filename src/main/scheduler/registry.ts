// The long-lived records the scheduler decides over: nodes (and their
// connections), providers (and their in-flight counts) and model groups
// (and their queues), kept in step with the config catalog. A config swap
// rewrites configured fields in place; counts, connections and waiters stay.
import type { Catalog } from './catalog.js';
import { defaultEndpoints, endpointMask } from '../../shared/endpoints.js';
import { GroupState, NodeState, ProviderState, type GroupEntry } from './state.js';

export class Registry {
  readonly nodes = new Map<string, NodeState>();
  readonly providers = new Map<string, ProviderState>();
  readonly groups = new Map<string, GroupState>();
  longThreshold = Infinity;

  /** Drops a node that left config once it is offline and holds no lease. */
  forgetNodeIfUnused(node: NodeState): void {
    if (!node.inCatalog && !node.connected && node.leases.size === 0 && this.nodes.get(node.id) === node) {
      this.nodes.delete(node.id);
    }
  }

  nodeState(id: string): NodeState {
    let node = this.nodes.get(id);
    if (node === undefined) {
      node = new NodeState(id);
      this.nodes.set(id, node);
    }
    return node;
  }

  /**
   * Brings the records in line with a new catalog. Records that left it
   * stay while they still matter: a provider with leases (capacity 0 from
   * now on), a group with waiters, a connected node.
   */
  apply(catalog: Catalog): void {
    this.longThreshold = catalog.longContextThresholdTokens;

    for (const node of this.nodes.values()) node.inCatalog = catalog.nodeIds.has(node.id);
    for (const id of catalog.nodeIds) this.nodeState(id).inCatalog = true;

    for (const provider of this.providers.values()) provider.inCatalog = false;
    for (const [id, configured] of catalog.providers) {
      let provider = this.providers.get(id);
      const node = this.nodeState(configured.nodeId);
      if (provider === undefined) {
        provider = new ProviderState(id, node);
        this.providers.set(id, provider);
      }
      // Moved to another node by a refresh: the slot is node and provider, so only the leases on the new
      // node (none, unless it moves back) count against its capacity; the rest stay where they run.
      if (provider.node !== node) moveSlot(provider, node);
      provider.inCatalog = true;
      const capacity = configured.config.capacity;
      provider.capacity = Number.isFinite(capacity) && capacity > 0 ? Math.floor(capacity) : 0;
      provider.enabled = configured.config.enabled;
      provider.maxContextTokens = configured.config.maxContextTokens;
      provider.holdsSessions = configured.config.type === 'cli';
      provider.endpoints = endpointMask(configured.config.endpoints ?? defaultEndpoints(configured.config.type));
      provider.servedModels = [];
    }
    for (const provider of this.providers.values()) {
      if (!provider.inCatalog) {
        if (provider.inFlight + provider.elsewhere === 0) {
          this.providers.delete(provider.id);
          continue;
        }
        provider.capacity = 0; // gone from config: its leases finish, nothing new
        provider.enabled = false;
        provider.servedModels = [];
      }
      provider.excessAllowed = provider.inFlight > provider.capacity;
    }

    const served = new Map<ProviderState, Set<string>>();
    for (const group of this.groups.values()) {
      group.inCatalog = false;
      group.entries = [];
    }
    for (const model of catalog.models.values()) {
      let group = this.groups.get(model.alias);
      if (group === undefined) {
        group = new GroupState(model.alias);
        this.groups.set(model.alias, group);
      }
      group.inCatalog = true;
      group.maxQueue = model.maxQueue;
      group.queueTimeoutMs = model.queueTimeoutMs;
      const entries: GroupEntry[] = [];
      for (const { providerId, servedModel } of model.providers) {
        const provider = this.providers.get(providerId) as ProviderState;
        entries.push({ provider, servedModel });
        let names = served.get(provider);
        if (names === undefined) served.set(provider, (names = new Set()));
        names.add(servedModel);
      }
      group.entries = entries;
    }
    for (const [provider, names] of served) provider.servedModels = [...names].sort();
    for (const group of this.groups.values()) {
      // A group gone from config vanishes once empty (the scheduler answers
      // its waiters at once: model_not_found).
      if (!group.inCatalog && group.queue.length === 0) this.groups.delete(group.alias);
    }
    for (const node of this.nodes.values()) this.forgetNodeIfUnused(node);
  }
}

/** Points `provider` at `node`, counting in its slot only the live leases minted on that node. */
function moveSlot(provider: ProviderState, node: NodeState): void {
  const live = provider.inFlight + provider.elsewhere;
  let here = 0;
  if (live > 0) for (const lease of node.leases) if (lease.provider === provider) here++;
  provider.node = node;
  provider.inFlight = here;
  provider.elsewhere = live - here;
}
