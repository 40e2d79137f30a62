// Which config changes a running edge can take (mutable) and which need a
// restart. One table, first match wins; docs/operations.md lists the same.
// A key is restart-required when something was built from it at start and
// cannot be rebuilt without dropping connections: a bound socket, the
// fastify body limit, the thread layout.

export interface MutabilityRule {
  readonly pattern: RegExp;
  readonly mutable: boolean;
  /** What happens on apply (mutable) or why a restart is needed. */
  readonly effect: string;
}

export const MUTABILITY_RULES: readonly MutabilityRule[] = [
  { pattern: /^listen\./, mutable: false, effect: 'the client and node listeners are bound at start' },
  { pattern: /^admin\./, mutable: false, effect: 'the admin listener and its token are fixed at start' },
  { pattern: /^workers\./, mutable: false, effect: 'the thread layout is fixed at start' },
  { pattern: /^bootstrap\./, mutable: false, effect: 'the bootstrap listener is bound and its artifacts read at start' },
  { pattern: /^nodes\[[^\]]*\]\.labels$/, mutable: true, effect: 'node references and status use the new labels at once' },
  {
    pattern: /^resilience\./,
    mutable: true,
    effect: 'the next outcome and the next 429/503 are judged by the new policy; ejections and holds under way keep their end; a new failure_rate_window starts every window afresh',
  },
  // Every refresh re-reads the certificate files (a renewal in place needs no config change); new paths are read the same way.
  { pattern: /^tls\.(client|nodes)\.(cert_file|key_file)$/, mutable: true, effect: 'the files are read and checked; new TLS handshakes get the new certificate, open connections keep theirs' },
  { pattern: /^tls\.nodes\.client_ca_file$/, mutable: true, effect: 'the CA is read and checked; node handshakes from now on are verified against it, connected nodes stay' },
  { pattern: /^tls\./, mutable: false, effect: 'TLS on or off, and whether node certificates are required, are fixed when the listeners are bound' },
  { pattern: /^limits\.body_bytes$/, mutable: false, effect: 'the HTTP body limit is compiled into the client listener' },
  { pattern: /^limits\.max_header_bytes$/, mutable: false, effect: 'the HTTP header limit is an option of the bound client listener' },
  { pattern: /^limits\.request_timeout_ms$/, mutable: false, effect: 'the request timeout is an option of the bound client listener' },
  { pattern: /^limits\.max_frame_bytes$/, mutable: false, effect: 'the gRPC message limit is an option of the bound node listener' },
  { pattern: /^limits\.stored_responses$/, mutable: false, effect: 'every I/O worker and the worker pool size their memory of stored responses at start' },
  { pattern: /^limits\.tunnel_window_bytes$/, mutable: true, effect: 'requests dispatched from now on' },
  { pattern: /^limits\.max_json_depth$/, mutable: true, effect: 'requests received from now on' },
  { pattern: /^limits\.offload_bytes$/, mutable: true, effect: 'requests received from now on' },
  { pattern: /^limits\.(ttfb_timeout_ms|idle_timeout_ms|sse_keepalive_ms)$/, mutable: true, effect: 'requests dispatched from now on' },
  { pattern: /^limits\.max_tunnels_per_node$/, mutable: true, effect: 'tunnels opened from now on' },
  { pattern: /^cors(\.|$)/, mutable: true, effect: 'requests and preflights received from now on; browsers may keep a preflight answer for its max_age_s' },
  { pattern: /^auth\./, mutable: true, effect: 'API keys, their models and limits apply to requests received from now on' },
  { pattern: /^limits\.tunnel_timeout_ms$/, mutable: true, effect: 'requests dispatched from now on' },
  // A session keeps the heartbeat pair it was told at Registered: judging an old session by a new,
  // shorter timeout would drop idle nodes still heartbeating at their old interval.
  { pattern: /^heartbeat\.timeout_ms$/, mutable: true, effect: 'node connections registered from now on (each session keeps the timeout it was told)' },
  { pattern: /^heartbeat\.interval_ms$/, mutable: true, effect: 'node connections registered from now on' },
  { pattern: /^scheduler\.long_context_threshold_tokens$/, mutable: true, effect: 'admissions and queued requests at once' },
  // Turned on with requests waiting, those keep the band and tenant they were admitted with (FIFO tags them too).
  { pattern: /^scheduler\.(fairness|aging_step_per_sec)$/, mutable: true, effect: 'the queue policy applies at once, to queued requests too (docs/scheduling.md)' },
  { pattern: /^drain\.grace_ms$/, mutable: true, effect: 'the next shutdown' },
  { pattern: /^a2a\./, mutable: true, effect: 'agent cards and new tasks use the new agents at once; running tasks finish as they began' },
  { pattern: /^runtime\./, mutable: false, effect: 'Node and V8 flags take effect when the process starts' },
  { pattern: /^runs\./, mutable: false, effect: 'the run records are sized at start' },
  {
    pattern: /^nodes\[[^\]]*\]\.token$/,
    mutable: true,
    effect: 'new registrations need the new token; the connected session takes no new requests and is closed once its open ones finish',
  },
  // Listed before the providers' general rule: the first match wins.
  {
    pattern: /^nodes\[[^\]]*\]\.providers\[[^\]]*\]\.endpoints$/,
    mutable: true,
    effect: "stored at once, but used only for a node whose agent announces no list of its own: an agent's announced list wins (change the agent's providers[].endpoints and restart it)",
  },
  { pattern: /^nodes\[[^\]]*\]\.providers\[/, mutable: true, effect: 'capacity, enabled, context length and new providers apply at once (a new one serves once its node announces it: at once if its agent already runs it, else after the agent config file names it and the agent takes refresh_config); queued requests are re-evaluated' },
  {
    pattern: /^nodes\[[^\]]*\]$/,
    mutable: true,
    effect: 'an added node may register at once; a removed node takes no new requests and its session is closed once its open ones finish',
  },
  { pattern: /^models\[/, mutable: true, effect: 'aliases, provider maps and queue policy apply at once; queued requests are re-evaluated' },
];

const UNKNOWN: MutabilityRule = { pattern: /$^/, mutable: false, effect: 'not classified: treated as needing a restart' };

export function ruleFor(path: string): MutabilityRule {
  for (const rule of MUTABILITY_RULES) if (rule.pattern.test(path)) return rule;
  return UNKNOWN;
}

export function isMutable(path: string): boolean {
  return ruleFor(path).mutable;
}
