// The `resilience` config section: when a provider is ejected as an outlier
// (consecutive failures, failure rate) and how overload (429/503) backs it
// off. Parsed here, not in config.ts, so the section stays one concern; the
// scheduler's policies are built from it by the two *PolicyOf functions
// (a hand-built config without the section gets the defaults).
import type { ConfigReader } from '../shared/config-reader.js';
import { DEFAULT_MAX_OVERLOAD_REQUEUES, type EdgeConfig, type ResilienceConfig } from '../shared/config-types.js';
import { DEFAULT_OUTLIER_POLICY, type OutlierPolicy } from './scheduler/outliers.js';
import { DEFAULT_OVERLOAD_POLICY, type OverloadPolicy } from './scheduler/overload.js';

const HOUR_MS = 3_600_000;

type Plain = Record<string, unknown>;

export function readResilience(r: ConfigReader, raw: unknown): ResilienceConfig {
  const section = r.object('resilience', raw, true) ?? {};
  r.noUnknownKeys('resilience', section, ['outliers', 'overload']);
  const o: Plain = r.object('resilience.outliers', section.outliers, true) ?? {};
  r.noUnknownKeys('resilience.outliers', o, [
    'consecutive_failures',
    'base_ejection_ms',
    'max_ejection_ms',
    'max_ejection_percent',
    'failure_rate_percent',
    'failure_rate_window',
    'failure_rate_min_requests',
  ]);
  const v: Plain = r.object('resilience.overload', section.overload, true) ?? {};
  r.noUnknownKeys('resilience.overload', v, ['default_retry_after_ms', 'max_retry_after_ms', 'max_requeues']);
  const d = DEFAULT_OUTLIER_POLICY;
  const baseEjectionMs = r.integer('resilience.outliers.base_ejection_ms', o.base_ejection_ms, 1, HOUR_MS, d.baseEjectionMs);
  const maxEjectionMs = r.integer('resilience.outliers.max_ejection_ms', o.max_ejection_ms, 1, 24 * HOUR_MS, d.maxEjectionMs);
  if (maxEjectionMs < baseEjectionMs) r.problems.push('resilience.outliers.max_ejection_ms: must be at least base_ejection_ms');
  const failureRateWindow = r.integer('resilience.outliers.failure_rate_window', o.failure_rate_window, 1, 1000, d.failureRateWindow);
  const failureRateMinRequests = r.integer('resilience.outliers.failure_rate_min_requests', o.failure_rate_min_requests, 1, 1000, d.failureRateMinRequests);
  if (failureRateMinRequests > failureRateWindow) r.problems.push('resilience.outliers.failure_rate_min_requests: must not exceed failure_rate_window');
  return {
    outliers: {
      consecutiveFailures: r.integer('resilience.outliers.consecutive_failures', o.consecutive_failures, 1, 1000, d.consecutiveFailures),
      baseEjectionMs,
      maxEjectionMs,
      maxEjectionShare: r.integer('resilience.outliers.max_ejection_percent', o.max_ejection_percent, 0, 100, Math.round(d.maxEjectionShare * 100)) / 100,
      // 0 turns failure-rate ejection off (consecutive failures still eject).
      failureRate: r.integer('resilience.outliers.failure_rate_percent', o.failure_rate_percent, 0, 100, Math.round(d.failureRate * 100)) / 100,
      failureRateWindow,
      failureRateMinRequests,
    },
    overload: {
      defaultRetryAfterMs: r.integer('resilience.overload.default_retry_after_ms', v.default_retry_after_ms, 0, HOUR_MS, DEFAULT_OVERLOAD_POLICY.defaultRetryAfterMs),
      maxRetryAfterMs: r.integer('resilience.overload.max_retry_after_ms', v.max_retry_after_ms, 0, HOUR_MS, DEFAULT_OVERLOAD_POLICY.maxRetryAfterMs),
      maxRequeues: r.integer('resilience.overload.max_requeues', v.max_requeues, 0, 100, DEFAULT_MAX_OVERLOAD_REQUEUES),
    },
  };
}

export function outlierPolicyOf(config: EdgeConfig): OutlierPolicy {
  const o = config.resilience?.outliers;
  return o === undefined ? DEFAULT_OUTLIER_POLICY : { ...DEFAULT_OUTLIER_POLICY, ...o };
}

export function overloadPolicyOf(config: EdgeConfig): OverloadPolicy {
  const v = config.resilience?.overload;
  return v === undefined ? DEFAULT_OVERLOAD_POLICY : { defaultRetryAfterMs: v.defaultRetryAfterMs, maxRetryAfterMs: v.maxRetryAfterMs };
}
