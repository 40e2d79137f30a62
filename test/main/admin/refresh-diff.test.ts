// Config refresh without a running edge: what counts as a change, how each
// is classified, which node hears about which path, and what the
// refresher commits (or refuses to) through a recording target.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseEdgeConfig } from '../../../src/main/config.js';
import { pathsByNode } from '../../../src/main/refresh/concern.js';
import { diffConfigs, REDACTED } from '../../../src/main/refresh/diff.js';
import { isMutable, MUTABILITY_RULES } from '../../../src/main/refresh/mutability.js';
import { ConfigRefresher, type RefreshTarget } from '../../../src/main/refresh/refresher.js';
import type { EdgeConfig } from '../../../src/shared/config-types.js';
import type { NodeCommandResult } from '../../../src/shared/node-commands.js';
import { ConfigError } from '../../../src/shared/config-reader.js';

function base(): any {
  return {
    listen: { http: { port: 0 }, grpc: { port: 0 } },
    admin: { port: 0 },
    nodes: [
      { id: 'n1', token: 'tok-1', providers: [{ id: 'p1', capacity: 2 }, { id: 'p2', capacity: 1 }] },
      { id: 'n2', token: 'tok-2', providers: [{ id: 'p3', capacity: 4 }] },
    ],
    models: [
      { alias: 'chat', providers: { p1: 'chat-7b', p3: 'chat-7b' } },
      { alias: 'embed', providers: { p2: 'embed-s' } },
    ],
  };
}

function parse(raw: unknown): EdgeConfig {
  return parseEdgeConfig(raw, 'test');
}

test('the same config, or the same lists in another order, is no change', () => {
  const a = base();
  const b = base();
  b.nodes.reverse();
  b.nodes[1].providers.reverse();
  b.models.reverse();
  assert.deepEqual(diffConfigs(parse(a), parse(b)), []);
});

test('each change is one path named as in the YAML, keyed by id, with old and new values', () => {
  const b = base();
  b.nodes[0].providers[0].capacity = 5;
  b.models[0].max_queue = 3;
  b.models[0].providers.p3 = 'chat-13b';
  b.limits = { tunnel_timeout_ms: 1234 };
  const changes = diffConfigs(parse(base()), parse(b));
  assert.deepEqual(
    changes.map((c) => [c.path, c.old, c.new]).sort(),
    [
      ['limits.tunnel_timeout_ms', 600000, 1234],
      ['models[chat].max_queue', 16, 3],
      ['models[chat].providers[p3]', 'chat-7b', 'chat-13b'],
      ['nodes[n1].providers[p1].capacity', 2, 5],
    ].sort(),
  );
});

test('a key whose value the config keeps in another unit is named, and valued, as the YAML writes it', () => {
  const b = base();
  b.resilience = { outliers: { max_ejection_percent: 30, failure_rate_percent: 20 } };
  const changes = diffConfigs(parse(base()), parse(b));
  assert.deepEqual(
    changes.map((c) => [c.path, c.old, c.new]).sort(),
    [
      ['resilience.outliers.failure_rate_percent', 50, 20],
      ['resilience.outliers.max_ejection_percent', 50, 30],
    ].sort(),
  );
  assert.ok(changes.every((c) => isMutable(c.path)));
});

test('secrets appear only as "[redacted]", never their values', () => {
  const b = base();
  b.nodes[0].token = 'new-secret';
  b.nodes.push({ id: 'n3', token: 'tok-3', providers: [] });
  const changes = diffConfigs(parse(base()), parse(b));
  const token = changes.find((c) => c.path === 'nodes[n1].token');
  assert.deepEqual(token && [token.old, token.new], [REDACTED, REDACTED]);
  const added = changes.find((c) => c.path === 'nodes[n3]');
  assert.equal(added?.old, null);
  assert.deepEqual(added?.new, { token: REDACTED, providers: [] });
  const text = JSON.stringify(changes);
  for (const secret of ['new-secret', 'tok-1', 'tok-3']) assert.ok(!text.includes(secret), secret);
});

test('API keys whose digests did not change are no change; a digest that did is one, redacted', () => {
  const withKeys = (digest: string): any => ({ ...base(), auth: { api_keys: [{ name: 'team-a', key_sha256: ['a'.repeat(64), digest] }] } });
  assert.deepEqual(diffConfigs(parse(withKeys('b'.repeat(64))), parse(withKeys('b'.repeat(64)))), []);
  const changes = diffConfigs(parse(withKeys('b'.repeat(64))), parse(withKeys('c'.repeat(64))));
  assert.deepEqual(changes.map((c) => [c.old, c.new]), [[REDACTED, REDACTED]]);
});

test('added and removed entries are one change each (null on the missing side)', () => {
  const b = base();
  b.nodes[0].providers.pop(); // p2 gone
  b.models.pop(); // embed gone
  b.models.push({ alias: 'code', providers: { p3: 'coder' } });
  const changes = diffConfigs(parse(base()), parse(b));
  const byPath = new Map(changes.map((c) => [c.path, c]));
  assert.equal(byPath.get('nodes[n1].providers[p2]')?.new, null);
  assert.equal(byPath.get('models[embed]')?.new, null);
  assert.equal(byPath.get('models[code]')?.old, null);
  assert.deepEqual((byPath.get('models[code]')?.new as any).providers, { p3: 'coder' });
  assert.equal(changes.length, 3);
});

test('listeners, admin, workers, TLS and body limit need a restart; capacity, models, nodes, tokens, heartbeat do not', () => {
  for (const path of ['listen.http.port', 'listen.grpc.host', 'admin.port', 'admin.token', 'workers.count', 'limits.body_bytes', 'tls.client']) {
    assert.equal(isMutable(path), false, path);
  }
  for (const path of [
    'nodes[n1].providers[p1].capacity',
    'nodes[n1].providers[p1].enabled',
    'nodes[n1].providers[p1].max_context_tokens',
    'nodes[n1].providers[p9]',
    'nodes[n9]',
    'nodes[n1].token',
    'models[chat].max_queue',
    'models[chat].queue_timeout_ms',
    'models[chat].providers[p1]',
    'models[new]',
    'limits.tunnel_timeout_ms',
    'heartbeat.interval_ms',
    'heartbeat.timeout_ms',
    'scheduler.long_context_threshold_tokens',
    'drain.grace_ms',
  ]) {
    assert.equal(isMutable(path), true, path);
  }
  // A key nobody classified is treated as needing a restart (the safe side).
  assert.equal(isMutable('some_future_section.knob'), false);
  assert.ok(MUTABILITY_RULES.every((r) => r.effect.length > 0));
});

test('a node hears about its own entry, models naming its providers, and heartbeat; nothing else', () => {
  const before = parse(base());
  const b = base();
  b.nodes[0].providers[1].capacity = 9; // n1's p2
  b.models[1].max_queue = 2; // embed: served by p2 on n1
  b.models[0].queue_timeout_ms = 500; // chat: n1 and n2
  b.heartbeat = { interval_ms: 1000, timeout_ms: 3000 };
  b.scheduler = { long_context_threshold_tokens: 1000 }; // nobody's
  const after = parse(b);
  const byNode = pathsByNode(diffConfigs(before, after), before, after, ['n1', 'n2']);
  assert.deepEqual(byNode.get('n1')?.sort(), [
    'heartbeat.interval_ms',
    'heartbeat.timeout_ms',
    'models[chat].queue_timeout_ms',
    'models[embed].max_queue',
    'nodes[n1].providers[p2].capacity',
  ]);
  assert.deepEqual(byNode.get('n2')?.sort(), ['heartbeat.interval_ms', 'heartbeat.timeout_ms', 'models[chat].queue_timeout_ms']);

  const c = base();
  c.scheduler = { long_context_threshold_tokens: 1000 };
  const only = parse(c);
  assert.equal(pathsByNode(diffConfigs(before, only), before, only, ['n1', 'n2']).size, 0);
});

class RecordingTarget implements RefreshTarget {
  commits = 0;
  notices: [string, readonly string[], number][] = [];
  retired: string[] = [];
  commandNode?: RefreshTarget['commandNode'];
  constructor(public config: EdgeConfig) {}
  setConfig(next: EdgeConfig): Promise<void> {
    this.commits++;
    this.config = next;
    return Promise.resolve();
  }
  connectedNodeIds(): string[] {
    return ['n1', 'n2'];
  }
  notifyNode(nodeId: string, paths: readonly string[], version: number): boolean {
    this.notices.push([nodeId, paths, version]);
    return true;
  }
  retireNode(nodeId: string): boolean {
    if (!this.connectedNodeIds().includes(nodeId)) return false;
    this.retired.push(nodeId);
    return true;
  }
}

test('evaluate touches nothing; apply commits the whole snapshot once and notifies only concerned nodes', async () => {
  const target = new RecordingTarget(parse(base()));
  const refresher = new ConfigRefresher(target, undefined, undefined);
  const b = base();
  b.nodes[1].providers[0].capacity = 8;

  const evaluated = await refresher.refresh({ mode: 'evaluate', config: b });
  assert.equal(evaluated.status, 'evaluated');
  assert.equal(evaluated.applicable, true);
  assert.deepEqual(evaluated.changes.map((c) => [c.path, c.mutable]), [['nodes[n2].providers[p3].capacity', true]]);
  assert.equal(target.commits, 0);
  assert.equal(target.notices.length, 0);
  assert.equal(refresher.configVersion, 1);

  const applied = await refresher.refresh({ mode: 'apply', config: b });
  assert.equal(applied.status, 'applied');
  assert.equal(applied.configVersion, 2);
  assert.equal(target.commits, 1);
  assert.equal(target.config.nodes[1].providers[0].capacity, 8);
  assert.deepEqual(target.notices, [['n2', ['nodes[n2].providers[p3].capacity'], 2]]);

  const again = await refresher.refresh({ mode: 'apply', config: b });
  assert.equal(again.status, 'unchanged');
  assert.equal(target.commits, 1, 'a no-change apply commits nothing');
  assert.equal(target.notices.length, 1, 'and pushes nothing');
  assert.equal(refresher.configVersion, 2);
});

test('a restart-required change or an invalid config is rejected with reasons and nothing is committed', async () => {
  const target = new RecordingTarget(parse(base()));
  const refresher = new ConfigRefresher(target, undefined, undefined);
  const before = target.config;

  const mixed = base();
  mixed.nodes[0].providers[0].capacity = 7; // mutable
  mixed.listen.http.port = 8081; // restart
  const rejected = await refresher.refresh({ mode: 'apply', config: mixed });
  assert.equal(rejected.status, 'rejected');
  assert.equal(rejected.rejection, 'restart_required');
  assert.match(rejected.reasons.join('\n'), /listen\.http\.port: needs a restart/);
  assert.equal(rejected.changes.length, 2, 'the reply still lists every change');

  const invalid = base();
  invalid.nodes[0].providers[0].capacity = -1;
  invalid.models[0].providers.p99 = 'x';
  const bad = await refresher.refresh({ mode: 'apply', config: invalid });
  assert.equal(bad.rejection, 'invalid_config');
  assert.match(bad.reasons.join('\n'), /capacity: expected an integer/);
  assert.match(bad.reasons.join('\n'), /p99: no provider with this id/);

  const yaml = await refresher.refresh({ mode: 'apply', config: 'nodes: [unclosed' });
  assert.equal(yaml.rejection, 'invalid_config');

  const noFile = await refresher.refresh({ mode: 'apply' });
  assert.equal(noFile.rejection, 'no_config_source');

  assert.equal(target.commits, 0);
  assert.equal(target.config, before);
  assert.equal(target.notices.length, 0);
});

test('removing a node or changing its token retires its session', async () => {
  const target = new RecordingTarget(parse(base()));
  const refresher = new ConfigRefresher(target, undefined, undefined);
  const b = base();
  b.nodes[0].token = 'rotated';
  b.nodes.pop(); // n2 removed
  b.models[0].providers = { p1: 'chat-7b' }; // chat no longer names p3
  const result = await refresher.refresh({ mode: 'apply', config: b });
  assert.equal(result.status, 'applied');
  assert.deepEqual(target.retired.sort(), ['n1', 'n2']);
  assert.ok(target.notices.some(([node, paths]) => node === 'n2' && paths.includes('nodes[n2]')), 'the removed node is told before it is retired');
});

test('a token change or removal of a node with no session retires nothing: it is reported not_connected, not "retired"', async () => {
  const target = new RecordingTarget(parse(base()));
  target.connectedNodeIds = () => ['n1'];
  const refresher = new ConfigRefresher(target, undefined, undefined);
  const b = base();
  b.nodes[1].token = 'rotated';
  const result = await refresher.refresh({ mode: 'apply', config: b });
  assert.equal(result.status, 'applied');
  assert.deepEqual(result.retired, []);
  assert.deepEqual(target.retired, []);
  assert.deepEqual(result.nodes.map((n) => [n.node, n.status]), [['n2', 'not_connected']]);
  assert.match(result.nodes[0].message, /the change reaches it when it next registers/);
  // Removed, it will never register again: the answer says so, not that it will hear of it later.
  const removed = base();
  removed.nodes.splice(1, 1);
  removed.models = removed.models.map((m: { providers: Record<string, string> }) => ({ ...m, providers: Object.fromEntries(Object.entries(m.providers).filter(([p]) => p !== 'p3')) }));
  const offline = new RecordingTarget(parse(b));
  offline.connectedNodeIds = () => ['n1'];
  const gone = await new ConfigRefresher(offline, undefined, undefined).refresh({ mode: 'apply', config: removed });
  assert.equal(gone.status, 'applied', gone.reasons.join('; '));
  const n2 = gone.nodes.find((n) => n.node === 'n2');
  assert.equal(n2?.status, 'not_connected');
  assert.match(n2?.message ?? '', /removed from the config, so it can no longer register/);
});

test('an apply is announced (committed) when it is live, not once the slowest node has answered', async () => {
  const target = new RecordingTarget(parse(base()));
  let answer: (() => void) | undefined;
  target.commandNode = (node: string, kind: string) => new Promise<NodeCommandResult>((resolve) => (answer = () => resolve({ node, kind, status: 'applied', message: '' })));
  const heard: string[] = [];
  const refresher = new ConfigRefresher(target, undefined, {
    committed: (version, paths) => heard.push(`committed ${version} ${paths.join(',')}`),
    refreshed: (result) => heard.push(`refreshed ${result.status}`),
  });
  const b = base();
  b.nodes[0].providers[0].capacity = 9;
  const pending = refresher.refresh({ mode: 'apply', config: b, nodeTimeoutMs: 60_000 });
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(heard, ['committed 2 nodes[n1].providers[p1].capacity'], 'said while the node has not answered');
  assert.equal(target.config.nodes[0].providers[0].capacity, 9);
  answer?.();
  assert.equal((await pending).status, 'applied');
  assert.deepEqual(heard, ['committed 2 nodes[n1].providers[p1].capacity', 'refreshed applied']);
});

test("an apply that names an evaluate's source digest commits only the file that was evaluated", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'refresh-digest-'));
  try {
    const file = join(dir, 'edge.json');
    const target = new RecordingTarget(parse(base()));
    const refresher = new ConfigRefresher(target, file, undefined);
    const evaluated = base();
    evaluated.models[0].max_queue = 7;
    await writeFile(file, JSON.stringify(evaluated));
    const shown = await refresher.refresh({ mode: 'evaluate' });
    assert.equal(shown.applicable, true);
    assert.match(shown.sourceDigest ?? '', /^[0-9a-f]{64}$/);
    // Edited after the operator saw the diff: node n2 removed, which that diff never showed.
    const edited = base();
    edited.models[0].max_queue = 7;
    edited.nodes.pop();
    edited.models[0].providers = { p1: 'chat-7b' };
    await writeFile(file, JSON.stringify(edited));
    const refused = await refresher.refresh({ mode: 'apply', sourceDigest: shown.sourceDigest ?? '' });
    assert.equal(refused.status, 'rejected');
    assert.equal(refused.rejection, 'source_changed');
    assert.match(refused.reasons[0], /changed since it was evaluated/);
    assert.equal(target.commits, 0, 'nothing committed');
    assert.deepEqual(target.retired, []);
    const again = await refresher.refresh({ mode: 'evaluate' });
    const applied = await refresher.refresh({ mode: 'apply', sourceDigest: again.sourceDigest ?? '' });
    assert.equal(applied.status, 'applied');
    assert.equal(target.commits, 1);
    assert.equal((await refresher.refresh({ mode: 'evaluate', config: base() })).sourceDigest, null, 'an inline candidate has no file digest');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('admin.token is required when the admin listener is not on loopback', () => {
  const b = base();
  b.admin = { host: '0.0.0.0', port: 9090 };
  assert.throws(() => parse(b), (err: unknown) => err instanceof ConfigError && /admin\.token: required/.test(err.message));
  b.admin.token = 'ops-secret';
  assert.equal(parse(b).admin?.token, 'ops-secret');
  const defaults = parse(base());
  assert.equal(defaults.admin?.host, '127.0.0.1');
  assert.equal(defaults.drain?.graceMs, 30_000);
});

test('revoking the last API key by refresh would open the gateway to anyone: restart-required; replacing it applies', async () => {
  const keyed = (...names: string[]) => {
    const b = base();
    b.auth = { api_keys: names.map((name) => ({ name, key_sha256: name.repeat(64).slice(0, 64) })) };
    return b;
  };
  const target = new RecordingTarget(parse(keyed('a')));
  const refresher = new ConfigRefresher(target, undefined, undefined);
  const open = await refresher.refresh({ mode: 'apply', config: base() });
  assert.equal(open.status, 'rejected');
  assert.equal(open.rejection, 'restart_required');
  assert.match(open.reasons.join('\n'), /turns client auth off/);
  assert.equal(target.commits, 0, 'auth stays on');
  const replaced = await refresher.refresh({ mode: 'apply', config: keyed('b') });
  assert.equal(replaced.status, 'applied', 'a new key for the leaked one is a live change');
});

test("a key's rotated digest is named key_sha256, as the YAML spells it", () => {
  const withKey = (digest: string): any => ({ ...base(), auth: { api_keys: [{ name: 'team-a', key_sha256: digest }] } });
  const changes = diffConfigs(parse(withKey('a'.repeat(64))), parse(withKey('b'.repeat(64))));
  assert.deepEqual(changes.map((c) => [c.path, c.old, c.new]), [['auth.api_keys[team-a].key_sha256', REDACTED, REDACTED]]);
  assert.ok(changes.every((c) => isMutable(c.path)));
});
