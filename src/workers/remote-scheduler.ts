// SchedulerPort of an I/O worker: every call becomes one fixed-size record on
// the worker -> main ring; the scheduler's answers arrive on the main ->
// worker ring and are handed to the DataPlane (decisions) and NodeGateway
// (connect answers, fences). Both rings are FIFO, so per worker the order of
// calls and of answers is kept.
import type { AdmitRequest, Grant, NodeFailure, Overloaded, ReleaseReason } from '../contract/scheduler.js';
import { drainLoop } from '../shared/ring/drain-loop.js';
import { ANNOUNCED_AGAIN, ANNOUNCED_ENDPOINTS, ANNOUNCED_UNHEALTHY, RecordKind, RecordReader, decodeKeyLevels, encodeFairness, rejectCodeOf, releaseReasonCode, SchedulerRecord } from '../contract/scheduler-records.js';
import { RecordChannel } from '../contract/record-channel.js';
import { RingConsumer, RingProducer } from '../shared/ring/spsc-ring.js';
import { isKeyRefusal, type DecisionHandler, type KeyLimit, type NodeRegistrar, type SchedulerPort } from '../contract/scheduler-port.js';

export class RemoteScheduler implements SchedulerPort {
  #handler: DecisionHandler | undefined;
  #registrar: NodeRegistrar | undefined;
  readonly out: RecordChannel;
  readonly producer: RingProducer;
  readonly consumer: RingConsumer;
  readonly #reader: RecordReader;
  /** Scratch for outgoing records (the channel copies what it must keep). */
  readonly #scratch = new SchedulerRecord();
  readonly #incoming = new SchedulerRecord();
  readonly #onRecord = this.#receive.bind(this);
  /** Each worker has its own ClientAuth; the one count per key lives on the main thread. */
  readonly countsKeys = true;

  constructor(toMain: SharedArrayBuffer, fromMain: SharedArrayBuffer) {
    this.producer = new RingProducer(toMain);
    this.out = new RecordChannel(this.producer);
    this.consumer = new RingConsumer(fromMain);
    this.#reader = new RecordReader(this.consumer.view, this.consumer.bytes);
  }

  /** Starts reading the scheduler's answers; resolves when the ring closes. */
  run(onError: (err: unknown) => void): Promise<void> {
    return drainLoop(this.consumer, this.#onRecord, onError);
  }

  close(): void {
    this.out.commit();
    this.producer.close();
    this.consumer.close();
  }

  setHandler(handler: DecisionHandler): void {
    this.#handler = handler;
  }

  setRegistrar(registrar: NodeRegistrar): void {
    this.#registrar = registrar;
  }

  admit(request: AdmitRequest, limitedKey?: KeyLimit): void {
    const r = this.#scratch.reset(RecordKind.admit);
    r.requestId = request.requestId;
    r.value = request.estimatedTokens;
    r.session = request.sessionKey ?? 0;
    r.worker = request.api ?? 0;
    encodeFairness(r, request);
    if (limitedKey === undefined) {
      this.out.send(r, request.directNodeId, undefined, request.alias, request.pinnedProviderId);
      return;
    }
    // The limit of this worker's config snapshot travels along (0: none, counted only): main needs no auth config.
    r.generation = limitedKey.maxConcurrent === Infinity ? 0 : limitedKey.maxConcurrent;
    r.rate = limitedKey.requestsPerMinute;
    this.out.send(r, request.directNodeId, limitedKey.name, request.alias, request.pinnedProviderId);
  }

  releaseKey(requestId: number, limited: boolean, usedTokens: number): void {
    const r = this.#scratch.reset(RecordKind.keyRelease);
    r.requestId = requestId;
    r.value = usedTokens;
    this.out.send(r);
    // A limited key's release is published now, not with the turn's batch: the exchange ends (its last
    // byte goes to the client) right after this, and the client may send its next request at once; the
    // main thread must be able to see the slot free. An unlimited key's count refuses nothing: it waits.
    if (limited) this.publish();
  }

  cancel(requestId: number): void {
    const r = this.#scratch.reset(RecordKind.cancel);
    r.requestId = requestId;
    this.out.send(r);
  }

  release(leaseId: number, reason: ReleaseReason, usedTokens = 0, retryAfterMs?: number): void {
    const r = this.#scratch.reset(RecordKind.release);
    r.leaseId = leaseId;
    r.code = releaseReasonCode(reason);
    // One field, two meanings: an overloaded answer (429/503) reports no usage.
    r.value = reason === 'overloaded' ? (retryAfterMs ?? -1) : usedTokens;
    this.out.send(r);
  }

  publish(): void {
    this.out.commit();
  }

  requeue(leaseId: number, request: AdmitRequest, excludeProviderId: string, providerFailed = false, overloaded?: Overloaded, node?: NodeFailure): void {
    const r = this.#scratch.reset(RecordKind.requeue);
    r.requestId = request.requestId;
    r.code = overloaded !== undefined ? 2 : node === 'leaving' ? 3 : node === 'lost' ? 4 : providerFailed ? 1 : 0;
    if (overloaded?.retryAfterMs !== undefined) r.generation = Math.min(0xfffffffe, Math.round(overloaded.retryAfterMs)) + 1;
    r.leaseId = leaseId;
    r.value = request.estimatedTokens;
    r.session = request.sessionKey ?? 0;
    r.worker = request.api ?? 0;
    this.out.send(r, request.directNodeId, excludeProviderId, request.alias, request.pinnedProviderId);
  }

  /** The fence already passed where the session lives, and nothing is sent
   * to main: marking the lease sent there would only keep a fence from
   * remembering it as unsent, and its release or requeue (always one, after
   * this) forgets it again; no stale report follows a send. One cross-thread
   * record (often one wake-up) less per request; peer tunnels never sent it. */
  confirmSent(_leaseId: number): boolean {
    return true;
  }

  reportStale(requestId: number, leaseId: number): void {
    const r = this.#scratch.reset(RecordKind.stale);
    r.requestId = requestId;
    r.leaseId = leaseId;
    this.out.send(r);
  }

  /** One `announce` record per provider id, then `connect`: the ring is FIFO, so main has the list when connect arrives. */
  register(nodeId: string, serial: number, providerIds: readonly string[], endpoints?: ReadonlyMap<string, number>, draining = false, unhealthy?: ReadonlySet<string>): void {
    for (let i = 0; i < providerIds.length; i++) {
      const a = this.#scratch.reset(RecordKind.announce);
      a.requestId = serial;
      const mask = endpoints?.get(providerIds[i]);
      a.code = (mask === undefined ? 0 : mask | ANNOUNCED_ENDPOINTS) | (unhealthy?.has(providerIds[i]) === true ? ANNOUNCED_UNHEALTHY : 0);
      this.out.send(a, undefined, providerIds[i]);
    }
    const r = this.#scratch.reset(RecordKind.connect);
    r.requestId = serial;
    r.code = draining ? 2 : 0;
    this.out.send(r, nodeId);
  }

  disconnect(nodeId: string, generation: number): void {
    const r = this.#scratch.reset(RecordKind.disconnect);
    r.generation = generation;
    this.out.send(r, nodeId);
  }

  /** A connect record with code 1: main checks the generation and answers `connected`. */
  joinLane(nodeId: string, serial: number, generation: number): void {
    const r = this.#scratch.reset(RecordKind.connect);
    r.requestId = serial;
    r.generation = generation;
    r.code = 1;
    this.out.send(r, nodeId);
  }

  /** A disconnect record with code 1: main forgets the lane's worker, the connection stays. */
  leaveLane(nodeId: string, generation: number): void {
    const r = this.#scratch.reset(RecordKind.disconnect);
    r.generation = generation;
    r.code = 1;
    this.out.send(r, nodeId);
  }

  queryQueuePosition(requestId: number): void {
    const r = this.#scratch.reset(RecordKind.queuePosition);
    r.requestId = requestId;
    this.out.send(r);
  }

  setProviderHealth(nodeId: string, providerId: string, healthy: boolean, generation = 0): void {
    const r = this.#scratch.reset(RecordKind.health);
    r.code = healthy ? 1 : 0;
    r.generation = generation;
    this.out.send(r, nodeId, providerId);
  }

  setAnnounced(nodeId: string, providerId: string, announced: boolean, endpoints: number | undefined, generation = 0): void {
    const r = this.#scratch.reset(RecordKind.announced);
    r.code = announced ? ANNOUNCED_AGAIN | (endpoints === undefined ? 0 : endpoints | ANNOUNCED_ENDPOINTS) : 0;
    r.generation = generation;
    this.out.send(r, nodeId, providerId);
  }

  setDraining(nodeId: string, draining: boolean, generation = 0): void {
    const r = this.#scratch.reset(RecordKind.draining);
    r.code = draining ? 1 : 0;
    r.generation = generation;
    this.out.send(r, nodeId);
  }

  #receive(offset: number, length: number): void {
    const r = this.#incoming;
    if (!this.#reader.decode(offset, length, r)) return;
    const handler = this.#handler;
    switch (r.kind) {
      case RecordKind.grant: {
        const grant: Grant = {
          requestId: r.requestId,
          leaseId: r.leaseId,
          nodeId: this.#reader.nameOf(r.nodeId) ?? '',
          providerId: this.#reader.nameOf(r.providerId) ?? '',
          servedModel: this.#reader.nameOf(r.nameId) ?? '',
          generation: r.generation,
          queuedMs: r.value,
          sessionMovedFrom: this.#reader.nameOf(r.extraId),
          keyLevels: decodeKeyLevels(r),
        };
        handler?.onGrant(grant, r.worker);
        return;
      }
      case RecordKind.reject: {
        const code = rejectCodeOf(r.code);
        if (isKeyRefusal(code)) handler?.onReject(r.requestId, code, r.value, undefined, decodeKeyLevels(r));
        else handler?.onReject(r.requestId, code, r.value, r.aux === 0 ? undefined : r.aux);
        return;
      }
      case RecordKind.requeued:
        if (r.code === 0) handler?.onRequeueRefused(r.requestId);
        else handler?.onRequeueAccepted(r.requestId);
        return;
      case RecordKind.staleChecked:
        handler?.onStaleChecked(r.requestId, r.leaseId, r.code === 1);
        return;
      case RecordKind.connected:
        this.#registrar?.onConnected(r.requestId, this.#reader.nameOf(r.nodeId) ?? '', r.generation, r.code === 1);
        return;
      case RecordKind.fence:
        this.#registrar?.onFence(this.#reader.nameOf(r.nodeId) ?? '', r.generation);
        return;
      case RecordKind.queuePosition:
        handler?.onQueuePosition?.(r.requestId, r.generation, r.value < 0 ? undefined : r.value);
        return;
      default:
        throw new Error(`scheduler ring: unexpected record kind ${r.kind}`);
    }
  }
}
