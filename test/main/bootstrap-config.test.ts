// The bootstrap section and node labels in the edge config: what is
// required, what is refused, and the defaults an operator gets.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultEndpoints } from '../../src/shared/endpoints.js';
import { parseEdgeConfig } from '../../src/main/config.js';
import { resolveNodeRef } from '../../src/main/nodes/node-refs.js';
import { renderAgentConfig } from '../../src/main/bootstrap/artifacts.js';
import { parseAgentConfig } from '../../src/agent/config.js';
import { ConfigError } from '../../src/shared/config-reader.js';
import { parse as parseYaml } from 'yaml';

function base(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    listen: { grpc: { host: '10.0.0.5', port: 50051 } },
    nodes: [
      { id: 'gpu-1', token: 't1', labels: ['rack1', 'h100'], providers: [{ id: 'p1', type: 'vllm', base_url: 'http://127.0.0.1:8001' }] },
      { id: 'gpu-2', token: 't2', labels: ['rack1'], providers: [{ id: 'p2', type: 'ollama' }] },
      { id: 'rack1', token: 't3', providers: [{ id: 'p3' }] },
    ],
    models: [],
    ...extra,
  };
}

function problemsOf(raw: unknown): string {
  try {
    parseEdgeConfig(raw, 'test.yaml');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems.join('\n');
  }
  assert.fail('expected a ConfigError');
}

test('bootstrap is off by default; when set it needs a long token and a dialable edge address', () => {
  assert.equal(parseEdgeConfig(base(), 't').bootstrap, undefined);
  const on = parseEdgeConfig(base({ bootstrap: { artifact_dir: '/srv/a', token: 'x'.repeat(16) } }), 't').bootstrap;
  assert.deepEqual(on, { host: '127.0.0.1', port: 8443, artifactDir: '/srv/a', token: 'x'.repeat(16), tokenExpiresAt: undefined, edgeAddress: undefined });
  const problems = problemsOf({ ...base({ bootstrap: { token: 'short', surprise: 1 } }), listen: { grpc: { host: '0.0.0.0' } } });
  assert.match(problems, /bootstrap\.token: at least 16 characters \(value not shown/);
  assert.doesNotMatch(problems, /short/);
  assert.match(problems, /bootstrap\.artifact_dir: expected a non-empty string/);
  assert.match(problems, /bootstrap\.edge_address: required when listen\.grpc\.host \(0\.0\.0\.0\)/);
  assert.match(problems, /bootstrap\.surprise: unknown key/);
});

test('bootstrap refuses a token that could never match, and an edge address nodes cannot dial', () => {
  const secret = '0123456789abcdef0123';
  // A YAML `|` block keeps the newline: no Authorization header could carry it.
  const newline = problemsOf(base({ bootstrap: { artifact_dir: '/srv/a', token: `${secret}\n`, edge_address: 'edge.example:50051' } }));
  assert.match(newline, /bootstrap\.token: must not contain whitespace \(value not shown/);
  assert.doesNotMatch(newline, new RegExp(secret));
  // Reachable from other hosts, but the gRPC listener is loopback: the rendered configs would have nodes dial themselves.
  const loopback = problemsOf({ ...base({ bootstrap: { listen: { host: '0.0.0.0' }, artifact_dir: '/srv/a', token: secret } }), listen: { grpc: { host: '127.0.0.1' } } });
  assert.match(loopback, /bootstrap\.edge_address: required when listen\.grpc\.host \(127\.0\.0\.1\) is loopback and bootstrap\.listen\.host \(0\.0\.0\.0\) is not/);
  // Both on loopback: a node on this host can dial it.
  const local = parseEdgeConfig({ ...base({ bootstrap: { artifact_dir: '/srv/a', token: secret } }), listen: { grpc: { host: '127.0.0.1' } } }, 't');
  assert.equal(local.bootstrap?.edgeAddress, undefined);
  for (const bad of ['edge.example', 'http://edge.example:50051', '::1:50051', 'edge.example:70000']) {
    const problems = problemsOf(base({ bootstrap: { artifact_dir: '/srv/a', token: secret, edge_address: bad } }));
    assert.match(problems, /bootstrap\.edge_address: expected host:port a node can dial/, bad);
  }
  for (const good of ['edge.example:50051', '10.0.0.5:443', '[::1]:50051']) {
    assert.equal(parseEdgeConfig(base({ bootstrap: { artifact_dir: '/srv/a', token: secret, edge_address: good } }), 't').bootstrap?.edgeAddress, good);
  }
});

test('a listen host written as a URL writes an IPv6 address is taken without its brackets', () => {
  const config = parseEdgeConfig({ ...base(), listen: { http: { host: '[::1]' }, grpc: { host: '::1' } } }, 't');
  assert.equal(config.http.host, '::1');
  assert.equal(config.grpc.host, '::1');
});

test('a reference is an id first, else every node with that label', () => {
  const config = parseEdgeConfig(base(), 't');
  assert.deepEqual(resolveNodeRef(config, 'gpu-2'), ['gpu-2']);
  assert.deepEqual(resolveNodeRef(config, 'h100'), ['gpu-1']);
  assert.deepEqual(resolveNodeRef(config, 'rack1'), ['rack1'], 'the id wins over the label of the same name');
  assert.deepEqual(resolveNodeRef(config, 'nothing'), []);
});

test('a rendered agent config is one the agent accepts as written', () => {
  const config = parseEdgeConfig(base(), 't');
  for (const node of config.nodes) {
    const text = renderAgentConfig(node, 'edge.example:50051');
    const agent = parseAgentConfig(parseYaml(text), 'rendered');
    assert.equal(agent.node.id, node.id);
    assert.equal(agent.edge.address, 'edge.example:50051');
    assert.deepEqual(agent.providers.map((p) => p.id), node.providers.map((p) => p.id));
  }
  const gpu1 = parseAgentConfig(parseYaml(renderAgentConfig(config.nodes[0], 'e:1')), 'r');
  assert.equal(gpu1.providers[0].baseUrl, 'http://127.0.0.1:8001');
  const gpu2 = parseAgentConfig(parseYaml(renderAgentConfig(config.nodes[1], 'e:1')), 'r');
  assert.equal(gpu2.providers[0].baseUrl, 'http://127.0.0.1:11434', 'the usual Ollama port when the catalog names none');
});

test("a rendered agent announces the catalog's endpoints: the agent's own list wins on the edge, so its type's defaults would narrow them", () => {
  const raw = base();
  const providers = (raw.nodes as { providers: Record<string, unknown>[] }[])[0].providers;
  providers[0].type = 'openai_compat';
  providers[0].endpoints = ['chat', 'messages', 'responses'];
  providers.push({ id: 'plain', type: 'vllm', base_url: 'http://127.0.0.1:8002' });
  const config = parseEdgeConfig(raw, 't');
  const text = renderAgentConfig(config.nodes[0], 'e:1');
  const agent = parseAgentConfig(parseYaml(text), 'rendered');
  assert.deepEqual(agent.providers[0].endpoints, ['chat', 'messages', 'responses']);
  // A catalog entry at its type's defaults renders none: the agent's defaults are the same list.
  assert.equal((parseYaml(text) as { providers: Record<string, unknown>[] }).providers[1].endpoints, undefined);
  assert.deepEqual(agent.providers[1].endpoints, defaultEndpoints('vllm'));
});

test('a rendered config with a cli provider says what the operator must add: the edge does not know its command', () => {
  const raw = base();
  (raw.nodes as { providers: Record<string, unknown>[] }[])[0].providers.push({ id: 'coder', type: 'cli', capacity: 1 });
  const config = parseEdgeConfig(raw, 't');
  const text = renderAgentConfig(config.nodes[0], 'e:1');
  assert.match(text, /^# Before running: add `command` .* cli provider coder; the edge does not know it\.$/m);
  assert.throws(() => parseAgentConfig(parseYaml(text), 'rendered'), /providers\[\d\]\.command/);
  assert.doesNotMatch(renderAgentConfig(config.nodes[1], 'e:1'), /Before running/, 'only where there is one');
});

test('a rendered config for a node the catalog lists no provider for says so: the agent refuses a config with none', () => {
  const raw = base();
  (raw.nodes as Record<string, unknown>[]).push({ id: 'gpu-new', token: 't4', providers: [] });
  const config = parseEdgeConfig(raw, 't');
  const text = renderAgentConfig(config.nodes[3], 'e:1');
  assert.match(text, /^# Before running: the edge's catalog lists no provider for node gpu-new, .*bootstrap again\.$/m);
  assert.throws(() => parseAgentConfig(parseYaml(text), 'rendered'), /providers: expected at least one provider/);
  assert.doesNotMatch(renderAgentConfig(config.nodes[0], 'e:1'), /Before running/, 'only where there is none');
});

test('a label change is a mutable refresh; a bootstrap change needs a restart', async () => {
  const { diffConfigs } = await import('../../src/main/refresh/diff.js');
  const { ruleFor } = await import('../../src/main/refresh/mutability.js');
  const before = parseEdgeConfig(base(), 't');
  const relabelled = base();
  (relabelled.nodes as { labels?: string[] }[])[1].labels = ['rack2'];
  const changes = diffConfigs(before, parseEdgeConfig({ ...relabelled, bootstrap: { artifact_dir: '/a', token: 'y'.repeat(20) } }, 't'));
  assert.deepEqual(
    changes.map((c) => [c.path, ruleFor(c.path).mutable]),
    [
      ['nodes[gpu-2].labels', true],
      ['bootstrap', false],
    ],
  );
});
