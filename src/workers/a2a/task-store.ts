// A2A task records of one data path (the main thread's, or one I/O
// worker's): each task is one run through the edge, and its record is what
// GetTask, CancelTask and SubscribeToTask read. Records live in memory only,
// bounded by a2a.max_tasks (the oldest finished go first) and kept for
// a2a.task_ttl_ms after they finish. A task's id names the data path that
// holds it (a2a-w{index}-… or a2a-m-…), so another worker can ask that one
// (a2a-surface.ts relays through the pool). Events fan out to subscribers
// through queues: they arrive at token rate, and an SSE writer whose client
// reads slower waits for its socket to drain while the text deltas queued
// for it merge into one update, so a slow reader costs the answer's text,
// not an event (and its JSON) per token.
import { randomUUID } from 'node:crypto';
import type { Message, Part, StreamResponse, Task, TaskState } from '@a2a-js/sdk';

// TaskState / Role values (the SDK's enums are numbers on the wire objects).
export const SUBMITTED = 1 as TaskState;
export const WORKING = 2 as TaskState;
export const COMPLETED = 3 as TaskState;
export const FAILED = 4 as TaskState;
export const CANCELED = 5 as TaskState;
const ROLE_AGENT = 2 as Message['role'];

export function textPart(text: string): Part {
  return { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' };
}

export function agentMessage(text: string, contextId: string, taskId: string): Message {
  return { messageId: randomUUID(), contextId, taskId, role: ROLE_AGENT, parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [] };
}

/** Which data path made a task id: a worker index, -1 for the main thread, undefined if not ours. */
export function ownerOfTaskId(id: string): number | undefined {
  const match = /^a2a-(?:w(\d{1,2})|m)-/.exec(id);
  if (match === null) return undefined;
  return match[1] === undefined ? -1 : Number(match[1]);
}

/** The text of an update whose artifact is one text part, else undefined. */
function deltaText(event: StreamResponse): string | undefined {
  const payload = event.payload;
  if (payload?.$case !== 'artifactUpdate') return undefined;
  const parts = payload.value.artifact?.parts;
  const content = parts?.length === 1 ? parts[0]?.content : undefined;
  return content?.$case === 'text' ? content.value : undefined;
}

/**
 * `next` appended to the queued `last` as one update (its `append` is
 * last's: a first delta still replaces), or undefined when they do not
 * merge. A new object: the events are shared by every subscriber's queue.
 */
function mergedDelta(last: StreamResponse, next: StreamResponse): StreamResponse | undefined {
  if (next.payload?.$case !== 'artifactUpdate' || !next.payload.value.append || last.payload?.$case !== 'artifactUpdate') return undefined;
  const before = deltaText(last);
  const after = deltaText(next);
  const update = last.payload.value;
  if (before === undefined || after === undefined || update.lastChunk || update.taskId !== next.payload.value.taskId || update.artifact?.artifactId !== next.payload.value.artifact?.artifactId) return undefined;
  const artifact = update.artifact;
  if (artifact === undefined) return undefined;
  // The answer's closing (empty) chunk folds in too: the merged update is then the last chunk.
  return { payload: { $case: 'artifactUpdate', value: { ...update, artifact: { ...artifact, parts: [textPart(before + after)] }, lastChunk: next.payload.value.lastChunk } } };
}

/** A queue one subscriber reads events from (an SSE stream, or a relay to another worker). */
export class EventQueue implements AsyncIterableIterator<StreamResponse> {
  readonly #items: StreamResponse[] = [];
  #waiter: ((result: IteratorResult<StreamResponse>) => void) | undefined;
  #closed = false;
  onClose: (() => void) | undefined;

  push(event: StreamResponse): void {
    if (this.#closed) return;
    const waiter = this.#waiter;
    if (waiter !== undefined) {
      this.#waiter = undefined;
      waiter({ done: false, value: event });
      return;
    }
    const last = this.#items.length === 0 ? undefined : this.#items[this.#items.length - 1];
    const merged = last === undefined ? undefined : mergedDelta(last, event);
    if (merged !== undefined) this.#items[this.#items.length - 1] = merged;
    else this.#items.push(event);
  }

  /** No more events: what is queued is still read, then the iteration ends. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.({ done: true, value: undefined });
    this.onClose?.();
  }

  next(): Promise<IteratorResult<StreamResponse>> {
    const item = this.#items.shift();
    if (item !== undefined) return Promise.resolve({ done: false, value: item });
    if (this.#closed) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve) => {
      this.#waiter = resolve;
    });
  }

  return(): Promise<IteratorResult<StreamResponse>> {
    this.#items.length = 0;
    this.close();
    return Promise.resolve({ done: true, value: undefined });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

/** A client message's size as its JSON text; its text parts alone should it not serialize. */
function storedChars(message: Message): number {
  try {
    return JSON.stringify(message).length;
  } catch {
    let chars = 0;
    for (const part of message.parts) if (part.content?.$case === 'text') chars += part.content.value.length;
    return chars;
  }
}

export class TaskEntry {
  state: TaskState = SUBMITTED;
  /** The run's answer so far. */
  text = '';
  /** The status message of a failed or cancelled task. */
  statusText: string | undefined;
  /** The edge's run id (x-edge-run-id, /admin/runs). */
  runId = '';
  /**
   * The node the run's session (its contextId) moved from, as x-edge-session-moved-from says on /v1/: a cli
   * agent's state there did not come along. '' when it did not move.
   */
  sessionMovedFrom = '';
  updatedAt = new Date().toISOString();
  /** Date.now() after which a finished record may go. */
  expiresAt = Infinity;
  readonly history: Message[];
  readonly artifactId = randomUUID();
  /** Cancels the run (RunSink.cancel; `asked`: by CancelTask, not the caller leaving); set once dispatched. */
  cancelRun: ((asked: boolean) => void) | undefined;
  /** The run answered whole and its turn is on its way to the context's home: too late to cancel. */
  completing = false;
  /** The store's accounting of a finished record (set by TaskStore.add). */
  onFinished: ((entry: TaskEntry) => void) | undefined;
  /** Characters of text the record holds, counted when it finished (0 before). */
  heldChars = 0;
  readonly #subscribers = new Set<EventQueue>();
  readonly done: Promise<void>;
  #resolveDone!: () => void;

  constructor(
    readonly id: string,
    readonly contextId: string,
    readonly agentId: string,
    /** The API key that made it (auth on): only that key sees it. */
    readonly keyName: string | undefined,
    userMessage: Message,
  ) {
    this.history = [{ ...userMessage, contextId, taskId: id }];
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
  }

  get terminal(): boolean {
    return this.state === COMPLETED || this.state === FAILED || this.state === CANCELED;
  }

  /** A queue of this task's events from now on (closed at once when it is over). */
  subscribe(): EventQueue {
    const queue = new EventQueue();
    if (this.terminal) {
      queue.close();
      return queue;
    }
    this.#subscribers.add(queue);
    queue.onClose = () => this.#subscribers.delete(queue);
    return queue;
  }

  working(): void {
    if (this.state !== SUBMITTED) return;
    this.#setState(WORKING);
  }

  delta(text: string): void {
    if (this.terminal) return;
    this.working();
    const append = this.text.length > 0;
    this.text += text;
    this.#publishChunk(text, append, false);
  }

  /** The run ended: completed, or failed with `error`. */
  finish(state: TaskState, statusText: string | undefined, ttlMs: number): void {
    if (this.terminal) return;
    this.statusText = statusText;
    if (state === COMPLETED) {
      this.history.push(agentMessage(this.text, this.contextId, this.id));
      // The answer's artifact is whole: a client that assembles chunks hears so before the final status (an empty append).
      if (this.text.length > 0) this.#publishChunk('', true, true);
    }
    this.#setState(state);
    this.expiresAt = Date.now() + ttlMs;
    // The run is over: the record must not keep it (its sink holds the exchange and its request body, the
    // context's earlier turns included), which no bound on the finished records counts.
    this.cancelRun = undefined;
    for (const queue of [...this.#subscribers]) queue.close();
    this.#subscribers.clear();
    this.#resolveDone();
    this.onFinished?.(this);
  }

  /**
   * What a finished record keeps in memory, in characters: the client's
   * messages as they came (every part, metadata and extensions included: a
   * small text beside a large data part or metadata must count as large),
   * the answer and the status text (the history's answer is `text` itself).
   */
  textChars(): number {
    let chars = this.text.length + (this.statusText?.length ?? 0);
    for (const message of this.history) if (message.role !== ROLE_AGENT) chars += storedChars(message);
    return chars;
  }

  #setState(state: TaskState): void {
    this.state = state;
    this.updatedAt = new Date().toISOString();
    // A move is told where a streaming client reads it: with the status it started working under.
    const metadata = this.sessionMovedFrom === '' ? undefined : { edgeSessionMovedFrom: this.sessionMovedFrom };
    this.#publish({ payload: { $case: 'statusUpdate', value: { taskId: this.id, contextId: this.contextId, status: this.#status(), metadata } } });
  }

  #status(): Task['status'] {
    return { state: this.state, message: this.statusText === undefined ? undefined : agentMessage(this.statusText, this.contextId, this.id), timestamp: this.updatedAt };
  }

  #publishChunk(text: string, append: boolean, lastChunk: boolean): void {
    this.#publish({
      payload: {
        $case: 'artifactUpdate',
        value: { taskId: this.id, contextId: this.contextId, artifact: { artifactId: this.artifactId, name: 'answer', description: '', parts: [textPart(text)], metadata: undefined, extensions: [] }, append, lastChunk, metadata: undefined },
      },
    });
  }

  #publish(event: StreamResponse): void {
    for (const queue of this.#subscribers) queue.push(event);
  }

  #metadata(): Record<string, string> {
    const metadata: Record<string, string> = { agent: this.agentId };
    if (this.runId !== '') metadata.edgeRunId = this.runId;
    if (this.sessionMovedFrom !== '') metadata.edgeSessionMovedFrom = this.sessionMovedFrom;
    return metadata;
  }

  /** The task as the protocol shows it; `historyLength` keeps only the newest messages. */
  snapshot(historyLength?: number): Task {
    const history = historyLength === undefined ? [...this.history] : historyLength <= 0 ? [] : this.history.slice(-historyLength);
    return {
      id: this.id,
      contextId: this.contextId,
      status: this.#status(),
      artifacts: this.text.length === 0 ? [] : [{ artifactId: this.artifactId, name: 'answer', description: '', parts: [textPart(this.text)], metadata: undefined, extensions: [] }],
      history,
      metadata: this.#metadata(),
    };
  }
}

/**
 * A running task holds its whole answer in one string, which V8 caps at ~512 Mi characters: a provider
 * (or a cli command, max_output_bytes up to 1 GiB) that wrote more made the append throw inside the
 * node's frame handler, and the edge (or its I/O worker) exited. Half of that leaves room for the JSON
 * of the task that carries it.
 */
export const MAX_ANSWER_CHARS = 256 * 1_048_576;

export class TaskStore {
  readonly #tasks = new Map<string, TaskEntry>();
  readonly #prefix: string;
  #maxTasks: number;
  /** a2a.max_task_bytes: the text finished records may hold (a record count alone let prompts of body_bytes each pile up for the TTL). */
  #maxChars: number;
  /** Text held by the finished records now in #tasks. */
  #finishedChars = 0;
  #lastSweep = 0;
  readonly #onFinished = (entry: TaskEntry): void => this.#finished(entry);

  constructor(workerIndex: number, maxTasks: number, maxChars = Number.MAX_SAFE_INTEGER) {
    this.#prefix = workerIndex < 0 ? 'a2a-m-' : `a2a-w${workerIndex}-`;
    this.#maxTasks = maxTasks;
    this.#maxChars = maxChars;
  }

  setMaxTasks(maxTasks: number, maxChars = this.#maxChars): void {
    this.#maxTasks = maxTasks;
    this.#maxChars = maxChars;
  }

  /** Text the finished records hold (status, tests). */
  get finishedChars(): number {
    return this.#finishedChars;
  }

  get size(): number {
    return this.#tasks.size;
  }

  /**
   * The most text one task's answer may hold: a2a.max_task_bytes (a record larger than every record
   * together may be could not be kept), and never past MAX_ANSWER_CHARS.
   */
  get maxAnswerChars(): number {
    return Math.min(this.#maxChars, MAX_ANSWER_CHARS);
  }

  newId(): string {
    return this.#prefix + randomUUID();
  }

  /** False when every record is a running task and the store is full. */
  add(entry: TaskEntry): boolean {
    this.#sweep(Date.now(), false);
    if (this.#tasks.size >= this.#maxTasks) {
      // Insertion order: finished ones go oldest first, as many as it takes (a2a.max_tasks may have been lowered).
      for (const [id, old] of this.#tasks) {
        if (this.#tasks.size < this.#maxTasks) break;
        if (old.terminal) this.#delete(id, old);
      }
      if (this.#tasks.size >= this.#maxTasks) return false;
    }
    entry.onFinished = this.#onFinished;
    this.#tasks.set(entry.id, entry);
    if (entry.terminal) this.#finished(entry);
    return true;
  }

  get(id: string): TaskEntry | undefined {
    const entry = this.#tasks.get(id);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.#delete(id, entry);
      return undefined;
    }
    return entry;
  }

  /** A record finished: its text counts, and the oldest finished others go while the total is over the bound (the newest is kept). */
  #finished(entry: TaskEntry): void {
    if (this.#tasks.get(entry.id) !== entry || entry.heldChars > 0) return;
    entry.heldChars = Math.max(1, entry.textChars());
    this.#finishedChars += entry.heldChars;
    if (this.#finishedChars <= this.#maxChars) return;
    for (const [id, old] of this.#tasks) {
      if (this.#finishedChars <= this.#maxChars) break;
      if (old !== entry && old.heldChars > 0) this.#delete(id, old);
    }
  }

  #delete(id: string, entry: TaskEntry): void {
    this.#tasks.delete(id);
    this.#finishedChars -= entry.heldChars;
    entry.heldChars = 0;
  }

  /** Drops expired records, at most once a second unless forced. */
  #sweep(now: number, force: boolean): void {
    if (!force && now - this.#lastSweep < 1_000) return;
    this.#lastSweep = now;
    for (const [id, entry] of this.#tasks) if (entry.expiresAt <= now) this.#delete(id, entry);
  }
}
