// refresh_config with providers added or removed: taken live when the edge
// can be told (Announce), named restart_required when it cannot (an edge that
// predates Announce); a withdrawn provider still serves for its grace, since
// the edge may have granted requests to it before it heard.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runAgentCommand, type CommandContext } from '../../src/agent/commands.js';
import { parseAgentConfig, type AgentConfig } from '../../src/agent/config.js';
import { Upstreams } from '../../src/agent/upstreams.js';
import { silentLogger } from '../../src/shared/logger.js';
import { waitUntil } from '../helpers/stack.js';

function agentConfig(providers: readonly string[]): AgentConfig {
  return parseAgentConfig(
    {
      edge: { address: '127.0.0.1:1' },
      node: { id: 'n1', token: 'a-node-token-of-32-characters-xx' },
      // Each id its own port, whatever the list: only the set changes between files.
      providers: providers.map((id) => ({ id, type: 'openai_compat', base_url: `http://127.0.0.1:${1000 + id.charCodeAt(1)}` })),
    },
    'test',
  );
}

function context(start: AgentConfig, file: () => AgentConfig, canAnnounce: boolean): { ctx: CommandContext; announced: () => number; config: () => AgentConfig } {
  let config = start;
  let announces = 0;
  const ctx: CommandContext = {
    logger: silentLogger(),
    upstreams: new Upstreams(start.providers),
    config: () => config,
    setConfig: (next) => {
      config = next;
    },
    reload: async () => file(),
    setDraining: () => {},
    openTunnels: () => 0,
    cli: undefined,
    canAnnounce: () => canAnnounce,
    announce: () => {
      announces++;
    },
  };
  return { ctx, announced: () => announces, config: () => config };
}

test('providers added and removed are taken live and announced when the edge can be told', async () => {
  const { ctx, announced, config } = context(agentConfig(['pa', 'pb']), () => agentConfig(['pb', 'pc']), true);
  try {
    const answer = await runAgentCommand(ctx, 'refresh_config', {}, 5_000);
    assert.equal(answer.status, 'applied', answer.message);
    assert.deepEqual((answer.result as { applied: string[] }).applied, ['providers[pa] (removed)', 'providers[pc] (added)']);
    assert.deepEqual(ctx.upstreams.ids().sort(), ['pb', 'pc'], 'what the next Register announces');
    assert.deepEqual(config().providers.map((p) => p.id), ['pb', 'pc'], 'what the probes and commands read');
    assert.equal(announced(), 1);
    assert.notEqual(ctx.upstreams.get('pa'), undefined, 'the withdrawn provider still serves what the edge granted before it heard');
  } finally {
    await ctx.upstreams.destroy();
  }
});

test('an edge that cannot be told (it predates Announce) gets them named restart_required, and nothing changes', async () => {
  const { ctx, announced, config } = context(agentConfig(['pa']), () => agentConfig(['pb']), false);
  try {
    const answer = await runAgentCommand(ctx, 'refresh_config', {}, 5_000);
    assert.equal(answer.status, 'restart_required');
    assert.match(answer.message, /needs an agent restart: providers\[pa\] \(removed\), providers\[pb\] \(added\)/);
    assert.deepEqual(ctx.upstreams.ids(), ['pa']);
    assert.deepEqual(config().providers.map((p) => p.id), ['pa']);
    assert.equal(announced(), 0);
  } finally {
    await ctx.upstreams.destroy();
  }
});

test("a withdrawn provider is served until its grace ends, and one added back within it is the new one", async () => {
  const upstreams = new Upstreams(agentConfig(['pa', 'pb']).providers);
  try {
    const version = upstreams.version;
    upstreams.withdraw('pa', 30);
    assert.equal(upstreams.version, version + 1);
    assert.deepEqual(upstreams.ids(), ['pb']);
    assert.notEqual(upstreams.get('pa'), undefined);
    await waitUntil(() => upstreams.get('pa') === undefined, 'the grace to end');

    upstreams.withdraw('pb', 60_000);
    const withdrawn = upstreams.get('pb');
    upstreams.add({ ...agentConfig(['pb']).providers[0], baseUrl: 'http://127.0.0.1:2002/prefix' });
    assert.deepEqual(upstreams.ids(), ['pb']);
    assert.notEqual(upstreams.get('pb'), withdrawn);
    assert.equal(upstreams.get('pb')?.pathPrefix, '/prefix');
  } finally {
    await upstreams.destroy();
  }
});
