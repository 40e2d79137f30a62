// The scheduler's public surface.
export { Scheduler, type CapacityExcess } from './scheduler.js';
export { estimateInputTokens } from './estimate.js';
export { DEFAULT_MAX_QUEUE, DEFAULT_QUEUE_TIMEOUT_MS } from './catalog.js';
export type * from './types.js';
