// Which changed paths a node is told about in its ConfigRefresh: its own
// entry and providers, every model that names one of its providers (before
// or after the change), and the heartbeat settings every node runs by.
import type { EdgeConfig } from '../../shared/config-types.js';
import type { ConfigChange } from './diff.js';

const NODE_PATH = /^nodes\[([^\]]*)\]/;
const MODEL_PATH = /^models\[([^\]]*)\]/;

/** alias -> node ids serving it, over both snapshots. */
function modelNodes(configs: readonly EdgeConfig[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const config of configs) {
    const nodeOf = new Map<string, string>();
    for (const node of config.nodes) for (const p of node.providers) nodeOf.set(p.id, node.id);
    for (const model of config.models) {
      let nodes = out.get(model.alias);
      if (nodes === undefined) out.set(model.alias, (nodes = new Set()));
      for (const providerId of model.providers.keys()) {
        const nodeId = nodeOf.get(providerId);
        if (nodeId !== undefined) nodes.add(nodeId);
      }
    }
  }
  return out;
}

/** node id -> the changed paths that concern it; nodes with none are absent. */
export function pathsByNode(changes: readonly ConfigChange[], before: EdgeConfig, after: EdgeConfig, nodeIds: Iterable<string>): Map<string, string[]> {
  const servingModel = modelNodes([before, after]);
  const out = new Map<string, string[]>();
  for (const nodeId of nodeIds) {
    const paths: string[] = [];
    for (const { path } of changes) {
      const node = NODE_PATH.exec(path);
      if (node !== null) {
        if (node[1] === nodeId) paths.push(path);
        continue;
      }
      const model = MODEL_PATH.exec(path);
      if (model !== null) {
        if (servingModel.get(model[1])?.has(nodeId) === true) paths.push(path);
        continue;
      }
      if (path.startsWith('heartbeat.')) paths.push(path);
    }
    if (paths.length > 0) out.set(nodeId, paths);
  }
  return out;
}
