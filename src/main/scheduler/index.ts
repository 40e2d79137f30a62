// The scheduler's public surface: what the rest of the main thread may use.
// Its request, grant and status types live in src/contract/scheduler.ts,
// since the data path speaks them too.
export { Scheduler, type CapacityExcess } from './scheduler.js';
export { DEFAULT_MAX_QUEUE, DEFAULT_QUEUE_TIMEOUT_MS } from './catalog.js';
