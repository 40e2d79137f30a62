// Small builders for scheduler tests: an EdgeConfig from a compact spec, a
// sink that records decisions, and an admit request.
import { parseEdgeConfig } from '../../../src/main/config.js';
import type { EdgeConfig, ModelConfig, NodeConfig, ProviderConfig } from '../../../src/shared/config-types.js';
import { Scheduler } from '../../../src/main/scheduler/scheduler.js';
import type { Endpoint } from '../../../src/shared/endpoints.js';
import type { AdmitRequest, Grant, RejectCode, SchedulerSink } from '../../../src/contract/scheduler.js';

/** Every limit at its documented default (the scheduler reads none of them). */
const DEFAULT_LIMITS = parseEdgeConfig({ nodes: [], models: [] }, 'defaults').limits;

export interface ProviderSpec {
  readonly id: string;
  readonly capacity?: number;
  readonly maxContextTokens?: number;
  readonly enabled?: boolean;
  /** Its type (default openai_compat); a `cli` provider holds its sessions' directories. */
  readonly type?: ProviderConfig['type'];
  /** The APIs it serves (default: openai_compat's chat, completions, embeddings). */
  readonly endpoints?: readonly Endpoint[];
}

export interface ModelSpec {
  readonly alias: string;
  /** provider id -> served name; a list means "served as `<alias>@<provider>`". */
  readonly providers: Readonly<Record<string, string>> | readonly string[];
  readonly maxQueue?: number;
  readonly queueTimeoutMs?: number;
}

export interface ConfigSpec {
  /** node id -> its providers */
  readonly nodes: Readonly<Record<string, readonly ProviderSpec[]>>;
  readonly models: readonly ModelSpec[];
  readonly longContextThresholdTokens?: number;
}

export function makeConfig(spec: ConfigSpec): EdgeConfig {
  const nodes: NodeConfig[] = Object.entries(spec.nodes).map(([id, providers]) => ({
    id,
    token: `token-${id}`,
    providers: providers.map(
      (p): ProviderConfig => ({
        id: p.id,
        type: p.type ?? 'openai_compat',
        capacity: p.capacity ?? 1,
        maxContextTokens: p.maxContextTokens,
        enabled: p.enabled ?? true,
        ...(p.endpoints === undefined ? {} : { endpoints: p.endpoints }),
      }),
    ),
  }));
  const models: ModelConfig[] = spec.models.map((m) => ({
    alias: m.alias,
    providers: Array.isArray(m.providers)
      ? new Map((m.providers as readonly string[]).map((id) => [id, `${m.alias}@${id}`]))
      : new Map(Object.entries(m.providers as Readonly<Record<string, string>>)),
    maxQueue: m.maxQueue ?? 16,
    queueTimeoutMs: m.queueTimeoutMs ?? 30_000,
  }));
  return {
    http: { host: '127.0.0.1', port: 0 },
    grpc: { host: '127.0.0.1', port: 0 },
    limits: DEFAULT_LIMITS,
    heartbeat: { intervalMs: 5_000, timeoutMs: 15_000 },
    scheduler: { longContextThresholdTokens: spec.longContextThresholdTokens ?? 1_000 },
    workers: { count: 0 },
    nodes,
    models,
  };
}

export interface Rejected {
  readonly requestId: number;
  readonly code: RejectCode;
  readonly retryAfterSec: number;
}

export type Decision = { readonly kind: 'grant'; readonly grant: Grant } | ({ readonly kind: 'reject' } & Rejected);

/** Records every decision in order; take() drains what arrived since the last take. */
export class RecordingSink implements SchedulerSink {
  readonly all: Decision[] = [];
  private taken = 0;

  grant(grant: Grant): void {
    this.all.push({ kind: 'grant', grant });
  }

  reject(requestId: number, code: RejectCode, retryAfterSec: number): void {
    this.all.push({ kind: 'reject', requestId, code, retryAfterSec });
  }

  /** Requests whose retry was refused after all (retryRefused), in order. */
  readonly retryRefusals: number[] = [];

  retryRefused(requestId: number): void {
    this.retryRefusals.push(requestId);
  }

  take(): Decision[] {
    const fresh = this.all.slice(this.taken);
    this.taken = this.all.length;
    return fresh;
  }

  /** Grants since the last take (rejects must be checked separately). */
  takeGrants(): Grant[] {
    return this.take().flatMap((d) => (d.kind === 'grant' ? [d.grant] : []));
  }

  grantFor(requestId: number): Grant | undefined {
    for (let i = this.all.length - 1; i >= 0; i--) {
      const d = this.all[i];
      if (d.kind === 'grant' && d.grant.requestId === requestId) return d.grant;
    }
    return undefined;
  }
}

export function req(requestId: number, alias: string, opts: { tokens?: number; node?: string } = {}): AdmitRequest {
  return { requestId, alias, estimatedTokens: opts.tokens ?? 10, directNodeId: opts.node };
}

/** A scheduler over `spec` with the given nodes connected at t=0 (all by default). */
export function setup(
  spec: ConfigSpec,
  connected: readonly string[] = Object.keys(spec.nodes),
): { s: Scheduler; sink: RecordingSink; gen: Map<string, number> } {
  const sink = new RecordingSink();
  const s = new Scheduler(makeConfig(spec), sink);
  const gen = new Map<string, number>();
  for (const id of connected) {
    const result = s.connect(id, 0);
    if (result === undefined) throw new Error(`node ${id} is not in the spec`);
    gen.set(id, result.generation);
  }
  return { s, sink, gen };
}
