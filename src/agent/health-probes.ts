// Active health: the agent probes each HTTP provider on a path of its type
// (GET /v1/models for openai_compat and vllm, /api/tags for ollama; a cli
// provider has none) every `health.interval_ms`, each probe bounded by
// `health.timeout_ms`. A provider is unhealthy after `unhealthy_after`
// failed probes in a row and healthy again after `healthy_after` passed in
// a row (1 by default; more keeps a provider that fails every other probe
// out of rotation rather than flapping in and out of it). The
// verdicts ride on the anchor stream's heartbeats (Heartbeat.probes); a
// change is sent at once (onChange), so the edge takes a failing provider
// out of rotation before any client request meets it.
import { performance } from 'node:perf_hooks';
import { DEFAULT_HEALTH, type AgentConfig, type AgentProviderConfig, type HealthOptions } from './config.js';
import type { ProviderType } from '../shared/config-types.js';

export interface ProbeVerdict {
  readonly providerId: string;
  readonly healthy: boolean;
  readonly detail: string;
}

/** The probe path a provider type gets when its config names none; undefined = not probed. */
export function defaultProbePath(type: ProviderType): string | undefined {
  if (type === 'ollama') return '/api/tags';
  if (type === 'cli') return undefined;
  return '/v1/models';
}

class ProbeState {
  healthy = true;
  failures = 0;
  passes = 0;
  detail = '';
  running = false;
}

export class HealthProbes {
  readonly #config: () => AgentConfig;
  readonly #onChange: () => void;
  readonly #states = new Map<string, ProbeState>();
  #timer: NodeJS.Timeout | undefined;

  constructor(config: () => AgentConfig, onChange: () => void) {
    this.#config = config;
    this.#onChange = onChange;
  }

  start(): void {
    const { intervalMs } = this.#options();
    if (this.#timer !== undefined || intervalMs === 0) return;
    void this.round();
    this.#timer = setInterval(onProbeTimer, intervalMs, this);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #options(): HealthOptions {
    return this.#config().health ?? DEFAULT_HEALTH;
  }

  /** The verdict of every probed provider (what a heartbeat carries). */
  verdicts(): ProbeVerdict[] {
    const out: ProbeVerdict[] = [];
    for (const [providerId, state] of this.#states) out.push({ providerId, healthy: state.healthy, detail: state.detail });
    return out;
  }

  /** One probe per provider that has a path (a probe still running is not doubled); settles once those it started are judged. */
  round(): Promise<void> {
    const config = this.#config();
    const live = new Set<string>();
    const started: Promise<void>[] = [];
    for (const provider of config.providers) {
      const path = provider.healthPath ?? defaultProbePath(provider.type);
      if (path === undefined || path === '' || provider.baseUrl === undefined) continue;
      live.add(provider.id);
      let state = this.#states.get(provider.id);
      if (state === undefined) {
        state = new ProbeState();
        this.#states.set(provider.id, state);
      }
      if (state.running) continue;
      state.running = true;
      started.push(this.#probe(provider, path, state));
    }
    this.#forgetAllBut(live);
    return Promise.all(started).then(noop);
  }

  /**
   * A refresh added or removed providers: the removed ones' verdicts go now
   * (the edge would count each heartbeat's as an unknown probe), and, when
   * the probes run, the added ones are probed now rather than a whole
   * interval later.
   */
  providersChanged(): void {
    this.#forgetAllBut(new Set(this.#config().providers.map((p) => p.id)));
    if (this.#timer !== undefined) void this.round();
  }

  /** A provider removed (or no longer probed) by a config change is forgotten. */
  #forgetAllBut(live: ReadonlySet<string>): void {
    for (const id of [...this.#states.keys()]) if (!live.has(id)) this.#states.delete(id);
  }

  async #probe(provider: AgentProviderConfig, path: string, state: ProbeState): Promise<void> {
    const { timeoutMs, unhealthyAfter, healthyAfter } = this.#options();
    const problem = await probeOnce(provider.baseUrl as string, path, provider.apiKey, timeoutMs);
    state.running = false;
    if (this.#states.get(provider.id) !== state) return;
    const wasHealthy = state.healthy;
    if (problem === undefined) {
      state.failures = 0;
      state.passes++;
      if (state.passes >= healthyAfter) state.healthy = true;
      // Still out until enough pass: it keeps the failure that put it there.
      if (state.healthy) state.detail = '';
    } else {
      state.passes = 0;
      state.failures++;
      state.detail = problem;
      if (state.failures >= unhealthyAfter) state.healthy = false;
    }
    if (state.healthy !== wasHealthy) this.#onChange();
  }
}

/** One GET of a provider's probe path: its status (or why there is none) and how long it took. */
export interface ProbeAnswer {
  readonly status?: number;
  /** A 3xx's Location (clipped): the probe path did not answer itself. */
  readonly redirect?: string;
  /** No answer: timed out, or the connection failed (`error`). */
  readonly timedOut?: boolean;
  readonly error?: string;
  readonly latencyMs: number;
}

/** Shared by the health probes and the `probe` node command, so both judge a provider alike. */
export async function probeProvider(baseUrl: string, path: string, apiKey: string | undefined, timeoutMs: number): Promise<ProbeAnswer> {
  // As the tunnels join it (upstreams.ts): without every trailing slash.
  const base = baseUrl.replace(/\/+$/, '');
  const started = performance.now();
  try {
    const response = await fetch(`${base}${path}`, {
      headers: apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` },
      signal: AbortSignal.timeout(timeoutMs),
      // Requests are never redirected (the agent's own client follows none): a probe that followed one
      // would call a provider behind a sign-in page healthy while every request to it failed.
      redirect: 'manual',
    });
    await response.body?.cancel();
    const latencyMs = Math.round(performance.now() - started);
    const location = response.status >= 300 && response.status < 400 ? response.headers.get('location') : null;
    return location === null ? { status: response.status, latencyMs } : { status: response.status, redirect: location.slice(0, 200), latencyMs };
  } catch (err) {
    const latencyMs = Math.round(performance.now() - started);
    if ((err as Error).name === 'TimeoutError') return { timedOut: true, latencyMs };
    return { error: (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message, latencyMs };
  }
}

/** Undefined when the provider answered 2xx in time; otherwise what went wrong. */
async function probeOnce(baseUrl: string, path: string, apiKey: string | undefined, timeoutMs: number): Promise<string | undefined> {
  const answer = await probeProvider(baseUrl, path, apiKey, timeoutMs);
  if (answer.timedOut === true) return `GET ${path}: no answer within ${timeoutMs} ms`;
  if (answer.status === undefined) return `GET ${path}: ${answer.error ?? 'no answer'} after ${answer.latencyMs} ms`;
  if (answer.redirect !== undefined) return `GET ${path}: HTTP ${answer.status} (a redirect to ${answer.redirect}: the probe path must answer itself)`;
  return answer.status >= 200 && answer.status < 300 ? undefined : `GET ${path}: HTTP ${answer.status}`;
}

function onProbeTimer(probes: HealthProbes): void {
  void probes.round();
}

function noop(): void {}
