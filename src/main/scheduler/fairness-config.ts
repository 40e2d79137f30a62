// Whether fair queuing is on, and its aging step, read from config. FIFO
// stays the default: with no `scheduler.fairness` set, fairness is on only
// when some API key configures a priority or a weight, or lets its clients
// name their tenants (fairness_header: true, which means nothing in FIFO).
import type { EdgeConfig } from '../../shared/config-types.js';

export interface Fairness {
  readonly enabled: boolean;
  /** Priority steps a waiting request's band gains per whole second waited. */
  readonly agingStepPerSec: number;
}

export const DEFAULT_AGING_STEP_PER_SEC = 1;

export function fairnessOf(config: EdgeConfig): Fairness {
  const configured = config.scheduler.fairness;
  const keys = config.auth?.apiKeys ?? [];
  const enabled = configured ?? keys.some((k) => k.priority !== undefined || k.weight !== undefined || k.fairnessHeader === true);
  const step = config.scheduler.agingStepPerSec;
  return { enabled, agingStepPerSec: step !== undefined && step >= 0 ? step : DEFAULT_AGING_STEP_PER_SEC };
}
