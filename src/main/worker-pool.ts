// The main thread's side of the I/O workers: starts them, owns every ring
// (created here, handed over in workerData), and feeds the scheduler from
// their records. Per worker: a worker -> main ring drained by a notify-driven
// loop (never Atomics.wait) and a main -> worker ring for the scheduler's
// answers, routed by request id (id % ID_STRIDE = the worker). Grants carry
// the index of the worker holding the node's session, so the client's worker
// knows whether the tunnel stays local or crosses a worker <-> worker ring.
// Cold-path control (inspection, config snapshots, metrics, drain) uses
// postMessage.
import { RetiredMetrics, type FoldableMetric } from './metric-fold.js';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { writesPretty } from '../shared/logger.js';
import type { EdgeConfig } from '../shared/config-types.js';
import type { TlsMaterial } from '../shared/tls-material.js';
import type { NodeCommandResult } from '../shared/node-commands.js';
import { drainLoop } from '../shared/ring/drain-loop.js';
import { ANNOUNCED_AGAIN, ANNOUNCED_ENDPOINTS, ANNOUNCED_UNHEALTHY, decodeFairness, encodeKeyLevels, RecordKind, RecordReader, rejectCodeCode, releaseReasonOf, SchedulerRecord } from '../contract/scheduler-records.js';
import { RecordChannel } from '../contract/record-channel.js';
import { RunWireDecoder, type RunWireBatch } from '../contract/run-wire.js';
import type { RunEvent } from '../contract/events.js';
import { createRing, RingConsumer, RingProducer, type RingRecordHandler } from '../shared/ring/spsc-ring.js';
import { ID_STRIDE } from '../contract/scheduler-port.js';
import type { AdmissionRejectCode, DecisionHandler, KeyRefusalCode } from '../contract/scheduler-port.js';
import type { DataPath, KeyLoadEntry } from '../contract/data-path.js';
import { StoredResponses } from '../contract/stored-responses.js';
import { DRAIN_FLAG, EVENTS_FLAG, FLAG_COUNT, type A2ARelayMessage, type AffinityAsk, type AffinityMessage, type ControlCall, type ControlReply, type IoWorkerData, type PlaneInspection, type WorkerEvent } from '../contract/io-protocol.js';
import { KeyConcurrency } from './key-concurrency.js';
import { retryAfterSecOf } from '../shared/request-rate.js';
import type { SchedulerDriver } from './scheduler-driver.js';
import type { Grant, KeyLevels } from '../contract/scheduler.js';
import type { ApiKind } from '../shared/endpoints.js';
import { StartError } from '../shared/start-error.js';
import { MAX_NODE_STREAMS } from '../shared/wire-limits.js';
import { tenantSecret } from '../shared/tenant-key.js';

const SCHEDULER_RING_BYTES = 1 << 20;
const PEER_RING_BYTES = 1 << 20;
const PEER_RING_BYTES_MANY = 1 << 18;
const IO_WORKER_SCRIPT = new URL('../workers/io-worker.js', import.meta.url);

/** Where a node's current connection lives: its anchor stream's worker, and the workers of its extra lanes. */
interface NodePlace {
  readonly worker: number;
  readonly generation: number;
  /** One entry per extra lane (a worker may hold several). */
  readonly lanes: number[];
  /** Round robin over the lanes for grants whose client worker holds none. */
  next: number;
  /**
   * Retired with lanes on other workers: the anchor's worker holds it to the
   * grace's end, as it cannot see them; once they have all closed (each when
   * idle) it is told to close the anchor once idle too, within what is left
   * of the grace.
   */
  retiring?: { readonly deadline: number; readonly reason: string };
}

class WorkerSlot {
  readonly out: RecordChannel;
  readonly producer: RingProducer;
  readonly consumer: RingConsumer;
  readonly reader: RecordReader;
  readonly record = new SchedulerRecord();
  /** This slot's records into #fromWorker: set once its drain loop starts. */
  onRecord: RingRecordHandler | undefined;
  /** Provider ids announced by sessions registering on this worker, by serial, until their connect record. */
  readonly announced = new Map<number, string[]>();
  /** Endpoint masks announced with them (absent for a provider whose node announced none), by serial. */
  readonly endpoints = new Map<number, Map<string, number>>();
  /** Of them, the ones whose probe failed as the node registered, by serial. */
  readonly unhealthy = new Map<number, Set<string>>();

  announcedEndpoints(serial: number): Map<string, number> {
    let map = this.endpoints.get(serial);
    if (map === undefined) this.endpoints.set(serial, (map = new Map()));
    return map;
  }
  worker: Worker | undefined;
  /** Reads this worker's run reports; a new one with each worker started in the slot. */
  runs = new RunWireDecoder();
  exited = false;
  /** Said `ready`: an exit from now on is a fault to recover from, not a failed start. */
  started = false;

  constructor(
    readonly index: number,
    readonly toMain: SharedArrayBuffer,
    readonly fromMain: SharedArrayBuffer,
  ) {
    this.producer = new RingProducer(fromMain);
    this.out = new RecordChannel(this.producer);
    this.consumer = new RingConsumer(toMain);
    this.reader = new RecordReader(this.consumer.view, this.consumer.bytes);
  }
}

/** The status the run records give a run its worker took down with it (the client's connection closed with that worker). */
const WORKER_EXITED_STATUS = 502;

export interface PoolPorts {
  readonly httpPort: number;
  readonly grpcPort: number;
}

/** A metric of a prom-client registry's JSON scrape, as far as the pool reads it. */
interface MetricJson {
  readonly type: string;
}

/** callAll's mark for a worker that exited before it answered. */
const GONE: unique symbol = Symbol('gone');
/**
 * How long status, metrics and a run's cancel wait for a worker: one that is
 * wedged (a runaway loop, a stuck native call) must not take the operator's
 * view, nor the start of a drain, with it. Its answer is left out.
 */
export const CONTROL_CALL_TIMEOUT_MS = 2_000;
class CallTimeout extends Error {
  constructor(worker: number, call: string, timeoutMs: number) {
    super(`I/O worker ${worker} did not answer ${call} within ${timeoutMs} ms`);
  }
}

/** A worker that did not answer in time (see callAll's timeoutMs). */
const SILENT: unique symbol = Symbol('silent');

export class WorkerPool implements DecisionHandler, DataPath {
  readonly #slots: WorkerSlot[] = [];
  readonly #peerRings: (SharedArrayBuffer | undefined)[][] = [];
  readonly #places = new Map<string, NodePlace>();
  /**
   * Every stored response a worker learnt (or dropped), as passed on to the others, oldest first, with
   * its expiry: a worker started in an exited one's place begins with them (its own map died with it).
   */
  #responses = new StoredResponses();
  /** The model list's `created` every worker answers (IoWorkerData.modelsCreated). */
  readonly #modelsCreated = Math.floor(Date.now() / 1000);
  readonly #scratch = new SchedulerRecord();
  /** Open requests per API key, over all workers (each key counted; auth.api_keys[].max_concurrent refuses above its limit). */
  readonly keys = new KeyConcurrency();
  /** #readOthers is reading the other workers' rings (not re-entered). */
  #readingOthers = false;
  #nextCall = 1;
  readonly #calls = new Map<number, { worker: number; resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  /** Each worker's last metrics scrape (prom-client JSON), by index. */
  readonly #lastMetrics: (MetricJson[] | undefined)[] = [];
  /** Workers whose control call timed out and that have not answered anything since. */
  readonly #unresponsive = new Set<WorkerSlot>();
  /** The counters and histograms of workers that exited, as last scraped: totals never go down (metric-fold.ts). */
  readonly #retiredMetrics = new RetiredMetrics();
  /** Flags shared with every worker: EVENTS_FLAG (workers build run events only while someone subscribes) and DRAIN_FLAG. */
  readonly flags = new Int32Array(new SharedArrayBuffer(4 * FLAG_COUNT));
  #closed = false;
  readonly #peerBytes: number;
  /** What a respawned worker starts with: the live config, the log level and the shared ports. */
  #config: EdgeConfig | undefined;
  #logLevel = 'info';
  #ports: PoolPorts | undefined;
  #tls: TlsMaterial;

  readonly #driver: SchedulerDriver;
  readonly #logger: Logger;
  readonly #onEvent: (event: WorkerEvent) => void;
  readonly #script: URL;

  constructor(
    readonly count: number,
    driver: SchedulerDriver,
    logger: Logger,
    onEvent: (event: WorkerEvent) => void,
    /** What the listeners serve (read and checked on this thread); setCertificates replaces it. */
    tls: TlsMaterial,
    /** The worker entry; a bench swaps in a synthetic load worker that speaks the same rings. */
    script: URL = IO_WORKER_SCRIPT,
  ) {
    this.#driver = driver;
    this.#logger = logger;
    this.#onEvent = onEvent;
    this.#tls = tls;
    this.#script = script;
    const peerBytes = count <= 8 ? PEER_RING_BYTES : PEER_RING_BYTES_MANY;
    this.#peerBytes = peerBytes;
    for (let i = 0; i < count; i++) {
      this.#slots.push(new WorkerSlot(i, createRing(SCHEDULER_RING_BYTES), createRing(SCHEDULER_RING_BYTES)));
      const row: (SharedArrayBuffer | undefined)[] = [];
      for (let j = 0; j < count; j++) row.push(i === j ? undefined : createRing(peerBytes));
      this.#peerRings.push(row);
    }
    driver.setHandler(this);
  }

  /** Starts worker 0 on the configured ports (0 = any), then the rest on the same ports (SO_REUSEPORT). */
  async start(config: EdgeConfig, logLevel: string): Promise<PoolPorts> {
    this.#config = config;
    this.#logLevel = logLevel;
    this.keys.setLimits(config.auth?.apiKeys ?? [], performance.now());
    // Restart-only (refresh/mutability.ts): the bound the workers are started with.
    this.#responses = new StoredResponses(config.limits.storedResponses);
    const first = await this.#spawn(0, config, config.http.port, config.grpc.port, logLevel);
    this.#ports = first;
    await Promise.all(this.#slots.slice(1).map((slot) => this.#spawn(slot.index, config, first.httpPort, first.grpcPort, logLevel)));
    return first;
  }

  async #spawn(index: number, config: EdgeConfig, httpPort: number, grpcPort: number, logLevel: string): Promise<PoolPorts> {
    const slot = this.#slots[index];
    const data: IoWorkerData = {
      index,
      count: this.count,
      config,
      tls: this.#tls,
      httpPort,
      grpcPort,
      logLevel,
      logPretty: writesPretty(this.#logger),
      toMain: slot.toMain,
      fromMain: slot.fromMain,
      toPeer: this.#peerRings[index],
      fromPeer: this.#peerRings.map((row) => row[index]),
      flags: this.flags.buffer as SharedArrayBuffer,
      responses: this.#responses.unexpired(),
      tenantSecret: tenantSecret(),
      modelsCreated: this.#modelsCreated,
    };
    const worker = new Worker(this.#script, { workerData: data, name: `edge-io-${index}` });
    slot.worker = worker;
    // A new worker's run wire starts with no names and no open slots.
    slot.runs = new RunWireDecoder();
    worker.on('message', (message: ControlReply | WorkerEvent | AffinityMessage | AffinityAsk | A2ARelayMessage | RunWireBatch) => this.#onMessage(message, index));
    worker.on('error', (err) => this.#logger.error({ err, worker: index }, 'I/O worker failed'));
    worker.on('exit', (code) => {
      slot.exited = true;
      this.#retireMetrics(index);
      this.keys.releaseWorker(index, ID_STRIDE);
      // Node delivers a worker's messages before its exit: every report it sent is in by now.
      this.#finishOpenRuns(slot);
      // Its calls get no answer now (a refresh waiting on it too), closing or not.
      this.#rejectCalls(index);
      if (this.#closed) return;
      this.#logger.error({ worker: index, code }, 'I/O worker exited');
      if (slot.started) void this.#recover(slot);
    });
    slot.onRecord = (offset, length) => this.#fromWorker(slot, offset, length);
    void drainLoop(slot.consumer, slot.onRecord, (err) => this.#logger.error({ err, worker: index }, 'scheduler record failed'));
    const ports = await readyOf(worker, index);
    slot.started = true;
    return ports;
  }

  // --- control (cold path) ------------------------------------------------------

  /** Control calls still waiting for `index`'s answer (tests: which part of a scrape is still out). */
  openCallsTo(index: number): number {
    let open = 0;
    for (const call of this.#calls.values()) if (call.worker === index) open++;
    return open;
  }

  /** Sends a request to one worker and resolves with its reply; past `timeoutMs` (0 = none) it rejects and a late reply is dropped. */
  call<T>(index: number, request: ControlCall, timeoutMs = 0): Promise<T> {
    const slot = this.#slots[index];
    if (slot.worker === undefined || slot.exited) return Promise.reject(new Error(`worker ${index} is not running`));
    const id = this.#nextCall++;
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = (): void => {
        if (timer !== undefined) clearTimeout(timer);
      };
      this.#calls.set(id, {
        worker: index,
        resolve: (value: unknown) => {
          settle();
          resolve(value as T);
        },
        reject: (err: Error) => {
          settle();
          reject(err);
        },
      });
      if (timeoutMs > 0) {
        timer = setTimeout(() => {
          this.#calls.delete(id);
          this.#unresponsive.add(slot);
          reject(new CallTimeout(index, request.type, timeoutMs));
        }, timeoutMs);
        timer.unref();
      }
      slot.worker?.postMessage({ ...request, id });
    });
  }

  /**
   * The same request to every running worker (one being replaced has nothing to answer); `each` sees every
   * answer with the slot that gave it. `timeoutMs` (0 = none): a worker that has not answered by then is left
   * out (logged; `silent` hears of it), so one wedged worker cannot hold up the answer of every other.
   */
  callAll<T>(request: ControlCall, each?: (slot: WorkerSlot, answer: T) => void, timeoutMs = 0, silent?: (slot: WorkerSlot) => void, only?: (slot: WorkerSlot) => boolean): Promise<T[]> {
    // A worker that exits during the call, or whose replacement is not spawned yet, has nothing to
    // answer: left out, not a failure of the whole call (status, metrics and a drain go on).
    const live = this.#slots.filter((slot) => !slot.exited && slot.worker !== undefined && (only === undefined || only(slot)));
    const ask = (slot: WorkerSlot): Promise<T | typeof GONE | typeof SILENT> =>
      this.call<T>(slot.index, request, timeoutMs).then(
        (answer) => {
          each?.(slot, answer);
          return answer;
        },
        (err: unknown) => {
          if (slot.exited) return GONE;
          if (!(err instanceof CallTimeout)) return Promise.reject(err);
          this.#logger.warn({ worker: slot.index, call: request.type, timeoutMs }, 'I/O worker did not answer in time: left out of this answer');
          silent?.(slot);
          return SILENT;
        },
      );
    return Promise.all(live.map(ask)).then((answers) => answers.filter((answer): answer is Awaited<T> => answer !== GONE && answer !== SILENT));
  }

  #rejectCalls(worker: number): void {
    for (const [id, call] of this.#calls) {
      if (call.worker !== worker) continue;
      this.#calls.delete(id);
      call.reject(new Error(`worker ${worker} exited`));
    }
  }

  /**
   * A worker exited on its own (a fault). Its nodes' connections are over
   * (their sockets died with it): disconnected, their lanes elsewhere fenced,
   * so the agents reconnect to the others. Its requests' leases are released
   * wherever their nodes live, and its queued requests dropped. Then it runs
   * again on fresh rings (the old ones may hold records for requests that
   * are gone), the other workers switch their peer links to the new ones
   * (cancelling tunnels the dead one's clients had on their nodes), and its
   * listener rejoins the shared ports.
   */
  async #recover(slot: WorkerSlot): Promise<void> {
    const index = slot.index;
    for (const [nodeId, place] of [...this.#places]) {
      if (place.worker === index) {
        this.#disconnect(nodeId, place.generation);
        // The worker never said so: the edge's session view and the event stream hear it here.
        this.#sessionGone(nodeId, place.generation, index);
      } else for (let at = place.lanes.indexOf(index); at >= 0; at = place.lanes.indexOf(index)) place.lanes.splice(at, 1);
    }
    const forgotten = this.#driver.forgetRequests((requestId) => requestId % ID_STRIDE === index);
    slot.consumer.close(); // its loop drains what the worker left, ignoring what would start work
    slot.producer.close();
    const fresh = new WorkerSlot(index, createRing(SCHEDULER_RING_BYTES), createRing(SCHEDULER_RING_BYTES));
    this.#slots[index] = fresh;
    const replacing: Promise<unknown>[] = [];
    for (let j = 0; j < this.count; j++) {
      if (j === index) continue;
      const toPeer = createRing(this.#peerBytes);
      const fromPeer = createRing(this.#peerBytes);
      this.#peerRings[index][j] = toPeer;
      this.#peerRings[j][index] = fromPeer;
      replacing.push(this.call(j, { type: 'replacePeer', peer: index, toPeer: fromPeer, fromPeer: toPeer }).catch(() => undefined));
    }
    this.#logger.warn({ worker: index, releasedLeases: forgotten.leases, droppedQueued: forgotten.queued }, 'I/O worker cleaned up; starting a new one');
    await Promise.all(replacing);
    const config = this.#config;
    const ports = this.#ports;
    if (this.#closed || config === undefined || ports === undefined) return;
    // Draining: a replacement would listen on the client port again (the others closed theirs) and,
    // never told to drain, hold the new connections the drain refuses; the others finish the drain.
    if (Atomics.load(this.flags, DRAIN_FLAG) === 1) {
      this.#logger.warn({ worker: index }, 'I/O worker not replaced: the edge is draining');
      return;
    }
    try {
      await this.#spawn(index, config, ports.httpPort, ports.grpcPort, this.#logLevel);
      this.#logger.info({ worker: index }, 'I/O worker replaced');
    } catch (err) {
      this.#logger.error({ err, worker: index }, 'I/O worker could not be replaced');
    }
  }

  // --- DataPath: the edge's calls, fanned out to the workers --------------------

  get workers(): number {
    return this.count;
  }

  /** Each worker swaps the snapshot in one step when the message arrives, so its requests see old or new; resolves once all have. */
  async setConfig(config: EdgeConfig): Promise<void> {
    this.#config = config;
    // The rates change now, not at each key's next admission: the time until then refills at the new rate.
    this.keys.setLimits(config.auth?.apiKeys ?? [], performance.now());
    // A worker being replaced starts from #config: it has nothing to answer here.
    await this.callAll({ type: 'setConfig', config });
  }

  async setCertificates(tls: TlsMaterial): Promise<void> {
    // A worker that replaces one later starts on it.
    this.#tls = tls;
    await this.callAll({ type: 'setCertificates', tls });
  }

  notifyNode(nodeId: string, changedPaths: readonly string[], configVersion: number): boolean {
    const place = this.#places.get(nodeId);
    if (place === undefined) return false;
    void this.call(place.worker, { type: 'notifyNode', nodeId, changedPaths, configVersion }).catch(() => undefined);
    return true;
  }

  /**
   * The worker holding the node's first stream sends it and waits; that worker enforces the deadline,
   * and a worker that stops answering is given up on the control calls' margin after it.
   */
  nodeCommand(nodeId: string, kind: string, args: Readonly<Record<string, string>>, deadlineMs: number): Promise<NodeCommandResult> {
    const place = this.#places.get(nodeId);
    if (place === undefined) return Promise.resolve({ node: nodeId, kind, status: 'not_connected', message: `node ${nodeId} has no connection on this edge` });
    return this.call<NodeCommandResult>(place.worker, { type: 'nodeCommand', nodeId, kind, args, deadlineMs }, deadlineMs + CONTROL_CALL_TIMEOUT_MS).catch((err: Error) => ({ node: nodeId, kind, status: 'failed' as const, message: err.message }));
  }

  /** Every worker holding a stream of the node retires its streams; see retireLanes for the order. */
  retireNode(nodeId: string, graceMs: number, reason: string): boolean {
    const place = this.#places.get(nodeId);
    if (place === undefined) return false;
    const holdAnchor = place.lanes.some((worker) => worker !== place.worker);
    if (holdAnchor) place.retiring = { deadline: performance.now() + graceMs, reason };
    for (const worker of new Set([place.worker, ...place.lanes])) void this.call(worker, { type: 'retireNode', nodeId, graceMs, reason, holdAnchor }).catch(() => undefined);
    return true;
  }

  /** Run ids do not say which worker took the client: ask each; at most one holds it. */
  async cancelRun(runId: string): Promise<boolean> {
    return (await this.callAll<boolean>({ type: 'cancelRun', runId }, undefined, CONTROL_CALL_TIMEOUT_MS)).some(Boolean);
  }

  inspect(): Promise<readonly PlaneInspection[]> {
    return this.callAll<PlaneInspection>({ type: 'inspect' }, undefined, CONTROL_CALL_TIMEOUT_MS);
  }

  beginDrain(): void {
    Atomics.store(this.flags, DRAIN_FLAG, 1);
  }

  /** Each worker drains its own listener; the grace runs in parallel. */
  async drain(graceMs: number): Promise<number> {
    // The grace is each worker's to keep; one that cannot answer past it (and a margin) is ended by close().
    return (await this.callAll<number>({ type: 'drain', graceMs }, undefined, graceMs + CONTROL_CALL_TIMEOUT_MS)).reduce((sum, n) => sum + n, 0);
  }

  /**
   * Every worker's registry, and what exited workers had counted: without
   * that a worker's death would take its totals out of every counter and
   * histogram, a drop Prometheus reads as a counter reset (rate() jumps).
   * What it counted after its last scrape is lost; the totals still only grow.
   */
  async metricParts(): Promise<unknown[]> {
    const answered: [WorkerSlot, MetricJson[]][] = [];
    await this.callAll<MetricJson[]>(
      { type: 'metrics' },
      (slot, part) => {
        answered.push([slot, part]);
        // Kept only while that worker still holds the slot (a late answer of an exited one is not).
        if (!slot.exited && this.#slots[slot.index] === slot) this.#lastMetrics[slot.index] = part;
      },
      CONTROL_CALL_TIMEOUT_MS,
      (slot) => {
        // Its last scrape stands in: left out, its counters would drop, which Prometheus reads as a reset.
        const last = this.#lastMetrics[slot.index];
        if (last !== undefined) answered.push([slot, last]);
      },
    );
    // In worker order, not the order they answered (metric-fold.ts says why). A worker that answered, then
    // exited before the others did: its answer is among the retired parts now.
    const live: MetricJson[][] = [];
    for (const [slot, part] of answered) if (!slot.exited) live[slot.index] = part;
    return this.#retiredMetrics.ordered(live, this.#slots.length);
  }

  /** Keeps what an exited worker's last scrape counted (gauges were its present: they go with it). */
  #retireMetrics(index: number): void {
    const last = this.#lastMetrics[index];
    this.#lastMetrics[index] = undefined;
    if (last !== undefined) this.#retiredMetrics.retire(index, last as unknown as FoldableMetric[]);
  }

  /** Which worker holds the node's current session, if any. */
  placeOf(nodeId: string): NodePlace | undefined {
    return this.#places.get(nodeId);
  }

  setEventsActive(active: boolean): void {
    Atomics.store(this.flags, EVENTS_FLAG, active ? 1 : 0);
  }

  keyLoad(): readonly KeyLoadEntry[] {
    return this.keys.load(performance.now());
  }

  ringUsage(): { name: string; used: number; capacity: number }[] {
    const out: { name: string; used: number; capacity: number }[] = [];
    for (const slot of this.#slots) {
      out.push({ name: `worker-${slot.index}->main`, ...slot.consumer.usage() });
      out.push({ name: `main->worker-${slot.index}`, ...slot.producer.usage() });
    }
    return out;
  }

  /** A worker's turn of run reports, back to RunEvents for the run records (and the bus). */
  #onRuns(batch: RunWireBatch, from: number): void {
    const slot = this.#slots[from];
    if (slot.runs.broken) return;
    let events: RunEvent[];
    try {
      events = slot.runs.decode(batch);
    } catch (err) {
      // An encoder bug, not client input. Requests and leases are unaffected; the run records miss this worker's reports until it is replaced.
      this.#logger.error({ err, worker: from }, 'run reports from an I/O worker could not be read; its later reports are dropped until it is replaced');
      return;
    }
    this.#onEvent({ type: 'runs', events });
  }

  /** A worker that exited finished none of the runs it still held (and its last 2 ms of reports are gone): the run records close them. */
  #finishOpenRuns(slot: WorkerSlot): void {
    const open = slot.runs.openRuns();
    if (open.length === 0) return;
    const now = Date.now();
    const events: RunEvent[] = open.map((run) => ({
      type: 'run.finished',
      runId: run.runId,
      requestId: run.requestId,
      model: run.model,
      node: null,
      provider: null,
      status: WORKER_EXITED_STATUS,
      outcome: 'worker_exited',
      totalMs: Math.max(0, now - run.queuedAt),
      queueMs: 0,
      bytesOut: 0,
      at: now,
      tokens: null,
      error: `I/O worker ${slot.index} exited while serving it`,
    }));
    this.#onEvent({ type: 'runs', events, workerExited: true });
  }

  #onMessage(message: ControlReply | WorkerEvent | AffinityMessage | AffinityAsk | A2ARelayMessage | RunWireBatch, from: number): void {
    if (message.type === 'runWire') {
      this.#onRuns(message, from);
      return;
    }
    if (message.type === 'event' || message.type === 'runs') {
      this.#onEvent(message);
      return;
    }
    if (message.type === 'a2a') {
      // To the worker that holds the task (or back to the one that asked); a gone worker's tasks are gone with it.
      const slot = this.#slots[message.to];
      if (slot !== undefined && !slot.exited && slot.worker !== undefined) {
        slot.worker.postMessage(message);
      } else if (message.op === 'get' || message.op === 'cancel' || message.op === 'subscribe' || message.op === 'history' || message.op === 'remember') {
        // No such worker (an id from another layout, or it exited): the asker hears at once.
        const error = { name: 'TaskNotFoundError', message: `task ${message.taskId ?? ''} is not known here (its worker is gone)` };
        this.#slots[from]?.worker?.postMessage({ type: 'a2a', to: from, from: message.to, call: message.call, op: 'reply', error } satisfies A2ARelayMessage);
      }
      return;
    }
    if (message.type === 'affinity') {
      if (message.stored === null) this.#responses.forget(message.responseId);
      else if (message.expiresAt !== undefined) this.#responses.touch(message.responseId);
      else this.#responses.remember(message.responseId, message.stored);
      // Every other worker learns where the response lives (id 0: no reply wanted).
      for (const slot of this.#slots) {
        if (slot.index !== from && !slot.exited) slot.worker?.postMessage({ id: 0, type: 'affinity', responseId: message.responseId, stored: message.stored, expiresAt: message.expiresAt });
      }
      return;
    }
    if (message.type === 'affinityAsk') {
      // Once every other worker answered a call posted now: a message one of them posted before the asker's
      // client even sent its request may still be unread here (the ports are read in their own order, not
      // the order of posting; a turn's wait was not enough: 0.3-0.6 ms late under load), and each port is
      // read in order, so its answer comes after it.
      const answer = (): void => {
        const slot = this.#slots[from];
        if (slot === undefined || slot.exited) return;
        const entry = this.#responses.lookup(message.responseId);
        const stored = entry === undefined ? null : { alias: entry.alias, providerId: entry.providerId, nodeId: entry.nodeId, owner: entry.owner };
        slot.worker?.postMessage({ id: 0, type: 'affinity', responseId: message.responseId, stored, expiresAt: entry?.expiresAt, call: message.call });
      };
      this.callAll({ type: 'sync' }, undefined, CONTROL_CALL_TIMEOUT_MS, undefined, (slot) => slot.index !== from).then(answer, answer);
      return;
    }
    if (message.type !== 'reply') return;
    // Any answer says the worker runs its loop again.
    this.#unresponsive.delete(this.#slots[from]);
    const call = this.#calls.get(message.id);
    if (call === undefined) return;
    this.#calls.delete(message.id);
    if (message.error !== undefined) call.reject(new Error(message.error));
    else call.resolve(message.value);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      // A worker that cannot close itself in time, or has not answered since a call timed out (asking would
      // only wait that long again), is terminated with the rest below.
      await this.callAll({ type: 'close' }, undefined, CONTROL_CALL_TIMEOUT_MS, undefined, (slot) => !this.#unresponsive.has(slot));
    } catch {
      // a worker that is gone has nothing left to close
    }
    this.#closed = true;
    for (const slot of this.#slots) {
      slot.consumer.close();
      slot.out.commit();
      slot.producer.close();
    }
    await Promise.all(this.#slots.map((slot) => (slot.exited ? undefined : slot.worker?.terminate())));
  }

  // --- records from workers (hot path) -------------------------------------------

  /**
   * A key takes a slot of its count (refused only at a limit). At the limit, another worker's
   * ring may still hold a release that happened before this request was even
   * sent: a client that read its response (the worker commits the release
   * before the response's last byte leaves) and sent the next request at once,
   * on a connection another worker owns. Each ring has its own drain loop, so
   * this one can be read first: the other rings are read up to now before
   * the key is refused. Never nested (a refusal met while reading them is
   * final), and never the ring being read, which is on the stack.
   */
  #acquireKey(slot: WorkerSlot, requestId: number, name: string, limit: number): boolean {
    if (this.keys.acquire(requestId, name, limit)) return true;
    if (!this.#readOthers(slot)) return false;
    return this.keys.acquire(requestId, name, limit);
  }

  /** The key's tokens, as #acquireKey its slot: a release in another ring may give back what a refusal lacks. */
  #reserveKeyTokens(slot: WorkerSlot, requestId: number, name: string, estimate: number, nowMs: number): number {
    const waitMs = this.keys.reserveTokens(requestId, name, estimate, nowMs);
    if (waitMs === 0 || !this.#readOthers(slot)) return waitMs;
    return this.keys.reserveTokens(requestId, name, estimate, nowMs);
  }

  /**
   * Reads every other worker's ring up to now, before a refusal for want of
   * room (a key at its limit, an alias with no free slot and a full queue):
   * each ring has its own drain loop, so a release committed before this
   * admit may still wait behind it. False when already reading them (the
   * records read meanwhile decide as they come).
   */
  #readOthers(slot: WorkerSlot): boolean {
    if (this.#readingOthers) return false;
    this.#readingOthers = true;
    try {
      for (const other of this.#slots) {
        if (other === slot || other.onRecord === undefined) continue;
        try {
          other.consumer.drainInPlace(other.onRecord);
        } catch (err) {
          this.#logger.error({ err, worker: other.index }, 'scheduler record failed');
        }
      }
    } finally {
      this.#readingOthers = false;
    }
    return true;
  }

  #fromWorker(slot: WorkerSlot, offset: number, length: number): void {
    const r = slot.record;
    if (!slot.reader.decode(offset, length, r)) return;
    // Left in the ring by a worker that exited: what ends work still counts; nothing new may start for it.
    if (slot.exited && startsWork(r.kind)) return;
    const driver = this.#driver;
    const reader = slot.reader;
    switch (r.kind) {
      case RecordKind.admit: {
        // A keyed request (providerId = the key's name, generation = its limit, 0 = none) takes its slot first,
        // then (rate = its requests per minute, 0 = none) a token of its rate: refused for either, it takes neither.
        if (r.providerId !== 0) {
          const key = reader.nameOf(r.providerId) ?? '';
          if (!this.#acquireKey(slot, r.requestId, key, r.generation)) {
            this.#rejectKey(r.requestId, key, 'too_many_concurrent_requests', 1, performance.now());
            return;
          }
          const now = performance.now();
          const tokenWaitMs = this.#reserveKeyTokens(slot, r.requestId, key, r.value, now);
          if (tokenWaitMs > 0) {
            this.keys.release(r.requestId, 0);
            this.#rejectKey(r.requestId, key, 'token_limit_exceeded', retryAfterSecOf(tokenWaitMs), now);
            return;
          }
          const waitMs = r.rate === 0 ? 0 : this.keys.takeRate(key, r.rate, now);
          if (waitMs > 0) {
            // Given back: refused, it takes neither.
            this.keys.release(r.requestId, 0);
            this.#rejectKey(r.requestId, key, 'rate_limit_exceeded', retryAfterSecOf(waitMs), now);
            return;
          }
        }
        const alias = reader.nameOf(r.nameId) ?? '';
        const fairness = decodeFairness(r);
        const request = { requestId: r.requestId, alias, estimatedTokens: r.value, directNodeId: reader.nameOf(r.nodeId), sessionKey: r.session, api: r.worker as ApiKind, pinnedProviderId: reader.nameOf(r.extraId), ...fairness };
        // With the request: a slot free elsewhere does not serve one bound to its session's node or its stored response's provider.
        if (this.#slots.length > 1 && driver.scheduler.saturated(alias, fairness.priority, request)) this.#readOthers(slot);
        driver.admit(request);
        return;
      }
      case RecordKind.cancel:
        driver.cancel(r.requestId);
        return;
      case RecordKind.keyRelease:
        this.keys.release(r.requestId, r.value);
        return;
      case RecordKind.release:
        const reason = releaseReasonOf(r.code);
        // value: the Retry-After (-1 = none) of an overloaded answer, else the tokens the response reported.
        if (reason === 'overloaded') driver.release(r.leaseId, reason, 0, r.value < 0 ? undefined : r.value);
        else driver.release(r.leaseId, reason, r.value);
        return;
      case RecordKind.requeue:
        driver.requeue(r.leaseId, { requestId: r.requestId, alias: reader.nameOf(r.nameId) ?? '', estimatedTokens: r.value, directNodeId: reader.nameOf(r.nodeId), sessionKey: r.session, api: r.worker as ApiKind, pinnedProviderId: reader.nameOf(r.extraId) }, reader.nameOf(r.providerId) ?? '', r.code === 1, r.code === 2 ? { retryAfterMs: r.generation === 0 ? undefined : r.generation - 1 } : undefined, r.code === 3 ? 'leaving' : r.code === 4 ? 'lost' : undefined);
        return;
      case RecordKind.stale:
        driver.reportStale(r.requestId, r.leaseId);
        return;
      case RecordKind.announce: {
        const list = slot.announced.get(r.requestId);
        const providerId = reader.nameOf(r.providerId) ?? '';
        if (list === undefined) slot.announced.set(r.requestId, [providerId]);
        else list.push(providerId);
        if ((r.code & ANNOUNCED_ENDPOINTS) !== 0) slot.announcedEndpoints(r.requestId).set(providerId, r.code & ~(ANNOUNCED_ENDPOINTS | ANNOUNCED_UNHEALTHY));
        if ((r.code & ANNOUNCED_UNHEALTHY) !== 0) {
          const failing = slot.unhealthy.get(r.requestId);
          if (failing === undefined) slot.unhealthy.set(r.requestId, new Set([providerId]));
          else failing.add(providerId);
        }
        return;
      }
      case RecordKind.connect: {
        if (r.code === 1) {
          this.#joinLane(slot, r.requestId, reader.nameOf(r.nodeId) ?? '', r.generation);
          return;
        }
        const announced = slot.announced.get(r.requestId) ?? [];
        slot.announced.delete(r.requestId);
        const endpoints = slot.endpoints.get(r.requestId);
        slot.endpoints.delete(r.requestId);
        const unhealthy = slot.unhealthy.get(r.requestId);
        slot.unhealthy.delete(r.requestId);
        this.#connect(slot, r.requestId, reader.nameOf(r.nodeId) ?? '', announced, endpoints, r.code === 2, unhealthy);
        return;
      }
      case RecordKind.disconnect: {
        const nodeId = reader.nameOf(r.nodeId) ?? '';
        if (r.code === 1) this.#leaveLane(slot, nodeId, r.generation);
        else this.#disconnect(nodeId, r.generation);
        return;
      }
      case RecordKind.health:
        driver.setProviderHealth(reader.nameOf(r.nodeId) ?? '', reader.nameOf(r.providerId) ?? '', r.code === 1, r.generation);
        return;
      case RecordKind.announced: {
        const endpoints = (r.code & ANNOUNCED_ENDPOINTS) !== 0 ? r.code & ~(ANNOUNCED_ENDPOINTS | ANNOUNCED_AGAIN) : undefined;
        driver.setAnnounced(reader.nameOf(r.nodeId) ?? '', reader.nameOf(r.providerId) ?? '', (r.code & ANNOUNCED_AGAIN) !== 0, endpoints, r.generation);
        return;
      }
      case RecordKind.draining:
        driver.setDraining(reader.nameOf(r.nodeId) ?? '', r.code === 1, r.generation);
        return;
      case RecordKind.queuePosition: {
        const at = driver.scheduler.queuePosition(r.requestId, performance.now());
        const reply = this.#scratch.reset(RecordKind.queuePosition);
        reply.requestId = r.requestId;
        reply.generation = at?.position ?? 0;
        reply.value = at?.etaMs ?? -1;
        slot.out.send(reply);
        return;
      }
      default:
        throw new Error(`scheduler ring: unexpected record kind ${r.kind} from worker ${slot.index}`);
    }
  }

  /**
   * Connect and answer in one step, before any grant the connect produced
   * goes out: the answer is on the worker's FIFO ring ahead of them. A
   * session of the node's previous generation is fenced where it lives.
   */
  #connect(slot: WorkerSlot, serial: number, nodeId: string, announced: readonly string[], endpoints: ReadonlyMap<string, number> | undefined, draining: boolean, unhealthy: ReadonlySet<string> | undefined): void {
    this.#driver.deferDecisions(() => {
      const previous = this.#places.get(nodeId);
      const connected = this.#driver.connect(nodeId, announced, endpoints, draining, unhealthy);
      const r = this.#scratch.reset(RecordKind.connected);
      r.requestId = serial;
      r.generation = connected?.generation ?? 0;
      slot.out.send(r, nodeId);
      if (connected === undefined) return;
      this.#places.set(nodeId, { worker: slot.index, generation: connected.generation, lanes: [], next: 0 });
      if (previous !== undefined && previous.generation !== connected.generation) this.#fenceEverywhere(nodeId, previous);
    });
  }

  /** A session that ended with its worker, reported as the worker would have reported it. */
  #sessionGone(nodeId: string, generation: number, worker: number): void {
    const session = { nodeId, generation, agentVersion: '', remoteAddress: '', connectedAtMs: 0, worker };
    this.#onEvent({ type: 'event', event: { type: 'node.disconnected', node: nodeId, generation, reason: `its I/O worker ${worker} exited` }, session, gone: true });
  }

  /** The anchor stream of (node, generation) ended: the connection is over, and its lanes are closed where they live. */
  #disconnect(nodeId: string, generation: number): void {
    const place = this.#places.get(nodeId);
    if (place !== undefined && place.generation === generation) {
      this.#places.delete(nodeId);
      if (place.lanes.length > 0) this.#fenceEverywhere(nodeId, place);
    }
    this.#driver.disconnect(nodeId, generation);
  }

  /**
   * A lane may join only the node's current connection, and only while it has
   * fewer than MAX_NODE_STREAMS streams: its lanes may live on every worker, so
   * only here are they all counted. The answer goes first on the lane's FIFO ring.
   */
  #joinLane(slot: WorkerSlot, serial: number, nodeId: string, generation: number): void {
    const place = this.#places.get(nodeId);
    const current = place !== undefined && place.generation === generation;
    const full = current && 1 + place.lanes.length >= MAX_NODE_STREAMS;
    if (current && !full) place.lanes.push(slot.index);
    const r = this.#scratch.reset(RecordKind.connected);
    r.requestId = serial;
    r.generation = current && !full ? generation : 0;
    r.code = full ? 1 : 0;
    slot.out.send(r, nodeId);
  }

  #leaveLane(slot: WorkerSlot, nodeId: string, generation: number): void {
    const place = this.#places.get(nodeId);
    if (place === undefined || place.generation !== generation) return;
    const at = place.lanes.indexOf(slot.index);
    if (at >= 0) place.lanes.splice(at, 1);
    const retiring = place.retiring;
    if (retiring !== undefined && !place.lanes.some((worker) => worker !== place.worker)) {
      // The last lane elsewhere closed, idle: nothing left to hold the anchor for until the grace's end.
      place.retiring = undefined;
      const graceMs = Math.max(0, retiring.deadline - performance.now());
      void this.call(place.worker, { type: 'retireNode', nodeId, graceMs, reason: retiring.reason, holdAnchor: false }).catch(() => undefined);
    }
  }

  /** Sends fence(generation) to every worker holding a lane of that connection (lane 0's included). */
  #fenceEverywhere(nodeId: string, place: NodePlace): void {
    const workers = new Set([place.worker, ...place.lanes]);
    for (const worker of workers) {
      if (this.#slots[worker].exited) continue;
      const fence = this.#scratch.reset(RecordKind.fence);
      fence.generation = place.generation;
      this.#slots[worker].out.send(fence, nodeId);
    }
  }

  /** The worker a grant's tunnel goes through: the client's own when it holds a lane of the node, else the next lane in turn. */
  #laneWorker(place: NodePlace, clientWorker: number): number {
    const lanes = place.lanes;
    if (lanes.length === 0 || place.worker === clientWorker) return place.worker;
    if (lanes.includes(clientWorker)) return clientWorker;
    const turn = place.next++ % (lanes.length + 1);
    return turn === 0 ? place.worker : lanes[turn - 1];
  }

  // --- DecisionHandler: the scheduler's answers, to the request's worker -----------

  #slotOf(requestId: number): WorkerSlot {
    return this.#slots[requestId % ID_STRIDE];
  }

  onGrant(grant: Grant): void {
    const r = this.#scratch.reset(RecordKind.grant);
    r.requestId = grant.requestId;
    r.leaseId = grant.leaseId;
    r.generation = grant.generation;
    r.value = grant.queuedMs;
    // What the request's key has left (its x-ratelimit-* headers): aux says which of the two are there.
    const levels = this.keys.levelsOf(grant.requestId);
    if (levels !== undefined) encodeKeyLevels(r, levels);
    const place = this.#places.get(grant.nodeId);
    r.worker = place === undefined ? 0 : this.#laneWorker(place, grant.requestId % ID_STRIDE);
    this.#slotOf(grant.requestId).out.send(r, grant.nodeId, grant.providerId, grant.servedModel, grant.sessionMovedFrom);
  }

  onReject(requestId: number, code: AdmissionRejectCode, retryAfterSec: number, retryAfterMs?: number, keyLevels?: KeyLevels): void {
    const r = this.#scratch.reset(RecordKind.reject);
    r.requestId = requestId;
    r.code = rejectCodeCode(code);
    r.value = retryAfterSec;
    r.aux = retryAfterMs === undefined ? 0 : Math.min(0xffffffff, Math.max(0, Math.round(retryAfterMs)));
    // A key's own refusal carries what the key has left instead (its x-ratelimit-* headers); it has no Retry-After in ms.
    if (keyLevels !== undefined) encodeKeyLevels(r, keyLevels);
    this.#slotOf(requestId).out.send(r);
  }

  /** A key's own limit refused the admission: the reply carries what the key has left (its x-ratelimit-* headers). */
  #rejectKey(requestId: number, key: string, code: KeyRefusalCode, retryAfterSec: number, nowMs: number): void {
    this.onReject(requestId, code, retryAfterSec, undefined, this.keys.levelsOfKey(key, nowMs));
  }

  onRequeueRefused(requestId: number): void {
    const r = this.#scratch.reset(RecordKind.requeued);
    r.requestId = requestId;
    this.#slotOf(requestId).out.send(r);
  }

  onRequeueAccepted(requestId: number): void {
    const r = this.#scratch.reset(RecordKind.requeued);
    r.requestId = requestId;
    r.code = 1;
    this.#slotOf(requestId).out.send(r);
  }

  onStaleChecked(requestId: number, leaseId: number, current: boolean): void {
    const r = this.#scratch.reset(RecordKind.staleChecked);
    r.requestId = requestId;
    r.leaseId = leaseId;
    r.code = current ? 1 : 0;
    this.#slotOf(requestId).out.send(r);
  }
}

/** Records that would admit, re-admit or connect on behalf of their worker. */
function startsWork(kind: number): boolean {
  return kind === RecordKind.admit || kind === RecordKind.requeue || kind === RecordKind.stale || kind === RecordKind.connect || kind === RecordKind.announce;
}

/**
 * The worker's ports once it says it is ready. A control call that reached
 * it while it booted (a status poll, a scrape) may be answered first: only
 * `ready`, a failed start (reply 0) or its end decide.
 */
function readyOf(worker: Worker, index: number): Promise<PoolPorts> {
  return new Promise<PoolPorts>((resolve, reject) => {
    const settle = (): void => {
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
    const onMessage = (message: ControlReply | { readonly type?: unknown }): void => {
      if (message.type === 'ready') {
        settle();
        const { httpPort, grpcPort } = (message as Extract<ControlReply, { type: 'ready' }>).value;
        resolve({ httpPort, grpcPort });
      } else if (message.type === 'reply' && (message as Extract<ControlReply, { type: 'reply' }>).id === 0) {
        settle();
        const reply = message as Extract<ControlReply, { type: 'reply' }>;
        // A port in use or a file it cannot read is the operator's to fix: its message names the config key.
        reject(reply.startError === true ? new StartError(reply.error ?? 'no reason given') : new Error(`I/O worker ${index} did not start: ${reply.error ?? 'no reason given'}`));
      }
    };
    const onError = (err: Error): void => {
      settle();
      reject(err);
    };
    const onExit = (code: number): void => {
      settle();
      reject(new Error(`I/O worker ${index} exited (code ${code}) before it was ready`));
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
  });
}
