// Operators name nodes by id or by label (config `nodes[].labels`): a
// reference that is some node's id means that node alone; otherwise it means
// every node carrying that label. An id always wins, so adding a label can
// never widen a command that named one node by its id.
import type { EdgeConfig } from '../../shared/config-types.js';

/** The node ids a reference names, in config order; empty when it names none. */
export function resolveNodeRef(config: EdgeConfig, ref: string): string[] {
  if (config.nodes.some((n) => n.id === ref)) return [ref];
  return config.nodes.filter((n) => n.labels?.includes(ref) === true).map((n) => n.id);
}
