// A small piscina pool for the heavy, rare part of request inspection:
// bodies of limits.offload_bytes and more are validated (and their prompt
// token-counted) off the event loop that owns the connection, so one 8 MB
// upload does not stall every other connection of that loop for ~10 ms.
// A per-request piscina.run costs ~15-70 µs of the caller's CPU, so small
// bodies stay inline (ClientServer.proxy).
//
// One pool per event loop that owns client connections (the main thread
// with workers.count 0, else each I/O worker), created on the first large
// body; its threads start on demand and exit after IDLE_TIMEOUT_MS idle.
import { availableParallelism } from 'node:os';
import { isMarkedAsUntransferable } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { inspectBody, type InspectResult } from '../http/inspect.js';
import type { InspectTask, InspectTaskReply } from './inspect-task.js';

const TASK_FILE = new URL('./inspect-task.js', import.meta.url).href;
const IDLE_TIMEOUT_MS = 10_000;

/**
 * Threads per pool: half the cores shared by the `owners` event loops that
 * each have a pool (workers.count, or 1 for the main thread), at least one.
 * The other half stays with the I/O loops and the scheduler.
 */
export function defaultOffloadThreads(owners: number, cores: number = availableParallelism()): number {
  return Math.max(1, Math.floor(cores / 2 / Math.max(1, owners)));
}

export interface OffloadedInspection {
  /** The body to use from now on: the same bytes, back from the pool (the caller's Buffer may be detached). */
  readonly body: Buffer;
  readonly info: InspectResult;
}

export class OffloadPool {
  #pool: Piscina | undefined;
  #closed = false;
  /** completed of the pool close() ended. */
  #completedBeforeClose = 0;

  constructor(readonly maxThreads: number) {}

  /** Inspections the pool finished (tests, status). */
  get completed(): number {
    return this.#pool?.completed ?? this.#completedBeforeClose;
  }

  /** Threads running now. */
  get threads(): number {
    return this.#pool?.threads.length ?? 0;
  }

  /**
   * inspectBody(body, maxDepth) in the pool, plus `inputTokens` on a valid
   * body when countTokens (as batchInputTokens says, against longThreshold, when batchInputs). `body` is moved when it owns its whole
   * ArrayBuffer (fastify's parser allocates one per body this large):
   * afterwards use the returned body only. After close() it runs inline.
   */
  async inspect(body: Buffer, maxDepth: number, countTokens = true, batchInputs = false, longThreshold = Infinity): Promise<OffloadedInspection> {
    if (this.#closed) return { body, info: inspectBody(body, maxDepth) };
    this.#pool ??= new Piscina({ filename: TASK_FILE, minThreads: 0, maxThreads: this.maxThreads, idleTimeout: IDLE_TIMEOUT_MS });
    const byteLength = body.length;
    const buffer = movableBuffer(body);
    const task: InspectTask = { buffer, byteLength, maxDepth, countTokens, batchInputs, longThreshold };
    const reply = (await this.#pool.run(task, { transferList: [buffer] })) as InspectTaskReply;
    return { body: Buffer.from(reply.buffer, 0, byteLength), info: reply.result };
  }

  /** Ends the threads (edge shutdown); later inspections run inline. */
  async close(): Promise<void> {
    this.#closed = true;
    const pool = this.#pool;
    this.#pool = undefined;
    if (pool === undefined) return;
    this.#completedBeforeClose = pool.completed;
    await pool.destroy();
  }
}

/** The body's own ArrayBuffer when it can be moved without copying, else a copy (~0.6 ms a MB). */
function movableBuffer(body: Buffer): ArrayBuffer {
  const whole = body.buffer;
  if (whole instanceof ArrayBuffer && body.byteOffset === 0 && body.byteLength === whole.byteLength && !isMarkedAsUntransferable(whole)) return whole;
  const copy = new ArrayBuffer(body.length);
  body.copy(new Uint8Array(copy));
  return copy;
}
