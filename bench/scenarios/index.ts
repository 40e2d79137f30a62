// Every scenario a run may execute, in run order. many-streams runs last: the
// memory it leaves allocated would distort later peak-RSS readings.
import type { ScenarioSpec, Variant } from '../harness/types.js';
import { closedLoop } from './closed-loop.js';
import { largeBody } from './large-body.js';
import { manyStreams } from './many-streams.js';
import { openLoop } from './open-loop.js';
import { streaming } from './streaming.js';

export const SCENARIOS: readonly ScenarioSpec<Variant>[] = [closedLoop, openLoop, streaming, largeBody, manyStreams];
