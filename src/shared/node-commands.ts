// The node command vocabulary both ends share: the kinds an operator may send
// a node over its stream, the statuses an answer may carry, and the Register
// capability by which an agent says it answers commands at all. The edge
// reports three statuses of its own that no agent sends: `timeout` (no
// answer within the deadline), `not_connected` and, for an agent without the
// capability, `unsupported`.

export const NODE_COMMAND_KINDS = ['refresh_config', 'drain', 'undrain', 'probe', 'restart_provider'] as const;
export type NodeCommandKind = (typeof NODE_COMMAND_KINDS)[number];

/** The args each kind takes (the agent's commands.ts reads no others). */
export const NODE_COMMAND_ARGS: Readonly<Record<NodeCommandKind, readonly string[]>> = {
  refresh_config: [],
  drain: [],
  undrain: [],
  probe: [],
  restart_provider: ['provider'],
};

export type NodeCommandStatus = 'ok' | 'applied' | 'restart_required' | 'failed' | 'unsupported' | 'timeout' | 'not_connected';

/** Announced in Register.capabilities by an agent that answers Command. */
export const COMMANDS_CAPABILITY = 'commands';

/** Default and ceiling of a command's deadline. */
export const DEFAULT_COMMAND_DEADLINE_MS = 5_000;
export const MAX_COMMAND_DEADLINE_MS = 120_000;

/** One node's answer to one command, as the admin API returns it. */
export interface NodeCommandResult {
  readonly node: string;
  readonly kind: string;
  readonly status: NodeCommandStatus;
  readonly message: string;
  /** Kind-specific details (probe: per-provider health); absent when the node sent none. */
  readonly result?: unknown;
}

export function isNodeCommandKind(kind: unknown): kind is NodeCommandKind {
  return typeof kind === 'string' && (NODE_COMMAND_KINDS as readonly string[]).includes(kind);
}

const AGENT_STATUSES: readonly string[] = ['ok', 'applied', 'restart_required', 'failed', 'unsupported'];

/** An agent's status string as the edge reports it; anything unknown is a failure. */
export function agentStatus(status: string): NodeCommandStatus {
  return AGENT_STATUSES.includes(status) ? (status as NodeCommandStatus) : 'failed';
}
