// The A2A request handler of the edge: the SDK's A2ARequestHandler
// interface, implemented over the data plane instead of the SDK's
// DefaultRequestHandler (docs/a2a.md says why). The SDK's JSON-RPC transport
// handlers (1.0, and 0.3 through its compatibility layer) parse, validate and
// frame; this class turns a message into a task whose run is an ordinary
// chat-completions exchange through DataPlane.begin: same admission, queue,
// scheduler, lease, tunnel, API key limits and run records as an HTTP
// request. The A2A contextId is the run's session id (x-edge-session), so a
// conversation keeps its cli working directory and its node affinity.
import { randomUUID } from 'node:crypto';
import type { AgentCard, CancelTaskRequest, GetTaskRequest, Message, SendMessageRequest, StreamResponse, SubscribeToTaskRequest, Task } from '@a2a-js/sdk';
import type { A2ARequestHandler, ServerCallContext } from '@a2a-js/sdk/server';
import {
  ContentTypeNotSupportedError,
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2AAgentConfig } from '../../shared/config-types.js';
import { Errors } from '../../shared/errors.js';
import type { A2ARelayMessage } from '../../contract/io-protocol.js';
import type { DataPlane } from '../data-plane.js';
import { CHAT } from '../http/api-routes.js';
import type { ApiKeyState } from '../http/client-auth.js';
import { inspectBody, type InspectOk } from '../http/inspect.js';
import { kExchange, type ProxyExchange } from '../http/proxy-exchange.js';
import { ContextHistory, historyKey, homeWorkerOf, type ChatTurnMessage } from './context-history.js';
import { RunSink, runRequest } from './run-sink.js';
import { CANCELED, COMPLETED, EventQueue, FAILED, ownerOfTaskId, TaskEntry, type TaskStore } from './task-store.js';

/** Per-call facts the route puts in ServerCallContext.state under this key. */
export const CALL_STATE = 'edge.a2a';

export interface A2ACall {
  readonly agent: A2AAgentConfig;
  readonly key: ApiKeyState | undefined;
  /** Aborted when the client's connection closes. */
  readonly signal: AbortSignal;
  readonly requestTag: string | undefined;
  /** The client's x-edge-priority / x-edge-fairness-id, for fair queuing as on /v1/ (docs/scheduling.md). */
  readonly fairnessHeaders?: Readonly<Record<string, string>>;
}

const CAPABILITIES_CARD: AgentCard = {
  name: 'llm-edge-gateway',
  description: '',
  supportedInterfaces: [],
  provider: undefined,
  version: '',
  documentationUrl: undefined,
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: [],
  defaultOutputModes: [],
  skills: [],
  signatures: [],
  iconUrl: undefined,
};

/** Same rule as x-edge-session: printable ASCII, up to 256 characters (it names a cli working directory). */
const CONTEXT_ID = /^[\x20-\x7e]{1,256}$/;
/** How long a question to another worker may go unanswered (it exited meanwhile). */
const RELAY_TIMEOUT_MS = 5_000;

/**
 * The owner did not answer in time (busy, not gone: a worker that exits fails
 * its calls at once). A plain error, which the SDK answers as -32603
 * (internal): a client retries that, where -32001 would tell it the task is
 * gone for good.
 */
function relayTimeout(taskId: string | undefined): Error {
  return new Error(`the worker that holds ${taskId === undefined || taskId === '' ? 'the task' : `task ${taskId}`} did not answer within ${RELAY_TIMEOUT_MS / 1000} s; retry`);
}
/** The pool passes messages to another worker; undefined on the main thread (workers.count 0). */
export type RelayPost = (message: A2ARelayMessage) => void;

const KNOWN_ERRORS: Record<string, new (message: string) => Error> = {
  TaskNotFoundError,
  TaskNotCancelableError,
  UnsupportedOperationError,
};

function errorOf(error: { name: string; message: string }): Error {
  const Known = KNOWN_ERRORS[error.name];
  return Known === undefined ? new Error(error.message) : new Known(error.message);
}

function callOf(context: ServerCallContext): A2ACall {
  const call = context.state.get(CALL_STATE) as A2ACall | undefined;
  if (call === undefined) throw new Error('A2A call without its edge state');
  return call;
}

/** JSON text of the message's parts; data parts only where the agent takes JSON. */
function promptOf(message: Message, agent: A2AAgentConfig): string {
  const texts: string[] = [];
  for (const part of message.parts) {
    const content = part.content;
    if (content?.$case === 'text') {
      texts.push(content.value);
    } else if (content?.$case === 'data' && agent.inputModes.includes('application/json')) {
      texts.push(JSON.stringify(content.value));
    } else {
      const kind = content?.$case ?? 'empty';
      const type = part.mediaType === '' ? kind : part.mediaType;
      throw new ContentTypeNotSupportedError(`agent ${agent.id} takes ${agent.inputModes.join(', ')}; a ${kind} part (${type}) is not supported`);
    }
  }
  const prompt = texts.join('\n');
  if (prompt.trim() === '') throw new RequestMalformedError('the message has no text to run');
  return prompt;
}

function acceptsOutput(agent: A2AAgentConfig, accepted: readonly string[]): boolean {
  if (accepted.length === 0) return true;
  return accepted.some((mode) => mode === '*/*' || mode === 'text/*' || agent.outputModes.includes(mode));
}

interface PendingCall {
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
  /** The worker asked: if it exits, the call fails at once. */
  readonly owner: number;
}

/** A subscription to another worker's task, fed by its 'event' messages. */
interface RemoteStream {
  readonly queue: EventQueue;
  readonly owner: number;
  /** The owner exited: the task is gone, and the stream ends with that error. */
  lost: boolean;
}

export class EdgeA2AHandler implements A2ARequestHandler {
  readonly #plane: DataPlane;
  readonly #store: TaskStore;
  readonly #workerIndex: number;
  #ttlMs: number;
  #relay: RelayPost | undefined;
  #nextCall = 1;
  readonly #pending = new Map<number, PendingCall>();
  /** Remote subscriptions this worker asked for: call -> the local queue fed by 'event'. */
  readonly #remoteStreams = new Map<number, RemoteStream>();
  /** Subscriptions other workers hold here: `${from}:${call}` -> the task's queue. */
  readonly #servedStreams = new Map<string, EventQueue>();
  /** The conversations whose home is this data path (context-history.ts). */
  readonly #history: ContextHistory;
  #workerCount = 0;
  /** Aliases served only by cli providers: their command keeps its own conversation in the session directory. */
  #cliAliases: ReadonlySet<string> = new Set();

  constructor(plane: DataPlane, store: TaskStore, workerIndex: number, ttlMs: number, history: ContextHistory) {
    this.#plane = plane;
    this.#store = store;
    this.#workerIndex = workerIndex;
    this.#ttlMs = ttlMs;
    this.#history = history;
  }

  /** How many I/O workers share the contexts' homes (0: this is the only data path), and which aliases are cli ones. */
  setTopology(workerCount: number, cliAliases: ReadonlySet<string>): void {
    this.#workerCount = workerCount;
    this.#cliAliases = cliAliases;
  }

  setTtl(ttlMs: number): void {
    this.#ttlMs = ttlMs;
  }

  setRelay(post: RelayPost): void {
    this.#relay = post;
  }

  // --- A2ARequestHandler ------------------------------------------------------

  /**
   * Cards are served by the routes (per agent, with the request's base URL);
   * the SDK's 0.3 transport asks here only whether streaming is on.
   */
  getAgentCard(): Promise<AgentCard> {
    return Promise.resolve(CAPABILITIES_CARD);
  }

  getAuthenticatedExtendedAgentCard(): Promise<never> {
    return Promise.reject(new ExtendedAgentCardNotConfiguredError('this edge publishes no extended agent card'));
  }

  async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<Task> {
    const call = callOf(context);
    const entry = await this.#start(params, call);
    const historyLength = params.configuration?.historyLength;
    if (params.configuration?.returnImmediately === true) return entry.snapshot(historyLength);
    if (!entry.terminal) {
      let onAbort: (() => void) | undefined;
      const left = new Promise<void>((resolve) => {
        onAbort = () => resolve();
        // The caller may have left already (while the SDK loaded, or earlier turns came from another worker): abort fired before this listener.
        if (call.signal.aborted) resolve();
        else call.signal.addEventListener('abort', onAbort, { once: true });
      });
      await Promise.race([entry.done, left]);
      if (onAbort !== undefined) call.signal.removeEventListener('abort', onAbort);
      // A blocking caller that left never learns the task id: its run is cancelled like an HTTP request's.
      if (!entry.terminal) this.#cancelEntry(entry, 'the caller closed its connection before the answer');
    }
    return entry.snapshot(historyLength);
  }

  async *sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const call = callOf(context);
    const entry = await this.#start(params, call);
    // Subscribed in the same turn as the snapshot: no event falls between them.
    const queue = entry.subscribe();
    let told = false;
    try {
      yield { payload: { $case: 'task', value: entry.snapshot(params.configuration?.historyLength) } };
      told = true;
      // The client leaving ends its stream, not the task: it may resubscribe (docs/a2a.md).
      yield* this.#drain(queue, call.signal);
    } finally {
      queue.close();
      // The stream ended before its first event went out: the caller never learned the task's id, so it could neither follow nor cancel it.
      if (!told && !entry.terminal) this.#cancelEntry(entry, 'the caller closed its connection before it learned the task id');
    }
  }

  async getTask(params: GetTaskRequest, context: ServerCallContext): Promise<Task> {
    const call = callOf(context);
    checkHistoryLength(params.historyLength);
    checkTaskId(params.id);
    const owner = this.#remoteOwner(params.id);
    if (owner !== undefined) return (await this.#ask(owner, { op: 'get', taskId: params.id, keyName: call.key?.name, agentId: call.agent.id, historyLength: params.historyLength })) as Task;
    return this.#entryFor(params.id, call.key?.name, call.agent.id).snapshot(params.historyLength);
  }

  async cancelTask(params: CancelTaskRequest, context: ServerCallContext): Promise<Task> {
    const call = callOf(context);
    checkTaskId(params.id);
    const owner = this.#remoteOwner(params.id);
    if (owner !== undefined) return (await this.#ask(owner, { op: 'cancel', taskId: params.id, keyName: call.key?.name, agentId: call.agent.id })) as Task;
    return this.#cancelLocal(params.id, call.key?.name, call.agent.id);
  }

  async *resubscribe(params: SubscribeToTaskRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const call = callOf(context);
    checkTaskId(params.id);
    const owner = this.#remoteOwner(params.id);
    if (owner !== undefined) {
      yield* this.#remoteSubscribe(owner, params.id, call);
      return;
    }
    const entry = this.#subscribable(params.id, call.key?.name, call.agent.id);
    const queue = entry.subscribe();
    try {
      yield { payload: { $case: 'task', value: entry.snapshot() } };
      yield* this.#drain(queue, call.signal);
    } finally {
      queue.close();
    }
  }

  createTaskPushNotificationConfig(): Promise<never> {
    return Promise.reject(new PushNotificationNotSupportedError('this edge sends no push notifications; stream or poll instead'));
  }

  getTaskPushNotificationConfig(): Promise<never> {
    return this.createTaskPushNotificationConfig();
  }

  listTaskPushNotificationConfigs(): Promise<never> {
    return this.createTaskPushNotificationConfig();
  }

  deleteTaskPushNotificationConfig(): Promise<never> {
    return this.createTaskPushNotificationConfig();
  }

  listTasks(): Promise<never> {
    return Promise.reject(new UnsupportedOperationError('ListTasks is not offered: task records are kept per worker for GetTask only'));
  }

  // --- tasks ---------------------------------------------------------------------

  /** Validates the message, records the task and dispatches its run. Refusals by admission become a failed task. */
  async #start(params: SendMessageRequest, call: A2ACall): Promise<TaskEntry> {
    const { agent, key } = call;
    const message = params.message;
    if (message === undefined) throw new RequestMalformedError('params.message is required');
    checkHistoryLength(params.configuration?.historyLength);
    if (message.taskId !== '') {
      // A task is one run: it takes no second message (input-required is never asked for).
      // Looked up as GetTask does, on whichever worker holds it: another key's task is as
      // unknown as a missing one (docs/a2a.md), its existence not told.
      const owner = this.#remoteOwner(message.taskId);
      if (owner !== undefined) await this.#ask(owner, { op: 'get', taskId: message.taskId, keyName: key?.name, agentId: agent.id, historyLength: 0 });
      else this.#entryFor(message.taskId, key?.name, agent.id);
      throw new UnsupportedOperationError(`task ${message.taskId} takes no further messages; send a new message with its contextId to continue the conversation`);
    }
    const prompt = promptOf(message, agent);
    if (!acceptsOutput(agent, params.configuration?.acceptedOutputModes ?? [])) {
      throw new ContentTypeNotSupportedError(`agent ${agent.id} answers in ${agent.outputModes.join(', ')}; none of the accepted output modes`);
    }
    const contextId = message.contextId === '' ? randomUUID() : message.contextId;
    if (!CONTEXT_ID.test(contextId)) throw new RequestMalformedError('contextId must be printable ASCII, up to 256 characters (it names the run session)');
    // A model agent's provider keeps no conversation: the context's earlier turns go first (a cli command keeps its own).
    const conversation = this.#cliAliases.has(agent.model) ? undefined : historyKey(key?.name, agent.id, contextId);
    const earlier = conversation === undefined || message.contextId === '' ? [] : await this.#earlierTurns(conversation, contextId);
    // Gone already (while the SDK loaded, or the history came from another worker): no one could learn the task's id, so no run.
    if (call.signal.aborted) throw new Error('the caller closed its connection before its task began');
    const entry = new TaskEntry(this.#store.newId(), contextId, agent.id, key?.name, message);
    // Busy, not unsupported: a plain error is -32603, which a client may retry (-32004 says never).
    if (!this.#store.add(entry)) throw new Error('this edge holds a2a.max_tasks running tasks; retry later');
    const refusal = this.#refusal(agent, key);
    if (refusal !== undefined) {
      // Counted in edge_rejects_total under its code, as the HTTP routes count the same refusal (no run is made).
      this.#plane.refused(refusal.code);
      entry.finish(FAILED, `${refusal.message} (${refusal.code})`, this.#ttlMs);
      return entry;
    }
    /** The run's exchange, known once begin() returned (before any onStarted: those come on later turns). */
    let exchange: ProxyExchange | undefined;
    const sink = new RunSink({
      onStarted: () => {
        // The grant that started it says whether the context's session left its node (its cli state with it).
        const movedFrom = exchange?.grant?.sessionMovedFrom;
        if (movedFrom !== undefined) entry.sessionMovedFrom = movedFrom;
        entry.working();
      },
      // Within the task's bound on its answer (RunSink fails the run past it: docs/a2a.md).
      onDelta: (text) => entry.delta(text),
      onFinished: (error, cancelled) => {
        // An operator's cancel of the run (POST /admin/runs/{id}/cancel) ends the task as a client's CancelTask would.
        const finish = (): void => entry.finish(error === undefined ? COMPLETED : cancelled === true ? CANCELED : FAILED, error, this.#ttlMs);
        // Only a completed turn joins the conversation: a failed or cancelled one has no answer to follow.
        if (error === undefined && !entry.terminal && conversation !== undefined) {
          // Completed only once the context's home holds the turn: a client told sooner could send the
          // next message, on a connection of another worker, before it landed, and run it without it.
          const stored = this.#remember(conversation, contextId, prompt, entry.text);
          if (stored !== undefined) {
            // The turn joins the conversation whatever comes now: a cancel meanwhile would end the task
            // canceled with its turn kept.
            entry.completing = true;
            stored.then(finish, finish);
            return;
          }
        }
        finish();
      },
    }, this.#store.maxAnswerChars);
    entry.cancelRun = (asked) => sink.cancel(asked);
    const body = Buffer.from(JSON.stringify({ model: agent.model, stream: true, messages: [...earlier, { role: 'user', content: prompt }] }));
    const info = inspectBody(body, 64) as InspectOk;
    const request = runRequest(contextId, call.requestTag, call.fairnessHeaders);
    this.#plane.begin(CHAT, CHAT.path, request, sink.asResponse(), body, info, key, undefined, sink);
    exchange = (sink as unknown as { [kExchange]?: ProxyExchange })[kExchange];
    if (exchange !== undefined) entry.runId = exchange.runId;
    return entry;
  }

  /** Why a run cannot start (the edge's own checks before admission), as the HTTP surface would say it. */
  #refusal(agent: A2AAgentConfig, key: ApiKeyState | undefined): { readonly code: string; readonly message: string } | undefined {
    if (this.#plane.shuttingDown) return { code: Errors.shuttingDown.code, message: Errors.shuttingDown.message };
    if (!this.#plane.hasModel(agent.model)) return { code: Errors.modelNotFound.code, message: `The model ${JSON.stringify(agent.model)} does not exist` };
    if (key === undefined) return undefined;
    if (!key.mayUse(agent.model)) return { code: Errors.modelNotAllowed.code, message: `this API key may not use the model ${JSON.stringify(agent.model)}` };
    // The concurrency slot is taken at admission (DataPlane.begin): a refused run fails like any other.
    return undefined;
  }

  /**
   * The context's turns so far, from its home (here, or another worker through the relay).
   * A lookup that fails fails the turn (-32603): run without its history, the answer would
   * silently ignore the conversation the client continued.
   */
  async #earlierTurns(conversation: string, contextId: string): Promise<ChatTurnMessage[]> {
    const home = homeWorkerOf(contextId, this.#workerCount);
    if (home === this.#workerIndex || this.#relay === undefined || home < 0) return this.#history.messages(conversation);
    try {
      return (await this.#ask(home, { op: 'history', context: conversation })) as ChatTurnMessage[];
    } catch (err) {
      // The home exited (peerGone): its memory of the context went with it, and a retry starts over from the next turn.
      if (err instanceof TaskNotFoundError) throw new Error(`the worker that held context ${contextId}'s earlier turns exited; they are lost, and a new message continues without them`);
      throw new Error(`the worker that holds context ${contextId}'s earlier turns did not answer within ${RELAY_TIMEOUT_MS / 1000} s; retry`);
    }
  }

  /** Adds a finished turn to its context; on another worker (its home), the promise settles once that one has it (or cannot answer). */
  #remember(conversation: string, contextId: string, user: string, assistant: string): Promise<unknown> | undefined {
    const home = homeWorkerOf(contextId, this.#workerCount);
    if (home === this.#workerIndex || this.#relay === undefined || home < 0) {
      this.#history.remember(conversation, user, assistant);
      return undefined;
    }
    return this.#ask(home, { op: 'remember', context: conversation, value: { user, assistant } });
  }

  #cancelEntry(entry: TaskEntry, why: string, asked = false): void {
    if (entry.completing) return;
    entry.cancelRun?.(asked);
    entry.finish(CANCELED, why, this.#ttlMs);
  }

  #cancelLocal(id: string, keyName: string | undefined, agentId: string | undefined): Task {
    const entry = this.#entryFor(id, keyName, agentId);
    if (entry.terminal) throw new TaskNotCancelableError(`task ${id} is already over (${entry.state === COMPLETED ? 'completed' : entry.state === FAILED ? 'failed' : 'canceled'})`);
    if (entry.completing) throw new TaskNotCancelableError(`task ${id} has its whole answer and is completing`);
    this.#cancelEntry(entry, 'canceled by the client', true);
    return entry.snapshot();
  }

  #entryFor(id: string, keyName: string | undefined, agentId: string | undefined): TaskEntry {
    const entry = this.#store.get(id);
    // Another key's task is as unknown as a missing one: its id says nothing. So is another agent's: each
    // agent is an A2A server of its own (its card, its endpoint, its conversations), and one must not read
    // or cancel the tasks of another.
    if (entry === undefined || entry.keyName !== keyName || entry.agentId !== agentId) throw new TaskNotFoundError(`task ${id} is not known here (never made, made with another key or through another agent, or expired after a2a.task_ttl_ms)`);
    return entry;
  }

  #subscribable(id: string, keyName: string | undefined, agentId: string | undefined): TaskEntry {
    const entry = this.#entryFor(id, keyName, agentId);
    if (entry.terminal) throw new UnsupportedOperationError(`task ${id} is already over; GetTask returns its result`);
    return entry;
  }

  async *#drain(queue: EventQueue, signal: AbortSignal): AsyncGenerator<StreamResponse, void, undefined> {
    const onAbort = (): void => queue.close();
    if (signal.aborted) queue.close();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const event of queue) yield event;
    } finally {
      signal.removeEventListener('abort', onAbort);
      queue.close();
    }
  }

  // --- other workers' tasks (workers.count > 0) ------------------------------------

  /** The worker holding task `id` when it is another one this worker can ask. */
  #remoteOwner(id: string): number | undefined {
    const owner = ownerOfTaskId(id);
    if (owner === undefined || owner === this.#workerIndex || owner < 0 || this.#relay === undefined) return undefined;
    return owner;
  }

  #ask(owner: number, message: Pick<A2ARelayMessage, 'op' | 'taskId' | 'keyName' | 'agentId' | 'historyLength' | 'context' | 'value'>): Promise<unknown> {
    const call = this.#nextCall++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(call);
        reject(relayTimeout(message.taskId));
      }, RELAY_TIMEOUT_MS);
      this.#pending.set(call, { resolve, reject, timer, owner });
      this.#relay?.({ type: 'a2a', to: owner, from: this.#workerIndex, call, ...message });
    });
  }

  async *#remoteSubscribe(owner: number, taskId: string, call: A2ACall): AsyncGenerator<StreamResponse, void, undefined> {
    const id = this.#nextCall++;
    const queue = new EventQueue();
    const stream: RemoteStream = { queue, owner, lost: false };
    this.#remoteStreams.set(id, stream);
    // The first answer is the task (or the error); events follow.
    const first = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(relayTimeout(taskId));
      }, RELAY_TIMEOUT_MS);
      this.#pending.set(id, { resolve, reject, timer, owner });
    });
    this.#relay?.({ type: 'a2a', to: owner, from: this.#workerIndex, call: id, op: 'subscribe', taskId, keyName: call.key?.name, agentId: call.agent.id });
    let ended = false;
    try {
      const task = (await first) as Task;
      yield { payload: { $case: 'task', value: task } };
      for await (const event of this.#drain(queue, call.signal)) yield event;
      if (stream.lost) throw new TaskNotFoundError(`task ${taskId}: the worker that held it exited`);
      ended = !call.signal.aborted;
    } finally {
      this.#remoteStreams.delete(id);
      this.#pending.delete(id);
      if (!ended && !stream.lost) this.#relay?.({ type: 'a2a', to: owner, from: this.#workerIndex, call: id, op: 'unsubscribe' });
    }
  }

  /**
   * Worker `peer` exited (a replacement, with call ids from 1 again, takes
   * its index): what this worker asked of it fails now instead of at its
   * timeout, its subscriptions to tasks there end with TaskNotFound, and
   * the ones it held here stop without a word, so that nothing meant for
   * the old worker reaches the new one.
   */
  peerGone(peer: number): void {
    for (const [call, pending] of this.#pending) {
      if (pending.owner !== peer) continue;
      this.#pending.delete(call);
      clearTimeout(pending.timer);
      pending.reject(new TaskNotFoundError(`the worker that held the task exited`));
    }
    for (const stream of this.#remoteStreams.values()) {
      if (stream.owner !== peer) continue;
      stream.lost = true;
      stream.queue.close();
    }
    const prefix = `${peer}:`;
    for (const [key, queue] of this.#servedStreams) {
      if (!key.startsWith(prefix)) continue;
      this.#servedStreams.delete(key);
      queue.close();
    }
  }

  /** Subscriptions this worker holds on other workers' tasks, and other workers' on its own. */
  get relayedStreams(): { remote: number; served: number } {
    return { remote: this.#remoteStreams.size, served: this.#servedStreams.size };
  }

  /** A relay message for this worker: a question about one of its tasks, or an answer to one it asked. */
  onRelay(message: A2ARelayMessage): void {
    switch (message.op) {
      case 'get':
      case 'cancel':
        this.#answer(message);
        return;
      case 'subscribe':
        this.#serveSubscription(message);
        return;
      case 'history':
        this.#reply(message, 'reply', this.#history.messages(message.context ?? ''));
        return;
      case 'remember': {
        const turn = message.value as { user: string; assistant: string };
        this.#history.remember(message.context ?? '', turn.user, turn.assistant);
        // The asker completes the task on this answer (call 0: an asker that waits for none).
        if (message.call !== 0) this.#reply(message, 'reply');
        return;
      }
      case 'unsubscribe':
        this.#servedStreams.get(`${message.from}:${message.call}`)?.close();
        return;
      case 'reply': {
        const pending = this.#pending.get(message.call);
        if (pending === undefined) return;
        this.#pending.delete(message.call);
        clearTimeout(pending.timer);
        if (message.error !== undefined) pending.reject(errorOf(message.error));
        else pending.resolve(message.value);
        return;
      }
      case 'event':
        this.#remoteStreams.get(message.call)?.queue.push(message.value as StreamResponse);
        return;
      case 'end':
        this.#remoteStreams.get(message.call)?.queue.close();
        return;
    }
  }

  #reply(to: A2ARelayMessage, op: 'reply' | 'event' | 'end', value?: unknown, error?: unknown): void {
    const failure = error === undefined ? undefined : { name: (error as Error).name, message: (error as Error).message };
    this.#relay?.({ type: 'a2a', to: to.from, from: this.#workerIndex, call: to.call, op, value, error: failure });
  }

  #answer(message: A2ARelayMessage): void {
    try {
      const taskId = message.taskId ?? '';
      const value = message.op === 'get' ? this.#entryFor(taskId, message.keyName, message.agentId).snapshot(message.historyLength) : this.#cancelLocal(taskId, message.keyName, message.agentId);
      this.#reply(message, 'reply', value);
    } catch (err) {
      this.#reply(message, 'reply', undefined, err);
    }
  }

  #serveSubscription(message: A2ARelayMessage): void {
    let entry: TaskEntry;
    try {
      entry = this.#subscribable(message.taskId ?? '', message.keyName, message.agentId);
    } catch (err) {
      this.#reply(message, 'reply', undefined, err);
      return;
    }
    const queue = entry.subscribe();
    const key = `${message.from}:${message.call}`;
    this.#servedStreams.set(key, queue);
    this.#reply(message, 'reply', entry.snapshot());
    void (async () => {
      for await (const event of queue) {
        // Dropped by peerGone: the asker is gone, and its index may be a new worker's.
        if (this.#servedStreams.get(key) !== queue) return;
        this.#reply(message, 'event', event);
      }
      if (this.#servedStreams.get(key) !== queue) return;
      this.#servedStreams.delete(key);
      this.#reply(message, 'end');
    })();
  }
}

/**
 * A task id is a non-empty string. Missing (the 1.0 decoding makes it '', 0.3 leaves it undefined) or
 * of another type, the call is malformed (-32602), not a question about a task no one has (-32001).
 */
export function checkTaskId(value: unknown): void {
  if (typeof value !== 'string' || value === '') throw new RequestMalformedError(`params.id must name a task (a non-empty string); got ${JSON.stringify(value) ?? 'none'}`);
}

/** historyLength: absent, or a count of newest messages (0: none). Anything else is the caller's mistake (-32602), never a guess. */
function checkHistoryLength(value: unknown): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new RequestMalformedError(`historyLength must be a whole number of messages, 0 or more; got ${JSON.stringify(value)}`);
  }
}
