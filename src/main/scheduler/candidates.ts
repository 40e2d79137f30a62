// Who may serve a request, resolved from the live state on every call
// (never a snapshot from enqueue time): a provider in the alias's map,
// enabled, on a connected node that is not draining and that announced it
// when it registered (a node without the provider cannot run it), matching the direct
// node if one was named, and covering the request's context if it is long.
// A request speaking one API (Messages, Responses, ...) has only the
// providers that serve that API as candidates, and a pinned one only its
// pinned provider; capacity stays one budget per provider across APIs.
import type { GroupEntry, GroupState, ProviderState } from './state.js';
import { ENDPOINTS, servesApi, type ApiKind } from '../../shared/endpoints.js';

/** What narrows a request's candidates besides context: QueueItem, Lease and AdmitRequest all carry it. */
export interface Wanted {
  readonly directNodeId: string | undefined;
  readonly api?: ApiKind;
  readonly pinnedProviderId?: string | undefined;
}

/** The provider serves `api`: what its node announced at Register, else its config (or type defaults). */
export function providerServes(p: ProviderState, api: ApiKind): boolean {
  return servesApi(p.node.announcedEndpoints?.get(p.id) ?? p.endpoints, api);
}

/**
 * Some provider of the alias serves `api`, connected or not: otherwise the
 * request is refused at once. An alias with no provider at all queues as
 * before (a provider may be added by a config refresh).
 */
export function groupServes(group: GroupState, api: ApiKind): boolean {
  const entries = group.entries;
  if (entries.length === 0) return true;
  for (const entry of entries) if (providerServes(entry.provider, api)) return true;
  return false;
}

/** Provider accepts new work at all (capacity aside). */
export function isEligible(p: ProviderState): boolean {
  return !p.held && couldServe(p);
}

/** Eligible but for an outlier hold: enabled, healthy, in the catalog, on a connected node that is not draining and runs it. */
export function couldServe(p: ProviderState): boolean {
  const node = p.node;
  return p.enabled && !p.unhealthy && p.inCatalog && node.connected && !node.draining && (node.announced === undefined || node.announced.has(p.id));
}

/**
 * How many requests may be in flight on `p` now: its capacity, lowered by
 * an overload (AIMD) limit, and 0 inside its Retry-After. A provider held
 * by Retry-After stays a candidate (eligible), so waiters queue for it
 * instead of being refused.
 */
export function slotsOf(p: ProviderState): number {
  if (p.overloadHeld) return 0;
  return p.overloadLimit < p.capacity ? p.overloadLimit : p.capacity;
}

/**
 * Token count that narrows the candidate set: 0 for a short request (no
 * context filter), its estimate for a long one. A larger value never widens
 * the set, which is what the pump's failure memo relies on.
 */
export function contextNeed(estimatedTokens: number, longThreshold: number): number {
  return estimatedTokens >= longThreshold ? estimatedTokens : 0;
}

/** The static part of candidacy: direct node, pinned provider, API and context length. */
export function fits(p: ProviderState, want: Wanted, need: number): boolean {
  if (want.directNodeId !== undefined && p.node.id !== want.directNodeId) return false;
  if (want.pinnedProviderId !== undefined && p.id !== want.pinnedProviderId) return false;
  if (!providerServes(p, want.api ?? 0)) return false;
  if (need === 0) return true;
  return p.maxContextTokens !== undefined && p.maxContextTokens >= need;
}

/**
 * The free candidate with the lowest inFlight/capacity; ties keep the
 * earlier entry (entries are sorted by provider id, then node id). When
 * none is free and an ejected provider has room, that one may still serve
 * what no other provider of the alias could (`pickSole`).
 */
export function pickCandidate(group: GroupState, want: Wanted, need: number, exclude?: string): GroupEntry | undefined {
  const entries = group.entries;
  let best: GroupEntry | undefined;
  let bestInFlight = 0;
  let bestCapacity = 1;
  let sawEjected = false;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    const p = entry.provider;
    if (p.inFlight >= slotsOf(p)) continue;
    if (p.held) {
      if (p.ejected) sawEjected = true;
      continue;
    }
    if (!couldServe(p) || !fits(p, want, need) || p.id === exclude) continue;
    // a/b < c/d without floating point: a*d < c*b (capacities are positive here).
    if (best === undefined || p.inFlight * bestCapacity < bestInFlight * p.capacity) {
      best = entry;
      bestInFlight = p.inFlight;
      bestCapacity = p.capacity;
    }
  }
  return best === undefined && sawEjected ? pickSole(group, want, need, exclude) : best;
}

/**
 * The contract keeps the last serving provider of an alias from ejection;
 * per request class that is done here rather than in the guard (which
 * would keep a failing provider in the chat rotation only because it alone
 * also serves Messages): an ejected provider stays a candidate for the
 * requests that no other provider could take, busy or not (an API or a
 * context window only it has), so those are served instead of timing out.
 * A pinned or node-directed request waits for its provider, as documented.
 */
function pickSole(group: GroupState, want: Wanted, need: number, exclude: string | undefined): GroupEntry | undefined {
  if (want.pinnedProviderId !== undefined || want.directNodeId !== undefined || othersServe(group, want, need)) return undefined;
  let best: GroupEntry | undefined;
  let bestInFlight = 0;
  let bestCapacity = 1;
  for (const entry of group.entries) {
    const p = entry.provider;
    if (!p.ejected || p.inFlight >= slotsOf(p) || !couldServe(p) || !fits(p, want, need) || p.id === exclude) continue;
    if (best === undefined || p.inFlight * bestCapacity < bestInFlight * p.capacity) {
      best = entry;
      bestInFlight = p.inFlight;
      bestCapacity = p.capacity;
    }
  }
  return best;
}

/** A provider of the group that is not ejected could take the request, now or once free. */
function othersServe(group: GroupState, want: Wanted, need: number): boolean {
  for (const entry of group.entries) {
    const p = entry.provider;
    if (!p.ejected && p.capacity > 0 && couldServe(p) && fits(p, want, need)) return true;
  }
  return false;
}

/** An ejected provider still taking what only it serves (`pickSole`) is a candidate too. */
function soleCandidate(p: ProviderState, group: GroupState, want: Wanted, need: number): boolean {
  return p.ejected && want.pinnedProviderId === undefined && want.directNodeId === undefined && couldServe(p) && fits(p, want, need) && !othersServe(group, want, need);
}

/**
 * Some request class (an API, or prompts past the others' windows) that is
 * waiting has no provider of the group but the ejected `p`. Only classes
 * with queued requests count: otherwise every release would walk a queue of
 * requests the ejected provider may not take.
 */
function servesAlone(group: GroupState, p: ProviderState): boolean {
  const window = p.maxContextTokens ?? -1;
  for (let api = 0 as ApiKind; api < ENDPOINTS.length; api++) {
    if (group.queuedByApi[api] !== 0 && providerServes(p, api) && window > othersWidestWindow(group, api)) return true;
  }
  return false;
}

/**
 * The widest context window among the group's providers in rotation (not
 * ejected, with capacity, reachable) that serve `api`: -1 when none declares
 * one, -2 when none serves the API at all.
 */
function othersWidestWindow(group: GroupState, api: ApiKind): number {
  let widest = -2;
  for (const entry of group.entries) {
    const q = entry.provider;
    if (q.ejected || q.capacity === 0 || !couldServe(q) || !providerServes(q, api)) continue;
    const w = q.maxContextTokens ?? -1;
    if (w > widest) widest = w;
  }
  return widest;
}

/**
 * A failed pick at `need` also fails every larger need (the pump's failure
 * memo), unless an ejected provider with room declares a longer window
 * than every other provider of `api`: past their windows it alone fits,
 * and `pickSole` takes the request. (With no other provider of `api`, the
 * ejected ones are its only candidates at every need: monotone again.)
 */
export function failureIsMonotone(group: GroupState, api: ApiKind): boolean {
  let ejectedWindow = -1;
  for (const entry of group.entries) {
    const p = entry.provider;
    if (!p.ejected || p.inFlight >= slotsOf(p) || !couldServe(p) || !providerServes(p, api)) continue;
    const window = p.maxContextTokens ?? -1;
    if (window > ejectedWindow) ejectedWindow = window;
  }
  return ejectedWindow <= Math.max(othersWidestWindow(group, api), -1);
}

/** Some provider of the group has a free slot for someone: the pump's early stop. */
export function hasFreeProvider(group: GroupState): boolean {
  const entries = group.entries;
  for (let i = 0; i < entries.length; i++) {
    const p = entries[i].provider;
    // An ejected one with room may take what only it serves (pickSole).
    if (p.inFlight < slotsOf(p) && (isEligible(p) || (p.ejected && couldServe(p) && servesAlone(group, p)))) return true;
  }
  return false;
}

/**
 * Some provider of the group, connected or not, fits the request's static
 * asks: its direct node, pinned provider and API, and a declared context
 * window of at least `need` tokens. Otherwise no wait could serve it.
 */
export function someFits(group: GroupState, want: Wanted, need: number): boolean {
  for (const entry of group.entries) if (fits(entry.provider, want, need)) return true;
  return false;
}

/**
 * Some candidate exists, busy or not: decides queue_timeout vs
 * no_provider_available, and whether a retry waits again. A half-open
 * provider with its probe out counts: it takes the next request once the
 * probe ends (as healthy, still half-open, or ejected and sole), so a
 * request waiting for it is waiting for a busy provider, not for none.
 */
export function hasEligibleCandidate(group: GroupState, want: Wanted, need: number, exclude?: string): boolean {
  for (const entry of group.entries) {
    const p = entry.provider;
    if (p.id === exclude) continue;
    if (((isEligible(p) || isProbing(p)) && fits(p, want, need)) || soleCandidate(p, group, want, need)) return true;
  }
  return false;
}

/** Half-open with its one probe request out (held, not ejected), and reachable. */
function isProbing(p: ProviderState): boolean {
  return p.held && !p.ejected && couldServe(p);
}

/**
 * The alias's config names a provider on that node (direct dispatch target exists); for a pinned
 * request, its pinned provider is on that node (else no wait could ever serve it there).
 */
export function servesOnNode(group: GroupState, nodeId: string, pinnedProviderId?: string): boolean {
  for (const entry of group.entries) {
    if (entry.provider.node.id === nodeId && (pinnedProviderId === undefined || entry.provider.id === pinnedProviderId)) return true;
  }
  return false;
}
