// Node and run events as the admin event stream carries them. Plain data
// only: they are serialised once, when the first subscriber sends them.

export interface NodeConnectedEvent {
  readonly type: 'node.connected';
  readonly node: string;
  readonly generation: number;
  readonly address: string;
  readonly agentVersion: string;
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

export interface NodeDrainEvent {
  readonly type: 'node.draining' | 'node.undrained';
  readonly node: string;
  /** admin: the drain API; leaving: the agent said Leaving; config: removed or its token changed. */
  readonly by: 'admin' | 'leaving' | 'config';
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
  /** How it ended: end, error, client_closed, timeout, fenced, … or the rejection code. */
  readonly outcome: string;
  readonly totalMs: number;
  readonly queueMs: number;
  readonly bytesOut: number;
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

export type EdgeEvent =
  | ProviderOutlierEvent
  | NodeConnectedEvent
  | NodeDisconnectedEvent
  | NodeLeavingEvent
  | NodeDrainEvent
  | RunStartedEvent
  | RunFinishedEvent
  | ConfigAppliedEvent
  | EdgeDrainingEvent;
