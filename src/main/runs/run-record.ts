// A run as the admin API shows it (before its wall-clock marks become ISO
// strings): built by the run store while the run is open, and again from
// the finished-run columns when asked for.
export type RunState = 'queued' | 'running' | 'finished';

export interface RunRecord {
  readonly id: string;
  readonly requestId: string;
  readonly model: string;
  readonly session: string;
  /** The client API key's name; null while auth is off. */
  readonly key: string | null;
  state: RunState;
  node: string | null;
  provider: string | null;
  adapter: string | null;
  attempts: number;
  /** Wall-clock marks, ms since the epoch; null = not (yet) reached. */
  queuedAt: number;
  dispatchedAt: number | null;
  firstByteAt: number | null;
  finishedAt: number | null;
  queueMs: number | null;
  ttfbMs: number | null;
  totalMs: number | null;
  /** end, error, client_closed, timeout, … or the rejection code; null while open. */
  outcome: string | null;
  status: number | null;
  bytesOut: number;
  tokens: { readonly prompt: number; readonly completion: number } | null;
  error: string | null;
}
