// Two refresh_config commands close together: the agent ends on the file the
// operator wrote last, though the first re-read happens to finish later.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runAgentCommand, type CommandContext } from '../../src/agent/commands.js';
import { parseAgentConfig, type AgentConfig } from '../../src/agent/config.js';
import { Upstreams } from '../../src/agent/upstreams.js';
import { silentLogger } from '../../src/shared/logger.js';
import { waitUntil } from '../helpers/stack.js';

function agentConfig(baseUrl: string): AgentConfig {
  return parseAgentConfig(
    {
      edge: { address: '127.0.0.1:1' },
      node: { id: 'n1', token: 'a-node-token-of-32-characters-xx' },
      providers: [{ id: 'p1', type: 'openai_compat', base_url: baseUrl }],
    },
    'test',
  );
}

test('overlapping refresh_config commands apply in the order they were asked, whatever order the file reads end in', async () => {
  let config = agentConfig('http://127.0.0.1:1001');
  const upstreams = new Upstreams(config.providers);
  // Each re-read returns the file as it was when asked, and ends when the test says so.
  const reads: { file: AgentConfig; done: () => void }[] = [];
  let file = agentConfig('http://127.0.0.1:1002');
  const ctx: CommandContext = {
    logger: silentLogger(),
    upstreams,
    config: () => config,
    setConfig: (next) => {
      config = next;
    },
    reload: () => {
      const asked = file;
      return new Promise<AgentConfig>((resolve) => reads.push({ file: asked, done: () => resolve(asked) }));
    },
    setDraining: () => {},
    openTunnels: () => 0,
    cli: undefined,
    canAnnounce: () => true,
    announce: () => {},
  };
  try {
    const first = runAgentCommand(ctx, 'refresh_config', {}, 5_000);
    await waitUntil(() => reads.length === 1, 'the first re-read started');
    file = agentConfig('http://127.0.0.1:1003');
    const second = runAgentCommand(ctx, 'refresh_config', {}, 5_000);
    // The slow disk: whichever re-read is pending last ends first.
    const answered = Promise.all([first, second]);
    let settled = false;
    void answered.then(() => (settled = true));
    while (!settled) {
      await waitUntil(() => settled || reads.length > 0, 'a re-read pending');
      reads.pop()?.done();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const [a, b] = await answered;
    assert.equal(a.status, 'applied');
    assert.equal(b.status, 'applied');
    assert.equal(config.providers[0].baseUrl, 'http://127.0.0.1:1003', 'the agent runs by the file written last');
  } finally {
    await upstreams.destroy();
  }
});
