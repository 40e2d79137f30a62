// The edge's validated configuration, as both the main thread and the data
// path read it. Produced by src/main/config.ts from YAML; treated as an
// immutable snapshot (a refresh swaps the whole object, never mutates it).

export type ProviderType = 'ollama' | 'vllm' | 'openai_compat' | 'cli';

export interface ProviderConfig {
  /** Unique across the fleet. */
  readonly id: string;
  readonly type: ProviderType;
  /** Max concurrent requests; one budget shared by every alias it serves. */
  readonly capacity: number;
  /** Context length the provider accepts; undefined = not declared (short requests only). */
  readonly maxContextTokens: number | undefined;
  /** A disabled provider gets no new requests. */
  readonly enabled: boolean;
}

export interface NodeConfig {
  readonly id: string;
  readonly token: string;
  readonly providers: readonly ProviderConfig[];
}

export interface ModelConfig {
  /** What clients put in `model`. */
  readonly alias: string;
  /** provider id -> served model name sent to that provider. */
  readonly providers: ReadonlyMap<string, string>;
  readonly maxQueue: number;
  readonly queueTimeoutMs: number;
}

export interface ListenConfig {
  readonly host: string;
  readonly port: number;
}

export interface EdgeConfig {
  readonly http: ListenConfig;
  readonly grpc: ListenConfig;
  readonly limits: {
    /** Largest accepted request body, bytes (413 above). */
    readonly bodyBytes: number;
    /** Whole-tunnel deadline, ms (504 / error event, CANCEL to the node). */
    readonly tunnelTimeoutMs: number;
  };
  readonly heartbeat: {
    readonly intervalMs: number;
    /** A peer silent this long is dropped (half-open TCP). */
    readonly timeoutMs: number;
  };
  readonly scheduler: {
    /** Estimated input tokens at or above this make a request `long`. */
    readonly longContextThresholdTokens: number;
  };
  readonly workers: { readonly count: number };
  readonly nodes: readonly NodeConfig[];
  readonly models: readonly ModelConfig[];
}
