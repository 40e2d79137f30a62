// The status snapshot (admin API, metrics): plain objects, sorted by id so
// two snapshots of the same state compare equal. Not on the hot path.
import { endpointsOfMask } from '../../shared/endpoints.js';
import { contextNeed, fits } from './candidates.js';
import type { Registry } from './registry.js';
import type { ProviderState } from './state.js';
import type { GroupStatus, NodeStatus, ProviderStatus, SchedulerStatus } from '../../contract/scheduler.js';

function byId<T extends { readonly id: string }>(a: T, b: T): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export function buildStatus(registry: Registry, liveLeases: number, now: number): SchedulerStatus {
  const { nodes, providers, groups, longThreshold } = registry;
  // Queued per provider: waiters that could run on it once it has a slot.
  const queued = new Map<ProviderState, number>();
  for (const group of groups.values()) {
    for (let item = group.queue.head; item !== null; item = item.next) {
      const need = contextNeed(item.estimatedTokens, longThreshold);
      for (const { provider } of group.entries) {
        if (fits(provider, item, need)) queued.set(provider, (queued.get(provider) ?? 0) + 1);
      }
    }
  }

  const nodeList: NodeStatus[] = [];
  for (const node of nodes.values()) {
    nodeList.push({
      id: node.id,
      connected: node.connected,
      generation: node.generation,
      connectedSinceMs: node.connectedSinceMs,
      draining: node.draining,
      leases: node.leases.size,
    });
  }
  nodeList.sort(byId);

  const providerList: ProviderStatus[] = [];
  for (const p of providers.values()) {
    providerList.push({
      id: p.id,
      nodeId: p.node.id,
      capacity: p.capacity,
      inFlight: p.inFlight,
      queued: queued.get(p) ?? 0,
      // A provider left with leases but no capacity (removed or lowered to 0) reads as full.
      loadRatio: p.capacity > 0 ? p.inFlight / p.capacity : p.inFlight > 0 ? 1 : 0,
      connected: p.node.connected,
      announced: p.node.announced === undefined || p.node.announced.has(p.id),
      enabled: p.enabled && p.inCatalog,
      draining: p.node.draining,
      servedModels: p.servedModels,
      endpoints: endpointsOfMask(p.node.announcedEndpoints?.get(p.id) ?? p.endpoints),
    });
  }
  providerList.sort(byId);

  const groupList: GroupStatus[] = [];
  for (const g of groups.values()) {
    // Not simply the head's: a retry or a re-admission goes back to its old place at the head, with its
    // wait restarted, ahead of waiters who have waited longer. Status is off the hot path: one pass.
    let oldest = Infinity;
    for (let item = g.queue.head; item !== null; item = item.next) if (item.enqueuedAt < oldest) oldest = item.enqueuedAt;
    groupList.push({
      alias: g.alias,
      queueDepth: g.queue.length,
      maxQueue: g.maxQueue,
      queueTimeoutMs: g.queueTimeoutMs,
      oldestWaitMs: oldest === Infinity ? 0 : Math.max(0, now - oldest),
      rejectedTotal: g.rejected,
    });
  }
  groupList.sort((a, b) => (a.alias < b.alias ? -1 : a.alias > b.alias ? 1 : 0));

  return { nodes: nodeList, providers: providerList, groups: groupList, liveLeases };
}
