// x-ratelimit-* on every relayed answer (and own-limit 429) of an API key with a
// requests_per_minute or tokens_per_minute, named as OpenAI's API names
// them (clients and their retry libraries read these): the limit, what is
// left of it, and how long until the bucket is full again. What is left is
// measured when the request was granted or refused (the scheduler thread's
// buckets with I/O workers, read into the grant or reject; the key's own at
// workers.count 0). A
// provider's own x-ratelimit-* (its account's, not the client's) is dropped
// from such an answer, so a client never reads two sets.
import type { KeyLevels } from '../../contract/scheduler.js';
import type { ApiKeyState } from './client-auth.js';

/** The header names the edge writes for a limited key; a provider's of the same prefix are dropped. */
export const RATE_LIMIT_PREFIX = 'x-ratelimit-';

/** What the key's buckets hold now (workers.count 0: the data path keeps them). */
export function localKeyLevels(key: ApiKeyState, nowMs: number): KeyLevels {
  return {
    requests: key.requestsPerMinute === 0 ? Number.NaN : (key.rate?.level(nowMs, key.requestsPerMinute) ?? key.requestsPerMinute),
    tokens: key.tokensPerMinute === 0 ? Number.NaN : (key.tokens?.level(nowMs, key.tokensPerMinute) ?? key.tokensPerMinute),
  };
}

/** The headers as name, value pairs (none for a limit that is off or was not measured). */
export function rateLimitHeaders(key: ApiKeyState, levels: KeyLevels): string[] {
  const out: string[] = [];
  push(out, 'requests', key.requestsPerMinute, levels.requests);
  push(out, 'tokens', key.tokensPerMinute, levels.tokens);
  return out;
}

function push(out: string[], what: 'requests' | 'tokens', perMinute: number, level: number): void {
  if (perMinute === 0 || Number.isNaN(level)) return;
  out.push(
    `x-ratelimit-limit-${what}`, String(perMinute),
    `x-ratelimit-remaining-${what}`, String(Math.max(0, Math.floor(level))),
    `x-ratelimit-reset-${what}`, durationOf(Math.max(0, ((perMinute - level) * 60_000) / perMinute)),
  );
}

/** A duration as OpenAI writes it: `250ms`, `1.5s`, `6m0s`. */
export function durationOf(ms: number): string {
  const whole = Math.ceil(ms);
  if (whole < 1000) return `${whole}ms`;
  // Rounded to hundredths before the minutes are split off: 119,999 ms is 2m0s, not 1m60s.
  const hundredths = Math.round(whole / 10);
  const minutes = Math.floor(hundredths / 6000);
  const seconds = (hundredths - minutes * 6000) / 100;
  return minutes === 0 ? `${seconds}s` : `${minutes}m${seconds}s`;
}
