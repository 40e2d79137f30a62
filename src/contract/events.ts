// Node and run events as the admin event stream carries them. Plain data
// only: they are serialised once, when the first subscriber sends them.
// Run events are also how the data path reports each run's lifecycle to the
// main thread's run records (RunSink): those are sent whether or not anyone
// subscribes to the stream.

export interface NodeConnectedEvent {
  readonly type: 'node.connected';
  readonly node: string;
  readonly generation: number;
  readonly address: string;
  readonly agentVersion: string;
  /** It registered drained: an operator's drain command its agent kept across the reconnect (lifted by the undrain command). */
  readonly drained: boolean;
}

export interface NodeDisconnectedEvent {
  readonly type: 'node.disconnected';
  readonly node: string;
  readonly generation: number;
  readonly reason: string;
}

export interface NodeLeavingEvent {
  readonly type: 'node.leaving';
  readonly node: string;
  readonly generation: number;
  readonly reason: string;
}

/** The node's connection changed the providers it offers (its agent's config refresh added or removed some: Announce). */
export interface NodeProvidersEvent {
  readonly type: 'node.providers';
  readonly node: string;
  readonly generation: number;
  readonly added: readonly string[];
  readonly withdrawn: readonly string[];
}

export interface NodeDrainEvent {
  readonly type: 'node.draining' | 'node.undrained';
  readonly node: string;
  /** admin: the drain API; leaving: the agent said Leaving; config: removed or its token changed. */
  readonly by: 'admin' | 'leaving' | 'config';
}

/** A request reached the data path and waits for the scheduler. */
export interface RunQueuedEvent {
  readonly type: 'run.queued';
  readonly runId: string;
  readonly requestId: string;
  readonly model: string;
  /** The session the client named; "default" when none. */
  readonly session: string;
  /** The client API key's name (auth.api_keys[].name); absent while auth is off. */
  readonly key?: string;
  /** Wall clock, ms since the epoch (the producing thread's). */
  readonly at: number;
}

/** The scheduler granted it a provider (again after a retry: `attempt` 2). */
export interface RunDispatchedEvent {
  readonly type: 'run.dispatched';
  readonly runId: string;
  readonly model: string;
  readonly node: string;
  readonly provider: string;
  /** `http` (a provider tunnel) or `cli` (a command on the node). */
  readonly adapter: string;
  readonly attempt: number;
  readonly queueMs: number;
  readonly at: number;
}

/**
 * It failed before its first byte (or its provider was overloaded) and went
 * back to the queue for another grant: queued again, on no provider.
 */
export interface RunRequeuedEvent {
  readonly type: 'run.requeued';
  readonly runId: string;
  readonly model: string;
  /** Why: the node's error code (upstream_connect_failed, …), provider_overloaded, node_overloaded or stale. */
  readonly reason: string;
  /** Where it had gone (null: a grant on a connection already gone, reason stale). */
  readonly node: string | null;
  readonly provider: string | null;
  readonly at: number;
}

/** The first response byte went to the client. */
export interface RunFirstByteEvent {
  readonly type: 'run.first_byte';
  readonly runId: string;
  readonly model: string;
  /** From the request reaching the data path to this byte. */
  readonly ttfbMs: number;
  readonly at: number;
}

export interface RunStartedEvent {
  readonly type: 'run.started';
  readonly runId: string;
  readonly requestId: string;
  readonly model: string;
  readonly node: string;
  readonly provider: string;
  readonly queueMs: number;
}

export interface RunFinishedEvent {
  readonly type: 'run.finished';
  readonly runId: string;
  readonly requestId: string;
  readonly model: string;
  readonly node: string | null;
  readonly provider: string | null;
  /** HTTP status the client got; 499 when it left before any. */
  readonly status: number;
  /** How it ended: end, error, client_closed, timeout, fenced, shutting_down, … or the rejection code. */
  readonly outcome: string;
  readonly totalMs: number;
  readonly queueMs: number;
  readonly bytesOut: number;
  /** Wall clock at the end (absent in events built before run records existed). */
  readonly at?: number;
  /** Token usage the provider reported, when it did. */
  readonly tokens?: { readonly prompt: number; readonly completion: number } | null;
  /** The error's message, when it ended in one (a cli command's stderr tail, for one). */
  readonly error?: string;
}

export interface ConfigAppliedEvent {
  readonly type: 'config.applied';
  readonly configVersion: number;
  readonly changedPaths: readonly string[];
}

export interface EdgeDrainingEvent {
  readonly type: 'edge.draining';
  readonly graceMs: number;
  readonly openRequests: number;
}

/** A provider's outlier state changed (ejected, half-open, back), or an operator reset it. */
export interface ProviderOutlierEvent {
  readonly type: 'provider.ejected' | 'provider.half_open' | 'provider.returned' | 'provider.reset';
  readonly provider: string;
  readonly reason?: string;
  /** provider.ejected: how long (ms) and the how-many-th ejection. */
  readonly ejectedMs?: number;
  readonly ejections?: number;
  readonly by?: 'admin';
}

/** Overload backoff (a 429/503 lowered its limit; back at capacity) or the node's health probe verdict changed. */
export interface ProviderLoadEvent {
  readonly type: 'provider.overloaded' | 'provider.overload_cleared' | 'provider.unhealthy' | 'provider.healthy';
  readonly provider: string;
  /** overloaded / overload_cleared: the effective concurrency limit now. */
  readonly limit?: number;
  /** overloaded: how long (ms) no new request goes to it (its Retry-After, or the default). */
  readonly holdMs?: number;
  /** unhealthy / healthy: the node that probes it. */
  readonly node?: string;
}

export type EdgeEvent =
  | ProviderOutlierEvent
  | ProviderLoadEvent
  | NodeConnectedEvent
  | NodeDisconnectedEvent
  | NodeLeavingEvent
  | NodeProvidersEvent
  | NodeDrainEvent
  | RunQueuedEvent
  | RunDispatchedEvent
  | RunRequeuedEvent
  | RunStartedEvent
  | RunFirstByteEvent
  | RunFinishedEvent
  | ConfigAppliedEvent
  | EdgeDrainingEvent;

export type RunEvent = RunQueuedEvent | RunDispatchedEvent | RunRequeuedEvent | RunStartedEvent | RunFirstByteEvent | RunFinishedEvent;

/** Every `run.*` type: what a subscriber with `runs=0` never gets. */
export function isRunEvent(event: EdgeEvent): event is RunEvent {
  return event.type.startsWith('run.');
}

/** Where the data path reports runs: the main thread's run records (directly, or batched from an I/O worker). */
export interface RunSink {
  run(event: RunEvent): void;
}
