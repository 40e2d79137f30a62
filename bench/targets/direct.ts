// The baseline: clients talk to the mock provider itself. Every other
// target's figures are read against this one.
import type { RunningTarget, TargetContext, TargetSpec } from '../harness/types.js';

export const direct: TargetSpec = {
  id: 'direct',
  label: 'direct (mock)',
  kind: 'baseline',
  hops: 0,
  async start(ctx: TargetContext): Promise<RunningTarget> {
    return {
      id: this.id,
      label: this.label,
      kind: this.kind,
      hops: this.hops,
      origin: ctx.mock.origin,
      model: 'bench-model',
      headers: {},
      processes: [ctx.mock.process],
      metricsUrl: undefined,
      version: undefined,
      configs: {},
      notes: [],
    };
  },
};
