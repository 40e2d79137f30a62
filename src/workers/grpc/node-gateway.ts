// The gRPC listener nodes dial, and the registry of their current sessions.
// A node that authenticates asks the scheduler to connect it (SchedulerPort
// register); the answer activates the session and supersedes the older one
// in one step, before any grant for the new generation is acted on here
// (the driver delivers it inside deferDecisions; a worker's main -> worker
// ring is FIFO and main writes the answer before the grants). A session of
// the node on another worker is fenced by a `fence` record (onFence).
// A node may add streams ("lanes") to its connection (Register with
// join_generation): they are accepted only while that generation is
// current and share it. The stream that registered anew anchors the
// connection: when it ends the connection ends and its lanes are closed
// (here, and by fence records where they live); a lane that ends fails only
// its own tunnels.
import { endpointMask, isEndpoint } from '../../shared/endpoints.js';
import { createHash, timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import { format } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Announce, ProbeResult, Register } from '../../gen/edge/v1/tunnel_pb.js';
import { DEFAULT_DRAIN_GRACE_MS, type EdgeConfig, type ProviderConfig } from '../../shared/config-types.js';
import { retireLanes } from './retire.js';
import { dialAddress } from '../../shared/url-host.js';
import { listenError } from '../../shared/start-error.js';
import { LogThrottle } from '../../shared/log-throttle.js';
import { nodeTunnelService } from '../../shared/node-tunnel-service.js';
import type { NodeRegistrar, SchedulerPort } from '../../contract/scheduler-port.js';
import { NodeLanes } from './node-lanes.js';
import { NodeSession, UNKNOWN_NODE_OR_TOKEN, type NodeCall, type SessionHost } from './node-session.js';
import { limitsOf } from '../../shared/config-hardening.js';
import { cutText, ProtocolStats } from './frame-guard.js';
import { MAX_ANNOUNCED_PROVIDERS, MAX_ERROR_MESSAGE_CHARS, MAX_NODE_STREAMS, MAX_PROVIDER_ID_BYTES } from '../../shared/wire-limits.js';

const REGISTER_TIMEOUT_MS = 10_000;
/**
 * Distinct provider ids outside the config that this thread passes on to the
 * scheduler, ever (an agent may run a provider the edge's config names only
 * after a refresh). Each id passed is interned on the scheduler's ring for
 * good, on both threads: without a bound, a node reconnecting with fresh ids
 * each time grew both without end.
 */
export const MAX_UNCONFIGURED_PROVIDER_IDS = 1024;

/** How long a node stream may go without Register: no longer than a registered node may stay silent. */
export function registerTimeoutMs(config: EdgeConfig): number {
  return Math.min(REGISTER_TIMEOUT_MS, config.heartbeat.timeoutMs);
}
/** Room for a frame's fields around its DATA payload (headers, error text) under the transport cap. */
const FRAME_OVERHEAD_BYTES = 64 * 1024;

/** Node lifecycle, for events, metrics and logs; set once by the edge. */
export interface NodeObserver {
  nodeConnected(session: NodeSession): void;
  nodeDisconnected(session: NodeSession, reason: string): void;
  nodeLeaving(session: NodeSession, reason: string): void;
  nodeProviders(session: NodeSession, added: readonly string[], withdrawn: readonly string[]): void;
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Called with the node's session once it is current, or undefined if it never became so. */
export type SessionWaiter = (session: NodeSession | undefined) => void;

/** What an anchor's Register said of its providers' types: a config refresh checks them again. */
interface TypeCheck {
  /** Provider id -> the type the node runs it as (announced ids the scheduler heard of, with a type). */
  readonly types: ReadonlyMap<string, string>;
  /** Provider id -> the endpoint mask it announced: what the scheduler is given with a provider put back. */
  readonly endpoints: ReadonlyMap<string, number> | undefined;
  /** Those left out for their type, as the scheduler was last told. */
  refused: ReadonlySet<string>;
  /** Every announced id the scheduler heard of (refused ones included): what the connection offers, less `refused`. */
  readonly announced: readonly string[];
}

/** What Register and Announce say of the node's providers. */
type ProviderAnnouncement = Pick<Register, 'providerIds' | 'providerEndpoints' | 'probes'>;


export class NodeGateway implements SessionHost, NodeRegistrar {
  readonly #server: grpc.Server;
  /** workers: the reusePort listener whose sockets go to the grpc-js server's connection injector. */
  #shared: { readonly listener: net.Server; readonly injector: grpc.ConnectionInjector } | undefined;
  /** Sessions whose register() awaits the scheduler's answer, by serial. */
  readonly #registering = new Map<number, NodeSession>();
  /** Serials of those that join a connection as extra lanes (kept even if the session closes first). */
  readonly #joining = new Set<number>();
  /** Callers waiting for a node whose session is registering here (tunnels from other workers). */
  readonly #waiters = new Map<string, SessionWaiter[]>();
  /** Protocol violations and drops, per kind, for logs and metrics. */
  readonly protocolStats = new ProtocolStats();
  /** SessionHost: rejections for credentials (anyone who reaches the listener can cause them) log once per 10 s. */
  readonly credentialRejections = new LogThrottle(10_000);
  /** SessionHost: streams that never sent Register, likewise. */
  readonly registerTimeoutLog = new LogThrottle(10_000);
  /** limits.max_frame_bytes of the live config (read per DATA frame, so kept as a plain field). */
  maxFrameBytes = 0;
  /** Per node: the lanes of its current connection that live here. */
  readonly #current = new Map<string, NodeLanes>();
  readonly #all = new Set<NodeSession>();
  /** Per anchor session: the probe verdict last passed on, per provider (absent = healthy). */
  readonly #probeVerdicts = new WeakMap<NodeSession, Map<string, boolean>>();
  /** Per anchor session: its providers' announced types, checked again on every config swap. */
  readonly #announcedTypes = new WeakMap<NodeSession, TypeCheck>();
  /** Announced ids outside the config passed on so far (at most MAX_UNCONFIGURED_PROVIDER_IDS). */
  readonly #unconfiguredIds = new Set<string>();
  #config: EdgeConfig;
  #tokenDigests = new Map<string, Buffer>();
  #observer: NodeObserver | undefined;

  readonly #port: SchedulerPort;

  constructor(
    config: EdgeConfig,
    port: SchedulerPort,
    readonly logger: Logger,
  ) {
    routeGrpcLog(logger);
    this.#port = port;
    this.#config = config;
    port.setRegistrar(this);
    this.#server = new grpc.Server({
      'grpc.keepalive_time_ms': 20_000,
      'grpc.keepalive_timeout_ms': 10_000,
      'grpc.keepalive_permit_without_calls': 1,
      // DATA payloads over max_frame_bytes fail their tunnel (NodeSession); a message
      // over this transport cap ends the node's whole stream (grpc-js RESOURCE_EXHAUSTED).
      'grpc.max_receive_message_length': limitsOf(config).maxFrameBytes + FRAME_OVERHEAD_BYTES,
    });
    this.setConfig(config);
    this.#server.addService(nodeTunnelService, { connect: (call: NodeCall) => this.#accept(call) });
  }

  /** A stream that has not registered within this long is closed; no longer than a registered node may stay silent. */
  get registerTimeoutMs(): number {
    return registerTimeoutMs(this.#config);
  }

  get heartbeatIntervalMs(): number {
    return this.#config.heartbeat.intervalMs;
  }

  get heartbeatTimeoutMs(): number {
    return this.#config.heartbeat.timeoutMs;
  }

  setConfig(config: EdgeConfig): void {
    const before = this.#tokenDigests;
    this.#config = config;
    this.#tokenDigests = new Map(config.nodes.map((n) => [n.id, digest(n.token)]));
    this.maxFrameBytes = limitsOf(config).maxFrameBytes;
    if (before.size > 0) this.#revokeSessions(before, config.drain?.graceMs ?? DEFAULT_DRAIN_GRACE_MS);
  }

  /**
   * Sessions here authenticated with a token the config no longer has (a
   * node removed, or its token changed). The main thread retires those it
   * knows of, but with I/O workers it may not know one yet: a register
   * checked against the old token whose record, or whose answer, was still
   * on its way when the config changed. So each worker ends its own: a
   * registering session is refused, and a connected one gets no new
   * requests; its extra lanes here close once idle, its anchor at the
   * grace's end at the latest (the main thread's retirement, which sees
   * every lane, closes it sooner).
   */
  #revokeSessions(before: ReadonlyMap<string, Buffer>, graceMs: number): void {
    const revoked = (nodeId: string): boolean => {
      const old = before.get(nodeId);
      const now = this.#tokenDigests.get(nodeId);
      return old !== undefined && (now === undefined || !timingSafeEqual(old, now));
    };
    for (const session of [...this.#registering.values()]) {
      if (session.isRegistering && revoked(session.nodeId)) session.reject(`the token of node ${JSON.stringify(session.nodeId)} changed while it registered; register with the current one`);
    }
    for (const [nodeId, lanes] of this.#current) {
      if (!revoked(nodeId)) continue;
      this.#port.setDraining(nodeId, true, lanes.generation);
      // Say which: an operator who removed a node should not be sent looking for a token change.
      const removed = !this.#tokenDigests.has(nodeId);
      const cause = removed ? 'node removed from the config' : 'node token revoked by the config';
      this.logger.warn({ node: nodeId, generation: lanes.generation, graceMs }, `${cause}: its connection here takes no new requests and closes once idle`);
      // The anchor is held to the grace's end: this worker cannot see the node's lanes on other workers, whose open
      // tunnels the anchor's close would cut (the main thread's retirement closes it sooner when all are idle).
      retireLanes(lanes.sessions, graceMs, removed ? 'it was removed by a config change' : 'its token was revoked by a config change', true);
    }
  }

  async listen(host: string, port: number, credentials = grpc.ServerCredentials.createInsecure()): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#server.bindAsync(dialAddress(host, port), credentials, (err, boundPort) => {
        if (err) reject(listenError('listen.grpc', host, port, err));
        else resolve(boundPort);
      });
    });
  }

  /**
   * Worker mode: every worker listens on the same port (SO_REUSEPORT, so the
   * kernel spreads node connections) and hands each socket to its own grpc-js
   * server through a connection injector (which does TLS with `credentials`).
   */
  async listenShared(host: string, port: number, credentials = grpc.ServerCredentials.createInsecure()): Promise<number> {
    const injector = this.#server.createConnectionInjector(credentials);
    const listener = net.createServer((socket) => injector.injectConnection(socket));
    this.#shared = { listener, injector };
    await new Promise<void>((resolve, reject) => {
      const failed = (err: Error): void => reject(listenError('listen.grpc', host, port, err));
      listener.once('error', failed);
      listener.listen({ host, port, reusePort: true }, () => {
        listener.off('error', failed);
        resolve();
      });
    });
    const address = listener.address();
    return typeof address === 'object' && address !== null ? address.port : port;
  }

  /** A session of the node's current connection here (the lane with the fewest open tunnels), if any. */
  session(nodeId: string): NodeSession | undefined {
    return this.#current.get(nodeId)?.pick();
  }

  /** Every lane of the node's current connection here. */
  lanes(nodeId: string): readonly NodeSession[] {
    return this.#current.get(nodeId)?.sessions ?? [];
  }

  /** Every current session here, lanes included. */
  *sessions(): IterableIterator<NodeSession> {
    for (const lanes of this.#current.values()) yield* lanes.sessions;
  }

  /** Ids of the nodes with a current connection here. */
  nodeIds(): IterableIterator<string> {
    return this.#current.keys();
  }

  register(session: NodeSession, register: Register): string | undefined {
    // One answer for both: a peer without a token must not learn which node ids exist (the log keeps the claimed id).
    // The token is digested either way, so that the time taken does not tell either.
    const presented = digest(register.token);
    const expected = this.#tokenDigests.get(register.nodeId);
    if (expected === undefined || !timingSafeEqual(expected, presented)) return UNKNOWN_NODE_OR_TOKEN;
    const idProblem = providerIdsProblem(register);
    if (idProblem !== undefined) return idProblem;
    const providers = this.#config.nodes.find((n) => n.id === register.nodeId)?.providers ?? [];
    const announced = this.#boundedProviders(session, register.providerIds, providers);
    const types = announcedTypes(register, announced);
    const refused = this.#refusedForType(register.nodeId, types, providers);
    const providerIds = refused.size === 0 ? announced : announced.filter((id) => !refused.has(id));
    const missing = providers.filter((p) => !register.providerIds.includes(p.id)).map((p) => p.id);
    if (missing.length > 0) this.logger.warn({ node: register.nodeId, missing }, 'node did not announce every configured provider; those get no requests on this connection');
    const maxTunnels = limitsOf(this.#config).maxTunnelsPerNode;
    let capacity = 0;
    for (const p of providers) capacity += p.capacity;
    // Not a config error (a node's lanes each carry up to the limit), but one connection alone cannot take every grant.
    if (maxTunnels > 0 && capacity > maxTunnels && register.joinGeneration === 0) {
      this.logger.warn({ node: register.nodeId, capacity, maxTunnelsPerNode: maxTunnels }, "the node's providers can be granted more requests than limits.max_tunnels_per_node lets one connection carry: grants past it go elsewhere once, then fail with 503 node_overloaded");
    }
    if (register.joinGeneration > 0) {
      // Every lane on one thread (driver) is counted here; with I/O workers main counts them over all workers.
      const here = this.#current.get(register.nodeId);
      if (here !== undefined && here.generation === register.joinGeneration && here.sessions.length >= MAX_NODE_STREAMS) return this.#laneLimit();
    }
    this.#registering.set(session.serial, session);
    // The answer (onConnected) may come from inside this call (driver) or later (worker).
    if (register.joinGeneration > 0) {
      this.#joining.add(session.serial);
      this.#port.joinLane(register.nodeId, session.serial, register.joinGeneration);
    } else {
      this.#announcedTypes.set(session, { types, endpoints: announcedEndpoints(register, announced), refused, announced });
      this.#port.register(register.nodeId, session.serial, providerIds, announcedEndpoints(register, providerIds), register.draining, failingProbes(register));
    }
    return undefined;
  }

  /**
   * The announced ids the scheduler hears of: every configured one, and ids outside the config while
   * fewer than MAX_UNCONFIGURED_PROVIDER_IDS distinct ones were passed on; the others are dropped,
   * counted, and their probe results too (session.providerIds).
   */
  #boundedProviders(session: NodeSession, ids: string[], providers: readonly ProviderConfig[]): string[] {
    let dropped: Set<string> | undefined;
    for (const id of ids) {
      if (providers.some((p) => p.id === id) || this.#unconfiguredIds.has(id)) continue;
      if (this.#unconfiguredIds.size < MAX_UNCONFIGURED_PROVIDER_IDS) this.#unconfiguredIds.add(id);
      else (dropped ??= new Set()).add(id);
    }
    if (dropped === undefined) return ids;
    this.protocolStats.droppedProviderIds += dropped.size;
    this.logger.warn({ node: session.nodeId, dropped: dropped.size, limit: MAX_UNCONFIGURED_PROVIDER_IDS }, "provider ids the edge's config does not name were announced past the limit of such ids; those are ignored on this connection");
    session.providerIds = new Set([...session.providerIds].filter((id) => !dropped.has(id)));
    return ids.filter((id) => !dropped.has(id));
  }

  /**
   * The announced providers this connection may not be sent requests for.
   * The edge's retry rules follow its catalog's type (a cli run is never
   * re-run elsewhere; an http request may be), and the agent runs what its
   * own config says: a provider that is cli on one side only is left out,
   * loudly. Another mismatch (ollama against vllm) changes nothing here and
   * is only logged. `before` (a config swap's check): those already left
   * out, not logged again.
   */
  #refusedForType(nodeId: string, types: ReadonlyMap<string, string>, providers: readonly ProviderConfig[], before?: ReadonlySet<string>): Set<string> {
    const refused = new Set<string>();
    for (const [id, nodeType] of types) {
      const catalog = providers.find((p) => p.id === id);
      if (catalog === undefined || catalog.type === nodeType) continue;
      const log = { node: nodeId, provider: id, edgeType: catalog.type, nodeType };
      if ((catalog.type === 'cli') !== (nodeType === 'cli')) {
        refused.add(id);
        if (before?.has(id) !== true) this.logger.error(log, "provider is a cli command on one side only: it gets no requests on this connection; make nodes[].providers[].type in the edge's config match the agent's");
      } else if (before === undefined) {
        this.logger.warn(log, "provider's type differs between the edge's config and the agent's; requests go as usual");
      }
    }
    return refused;
  }

  /**
   * Register's type check again, for the connections anchored here, after a
   * config swap (a refresh, SIGHUP): the scheduler is told of each provider
   * the new types take out of what the connection offers, or put back, in
   * the same way as Register would have (status: not_announced), without a
   * reconnect. Called once the data path here is on the new snapshot: a
   * provider put back may be granted a waiter at once.
   */
  recheckTypes(): void {
    for (const lanes of this.#current.values()) {
      for (const session of lanes.sessions) this.#recheckTypes(session);
    }
  }

  #recheckTypes(session: NodeSession): void {
    const announced = this.#announcedTypes.get(session);
    if (announced === undefined) return; // a lane: its anchor's thread checks
    const providers = this.#config.nodes.find((n) => n.id === session.nodeId)?.providers ?? [];
    const refused = this.#refusedForType(session.nodeId, announced.types, providers, announced.refused);
    for (const id of refused) {
      if (!announced.refused.has(id)) this.#port.setAnnounced(session.nodeId, id, false, undefined, session.generation);
    }
    for (const id of announced.refused) {
      if (refused.has(id)) continue;
      const catalog = providers.find((p) => p.id === id);
      if (catalog !== undefined) this.logger.info({ node: session.nodeId, provider: id, type: catalog.type }, "provider's type in the edge's config agrees with the agent's again: it gets requests on this connection");
      this.#port.setAnnounced(session.nodeId, id, true, announced.endpoints?.get(id), session.generation);
    }
    announced.refused = refused;
  }

  /**
   * The anchor's Announce: the providers its node offers from now on (a
   * config refresh on the node added or removed some), checked as Register's
   * are. The scheduler hears of each that comes or goes as a config swap's
   * type check tells it (setAnnounced; a withdrawn provider's open leases run
   * on); an added one's probe verdict goes first, so that no waiter is
   * granted to a provider whose probe fails.
   */
  announce(session: NodeSession, update: Announce): void {
    const prior = this.#announcedTypes.get(session);
    const lanes = this.#current.get(session.nodeId);
    if (prior === undefined || lanes === undefined || !lanes.has(session)) return; // superseded meanwhile
    const problem = providerIdsProblem(update);
    if (problem !== undefined) {
      this.protocolStats.refusedAnnounces++;
      this.logger.warn({ node: session.nodeId, problem }, 'node announced providers the edge refuses; it offers what it offered before');
      return;
    }
    const providers = this.#config.nodes.find((n) => n.id === session.nodeId)?.providers ?? [];
    session.providerIds = new Set(update.providerIds);
    const announced = this.#boundedProviders(session, update.providerIds, providers);
    const types = announcedTypes(update, announced);
    const refused = this.#refusedForType(session.nodeId, types, providers, prior.refused);
    const endpoints = announcedEndpoints(update, announced);
    const failing = failingProbes(update);
    const before = new Set(prior.announced.filter((id) => !prior.refused.has(id)));
    const offered = new Set(announced.filter((id) => !refused.has(id)));
    const added: string[] = [];
    const withdrawn: string[] = [];
    for (const id of before) {
      if (offered.has(id)) continue;
      withdrawn.push(id);
      this.#port.setAnnounced(session.nodeId, id, false, undefined, session.generation);
    }
    for (const id of offered) {
      const mask = endpoints?.get(id);
      if (before.has(id) && mask === prior.endpoints?.get(id)) continue;
      if (!before.has(id)) {
        added.push(id);
        this.#port.setProviderHealth(session.nodeId, id, failing?.has(id) !== true, session.generation);
      }
      this.#port.setAnnounced(session.nodeId, id, true, mask, session.generation);
    }
    this.#announcedTypes.set(session, { types, endpoints, refused, announced });
    const unconfigured = added.filter((id) => !providers.some((p) => p.id === id));
    this.logger.info({ node: session.nodeId, added, withdrawn, ...(unconfigured.length > 0 ? { unconfigured } : {}) }, "node changed the providers it offers");
    if (added.length > 0 || withdrawn.length > 0) this.#observer?.nodeProviders(session, added, withdrawn);
  }

  /** The rejection of a lane whose connection already has MAX_NODE_STREAMS streams (the agent never opens more). */
  #laneLimit(): string {
    this.protocolStats.laneLimitRejections++;
    return `more than ${MAX_NODE_STREAMS} streams on one connection (the anchor and its lanes)`;
  }

  // --- NodeRegistrar ---------------------------------------------------------

  onConnected(serial: number, nodeId: string, generation: number, full = false): void {
    const session = this.#registering.get(serial);
    this.#registering.delete(serial);
    const wasJoin = this.#joining.delete(serial);
    if (session === undefined || !session.isRegistering) {
      // Closed while the scheduler answered: undo, so the node is not left online;
      // a lane undoes only itself (its connection goes on).
      if (generation > 0) {
        if (wasJoin) this.#port.leaveLane(nodeId, generation);
        else this.#port.disconnect(nodeId, generation);
      }
      this.#settleWaiters(nodeId);
      return;
    }
    const joining = session.joinGeneration > 0;
    if (full) {
      session.reject(this.#laneLimit());
      this.#settleWaiters(nodeId);
      return;
    }
    const here = this.#current.get(nodeId);
    if (generation === 0 || (joining && here !== undefined && here.generation > generation)) {
      session.reject(joining ? `generation ${session.joinGeneration} of ${nodeId} is not current; register anew` : `unknown node id ${JSON.stringify(nodeId)}`);
      this.#settleWaiters(nodeId);
      return;
    }
    if (!joining && session.registeredDraining) {
      // Drained by command before this connection: the agent refuses new tunnels, so the edge sends it none.
      // The connect itself was told (its pump granted nothing here); said again for the status and the log.
      this.#port.setDraining(nodeId, true, generation);
      this.logger.info({ node: nodeId, generation }, 'node registered drained (operator command): no new requests until undrained');
    }
    if (here !== undefined && here.generation === generation) {
      here.add(session);
      session.activate(generation);
    } else {
      // A new connection (or the first of its lanes to live here): whatever this plane held of an older one is superseded.
      const lanes = new NodeLanes(generation);
      lanes.add(session);
      this.#current.set(nodeId, lanes);
      session.activate(generation);
      if (here !== undefined) {
        // Usually the agent's own reconnect; the same id from two agents at once flaps like this every few seconds.
        const previous = here.sessions[0]?.remoteAddress;
        this.logger.warn({ node: nodeId, generation, peer: session.remoteAddress, previousPeer: previous }, 'node connected again while its previous connection was open: superseded (a reconnect, or a second agent with the same node id)');
        this.#closeLanes(here, `superseded by generation ${generation}`);
      }
    }
    if (!joining) {
      // Checked at Register against the config of that moment: one swapped in before this answer came is checked now.
      this.#recheckTypes(session);
      this.#observer?.nodeConnected(session);
    }
    this.#settleWaiters(nodeId);
  }

  onFence(nodeId: string, generation: number): void {
    const lanes = this.#current.get(nodeId);
    if (lanes === undefined || lanes.generation !== generation) return;
    this.#closeLanes(lanes, `superseded by a newer connection of ${nodeId}`);
  }

  #closeLanes(lanes: NodeLanes, reason: string): void {
    for (const session of [...lanes.sessions]) {
      this.protocolStats.supersededSessions++;
      session.close(reason);
    }
  }

  /**
   * Calls `waiter` with the node's current session here, now or, when a
   * session of the node is registering here, once the scheduler answered.
   */
  whenCurrent(nodeId: string, waiter: SessionWaiter): void {
    for (const session of this.#registering.values()) {
      if (session.nodeId !== nodeId || !session.isRegistering) continue;
      const list = this.#waiters.get(nodeId);
      if (list === undefined) this.#waiters.set(nodeId, [waiter]);
      else list.push(waiter);
      return;
    }
    waiter(this.session(nodeId));
  }

  #settleWaiters(nodeId: string): void {
    const list = this.#waiters.get(nodeId);
    if (list === undefined) return;
    this.#waiters.delete(nodeId);
    for (const waiter of list) waiter(this.session(nodeId));
  }

  setObserver(observer: NodeObserver): void {
    this.#observer = observer;
  }

  /**
   * The node's anchor stream reported its probe results: every verdict goes
   * to the scheduler (an unhealthy provider gets no new requests; a passing
   * verdict returns a half-open one), which acts on a change only: a few
   * records per heartbeat. Sent every time, not on change, because a
   * provider a config refresh just added (or added back) starts healthy in
   * the scheduler and would otherwise never hear that its probe fails. A
   * change is logged. A new connection starts from healthy, there and here.
   */
  probed(session: NodeSession, probes: readonly ProbeResult[]): void {
    const lanes = this.#current.get(session.nodeId);
    if (lanes === undefined || !lanes.has(session) || session.joinGeneration !== 0) return;
    let known = this.#probeVerdicts.get(session);
    if (known === undefined) {
      known = new Map();
      this.#probeVerdicts.set(session, known);
    }
    for (const probe of probes) {
      // Only what Register announced (its ids are bounded there): any other id would be interned on the
      // scheduler's ring for good, and one larger than a ring record would end this worker.
      if (!session.providerIds.has(probe.providerId)) {
        this.protocolStats.unknownProbes++;
        continue;
      }
      if ((known.get(probe.providerId) ?? true) !== probe.healthy) {
        known.set(probe.providerId, probe.healthy);
        this.logger.warn({ node: session.nodeId, provider: probe.providerId, detail: probe.detail === '' ? undefined : cutText(probe.detail, MAX_ERROR_MESSAGE_CHARS) }, probe.healthy ? 'provider health probe passes' : 'provider health probe fails');
      }
      this.#port.setProviderHealth(session.nodeId, probe.providerId, probe.healthy, session.generation);
    }
  }

  /** The node's current session said Leaving: no new requests for it; open ones finish. */
  leaving(session: NodeSession, reason: string): void {
    const lanes = this.#current.get(session.nodeId);
    if (lanes === undefined || !lanes.has(session)) return;
    if (!lanes.leaving) this.#port.setDraining(session.nodeId, true, session.generation);
    lanes.leaving = true;
    // The agent says Leaving on every stream; one event per connection, from its anchor.
    if (session.joinGeneration === 0) this.#observer?.nodeLeaving(session, reason);
  }

  forget(session: NodeSession): void {
    this.#all.delete(session);
    if (this.#registering.delete(session.serial)) this.#settleWaiters(session.nodeId);
  }

  unregister(session: NodeSession, reason: string): void {
    const lanes = this.#current.get(session.nodeId);
    const current = lanes !== undefined && lanes.remove(session);
    if (current && lanes.sessions.length === 0) this.#current.delete(session.nodeId);
    if (session.joinGeneration > 0) {
      this.#port.leaveLane(session.nodeId, session.generation);
      return;
    }
    this.#port.disconnect(session.nodeId, session.generation);
    this.#observer?.nodeDisconnected(session, reason);
    // The anchor is gone, so is the connection: its lanes here go too (other workers get a fence).
    if (current && lanes.sessions.length > 0) {
      this.#current.delete(session.nodeId);
      for (const lane of [...lanes.sessions]) lane.close(`the node's first stream closed: ${reason}`);
    }
    this.logger.debug({ node: session.nodeId, generation: session.generation, reason }, 'node unregistered');
  }

  async close(): Promise<void> {
    for (const session of [...this.#all]) session.close('edge shutting down');
    // Worker mode: the listener's close calls back once its node sockets have
    // closed. tryShutdown alone calls back before then (the injector's destroy
    // already began closing its sessions), and the worker is terminated next:
    // the agents' calls would end with a reset instead of their status.
    let socketsClosed: Promise<void> = Promise.resolve();
    if (this.#shared !== undefined) {
      const listener = this.#shared.listener;
      socketsClosed = new Promise<void>((resolve) => listener.close(() => resolve()));
      this.#shared.injector.destroy();
    }
    await new Promise<void>((resolve) => {
      this.#server.tryShutdown(() => void socketsClosed.then(resolve));
      setTimeout(() => {
        this.#server.forceShutdown();
        resolve();
      }, 2_000).unref();
    });
  }

  #accept(call: NodeCall): void {
    this.#all.add(new NodeSession(call, this));
  }
}

/** Why Register's or Announce's provider ids are refused (more than the agents' config allows, or an id too long); undefined: fine. */
function providerIdsProblem(announcement: ProviderAnnouncement): string | undefined {
  const ids = announcement.providerIds;
  if (ids.length > MAX_ANNOUNCED_PROVIDERS) return `more than ${MAX_ANNOUNCED_PROVIDERS} provider ids announced`;
  // The agent sends one entry of each per provider. Each entry is looked up among the ids: hundreds of thousands
  // of them (a message up to the transport cap) held this thread for a second, and Announce may come again and again.
  if (announcement.providerEndpoints.length > MAX_ANNOUNCED_PROVIDERS) return `more than ${MAX_ANNOUNCED_PROVIDERS} provider endpoint lists announced`;
  if (announcement.probes.length > MAX_ANNOUNCED_PROVIDERS) return `more than ${MAX_ANNOUNCED_PROVIDERS} probe results announced`;
  for (const id of ids) {
    if (Buffer.byteLength(id, 'utf8') > MAX_PROVIDER_ID_BYTES) return `a provider id longer than ${MAX_PROVIDER_ID_BYTES} bytes announced`;
  }
  return undefined;
}

/** The providers whose health probe failed as the node registered or announced them (undefined: none, or an agent that predates the field). */
function failingProbes(register: ProviderAnnouncement): ReadonlySet<string> | undefined {
  let failing: Set<string> | undefined;
  for (const probe of register.probes) {
    if (!probe.healthy) (failing ??= new Set()).add(probe.providerId);
  }
  return failing;
}

/** Provider id -> the type the node announced for it, for `providerIds` (an agent that predates types: none). */
function announcedTypes(register: ProviderAnnouncement, providerIds: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of register.providerEndpoints) {
    if (entry.type !== '' && providerIds.includes(entry.providerId)) out.set(entry.providerId, entry.type);
  }
  return out;
}

/**
 * Provider id -> endpoint mask the node announced; names this edge does not
 * know are skipped (a newer agent). A provider it announced no endpoints for
 * keeps the edge's config.
 */
function announcedEndpoints(register: ProviderAnnouncement, providerIds: readonly string[]): Map<string, number> | undefined {
  if (register.providerEndpoints.length === 0) return undefined;
  const out = new Map<string, number>();
  for (const entry of register.providerEndpoints) {
    if (!providerIds.includes(entry.providerId)) continue;
    out.set(entry.providerId, endpointMask(entry.endpoints.filter(isEndpoint)));
  }
  return out;
}

/**
 * grpc-js writes its own errors to stderr ("E No address added …"): into
 * this thread's log instead, as warnings. The failed bind is left out: the
 * listen's StartError says it, naming the config key.
 */
function routeGrpcLog(logger: Logger): void {
  grpc.setLogger({
    error: (...args: unknown[]): void => {
      const text = format(...args);
      if (!text.includes('No address added out of total')) logger.warn({ grpc: text }, 'grpc-js');
    },
  });
}
