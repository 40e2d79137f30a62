// The contract's invariants, checked from scratch over the scheduler's
// state. Used after every step of the model test; cheap enough for a debug
// endpoint but never called on the hot path.
import { contextNeed, pickCandidate, type Wanted } from './candidates.js';
import type { DeadlineHeap } from './deadline-heap.js';
import type { GroupState, Lease, NodeState, ProviderState } from './state.js';
import type { QueueItem } from './state.js';

export interface SchedulerView {
  readonly nodes: ReadonlyMap<string, NodeState>;
  readonly providers: ReadonlyMap<string, ProviderState>;
  readonly groups: ReadonlyMap<string, GroupState>;
  readonly waiting: ReadonlySet<GroupState>;
  readonly queued: ReadonlyMap<number, QueueItem>;
  readonly deadlines: DeadlineHeap;
  readonly leases: ReadonlyMap<number, Lease>;
  readonly fencedUnsent: ReadonlyMap<number, Lease>;
  readonly longThreshold: number;
  /** Latest `now` seen. */
  readonly now: number;
  readonly grantsOverCapacity: number;
  /** What a queued request asks of its candidates, as the scheduler reads it (its session's node included). */
  wantOf(item: QueueItem): Wanted;
}

export function checkInvariants(v: SchedulerView): string[] {
  const errors: string[] = [];
  checkLeases(v, errors);
  checkQueues(v, errors);
  return errors;
}

function checkLeases(v: SchedulerView, errors: string[]): void {
  if (v.grantsOverCapacity > 0) errors.push(`${v.grantsOverCapacity} grant(s) were made on a full provider`);

  const perProvider = new Map<ProviderState, number>();
  const elsewhere = new Map<ProviderState, number>();
  for (const [id, lease] of v.leases) {
    if (lease.leaseId !== id) errors.push(`lease ${id} is indexed under the wrong id`);
    if (v.providers.get(lease.provider.id) !== lease.provider) errors.push(`lease ${id}: provider ${lease.provider.id} is not tracked`);
    if (v.nodes.get(lease.node.id) !== lease.node) errors.push(`lease ${id}: node ${lease.node.id} is not tracked`);
    if (!lease.node.leases.has(lease)) errors.push(`lease ${id} is missing from node ${lease.node.id}'s index`);
    if (!lease.node.connected || lease.generation !== lease.node.generation) {
      errors.push(`lease ${id} outlived its generation ${lease.generation} on node ${lease.node.id}`);
    }
    if (v.fencedUnsent.has(id)) errors.push(`lease ${id} is both live and fenced`);
    // A provider's slot is on its current node; leases minted on a node a refresh moved it away from are counted apart.
    if (lease.node === lease.provider.node) perProvider.set(lease.provider, (perProvider.get(lease.provider) ?? 0) + 1);
    else elsewhere.set(lease.provider, (elsewhere.get(lease.provider) ?? 0) + 1);
  }

  let nodeIndexed = 0;
  for (const node of v.nodes.values()) {
    nodeIndexed += node.leases.size;
    for (const lease of node.leases) {
      if (v.leases.get(lease.leaseId) !== lease) errors.push(`node ${node.id} indexes released lease ${lease.leaseId}`);
    }
  }
  if (nodeIndexed !== v.leases.size) errors.push(`node lease indexes hold ${nodeIndexed}, live leases ${v.leases.size}`);

  let sum = 0;
  for (const p of v.providers.values()) {
    const live = perProvider.get(p) ?? 0;
    sum += p.inFlight + p.elsewhere;
    if (p.inFlight !== live) errors.push(`provider ${p.id}: inFlight ${p.inFlight} != live leases ${live}`);
    const away = elsewhere.get(p) ?? 0;
    if (p.elsewhere !== away) errors.push(`provider ${p.id}: ${p.elsewhere} leases counted elsewhere != ${away} live on other nodes`);
    if (p.inFlight > p.capacity && !p.excessAllowed) {
      errors.push(`provider ${p.id}: inFlight ${p.inFlight} > capacity ${p.capacity} without a config change`);
    }
    if (!p.inCatalog && p.inFlight + p.elsewhere === 0) errors.push(`provider ${p.id} left config and has no leases but is kept`);
  }
  if (sum !== v.leases.size) errors.push(`sum of inFlight ${sum} != live leases ${v.leases.size}`);
}

function checkQueues(v: SchedulerView, errors: string[]): void {
  let total = 0;
  for (const group of v.groups.values()) {
    const n = group.queue.length;
    if ((n > 0) !== v.waiting.has(group)) errors.push(`group ${group.alias}: waiting set disagrees with depth ${n}`);
    let count = 0;
    const byApi = [0, 0, 0, 0, 0];
    let prev: QueueItem | null = null;
    for (let item = group.queue.head; item !== null; item = item.next) {
      count++;
      byApi[item.api]++;
      if (item.prev !== prev) errors.push(`group ${group.alias}: broken back link at request ${item.requestId}`);
      if (prev !== null && prev.seq >= item.seq) {
        errors.push(`group ${group.alias}: FIFO order broken (seq ${prev.seq} before ${item.seq})`);
      }
      if (item.group !== group) errors.push(`request ${item.requestId} queued in ${group.alias} but owned by ${item.group.alias}`);
      if (v.queued.get(item.requestId) !== item) errors.push(`request ${item.requestId} is not indexed`);
      if (item.heapIndex < 0) errors.push(`request ${item.requestId} has no deadline entry`);
      if (item.deadline <= v.now) errors.push(`request ${item.requestId} is past its deadline and still queued`);
      const need = contextNeed(item.estimatedTokens, v.longThreshold);
      const free = pickCandidate(group, v.wantOf(item), need, item.excludeProviderId);
      if (free !== undefined) {
        errors.push(`request ${item.requestId} (${group.alias}) waits while ${free.provider.id} has a free slot`);
      }
      prev = item;
    }
    if (group.queue.tail !== prev) errors.push(`group ${group.alias}: tail is not the last item`);
    if (count !== n) errors.push(`group ${group.alias}: length ${n} but ${count} items linked`);
    if (byApi.some((c, api) => c !== group.queuedByApi[api])) errors.push(`group ${group.alias}: queued per API ${byApi.join(',')} but counted ${group.queuedByApi.join(',')}`);
    if (!group.inCatalog && n === 0) errors.push(`group ${group.alias} left config, is empty and still kept`);
    total += count;
  }
  for (const group of v.waiting) {
    if (v.groups.get(group.alias) !== group) errors.push(`waiting group ${group.alias} is not tracked`);
  }
  if (total !== v.queued.size) errors.push(`queues hold ${total}, index holds ${v.queued.size}`);
  if (total !== v.deadlines.size) errors.push(`queues hold ${total}, deadline heap holds ${v.deadlines.size}`);
  if (!v.deadlines.isValid()) errors.push('deadline heap order is broken');
}
