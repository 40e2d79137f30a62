// An apply is "applied" for a script once every I/O worker serves it: the
// edge logs `config applied` from the refresher's `live`, which must wait for
// the workers' swap (the `committed` event goes out at once, before the nodes
// are told). Here the workers' swap is held, as a busy worker holds it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseEdgeConfig } from '../../../src/main/config.js';
import { ConfigRefresher, type RefreshTarget } from '../../../src/main/refresh/refresher.js';
import { edgeConfigObject, waitUntil } from '../../helpers/stack.js';

test('a refresh says its config is live only once every I/O worker took it', async () => {
  const raw = edgeConfigObject({ capacity: 1 });
  let swapped!: () => void;
  const target: RefreshTarget = {
    config: parseEdgeConfig(raw, 'test'),
    setConfig(next) {
      (target as { config: typeof next }).config = next;
      return new Promise((resolve) => (swapped = resolve));
    },
    connectedNodeIds: () => [],
    notifyNode: () => false,
    retireNode: () => false,
  };
  const said: string[] = [];
  const refresher = new ConfigRefresher(target, undefined, {
    refreshed: () => said.push('refreshed'),
    committed: (version) => said.push(`committed ${version}`),
    live: (version, paths, _origin, late) => said.push(`live ${version} ${paths.join(',')} ${late ?? 'in time'}`),
  });
  try {
    const next = structuredClone(raw) as { nodes: { providers: { capacity: number }[] }[] };
    next.nodes[0].providers[0].capacity = 3;
    const answer = refresher.refresh({ mode: 'apply', config: next, origin: 'test' });
    await waitUntil(() => said.length > 0, 'the commit');
    assert.deepEqual(said, ['committed 2'], 'nothing said live while a worker has not swapped');
    swapped();
    const result = await answer;
    assert.equal(result.status, 'applied');
    assert.deepEqual(said.slice(0, 2), ['committed 2', `live 2 ${result.changes.map((c) => c.path).join(',')} in time`]);
  } finally {
    await refresher.close();
  }
});
