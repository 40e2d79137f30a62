// The conversation of an A2A context for a model agent: its finished turns
// (each user message's text and the agent's answer) as chat messages, sent
// before the new user message on the context's next task. The provider keeps
// no conversation of its own, so without this a second message in a context
// would lose the first. Bounded three ways: a2a.history_max_turns and
// a2a.history_max_bytes per context (the oldest turns go first), and at most
// a2a.max_tasks contexts per data path (the least recently used go first),
// holding at most a2a.max_task_bytes bytes of text together (the count alone
// let max_tasks contexts of history_max_bytes each pile up: GiBs by default);
// a context is kept a2a.task_ttl_ms after its last turn, like a task record.
// Keyed by API key, agent and contextId: another key's context with the
// same id is another conversation. With I/O workers every context has one
// home worker (homeWorkerOf), which holds its history whichever worker ran
// its tasks (edge-a2a-handler.ts asks it through the relay).
import { createHash } from 'node:crypto';

export interface ChatTurnMessage {
  readonly role: 'user' | 'assistant';
  readonly content: string;
}

export interface HistoryLimits {
  readonly maxTurns: number;
  readonly maxBytes: number;
  readonly maxContexts: number;
  /** Bytes all contexts of the data path hold together (a2a.max_task_bytes); the newest context is always kept. */
  readonly maxTotalBytes: number;
  readonly ttlMs: number;
}

interface Conversation {
  readonly turns: { readonly user: string; readonly assistant: string; readonly bytes: number }[];
  bytes: number;
  expiresAt: number;
}

/** The worker holding a context's history: a hash of the context id over the pool (-1: the main thread, no workers). */
export function homeWorkerOf(contextId: string, workerCount: number): number {
  if (workerCount <= 0) return -1;
  return createHash('sha1').update(contextId).digest().readUInt32BE(0) % workerCount;
}

export function historyKey(keyName: string | undefined, agentId: string, contextId: string): string {
  return `${keyName ?? ''}\n${agentId}\n${contextId}`;
}

export class ContextHistory {
  /** Map order is recency: a context used again moves to the end. */
  readonly #contexts = new Map<string, Conversation>();
  /** Bytes of every conversation in #contexts. */
  #totalBytes = 0;
  #limits: HistoryLimits;

  constructor(limits: HistoryLimits) {
    this.#limits = limits;
  }

  setLimits(limits: HistoryLimits): void {
    this.#limits = limits;
  }

  get size(): number {
    return this.#contexts.size;
  }

  /** Bytes of text held over all contexts (tests). */
  get totalBytes(): number {
    return this.#totalBytes;
  }

  /** The context's turns as chat messages, oldest first (empty when unknown or expired). */
  messages(key: string): ChatTurnMessage[] {
    const conversation = this.#contexts.get(key);
    if (conversation === undefined) return [];
    if (conversation.expiresAt <= Date.now()) {
      this.#delete(key, conversation);
      return [];
    }
    const out: ChatTurnMessage[] = [];
    for (const turn of conversation.turns) out.push({ role: 'user', content: turn.user }, { role: 'assistant', content: turn.assistant });
    return out;
  }

  /** Appends a finished turn, then trims the context to its limits and the store to its size. */
  remember(key: string, user: string, assistant: string): void {
    const { maxTurns, maxBytes, ttlMs } = this.#limits;
    if (maxTurns <= 0) return;
    const now = Date.now();
    let conversation = this.#contexts.get(key);
    if (conversation !== undefined) this.#delete(key, conversation);
    if (conversation === undefined || conversation.expiresAt <= now) conversation = { turns: [], bytes: 0, expiresAt: 0 };
    const bytes = Buffer.byteLength(user) + Buffer.byteLength(assistant);
    if (bytes > maxBytes) {
      // A turn that could never fit is not kept, and does not cost the earlier turns their place.
      if (conversation.turns.length > 0) this.#set(key, conversation);
      return;
    }
    conversation.turns.push({ user, assistant, bytes });
    conversation.bytes += bytes;
    while (conversation.turns.length > 0 && (conversation.turns.length > maxTurns || conversation.bytes > maxBytes)) {
      conversation.bytes -= conversation.turns.shift()?.bytes ?? 0;
    }
    conversation.expiresAt = now + ttlMs;
    if (conversation.turns.length > 0) this.#set(key, conversation);
    this.#evict(now, key);
  }

  #set(key: string, conversation: Conversation): void {
    this.#contexts.set(key, conversation);
    this.#totalBytes += conversation.bytes;
  }

  #delete(key: string, conversation: Conversation): void {
    this.#contexts.delete(key);
    this.#totalBytes -= conversation.bytes;
  }

  /** Least recently used first, expired ones too, while over the count or the bytes; `newest` (just remembered) stays. */
  #evict(now: number, newest: string): void {
    const { maxContexts, maxTotalBytes } = this.#limits;
    for (const [key, conversation] of this.#contexts) {
      if (key === newest || (this.#contexts.size <= maxContexts && this.#totalBytes <= maxTotalBytes && conversation.expiresAt > now)) break;
      this.#delete(key, conversation);
    }
  }
}
