// The edge's validated configuration, as both the main thread and the data
// path read it. Produced by src/main/config.ts from YAML; treated as an
// immutable snapshot (a refresh swaps the whole object, never mutates it).

import type { Endpoint } from './endpoints.js';

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
  /** Upstream URL on the node; used only to render a bootstrap agent config. */
  readonly baseUrl?: string;
  /** APIs it serves natively (config `endpoints`, else the type's defaults: src/shared/endpoints.ts). */
  readonly endpoints?: readonly Endpoint[];
  /** The model names it serves, when the operator lists them: every served name an alias maps to it must be one. */
  readonly models?: readonly string[];
}

export interface NodeConfig {
  readonly id: string;
  readonly token: string;
  readonly providers: readonly ProviderConfig[];
  /** Names an operator may use instead of the id (a label may name several nodes); absent = none. */
  readonly labels?: readonly string[];
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
  /** listen.http only: plain API POSTs read off the socket by the lean HTTP/1.1 connection (default true; false: node:http reads every request). */
  readonly leanHttp1?: boolean;
}

/** The optional listener that hands new nodes their agent package and config. */
export interface BootstrapConfig {
  readonly host: string;
  readonly port: number;
  /** Holds the agent tarball (`npm pack` output); read once at start, served from memory. */
  readonly artifactDir: string;
  /** Bearer token a bootstrapping node presents. */
  readonly token: string;
  /** Date.now() from which the token is refused (bootstrap.token_expires_at); undefined = never. */
  readonly tokenExpiresAt: number | undefined;
  /** The node listener's address as nodes dial it (host:port), written into rendered configs; undefined = listen.grpc's host and bound port. */
  readonly edgeAddress: string | undefined;
}

/** The operator's listener (admin API, /metrics); separate from the client listener. */
export interface AdminConfig {
  readonly host: string;
  readonly port: number;
  /** Bearer token every admin request must present; required unless host is loopback. */
  readonly token: string | undefined;
}

/** drain.grace_ms when the config says nothing: how long open requests get when the edge, or a retired node, drains. */
export const DEFAULT_DRAIN_GRACE_MS = 30_000;

export interface DrainConfig {
  /** On SIGTERM/SIGINT, how long open requests may run before everything is closed. */
  readonly graceMs: number;
}

export interface EdgeConfig {
  readonly http: ListenConfig;
  readonly grpc: ListenConfig;
  readonly limits: {
    /** Largest accepted request body, bytes (413 above). */
    readonly bodyBytes: number;
    /** Whole-tunnel deadline, ms (504 / error event, CANCEL to the node). */
    readonly tunnelTimeoutMs: number;
    /** Per-tunnel flow-control window: response bytes a node may send ahead of the client; 0 = unlimited. */
    readonly tunnelWindowBytes: number;
    /** Stored Responses-API ids remembered (id -> provider, LRU); undefined in a hand-built config = the default. */
    readonly storedResponses?: number;
  } & Partial<LimitsHardening>;
  readonly heartbeat: {
    readonly intervalMs: number;
    /** A peer silent this long is dropped (half-open TCP). */
    readonly timeoutMs: number;
  };
  readonly scheduler: {
    /** Estimated input tokens at or above this make a request `long`. */
    readonly longContextThresholdTokens: number;
    /** Fair queuing (docs/scheduling.md): undefined = on exactly when some API key sets priority or weight. */
    readonly fairness?: boolean;
    /** Fair queuing: a waiting request's band rises by this many priority steps per whole second waited (0 = no aging). */
    readonly agingStepPerSec?: number;
  };
  readonly workers: { readonly count: number };
  // Optional only so hand-built configs (tests, benches) stay valid;
  // parseEdgeConfig always sets both. Readers fall back to the defaults.
  readonly admin?: AdminConfig;
  readonly drain?: DrainConfig;
  /** Run records (GET /admin/runs): how many finished runs are kept. Optional like drain. */
  readonly runs?: { readonly maxFinished: number };
  /** runtime.node_flags, resolved (`auto` expanded for this host): the Node flags the edge restarts itself with at start. Optional like drain. */
  readonly runtime?: { readonly nodeFlags: readonly string[] };
  readonly nodes: readonly NodeConfig[];
  readonly models: readonly ModelConfig[];
  // Optional like admin/drain (hand-built configs stay valid); parseEdgeConfig
  // always sets them; readers use hardeningOf() from src/main/config-hardening.ts.
  readonly auth?: AuthConfig;
  readonly tls?: TlsConfig;
  /** Absent: no bootstrap listener. */
  readonly bootstrap?: BootstrapConfig;
  /** Outlier ejection and overload backoff (src/main/config-resilience.ts); optional like drain, defaults when absent. */
  readonly resilience?: ResilienceConfig;
  /** The A2A surface (docs/a2a.md); absent or no agents: no A2A routes. */
  readonly a2a?: A2AConfig;
  /** Browser calls from other origins to the client listener (src/main/config-cors.ts); absent or no origins: off. */
  readonly cors?: CorsConfig;
}

export interface CorsConfig {
  /** Serialized origins (`https://app.example.com`, lower-case, no path) allowed to call the client API from a browser; `*`: any. */
  readonly allowedOrigins: readonly string[];
  /** How long a browser may cache a preflight's answer, seconds (Access-Control-Max-Age). */
  readonly maxAgeS: number;
}

export interface ResilienceConfig {
  readonly outliers: {
    readonly consecutiveFailures: number;
    readonly baseEjectionMs: number;
    readonly maxEjectionMs: number;
    readonly maxEjectionShare: number;
    readonly failureRate: number;
    readonly failureRateWindow: number;
    readonly failureRateMinRequests: number;
  };
  readonly overload: {
    readonly defaultRetryAfterMs: number;
    readonly maxRetryAfterMs: number;
    /** Times one request goes back to the queue after a 429/503 before the provider's answer is relayed. */
    readonly maxRequeues: number;
  };
}

/** resilience.overload.max_requeues when the config says nothing (or, hand-built, has no resilience section). */
export const DEFAULT_MAX_OVERLOAD_REQUEUES = 3;

// --- A2A: agents exposed over the Agent2Agent protocol (src/workers/a2a/, docs/a2a.md)

export interface A2ASkillConfig {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly tags: readonly string[];
  readonly examples: readonly string[];
}

export interface A2AAgentConfig {
  /** URL segment: the agent lives at /a2a/{id}/ (its card at /a2a/{id}/.well-known/agent-card.json). */
  readonly id: string;
  /** The model alias its tasks run on (a cli provider group is an alias too). */
  readonly model: string;
  readonly name: string;
  readonly description: string;
  readonly inputModes: readonly string[];
  readonly outputModes: readonly string[];
  readonly skills: readonly A2ASkillConfig[];
}

export interface A2AConfig {
  readonly agents: readonly A2AAgentConfig[];
  /** Finished tasks are kept this long for GetTask, ms. */
  readonly taskTtlMs: number;
  /** Task records kept per data path (each I/O worker); the oldest finished go first. */
  readonly maxTasks: number;
  /** Text (characters of prompts and answers) the finished records of a data path hold at most; the oldest finished go first. */
  readonly maxTaskBytes: number;
  /** A model agent's context keeps this many finished turns (user message + answer) as chat history; 0 = none. */
  readonly historyMaxTurns: number;
  /** ...and at most this many bytes of their text; the oldest turns go first. */
  readonly historyMaxBytes: number;
  /** Base URL the cards advertise (behind a proxy); undefined = taken from the request's Host. */
  readonly publicUrl: string | undefined;
}

// --- hardening: client auth, TLS, extra limits (read by src/main/config-hardening.ts)

export interface ApiKeyConfig {
  /** Shown in logs and status; never the key itself. */
  readonly name: string;
  /**
   * Lower-case hex of sha256(key), one per secret the key is known by (more than one while a secret is
   * rotated: the name's limits, counts and stored responses stay one key's); the key itself is never stored.
   */
  readonly keySha256s: readonly string[];
  /** Aliases this key may use; undefined = every model. */
  readonly models: readonly string[] | undefined;
  /** Max requests of this key open at once; undefined = no limit. */
  readonly maxConcurrent: number | undefined;
  /** Requests of this key admitted per minute (a bucket of a minute's worth); undefined = no limit. */
  readonly requestsPerMinute?: number;
  /**
   * Tokens (prompt + completion, as the provider reports them) of this key per minute; undefined = no limit.
   * A bucket of a minute's worth: a request is admitted while it holds any, reserving its estimated prompt, and
   * is charged what its response reported when it ends (src/shared/request-rate.ts).
   */
  readonly tokensPerMinute?: number;
  /** Fair queuing: the key's priority band (-100..100; negative = sheddable); undefined = 0. A request may only lower it. */
  readonly priority?: number;
  /** Fair queuing: the key's weight within its band (1..1000); undefined = 1. */
  readonly weight?: number;
  /** Fair queuing: requests of this key may name their own tenant with x-edge-fairness-id (say, the key's end users). */
  readonly fairnessHeader?: boolean;
}

export interface AuthConfig {
  /** Empty = client auth is off (every request is let in). */
  readonly apiKeys: readonly ApiKeyConfig[];
}

export interface TlsFilesConfig {
  readonly certFile: string;
  readonly keyFile: string;
}

export interface NodeTlsConfig extends TlsFilesConfig {
  /** CA bundle that node client certificates must chain to (mutual TLS). */
  readonly clientCaFile: string | undefined;
  /** Refuse nodes that present no valid client certificate. */
  readonly requireClientCert: boolean;
}

export interface TlsConfig {
  /** TLS on the client (OpenAI API) listener; undefined = plain HTTP. */
  readonly client: TlsFilesConfig | undefined;
  /** TLS (and optionally mutual TLS) on the node (gRPC) listener; undefined = plaintext. */
  readonly nodes: NodeTlsConfig | undefined;
}

export interface LimitsHardening {
  /** Deepest JSON nesting accepted in a request body (400 json_too_deep above). */
  readonly maxJsonDepth: number;
  /** Largest request head (request line + headers), bytes (431 above). */
  readonly maxHeaderBytes: number;
  /** A client's whole request (head and body) must arrive within this, ms (408 request_timeout after); 0 = off. */
  readonly requestTimeoutMs: number;
  /** Tunnels one node connection may have open at once; 0 = no limit beyond capacity. */
  readonly maxTunnelsPerNode: number;
  /** Largest gRPC message a node may send, bytes; a larger one ends its connection. */
  readonly maxFrameBytes: number;
  /** Response headers must arrive this soon after dispatch, ms; 0 = off. */
  readonly ttfbTimeoutMs: number;
  /** Longest silence between response frames once headers arrived, ms; 0 = off. */
  readonly idleTimeoutMs: number;
  /** While a streaming request waits this long for its first byte, send SSE comments so proxies keep it open, ms; 0 = off. */
  readonly sseKeepaliveMs: number;
  /** Bodies this large or larger are validated and token-counted in the offload pool, bytes; 0 = never. */
  readonly offloadBytes: number;
}
